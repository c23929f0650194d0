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
mod binary;
mod elf;
mod kallsyms;
pub mod kernel;

pub use addr::{Avma, FileOffset, MappedRange, Svma};
pub use binary::{BinaryLookup, BinaryReport, Origin};
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
    /// A user-space address in a binary of which no file of the recorded build was found
    /// (the name is `DSO+0xOFFSET`): never guessed into a stage.
    pub binary_unknown: bool,
}

/// Where symbols are looked for beyond the input itself, as the user gave them.
#[derive(Debug, Clone, Default)]
pub struct SymbolPaths {
    /// `--kallsyms FILE`: the recording machine's kernel symbols. Default: none (perf's
    /// build-id cache, then this machine when it runs the recorded build).
    pub kallsyms: Option<std::path::PathBuf>,
    /// `--symfs DIR`: a copy of the recording machine's files (DIR/PATH tried first, as
    /// perf does). Default: none.
    pub symfs: Option<std::path::PathBuf>,
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
/// and can be read here, as private or shared as the recording's meta.json; returns how
/// many were written.
pub fn write_symbol_maps(dir: &std::path::Path, maps: &[Mapping]) -> crate::Result<usize> {
    use std::os::unix::fs::PermissionsExt;
    let out = dir.join("symbols");
    let mode = std::fs::symlink_metadata(dir.join("meta.json")).map_or(0o600, |m| m.permissions().mode() & 0o644);
    let dir_mode = if mode & 0o044 != 0 { 0o755 } else { 0o700 };
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
        match std::fs::symlink_metadata(&out) {
            Err(_) => collector::outdir::create_dir_new(&out, dir_mode)?,
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                let e = std::io::Error::other("not a directory (a symlink is not followed)");
                return Err(crate::Error::Io { path: out.clone(), source: e });
            }
        }
        let p = out.join(format!("{id}.map"));
        collector::outdir::write_atomic(&p, e.symbol_map().as_bytes(), mode)?;
        written += 1;
    }
    Ok(written)
}

/// What a symbolizer found for one (path, recorded build-id).
type Binaries = HashMap<(String, Option<String>), binary::Found>;

/// Forget, before a symbolizer is reused for another recording, what was not found (the
/// file may be readable now, or the new recording ship its symbol map) and what was read
/// without a build-id to check (the file may have been rebuilt since). A binary found by
/// its build-id stays: it is that build wherever it came from.
fn keep_matching(bins: &mut Binaries) {
    bins.retain(|(_, id), b| id.is_some() && b.elf.is_some() && !matches!(b.origin, Some(Origin::SymbolMap(_))));
}

/// A binary's short name (its file name), as tables show it.
fn dso_name(path: &str) -> String {
    std::path::Path::new(path).file_name().map_or(path.to_string(), |f| f.to_string_lossy().into_owned())
}

/// Resolves the samples of one recording.
pub struct Symbolizer {
    maps: HashMap<u32, Vec<Mapping>>,
    kallsyms: Option<Kallsyms>,
    bins: Binaries,
    /// Symbol maps shipped with a recording, by build-id, with their files.
    shipped: HashMap<String, (ElfSymbols, std::path::PathBuf)>,
    /// Where binaries and their debug files are looked for. Default: [`BinaryLookup`]'s.
    lookup: BinaryLookup,
    /// What loading found wrong with the symbol sources (a kallsyms snapshot of junk),
    /// each naming its file; reports print them.
    warnings: Vec<String>,
    /// Where the kernel's names come from, in words (for the report).
    kernel_source: String,
    /// Kernel address ranges left unnamed (modules of another build or load).
    kernel_unnamed: Vec<(u64, u64)>,
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
            bins: HashMap::new(),
            shipped: HashMap::new(),
            warnings: Vec::new(),
            lookup: BinaryLookup::default(),
            kernel_source,
            kernel_unnamed: Vec::new(),
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

    /// Look for binaries under `symfs` first (`--symfs`, as perf).
    pub fn with_symfs(mut self, symfs: Option<&std::path::Path>) -> Symbolizer {
        self.lookup.symfs = symfs.map(std::path::Path::to_path_buf);
        self
    }

