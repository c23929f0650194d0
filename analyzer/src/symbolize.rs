//! Symbolization: instruction pointers to symbol names through the ELF symbol tables of the
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

use collector::records::{Mapping, Sample};
use std::collections::HashMap;

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

/// A binary's function symbols, its file-offset -> address map, and (built on first use)
/// its DWARF context. Names stay raw slices of the mapped file until a lookup asks for one;
/// each is demangled once then (a release binary has tens of thousands of symbols and an
/// analysis needs a few hundred).
///
/// A stripped binary (a distribution's libc) keeps only its dynamic symbols; its full
/// symbol table lives in a separate debug file named by its build-id
/// (`/usr/lib/debug/.build-id/NN/REST.debug`, as Debian's `-dbg` and `-dbgsym` packages
/// install them). When that file exists, its symbols are read too, as perf does.
pub struct ElfSymbols {
    path: std::path::PathBuf,
    /// The bytes the names live in: the mapped binary (and its debug file), or a symbol
    /// map's text.
    names: Vec<NameStore>,
    /// Sorted by address.
    syms: Vec<Sym>,
    /// Each symbol's readable name, made on first use.
    shown: Vec<std::cell::OnceCell<String>>,
    segs: Vec<(u64, u64, u64)>,
    pub build_id: Option<String>,
    /// The debug file whose symbols were added, if any.
    pub debug_file: Option<std::path::PathBuf>,
    dwarf: std::cell::OnceCell<Option<addr2line::Loader>>,
}

/// One function: its address and size, and where its name is (`names[store][off..off+len]`).
#[derive(Debug, Clone, Copy)]
struct Sym {
    addr: u64,
    size: u64,
    store: u32,
    len: u32,
    off: usize,
}

enum NameStore {
    /// Raw (mangled) names in a mapped ELF file.
    Mapped(memmap2::Mmap),
    /// Names already demangled (a symbol map).
    Text(String),
}

impl NameStore {
    fn bytes(&self) -> &[u8] {
        match self {
            NameStore::Mapped(m) => m,
            NameStore::Text(t) => t.as_bytes(),
        }
    }
}

/// Where distributions install debug files by build-id.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The function symbols of a mapped ELF file, names as offsets into `data`; with its
/// segments and build-id.
type ElfParts = (Vec<Sym>, Vec<(u64, u64, u64)>, Option<String>);

fn elf_parts(data: &memmap2::Mmap, store: u32) -> Option<ElfParts> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let file = object::File::parse(&**data).ok()?;
    let base = data.as_ptr() as usize;
    let in_file = |name: &[u8]| {
        let off = (name.as_ptr() as usize).checked_sub(base)?;
        (off + name.len() <= data.len()).then_some((off, u32::try_from(name.len()).ok()?))
    };
    let syms = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == object::SymbolKind::Text && s.address() != 0)
        .filter_map(|s| {
            let (off, len) = in_file(s.name_bytes().ok()?)?;
            Some(Sym { addr: s.address(), size: s.size(), store, len, off })
        })
        .collect();
    let segs = file.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
    let build_id = file.build_id().ok().flatten().map(|b| b.iter().map(|x| format!("{x:02x}")).collect());
    Some((syms, segs, build_id))
}

fn map_file(path: &std::path::Path) -> Option<memmap2::Mmap> {
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: read-only private mapping of a binary.
    unsafe { memmap2::Mmap::map(&f) }.ok()
}

impl ElfSymbols {
    /// Read the symbol table (mapping the file; nothing else is parsed), and the symbols
    /// of its debug file under [`DEBUG_ROOT`] when there is one.
    pub fn load(path: &std::path::Path) -> Option<ElfSymbols> {
        ElfSymbols::load_with_debug(path, Some(std::path::Path::new(DEBUG_ROOT)))
    }

