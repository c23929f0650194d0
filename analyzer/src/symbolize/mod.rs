//! Symbolization ([`elf`] binaries, [`kallsyms`] the kernel, [`addr`] the typed address
//! spaces): instruction pointers to symbol names through the ELF symbol tables of the
//! mapped binaries (one table per binary, built on first use and reused; build-ids checked
//! against the recording's maps.json) and, for kernel addresses, the recording's kallsyms
//! snapshot. A binary without a matching symbol falls back to `DSO+offset`.
//!
//! A recording made with `record --keep-symbols` also carries `symbols/BUILDID.map` (one
//! `FILE_OFFSET SIZE NAME` line per function, hex offsets and sizes, demangled names),
//! used when the binary itself is missing or was rebuilt: the recording then analyzes the
//! same on any machine.
//!
//! Source lines and inline frames come from DWARF through addr2line: one
//! `addr2line::Loader` per binary, created on the first request for lines and reused (the
//! stage table needs only function symbols and never parses DWARF). A binary without
//! debug info yields its symbol-table name with no file or line.

mod addr;
mod elf;
mod kallsyms;
pub mod kernel;

pub use addr::{Avma, FileOffset, MappedRange, Svma};
pub use elf::{ElfSymbols, DEBUG_ROOT};
pub use kallsyms::Kallsyms;

use collector::records::{Mapping, Sample};
use std::collections::HashMap;

/// How an unnamed kernel address is written: `[kernel.kallsyms]+0xADDRESS`, as perf does.
pub const UNNAMED_KERNEL: &str = "[kernel.kallsyms]+";

/// Whether a kernel symbol name is an address left unnamed ([`UNNAMED_KERNEL`]).
pub fn is_unnamed_kernel(name: &str) -> bool {
    name.starts_with(UNNAMED_KERNEL)
}

/// What an address resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Symbol {
    pub name: String,
    /// The file (`[kernel.kallsyms]` for the kernel).
    pub dso: String,
}

/// One frame of an address: the function (an inlined one first, then the functions it
/// was inlined into, the real function last) and its source position when DWARF has it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
pub struct Frame {
    pub function: String,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Write `DIR/symbols/BUILDID.map` for every mapped binary of `maps` that has a build-id
/// and can be read here; returns how many were written.
pub fn write_symbol_maps(dir: &std::path::Path, maps: &[Mapping]) -> crate::Result<usize> {
    let out = dir.join("symbols");
    let mut done = std::collections::HashSet::new();
    let mut written = 0;
    for m in maps {
        let Some(id) = &m.build_id else { continue };
        if !done.insert(id.clone()) {
            continue;
        }
        let Some(e) = ElfSymbols::load(std::path::Path::new(&m.path)) else { continue };
        if e.build_id.as_deref() != Some(id.as_str()) {
            continue;
        }
        std::fs::create_dir_all(&out).map_err(|e| crate::Error::Io { path: out.clone(), source: e })?;
        let p = out.join(format!("{id}.map"));
        std::fs::write(&p, e.symbol_map()).map_err(|e| crate::Error::Io { path: p.clone(), source: e })?;
        written += 1;
    }
    Ok(written)
}

/// Forget the binaries `maps` would not accept: one rebuilt since it was read (a mapping
/// of its path names another build-id) or one that could not be read then (it may be
/// readable now). They are read again on first use.
fn keep_matching(elfs: &mut HashMap<String, Option<ElfSymbols>>, maps: &[Mapping]) {
    elfs.retain(|path, e| {
        maps.iter().filter(|m| &m.path == path).all(|m| match (e.as_ref(), &m.build_id) {
            (Some(e), Some(want)) => e.build_id.as_deref() == Some(want.as_str()),
            (None, _) => false,
            (Some(_), None) => true,
        })
    });
}

/// Resolves the samples of one recording.
pub struct Symbolizer {
    maps: HashMap<u32, Vec<Mapping>>,
    kallsyms: Option<Kallsyms>,
    elfs: HashMap<String, Option<ElfSymbols>>,
    /// Symbol maps shipped with a recording, by build-id.
    shipped: HashMap<String, ElfSymbols>,
    /// Where debug files are looked up by build-id. Default: [`DEBUG_ROOT`].
    debug_root: Option<std::path::PathBuf>,
    /// What loading found wrong with the symbol sources (a kallsyms snapshot of junk),
    /// each naming its file; reports print them.
    warnings: Vec<String>,
    /// Where the kernel's names come from, in words (for the report).
    kernel_source: String,
    /// Kernel address ranges left unnamed (modules of another build or load).
    kernel_unnamed: Vec<(u64, u64)>,
    /// Binaries named from a symbol map shipped with the recording.
    used_shipped: std::collections::BTreeSet<String>,
}

impl Symbolizer {
    pub fn new(maps: Vec<Mapping>, kallsyms: Option<Kallsyms>) -> Symbolizer {
        let mut by_pid: HashMap<u32, Vec<Mapping>> = HashMap::new();
        for m in maps {
            by_pid.entry(m.pid).or_default().push(m);
        }
        let kernel_source =
            if kallsyms.is_some() { "kernel: kallsyms as given".to_string() } else { "kernel: none".to_string() };
        Symbolizer {
            maps: by_pid,
            kallsyms,
            elfs: HashMap::new(),
            shipped: HashMap::new(),
            warnings: Vec::new(),
            debug_root: Some(DEBUG_ROOT.into()),
            kernel_source,
            kernel_unnamed: Vec::new(),
            used_shipped: Default::default(),
        }
    }