    /// Every binary looked up so far: its recorded build-id and where its symbols came
    /// from, or why none (what `report --buildid-list` prints), sorted by path.
    pub fn binaries(&self) -> Vec<BinaryReport> {
        let mut out: Vec<BinaryReport> = self
            .bins
            .iter()
            .map(|((path, id), b)| match (&b.elf, &b.origin) {
                (Some(e), Some(o)) => BinaryReport {
                    path: path.clone(),
                    recorded: id.clone(),
                    source: Some(o.describe(e, id.as_deref())),
                    unnamed: None,
                },
                _ => BinaryReport {
                    path: path.clone(),
                    recorded: id.clone(),
                    source: None,
                    unnamed: Some(self.why_unnamed(path, id.as_deref(), b)),
                },
            })
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path).then(a.recorded.cmp(&b.recorded)));
        out
    }

    /// Why a binary stayed unnamed, and how to supply it.
    fn why_unnamed(&self, path: &str, id: Option<&str>, b: &binary::Found) -> String {
        let tried = if b.refused.is_empty() { String::new() } else { format!(" (found {})", b.refused.join("; ")) };
        match id {
            Some(id) => format!(
                "no file of the recorded build-id {id} was found{tried}: its samples stay {}+0x... (stage {}); {}",
                dso_name(path),
                crate::rules::BINARY_UNKNOWN,
                self.lookup.how_to_supply(path, id)
            ),
            None if path.starts_with('[') => format!(
                "no file holds it and no build-id was recorded to find its image by: its samples stay {}+0x... \
                 (stage {})",
                dso_name(path),
                crate::rules::BINARY_UNKNOWN
            ),
            None => format!(
                "unreadable here and no build-id recorded: its samples stay {}+0x... (stage {}); give a copy with \
                 --symfs DIR (DIR{path})",
                dso_name(path),
                crate::rules::BINARY_UNKNOWN
            ),
        }
    }

    /// Where every name came from, one line per source: the kernel's, then each binary
    /// read (its ELF symbol table, a debug file by build-id, perf's build-id cache,
    /// `--symfs`, a recording's symbol map) or why it stayed unnamed.
    pub fn sources(&self) -> Vec<String> {
        let mut out = vec![self.kernel_source.clone()];
        for b in self.binaries() {
            match (&b.source, &b.unnamed) {
                (Some(src), _) => out.push(format!("{}: {src}", b.path)),
                (None, Some(_)) => out.push(format!(
                    "{}: unnamed (recorded build-id {}): its samples stay FILE+0x...",
                    b.path,
                    b.recorded.as_deref().unwrap_or("none")
                )),
                (None, None) => {}
            }
        }
        out
    }

    /// One warning per binary that stayed unnamed: which, why, and how to supply it.
    pub fn unnamed_binaries(&self) -> Vec<String> {
        self.binaries().into_iter().filter_map(|b| Some(format!("{}: {}", b.path, b.unnamed?))).collect()
    }

    /// Name only what the binaries (and a recording's symbol maps) name, not what debug
    /// files installed on this machine add: for results that must not depend on the
    /// machine (golden tests). Binaries already read keep their names.
    pub fn without_debug_files(mut self) -> Symbolizer {
        self.lookup.debug_root = None;
        self.lookup.buildid_dir = None;
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
        Symbolizer::load(rec, None, None)
    }

    /// [`Symbolizer::for_recording`] with the user's symbol paths: binaries looked for
    /// under `--symfs` first, and `--kallsyms` used for the kernel in place of the
    /// recording's snapshot (checked against the `_text` address the recording names).
    pub fn for_recording_with(rec: &collector::recording::Recording, paths: &SymbolPaths) -> crate::Result<Symbolizer> {
        Ok(Symbolizer::load(rec, None, paths.kallsyms.as_deref())?.with_symfs(paths.symfs.as_deref()))
    }

    /// Symbolizer for another recording, keeping what this one already loaded where it
    /// still holds: binaries' symbol tables (checked against each mapping's build-id as
    /// always) and the kernel's symbols when the new snapshot is the same text. A series of
    /// recordings of one program on one boot (a sweep) then parses each only once.
    pub fn reuse_for(self, rec: &collector::recording::Recording) -> crate::Result<Symbolizer> {
        Symbolizer::load(rec, Some(self), None)
    }

    fn load(
        rec: &collector::recording::Recording,
        prev: Option<Symbolizer>,
        given: Option<&std::path::Path>,
    ) -> crate::Result<Symbolizer> {
        let maps = rec.maps()?;
        let (prev_ks, prev_rest) = match prev {
            Some(p) => {
                let mut bins = p.bins;
                keep_matching(&mut bins);
                (p.kallsyms, Some((bins, p.lookup)))
            }
            None => (None, None),
        };
        let id = recorded_kernel(&rec.meta.machine);
        let what = rec.dir.display().to_string();
        let mut kernel = match given {
            // The user's file stands in for the snapshot: checked against the recorded
            // `_text` (it has no build-id of its own), said in the source line.
            Some(g) => {
                let look = kernel::KernelLookup { given: Some(g.to_path_buf()), ..kernel::KernelLookup::default() };
                let found = kernel::kernel_symbols(&id, &look, &what)?;
                KernelChoice { ks: found.kallsyms, source: found.source, warnings: found.warnings }
            }
            None => from_snapshot(&rec.dir, &id, prev_ks),
        };
        // Without a usable snapshot: perf's build-id cache or this machine, when they hold
        // the recorded build (never a kernel the recording does not name).
        if kernel.ks.is_none() && id.build_id.is_some() {
            kernel.instead_of_snapshot(&id, &what)?;
        }
        let mut sym = Symbolizer::new(maps, kernel.ks);
        sym.warnings = kernel.warnings;
        sym.kernel_source = kernel.source;
        if let Some((bins, lookup)) = prev_rest {
            sym.bins = bins;
            sym.lookup = lookup;
        }
        sym.load_shipped(&rec.dir.join("symbols"))?;
        Ok(sym)
    }

    /// The symbol maps shipped with the recording in `dir` (`BUILDID.map`), by build-id.
    fn load_shipped(&mut self, dir: &std::path::Path) -> crate::Result<()> {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let p = e.path();
                let Some(id) = p.file_name().and_then(|f| f.to_str()).and_then(|f| f.strip_suffix(".map")) else {
                    continue;
                };
                let text = collector::files::read_to_string(&p, collector::files::Kind::SymbolMap)?;
                self.shipped.insert(id.to_string(), (ElfSymbols::from_symbol_map(&text, &p, id)?, p.clone()));
            }
        }
        Ok(())
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
        let dso = dso_name(&m.path);
        Some((m, off, dso))
    }

    /// The symbols of mapping `m`'s binary as recorded, looked up once per (path,
    /// build-id) ([`BinaryLookup`]; then a symbol map shipped with the recording); None
    /// when no file of that build was found.
    fn elf(&mut self, m: &Mapping) -> Option<&ElfSymbols> {
        let key = (m.path.clone(), m.build_id.clone());
        if !self.bins.contains_key(&key) {
            let mut found = self.lookup.find(&m.path, m.build_id.as_deref());
            if found.elf.is_none() {
                if let Some((e, p)) = m.build_id.as_ref().and_then(|id| self.shipped.remove(id)) {
                    found.origin = Some(Origin::SymbolMap(p));
                    found.elf = Some(e);
                }
            }
            self.bins.insert(key.clone(), found);
        }
        self.bins.get(&key).and_then(|b| b.elf.as_ref())
    }

    /// The mapping holding `ip` in process `pid` and the file offset of `ip` in it.
    pub fn mapping_of(&self, pid: u32, ip: u64) -> Option<(Mapping, FileOffset)> {
        self.locate(pid, Avma(ip)).map(|(m, off, _)| (m, off))
    }

    /// The symbols of mapping `m`'s binary, when a file of its recorded build was found
    /// (see [`Symbolizer::binaries`] for where from), or a recording's symbol map.
    pub fn binary(&mut self, m: &Mapping) -> Option<&ElfSymbols> {
        self.elf(m)
    }

    /// Where the symbols of mapping `m`'s binary came from, in words, or why there are
    /// none (naming the recorded build-id and any file of another build that was refused).
    pub fn binary_source(&mut self, m: &Mapping) -> String {
        self.elf(m);
        let key = (m.path.clone(), m.build_id.clone());
        match self.bins.get(&key) {
            Some(b) => match (&b.elf, &b.origin) {
                (Some(e), Some(o)) => format!("{}: {}", m.path, o.describe(e, m.build_id.as_deref())),
                _ => format!("{}: {}", m.path, self.why_unnamed(&m.path, m.build_id.as_deref(), b)),
            },
            None => format!("{}: not looked up", m.path),
        }
    }

    /// Resolve an address in process `pid`.
    pub fn resolve_ip(&mut self, pid: u32, ip: u64, kernel: bool) -> Symbol {
        if kernel {
            return Symbol { name: self.kernel_name(ip), dso: "[kernel.kallsyms]".into(), binary_unknown: false };
        }
        let Some((m, off, dso)) = self.locate(pid, Avma(ip)) else {
            return Symbol { name: format!("[unknown]+{ip:#x}"), dso: "[unknown]".into(), binary_unknown: false };
        };
        let (name, binary_unknown) = match self.elf(&m) {
            Some(e) => (e.at_offset(off).map_or_else(|| format!("{dso}+{:#x}", off.0), str::to_string), false),
            None => (format!("{dso}+{:#x}", off.0), true),
        };
        Symbol { name, dso, binary_unknown }
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

/// The kernel a recording names in its meta.json: build-id and `_text` address.
fn recorded_kernel(machine: &collector::recording::Machine) -> kernel::KernelIdentity {
    kernel::KernelIdentity {
        build_id: machine.kernel_build_id.clone(),
        reference: machine
            .kernel_text
            .as_deref()
            .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
            .map(|a| ("_text".to_string(), a)),
    }
}

/// The kernel symbols a recording is read with, the source line, and what was wrong.
struct KernelChoice {
    ks: Option<Kallsyms>,
    source: String,
    warnings: Vec<String>,
}

/// The snapshot in recording directory `dir` (`kallsyms`, or gzipped `kallsyms.gz`; `prev`:
/// the symbols of the recording before, reused when the text is the same), checked against
/// the kernel the recording names (`id`); one without addresses (taken without the right to
/// see them) resolves nothing and is ignored.
fn from_snapshot(dir: &std::path::Path, id: &kernel::KernelIdentity, prev: Option<Kallsyms>) -> KernelChoice {
    let mut choice = KernelChoice { ks: None, source: String::from("kernel: none"), warnings: Vec::new() };
    let Some(p) = ["kallsyms", "kallsyms.gz"].iter().map(|f| dir.join(f)).find(|p| p.exists()) else {
        choice.warnings.push(format!(
            "{}: no kallsyms snapshot: kernel samples stay unnamed ([kernel.kallsyms]+0x...)",
            dir.display()
        ));
        return choice;
    };
    let k = match Kallsyms::load_reusing(&p, prev) {
        Ok(k) => k,
        Err(e) => {
            choice.warnings.push(format!("kernel samples stay unnamed ([kernel.kallsyms]+0x...): {e}"));
            return choice;
        }
    };
    // The snapshot was taken on the recording boot: its `_text` must be the recorded one,
    // or it is not this recording's kernel.
    match (&id.reference, k.address_of("_text")) {
        (Some((_, want)), Some(have)) if *want != have => {
            choice.warnings.push(format!(
                "{}: _text at {have:#x}, but the recording's kernel had it at {want:#x}: the \
                 snapshot is not this recording's kernel; kernel samples stay unnamed \
                 ([kernel.kallsyms]+0x...)",
                p.display()
            ));
            choice.source = format!("kernel: none ({} contradicts meta.json)", p.display());
        }
        _ => {
            choice.source = format!(
                "kernel: the recording's kallsyms snapshot{}",
                match (&id.build_id, &id.reference) {
                    (Some(b), Some(_)) => format!(" (build-id {b}; _text as recorded)"),
                    (Some(b), None) => format!(" (build-id {b})"),
                    _ => " (taken with the recording)".to_string(),
                }
            );
            choice.ks = Some(k);
        }
    }
    choice
}

impl KernelChoice {
    /// Perf's build-id cache or this machine in place of a missing or unusable snapshot,
    /// when they hold the recorded build `id`; what was wrong with the snapshot is still
    /// said (a FIFO or a device planted as `kallsyms` is not passed over in silence), with
    /// what stood in for it.
    fn instead_of_snapshot(&mut self, id: &kernel::KernelIdentity, what: &str) -> crate::Result<()> {
        let found = kernel::kernel_symbols(id, &kernel::KernelLookup::default(), what)?;
        if found.kallsyms.is_some() {
            let instead = format!("kernel symbols from {} instead", found.source.trim_start_matches("kernel: "));
            for w in self.warnings.iter_mut() {
                *w = w.replace("kernel samples stay unnamed ([kernel.kallsyms]+0x...)", &instead);
            }
            self.source = found.source;
            self.ks = found.kallsyms;
        }
        Ok(())
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
    fn a_reused_symbolizer_keeps_only_binaries_found_by_build_id() {
        let exe = std::env::current_exe().unwrap();
        let path = exe.display().to_string();
        let id = ElfSymbols::open(&exe).unwrap().build_id.expect("test binaries carry a build-id");
        let found =
            |origin: Origin| binary::Found { elf: ElfSymbols::open(&exe), origin: Some(origin), refused: Vec::new() };
        let mut bins: Binaries = HashMap::from([
            ((path.clone(), Some(id.clone())), found(Origin::Path { checked: true })),
            ((path.clone(), None), found(Origin::Path { checked: false })),
            (("/gone".to_string(), Some("00ff".into())), binary::Found { elf: None, origin: None, refused: vec![] }),
            (("/shipped".to_string(), Some("11ee".into())), found(Origin::SymbolMap("/r/symbols/11ee.map".into()))),
        ]);
        keep_matching(&mut bins);
        let kept: Vec<_> = bins.keys().cloned().collect();
        // Found by its build-id: the same build for every recording. Read unchecked (may be
        // rebuilt), not found (may be readable now), another recording's symbol map: again.
        assert_eq!(kept, [(path, Some(id))]);
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