    /// [`ElfSymbols::load`] with debug files looked up under `debug_root` (none: not at all).
    pub fn load_with_debug(path: &std::path::Path, debug_root: Option<&std::path::Path>) -> Option<ElfSymbols> {
        let data = map_file(path)?;
        let (mut syms, segs, build_id) = elf_parts(&data, 0)?;
        let mut names = vec![NameStore::Mapped(data)];
        let mut debug_file = None;
        if let (Some(root), Some(id)) = (debug_root, build_id.as_deref().filter(|id| id.len() > 2)) {
            let p = root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
            // The debug file must be the same build (its own build-id note says so).
            if let Some(dbg) = p.exists().then(|| map_file(&p)).flatten() {
                if let Some((more, _, Some(dbg_id))) = elf_parts(&dbg, 1) {
                    if dbg_id == id {
                        syms.extend(more);
                        names.push(NameStore::Mapped(dbg));
                        debug_file = Some(p);
                    }
                }
            }
        }
        syms.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        syms.dedup_by_key(|s| s.addr);
        let shown = (0..syms.len()).map(|_| std::cell::OnceCell::new()).collect();
        Some(ElfSymbols {
            path: path.to_path_buf(),
            names,
            syms,
            shown,
            segs,
            build_id,
            debug_file,
            dwarf: std::cell::OnceCell::new(),
        })
    }

    /// Symbols from a symbol map (`FILE_OFFSET SIZE NAME` lines, hex): offsets stand in
    /// for addresses, so lookups by file offset work without the binary.
    pub fn from_symbol_map(text: &str, origin: &std::path::Path, build_id: &str) -> crate::Result<ElfSymbols> {
        let mut syms = Vec::new();
        let mut names = String::new();
        for (i, line) in text.lines().enumerate() {
            let bad = |what: &str| crate::Error::Import {
                path: origin.display().to_string(),
                line: i + 1,
                msg: format!("{what}: expected `FILE_OFFSET SIZE NAME` with hexadecimal offset and size"),
            };
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let mut it = line.splitn(3, ' ');
            let off = it.next().and_then(|x| u64::from_str_radix(x, 16).ok()).ok_or_else(|| bad("offset"))?;
            let size = it.next().and_then(|x| u64::from_str_radix(x, 16).ok()).ok_or_else(|| bad("size"))?;
            let name = it.next().filter(|n| !n.is_empty()).ok_or_else(|| bad("name"))?;
            let len = u32::try_from(name.len()).map_err(|_| bad("name"))?;
            syms.push(Sym { addr: off, size, store: 0, len, off: names.len() });
            names.push_str(name);
        }
        syms.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        syms.dedup_by_key(|s| s.addr);
        let shown = (0..syms.len()).map(|_| std::cell::OnceCell::new()).collect();
        Ok(ElfSymbols {
            path: origin.to_path_buf(),
            names: vec![NameStore::Text(names)],
            syms,
            shown,
            segs: vec![(0, u64::MAX, 0)],
            build_id: Some(build_id.to_string()),
            debug_file: None,
            dwarf: std::cell::OnceCell::from(None),
        })
    }

    /// The readable name of symbol `i`: Rust (legacy and v0) and C++ (Itanium) names
    /// demangled, others kept; made on first use.
    fn name(&self, i: usize) -> &str {
        self.shown[i].get_or_init(|| {
            let Sym { store, off, len, .. } = self.syms[i];
            let Some(names) = self.names.get(store as usize) else { return String::new() };
            let raw = names.bytes().get(off..off + len as usize).unwrap_or_default();
            let raw = String::from_utf8_lossy(raw);
            match names {
                NameStore::Mapped(_) => addr2line::demangle_auto(raw, None).into_owned(),
                NameStore::Text(_) => raw.into_owned(),
            }
        })
    }

    /// This binary's functions as a symbol map (see [`ElfSymbols::from_symbol_map`]):
    /// only functions inside a file-backed segment, by file offset.
    pub fn symbol_map(&self) -> String {
        let mut out = String::new();
        for (i, &Sym { addr: va, size, .. }) in self.syms.iter().enumerate() {
            let Some(&(fo, _, sva)) = self.segs.iter().find(|(_, sz, v)| va >= *v && va < v + sz) else { continue };
            out.push_str(&format!("{:x} {:x} {}\n", va - sva + fo, size, self.name(i).replace('\n', " ")));
        }
        out
    }

    /// The virtual address (as in the ELF file) of file offset `off`.
    pub fn vaddr_of(&self, off: u64) -> Option<u64> {
        let &(fo, _, va) = self.segs.iter().find(|(o, sz, _)| off >= *o && off < o + sz)?;
        Some(off - fo + va)
    }

