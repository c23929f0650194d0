//! A binary's function symbols (ELF symbol table, its debug file's by build-id, or a
//! recording's symbol map), its file-offset -> ELF-address map, and its DWARF context for
//! lines and inline frames (built on first use: one `addr2line::Loader` per binary).

use super::addr::{FileOffset, Svma};
use super::Frame;

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
    /// Raw names in an ELF image held in memory (the running vDSO).
    Owned(Vec<u8>),
}

impl NameStore {
    fn bytes(&self) -> &[u8] {
        match self {
            NameStore::Mapped(m) => m,
            NameStore::Text(t) => t.as_bytes(),
            NameStore::Owned(b) => b,
        }
    }
}

/// Where distributions install debug files by build-id.
pub const DEBUG_ROOT: &str = "/usr/lib/debug";

/// The function symbols of a mapped ELF file, names as offsets into `data`; with its
/// segments and build-id.
type ElfParts = (Vec<Sym>, Vec<(u64, u64, u64)>, Option<String>);

fn elf_parts(data: &[u8], store: u32) -> Option<ElfParts> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let file = object::File::parse(data).ok()?;
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

/// Map a regular file read-only. Opened without blocking (a FIFO planted where a binary
/// was recorded must not hang the reader) and checked to be a regular file first.
fn map_file(path: &std::path::Path) -> Option<memmap2::Mmap> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    // SAFETY: read-only private mapping of a binary.
    unsafe { memmap2::Mmap::map(&f) }.ok()
}

/// Sort by address, the largest symbol first at one address, and keep one per address.
fn sort_symbols(syms: &mut Vec<Sym>) {
    syms.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
    syms.dedup_by_key(|s| s.addr);
}

impl ElfSymbols {
    /// Read the symbol table (mapping the file; nothing else is parsed), and the symbols
    /// of its debug file under [`DEBUG_ROOT`] when there is one.
    pub fn load(path: &std::path::Path) -> Option<ElfSymbols> {
        ElfSymbols::load_with_debug(path, Some(std::path::Path::new(DEBUG_ROOT)))
    }