    /// A symbolizer whose kernel names come from the symbols chosen for the recorded kernel
    /// ([`kernel::kernel_symbols`]): their source, warnings and unnamed ranges come along.
    pub fn with_kernel(maps: Vec<Mapping>, ks: kernel::KernelSymbols) -> Symbolizer {
        let mut s = Symbolizer::new(maps, ks.kallsyms);
        s.kernel_source = ks.source;
        s.warnings = ks.warnings;
        s.kernel_unnamed = ks.unnamed;
        s
    }

    /// Where every name came from, one line per source: the kernel's, then each binary
    /// read (ELF symbol table, debug file by build-id, a recording's symbol map, or
    /// unreadable).
    pub fn sources(&self) -> Vec<String> {
        let mut out = vec![self.kernel_source.clone()];
        let mut paths: Vec<&String> = self.elfs.keys().collect();
        paths.sort();
        for p in paths {
            let line = match (&self.elfs[p], self.used_shipped.contains(p)) {
                (_, true) => format!("{p}: the recording's symbol map (the binary here is missing or rebuilt)"),
                (Some(e), false) => match &e.debug_file {
                    Some(d) => format!("{p}: debug file {} (by build-id)", d.display()),
                    None => format!(
                        "{p}: its ELF symbol table{}",
                        e.build_id.as_deref().map_or(String::new(), |b| format!(" (build-id {b})"))
                    ),
                },
                (None, false) => format!("{p}: unreadable here: its samples stay unnamed (FILE+0x...)"),
            };
            out.push(line);
        }
        out
    }

    /// Name only what the binaries (and a recording's symbol maps) name, not what debug
    /// files installed on this machine add: for results that must not depend on the
    /// machine (golden tests). Binaries already read keep their names.
    pub fn without_debug_files(mut self) -> Symbolizer {
        self.debug_root = None;
        self
    }

    /// Mappings learned later (a live target mapping a library, a new process).
    pub fn add_maps(&mut self, maps: impl IntoIterator<Item = Mapping>) {
        for m in maps {
            self.maps.entry(m.pid).or_default().push(m);
        }
    }

    /// Symbolizer for a recording directory (maps.json and the kallsyms snapshot).
    pub fn for_recording(rec: &collector::recording::Recording) -> crate::Result<Symbolizer> {
        Symbolizer::load(rec, None)
    }

    /// Symbolizer for another recording, keeping what this one already loaded where it
    /// still holds: binaries' symbol tables (checked against each mapping's build-id as
    /// always) and the kernel's symbols when the new snapshot is the same text. A series of
    /// recordings of one program on one boot (a sweep) then parses each only once.
    pub fn reuse_for(self, rec: &collector::recording::Recording) -> crate::Result<Symbolizer> {
        Symbolizer::load(rec, Some(self))
    }