    /// The function containing virtual address `vaddr` (zero-size symbols extend to the next one).
    pub fn at_vaddr(&self, vaddr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.addr <= vaddr).checked_sub(1)?;
        let Sym { addr: a, size: sz, .. } = self.syms[i];
        let end = if sz > 0 { a + sz } else { self.syms.get(i + 1).map_or(u64::MAX, |n| n.addr) };
        (vaddr < end).then(|| self.name(i))
    }

    /// Whether DWARF could be loaded for this binary (loads it on first call).
    pub fn has_dwarf(&self) -> bool {
        self.loader().is_some()
    }

    fn loader(&self) -> Option<&addr2line::Loader> {
        self.dwarf.get_or_init(|| addr2line::Loader::new(&self.path).ok()).as_ref()
    }

    /// The frames at virtual address `vaddr`, innermost (inlined) first, from DWARF; the
    /// symbol table's name alone when DWARF has nothing there; empty when neither knows it.
    pub fn frames_at_vaddr(&self, vaddr: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        if let Some(l) = self.loader() {
            if let Ok(mut it) = l.find_frames(vaddr) {
                while let Ok(Some(f)) = it.next() {
                    let function = f.function.as_ref().and_then(|n| n.demangle().ok()).map(|n| n.into_owned());
                    let (file, line) = f.location.map_or((None, None), |l| (l.file.map(str::to_string), l.line));
                    match function {
                        Some(function) => out.push(Frame { function, file, line }),
                        // A location without a function DIE: keep the symbol-table name.
                        None => out.push(Frame {
                            function: self.at_vaddr(vaddr).map_or_else(|| format!("{vaddr:#x}"), str::to_string),
                            file,
                            line,
                        }),
                    }
                }
            }
        }
        match (out.last_mut(), self.at_vaddr(vaddr)) {
            // The real (outermost) function: the symbol table's full path, since DWARF built
            // with line tables only names functions without their module path.
            (Some(last), Some(name)) => last.function = name.to_string(),
            (None, Some(name)) => out.push(Frame { function: name.to_string(), file: None, line: None }),
            _ => {}
        }
        out
    }

    /// The function containing file offset `off` (zero-size symbols extend to the next one).
    pub fn at_offset(&self, off: u64) -> Option<&str> {
        self.at_vaddr(self.vaddr_of(off)?)
    }
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

/// The kernel's symbols from a kallsyms snapshot (`ADDR TYPE NAME [MODULE]` lines).
pub struct Kallsyms {
    /// The file's text; names are slices of it.
    text: String,
    /// (address, name start, name length), sorted by address.
    syms: Vec<(u64, u32, u32)>,
}

impl Kallsyms {
    pub fn parse(text: &str) -> Kallsyms {
        Kallsyms::from_text(text.to_string())
    }

    fn from_text(text: String) -> Kallsyms {
        let mut syms = Vec::with_capacity(text.len() / 40);
        let mut off = 0usize;
        for line in text.split_inclusive('\n') {
            let start = off;
            off += line.len();
            let b = line.as_bytes();
            // `ADDR TYPE NAME[\t[MODULE]]`
            let Some(sp) = b.iter().position(|&c| c == b' ') else { continue };
            if b.len() < sp + 4 || b[sp + 2] != b' ' || !matches!(b[sp + 1], b't' | b'T' | b'w' | b'W') {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(&line[..sp], 16) else { continue };
            let name = &line[sp + 3..];
            let len = name.find(['\t', ' ', '\n', '\r']).unwrap_or(name.len());
            if addr == 0 || len == 0 {
                continue;
            }
            syms.push((addr, (start + sp + 3) as u32, len as u32));
        }
        syms.sort_unstable_by_key(|s| s.0);
        Kallsyms { text, syms }
    }

    /// Read a kallsyms file (plain or gzipped); an empty or address-less file is an error,
    /// since it would leave every kernel sample unresolved.
    pub fn load(path: &std::path::Path) -> crate::Result<Kallsyms> {
        Kallsyms::load_reusing(path, None)
    }

    /// [`Kallsyms::load`], returning `prev` instead of parsing again when the file holds
    /// the same text.
    pub fn load_reusing(path: &std::path::Path, prev: Option<Kallsyms>) -> crate::Result<Kallsyms> {
        let io = |e| crate::Error::Io { path: path.into(), source: e };
        let bytes = std::fs::read(path).map_err(io)?;
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut s).map_err(io)?;
            s
        } else {
            String::from_utf8_lossy(&bytes).into_owned()
        };
        if let Some(p) = prev.filter(|p| p.text == text && !p.is_empty()) {
            return Ok(p);
        }
        let k = Kallsyms::from_text(text);
        if k.is_empty() {
            return Err(crate::Error::Kallsyms {
                path: path.display().to_string(),
                msg: "no text symbols with addresses: expected `ADDRESS TYPE NAME` lines as in /proc/kallsyms \
                      read by root"
                    .into(),
            });
        }
        Ok(k)
    }

    /// This machine's /proc/kallsyms, if readable with addresses.
    pub fn current() -> Option<Kallsyms> {
        Kallsyms::load(std::path::Path::new("/proc/kallsyms")).ok()
    }

    pub fn len(&self) -> usize {
        self.syms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (_, start, len) = self.syms[i];
        self.text.get(start as usize..(start + len) as usize)
    }
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
}