    /// [`ElfSymbols::load`] with debug files looked up under `debug_root` (none: not at all).
    pub fn load_with_debug(path: &std::path::Path, debug_root: Option<&std::path::Path>) -> Option<ElfSymbols> {
        let mut e = ElfSymbols::open(path)?;
        if let (Some(root), Some(id)) = (debug_root, e.build_id.clone().filter(|id| id.len() > 2)) {
            e.add_debug_file(&[root.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]))]);
        }
        Some(e)
    }

    /// Read the symbol table of the file at `path` alone (no debug file); None when it is
    /// not a readable ELF file.
    pub fn open(path: &std::path::Path) -> Option<ElfSymbols> {
        ElfSymbols::from_store(NameStore::Mapped(map_file(path)?), path)
    }

    /// The symbols of the ELF data in `store` (its only name store), `path` naming it.
    fn from_store(store: NameStore, path: &std::path::Path) -> Option<ElfSymbols> {
        let (mut syms, segs, build_id) = elf_parts(store.bytes(), 0)?;
        sort_symbols(&mut syms);
        let shown = (0..syms.len()).map(|_| std::cell::OnceCell::new()).collect();
        Some(ElfSymbols {
            path: path.to_path_buf(),
            names: vec![store],
            syms,
            shown,
            segs,
            build_id,
            debug_file: None,
            dwarf: std::cell::OnceCell::new(),
        })
    }

    /// Read the symbol table of an ELF image held in memory (the running vDSO); `label`
    /// names it in reports. None when it is not an ELF image.
    pub fn from_image(image: Vec<u8>, label: &std::path::Path) -> Option<ElfSymbols> {
        ElfSymbols::from_store(NameStore::Owned(image), label)
    }

    /// Add the symbols of the first of `candidates` that exists and is a debug file of this
    /// very build (its own build-id note says so), as perf does for stripped binaries.
    /// Returns whether one was added.
    pub fn add_debug_file(&mut self, candidates: &[std::path::PathBuf]) -> bool {
        let Some(id) = self.build_id.clone() else { return false };
        if self.debug_file.is_some() {
            return false;
        }
        for p in candidates {
            let Some(dbg) = p.is_file().then(|| map_file(p)).flatten() else { continue };
            let store = self.names.len() as u32;
            let Some((more, _, Some(dbg_id))) = elf_parts(&dbg, store) else { continue };
            if dbg_id != id {
                continue;
            }
            self.syms.extend(more);
            sort_symbols(&mut self.syms);
            self.shown = (0..self.syms.len()).map(|_| std::cell::OnceCell::new()).collect();
            self.names.push(NameStore::Mapped(dbg));
            self.debug_file = Some(p.clone());
            return true;
        }
        false
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
        sort_symbols(&mut syms);
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
                NameStore::Mapped(_) | NameStore::Owned(_) => addr2line::demangle_auto(raw, None).into_owned(),
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

    /// The address (as the ELF file states it) of file offset `off`.
    pub fn vaddr_of(&self, off: FileOffset) -> Option<Svma> {
        let off = off.0;
        let &(fo, _, va) = self.segs.iter().find(|(o, sz, _)| off >= *o && off < o + sz)?;
        Some(Svma(off - fo + va))
    }

    /// The function containing address `vaddr` (zero-size symbols extend to the next one).
    pub fn at_vaddr(&self, vaddr: Svma) -> Option<&str> {
        let vaddr = vaddr.0;
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
    pub fn frames_at_vaddr(&self, vaddr: Svma) -> Vec<Frame> {
        let mut out = Vec::new();
        if let Some(l) = self.loader() {
            if let Ok(mut it) = l.find_frames(vaddr.0) {
                while let Ok(Some(f)) = it.next() {
                    let function = f.function.as_ref().and_then(|n| n.demangle().ok()).map(|n| n.into_owned());
                    let (file, line) = f.location.map_or((None, None), |l| (l.file.map(str::to_string), l.line));
                    match function {
                        Some(function) => out.push(Frame { function, file, line }),
                        // A location without a function DIE: keep the symbol-table name.
                        None => out.push(Frame {
                            function: self.at_vaddr(vaddr).map_or_else(|| format!("{:#x}", vaddr.0), str::to_string),
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

    /// The file these symbols were read from (a binary, or a recording's symbol map).
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// The function containing `vaddr`: its name, start and size (a zero-size symbol
    /// extends to the next one; the last such one to its segment's end).
    pub fn function_at(&self, vaddr: Svma) -> Option<(&str, Svma, u64)> {
        let i = self.syms.partition_point(|s| s.addr <= vaddr.0).checked_sub(1)?;
        let Sym { addr: a, size: sz, .. } = self.syms[i];
        let end = if sz > 0 {
            a.saturating_add(sz)
        } else {
            let seg_end = self.segs.iter().find(|(_, len, v)| a >= *v && a - v < *len).map(|(_, len, v)| v + len);
            self.syms.get(i + 1).map(|n| n.addr).or(seg_end)?
        };
        (vaddr.0 < end).then(|| (self.name(i), Svma(a), end - a))
    }

    /// The bytes of the binary at `start` (as the ELF file states addresses), at most `len`
    /// of them and never past the end of the file-backed segment holding `start`. None for
    /// a recording's symbol map (it holds no instruction bytes) or an address in no
    /// file-backed segment.
    pub fn bytes_at(&self, start: Svma, len: u64) -> Option<&[u8]> {
        let data = match self.names.first()? {
            NameStore::Mapped(m) => &m[..],
            NameStore::Owned(b) => &b[..],
            NameStore::Text(_) => return None,
        };
        let &(fo, filesz, va) = self.segs.iter().find(|(_, sz, v)| start.0 >= *v && start.0 - v < *sz)?;
        let from = usize::try_from(fo + (start.0 - va)).ok()?;
        let seg_end = usize::try_from(fo.checked_add(filesz)?).ok()?.min(data.len());
        let to = usize::try_from(len).ok().and_then(|l| from.checked_add(l)).map_or(seg_end, |t| t.min(seg_end));
        data.get(from..to)
    }

    /// Whether names came from an ELF file (not a recording's symbol map).
    pub fn is_elf(&self) -> bool {
        !matches!(self.names.first(), Some(NameStore::Text(_)))
    }

    /// The function containing file offset `off` (zero-size symbols extend to the next one).
    pub fn at_offset(&self, off: FileOffset) -> Option<&str> {
        self.at_vaddr(self.vaddr_of(off)?)
    }
}