    fn load(rec: &collector::recording::Recording, prev: Option<Symbolizer>) -> crate::Result<Symbolizer> {
        let maps = rec.maps()?;
        let (prev_ks, prev_rest) = match prev {
            Some(p) => {
                let mut elfs = p.elfs;
                keep_matching(&mut elfs, &maps);
                (p.kallsyms, Some((elfs, p.debug_root)))
            }
            None => (None, None),
        };
        // The snapshot (`kallsyms`, or gzipped `kallsyms.gz`), checked against the kernel
        // the recording names (build-id and `_text` in meta.json); one without addresses
        // (taken without the right to see them) resolves nothing and is ignored.
        let mut warnings = Vec::new();
        let machine = &rec.meta.machine;
        let id = kernel::KernelIdentity {
            build_id: machine.kernel_build_id.clone(),
            reference: machine
                .kernel_text
                .as_deref()
                .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
                .map(|a| ("_text".to_string(), a)),
        };
        let snapshot = ["kallsyms", "kallsyms.gz"].iter().map(|f| rec.dir.join(f)).find(|p| p.exists());
        let what = rec.dir.display().to_string();
        let mut kernel_source = String::from("kernel: none");
        let mut ks = None;
        match &snapshot {
            Some(p) => match Kallsyms::load_reusing(p, prev_ks) {
                Ok(k) => {
                    // The snapshot was taken on the recording boot: its `_text` must be the
                    // recorded one, or it is not this recording's kernel.
                    match (&id.reference, k.address_of("_text")) {
                        (Some((_, want)), Some(have)) if *want != have => {
                            warnings.push(format!(
                                "{}: _text at {have:#x}, but the recording's kernel had it at {want:#x}: the \
                                 snapshot is not this recording's kernel; kernel samples stay unnamed \
                                 ([kernel.kallsyms]+0x...)",
                                p.display()
                            ));
                            kernel_source = format!("kernel: none ({} contradicts meta.json)", p.display());
                        }
                        _ => {
                            kernel_source = format!(
                                "kernel: the recording's kallsyms snapshot{}",
                                match (&id.build_id, &id.reference) {
                                    (Some(b), Some(_)) => format!(" (build-id {b}; _text as recorded)"),
                                    (Some(b), None) => format!(" (build-id {b})"),
                                    _ => " (taken with the recording)".to_string(),
                                }
                            );
                            ks = Some(k);
                        }
                    }
                }
                Err(e) => warnings.push(format!("kernel samples stay unnamed ([kernel.kallsyms]+0x...): {e}")),
            },
            None => warnings.push(format!(
                "{}: no kallsyms snapshot: kernel samples stay unnamed ([kernel.kallsyms]+0x...)",
                rec.dir.display()
            )),
        }
        // Without a usable snapshot: perf's build-id cache or this machine, when they hold
        // the recorded build (never a kernel the recording does not name).
        if ks.is_none() && id.build_id.is_some() {
            let found = kernel::kernel_symbols(&id, &kernel::KernelLookup::default(), &what)?;
            if found.kallsyms.is_some() {
                warnings.clear();
                kernel_source = found.source;
                ks = found.kallsyms;
            }
        }
        let mut sym = Symbolizer::new(maps, ks);
        sym.warnings = warnings;
        sym.kernel_source = kernel_source;
        if let Some((elfs, debug_root)) = prev_rest {
            sym.elfs = elfs;
            sym.debug_root = debug_root;
        }
        let dir = rec.dir.join("symbols");
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let p = e.path();
                let Some(id) = p.file_name().and_then(|f| f.to_str()).and_then(|f| f.strip_suffix(".map")) else {
                    continue;
                };
                let text = std::fs::read_to_string(&p).map_err(|e| crate::Error::Io { path: p.clone(), source: e })?;
                sym.shipped.insert(id.to_string(), ElfSymbols::from_symbol_map(&text, &p, id)?);
            }
        }
        Ok(sym)
    }

    /// What loading found wrong with the symbol sources, each naming its file.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Resolve a sample's IP.
    pub fn resolve(&mut self, s: &Sample) -> Symbol {
        self.resolve_ip(s.pid, s.ip, s.kernel)
    }

    /// The mapping of `ip` in process `pid`, its file offset and the DSO's short name.
    fn locate(&self, pid: u32, ip: Avma) -> Option<(Mapping, FileOffset, String)> {
        let (m, off) = self.maps.get(&pid)?.iter().rev().find_map(|m| Some((m, m.file_offset(ip)?)))?;
        let m = m.clone();
        let dso =
            std::path::Path::new(&m.path).file_name().map_or(m.path.clone(), |f| f.to_string_lossy().into_owned());
        Some((m, off, dso))
    }

    /// The binary of mapping `m`, loaded once; None when unreadable or its build-id differs
    /// from the one recorded.
    fn elf(&mut self, m: &Mapping) -> Option<&ElfSymbols> {
        let root = self.debug_root.as_deref();
        let elf = self
            .elfs
            .entry(m.path.clone())
            .or_insert_with(|| ElfSymbols::load_with_debug(std::path::Path::new(&m.path), root));
        let usable = match (elf.as_ref(), &m.build_id) {
            (Some(e), Some(want)) => e.build_id.as_deref() == Some(want.as_str()),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if usable {
            return elf.as_ref();
        }
        // The binary is gone or rebuilt: a symbol map shipped with the recording.
        let shipped = m.build_id.as_ref().and_then(|id| self.shipped.get(id));
        if shipped.is_some() {
            self.used_shipped.insert(m.path.clone());
        }
        shipped
    }

    /// Resolve an address in process `pid`.
    pub fn resolve_ip(&mut self, pid: u32, ip: u64, kernel: bool) -> Symbol {
        if kernel {
            return Symbol { name: self.kernel_name(ip), dso: "[kernel.kallsyms]".into() };
        }
        let Some((m, off, dso)) = self.locate(pid, Avma(ip)) else {
            return Symbol { name: format!("[unknown]+{ip:#x}"), dso: "[unknown]".into() };
        };
        let name = match self.elf(&m).and_then(|e| e.at_offset(off)) {
            Some(n) => n.to_string(),
            None => format!("{dso}+{:#x}", off.0),
        };
        Symbol { name, dso }
    }

    fn kernel_name(&self, ip: u64) -> String {
        let untrusted = self.kernel_unnamed.iter().any(|&(start, len)| ip >= start && ip - start < len);
        self.kallsyms
            .as_ref()
            .filter(|_| !untrusted)
            .and_then(|k| k.lookup(ip))
            .map_or_else(|| format!("{UNNAMED_KERNEL}{ip:#x}"), str::to_string)
    }

    /// The frames of an address, innermost inlined function first, with DWARF file and line
    /// where the binary has them; kernel addresses give their kallsyms name only.
    pub fn frames_ip(&mut self, pid: u32, ip: u64, kernel: bool) -> Vec<Frame> {
        let name_only = |function: String| vec![Frame { function, file: None, line: None }];
        if kernel {
            return name_only(self.kernel_name(ip));
        }
        let Some((m, off, dso)) = self.locate(pid, Avma(ip)) else {
            return name_only(format!("[unknown]+{ip:#x}"));
        };
        let frames = self.elf(&m).and_then(|e| Some(e.frames_at_vaddr(e.vaddr_of(off)?))).unwrap_or_default();
        if frames.is_empty() {
            name_only(format!("{dso}+{:#x}", off.0))
        } else {
            frames
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lookup_takes_the_symbol_below() {
        let k = Kallsyms::parse("ffffffff81000000 T _text\nffffffff81000100 t fib_table_lookup\nffffffff81000200 T ip_rcv\n0000000000000000 A fixed\n");
        assert_eq!(k.len(), 3);
        assert_eq!(k.lookup(0xffffffff81000150), Some("fib_table_lookup"));
        assert_eq!(k.lookup(0xffffffff81000200), Some("ip_rcv"));
        assert_eq!(k.lookup(0x10), None);
    }

    #[test]
    fn kallsyms_are_reused_only_when_the_snapshot_is_the_same() {
        let dir = std::env::temp_dir().join(format!("fwdscope-ks-reuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "ffffffff81000000 T _text\nffffffff81000100 t fib_table_lookup\n").unwrap();
        std::fs::write(&b, "ffffffff81000000 T _text\nffffffff81000100 t ip_route_input_slow\n").unwrap();
        let ka = Kallsyms::load(&a).unwrap();
        let again = Kallsyms::load_reusing(&a, Some(ka)).unwrap();
        assert_eq!(again.lookup(0xffffffff81000150), Some("fib_table_lookup"));
        // Another snapshot is parsed, not answered from the previous one.
        let kb = Kallsyms::load_reusing(&b, Some(again)).unwrap();
        assert_eq!(kb.lookup(0xffffffff81000150), Some("ip_route_input_slow"));
        std::fs::write(&a, "0000000000000000 T _text\n").unwrap();
        assert!(Kallsyms::load_reusing(&a, Some(kb)).is_err(), "an address-less snapshot is still refused");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_reused_binary_is_dropped_when_the_recording_names_another_build_id() {
        let exe = std::env::current_exe().unwrap();
        let path = exe.display().to_string();
        let elf = ElfSymbols::load(&exe).unwrap();
        let id = elf.build_id.clone().expect("test binaries carry a build-id");
        let map_of = |path: &str, build_id: Option<&str>| Mapping {
            time: 0,
            pid: 1,
            tid: 1,
            start: 0x1000,
            len: 0x1000,
            pgoff: 0,
            path: path.to_string(),
            build_id: build_id.map(str::to_string),
        };
        let map = |build_id: Option<&str>| map_of(&path, build_id);
        let mut elfs = HashMap::from([(path.clone(), Some(elf)), ("/gone".to_string(), None)]);
        keep_matching(&mut elfs, &[map(Some(&id)), map_of("/gone", None)]);
        assert!(elfs.get(&path).is_some_and(Option::is_some), "same build-id: kept");
        assert!(!elfs.contains_key("/gone"), "unreadable then: tried again");
        keep_matching(&mut elfs, &[map(None)]);
        assert!(elfs.contains_key(&path), "no build-id recorded: kept");
        keep_matching(&mut elfs, &[map(Some("00ff"))]);
        assert!(elfs.is_empty(), "rebuilt: read again");
    }

    #[test]
    fn own_functions_resolve_through_the_test_binary() {
        // This test binary's own mapping, as the kernel would report it.
        let exe = std::env::current_exe().unwrap();
        let maps_text = std::fs::read_to_string("/proc/self/maps").unwrap();
        let addr = kallsyms_lookup_takes_the_symbol_below as *const () as usize as u64;
        let line = maps_text
            .lines()
            .find(|l| {
                let r = l.split_whitespace().next().unwrap();
                let (a, b) = r.split_once('-').unwrap();
                let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
                addr >= a && addr < b
            })
            .unwrap();
        let f: Vec<&str> = line.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let start = u64::from_str_radix(a, 16).unwrap();
        let m = Mapping {
            time: 0,
            pid: 7,
            tid: 7,
            start,
            len: u64::from_str_radix(b, 16).unwrap() - start,
            pgoff: u64::from_str_radix(f[2], 16).unwrap(),
            path: exe.display().to_string(),
            build_id: None,
        };
        let mut s = Symbolizer::new(vec![m], None);
        let sym = s.resolve_ip(7, addr, false);
        assert!(sym.name.ends_with("kallsyms_lookup_takes_the_symbol_below"), "{sym:?}");
        // An address in no mapping, and a kernel address without kallsyms.
        assert!(s.resolve_ip(8, addr, false).name.starts_with("[unknown]"));
        assert_eq!(s.resolve_ip(7, 0xffffffff81000000, true).dso, "[kernel.kallsyms]");
    }
}
