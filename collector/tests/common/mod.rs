//! Test helpers: find test programs, skip without perf, and symbolize sample addresses
//! against the ELF symbol table of a mapped binary (independently of the analyzer).

#![allow(dead_code)]

use collector::records::{Mapping, Sample};
use object::{Object, ObjectSegment, ObjectSymbol};
use std::path::{Path, PathBuf};

/// The directory cargo put this test's binaries in (target/<profile>).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    exe.parent().and_then(Path::parent).expect("target dir").to_path_buf()
}

pub fn example(name: &str) -> PathBuf {
    target_dir().join("examples").join(name)
}

pub fn forwarder_bin() -> PathBuf {
    target_dir().join("fwdscope-forwarder")
}

/// Whether perf_event_open works here for a software event on ourselves; prints why not.
pub fn perf_available() -> bool {
    let scope =
        collector::perf_abi::Scope { pid: Some(0), cpu: None, inherit: false, enable_on_exec: false, kernel: false };
    match collector::perf_abi::CountingEvent::open(collector::events::EventId::TaskClock, &scope) {
        Ok(_) => true,
        Err(e) => {
            println!("SKIP: perf_event_open is not available here: {e}");
            false
        }
    }
}

/// Symbol names of one ELF file with their virtual-address ranges, and its segments.
pub struct Elf {
    syms: Vec<(u64, u64, String)>,
    segs: Vec<(u64, u64, u64)>, // (file offset, size, vaddr)
}

impl Elf {
    pub fn load(path: &Path) -> Elf {
        let data = std::fs::read(path).expect("read ELF");
        let f = object::File::parse(&*data).expect("parse ELF");
        let mut syms: Vec<(u64, u64, String)> = f
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
            .collect();
        syms.sort();
        let segs = f.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
        Elf { syms, segs }
    }

    /// The symbol containing the file offset `off`.
    pub fn symbol_at_offset(&self, off: u64) -> Option<&str> {
        let (fo, _, va) = *self.segs.iter().find(|(o, sz, _)| off >= *o && off < o + sz)?;
        let vaddr = off - fo + va;
        let i = self.syms.partition_point(|(a, _, _)| *a <= vaddr);
        let (a, sz, name) = self.syms.get(i.checked_sub(1)?)?;
        (vaddr < a + sz).then_some(name.as_str())
    }
}

/// Symbolize a sample IP through the mappings of its process, for files whose path ends
/// with `file_suffix`.
pub fn symbolize<'a>(s: &Sample, maps: &[Mapping], file_suffix: &str, elf: &'a Elf) -> Option<&'a str> {
    let m = maps
        .iter()
        .find(|m| m.pid == s.pid && m.path.ends_with(file_suffix) && s.ip >= m.start && s.ip < m.start + m.len)?;
    elf.symbol_at_offset(s.ip - m.start + m.pgoff)
}