impl Symbolizer {
    pub fn new(maps: Vec<Mapping>, kallsyms: Option<Kallsyms>) -> Symbolizer {
        let mut by_pid: HashMap<u32, Vec<Mapping>> = HashMap::new();
        for m in maps {
            by_pid.entry(m.pid).or_default().push(m);
        }
        Symbolizer {
            maps: by_pid,
            kallsyms,
            elfs: HashMap::new(),
            shipped: HashMap::new(),
            debug_root: Some(DEBUG_ROOT.into()),
        }
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
        // The snapshot (`kallsyms`, or gzipped `kallsyms.gz`); one without addresses (taken
        // without the right to see them) resolves nothing and is ignored.
        let ks = ["kallsyms", "kallsyms.gz"]
            .iter()
            .map(|f| rec.dir.join(f))
            .find(|p| p.exists())
            .and_then(|p| Kallsyms::load_reusing(&p, prev_ks).ok());
        let mut sym = Symbolizer::new(maps, ks);
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

    /// Resolve a sample's IP.
    pub fn resolve(&mut self, s: &Sample) -> Symbol {
        self.resolve_ip(s.pid, s.ip, s.kernel)
    }

    /// The mapping of `ip` in process `pid`, its file offset and the DSO's short name.
    fn locate(&self, pid: u32, ip: u64) -> Option<(Mapping, u64, String)> {
        let m = self.maps.get(&pid)?.iter().rev().find(|m| ip >= m.start && ip < m.start + m.len)?.clone();
        let off = ip - m.start + m.pgoff;
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
        m.build_id.as_ref().and_then(|id| self.shipped.get(id))
    }

    /// Resolve an address in process `pid`.
    pub fn resolve_ip(&mut self, pid: u32, ip: u64, kernel: bool) -> Symbol {
        if kernel {
            return Symbol { name: self.kernel_name(ip), dso: "[kernel.kallsyms]".into() };
        }
        let Some((m, off, dso)) = self.locate(pid, ip) else {
            return Symbol { name: format!("[unknown]+{ip:#x}"), dso: "[unknown]".into() };
        };
        let name = match self.elf(&m).and_then(|e| e.at_offset(off)) {
            Some(n) => n.to_string(),
            None => format!("{dso}+{off:#x}"),
        };
        Symbol { name, dso }
    }

    fn kernel_name(&self, ip: u64) -> String {
        self.kallsyms.as_ref().and_then(|k| k.lookup(ip)).map_or_else(|| format!("[kernel]+{ip:#x}"), str::to_string)
    }

    /// The frames of an address, innermost inlined function first, with DWARF file and line
    /// where the binary has them; kernel addresses give their kallsyms name only.
    pub fn frames_ip(&mut self, pid: u32, ip: u64, kernel: bool) -> Vec<Frame> {
        let name_only = |function: String| vec![Frame { function, file: None, line: None }];
        if kernel {
            return name_only(self.kernel_name(ip));
        }
        let Some((m, off, dso)) = self.locate(pid, ip) else {
            return name_only(format!("[unknown]+{ip:#x}"));
        };
        let frames = self.elf(&m).and_then(|e| Some(e.frames_at_vaddr(e.vaddr_of(off)?))).unwrap_or_default();
        if frames.is_empty() {
            name_only(format!("{dso}+{off:#x}"))
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
