//! Which file may name a user-space binary's samples: only one of the build the recording
//! names. A mapping carries the build-id it was recorded with (perf.data: MMAP2 records
//! with build-ids or the build-id table; a recording: maps.json). Candidates are tried in
//! perf's order: `--symfs DIR` (DIR/PATH, as perf), perf's build-id cache
//! (`~/.debug/.build-id/NN/REST/elf`, `~/.debug/PATH/BUILDID/elf`), then the file at the
//! recorded path (for `[vdso]`, which no file holds: this machine's running vDSO image); a
//! recording's own symbol map (`record --keep-symbols`) comes last. Each
//! must carry the recorded build-id: a file of another build never names a sample. Debug
//! files by build-id (`/usr/lib/debug/.build-id/NN/REST.debug`, under `--symfs` too, and
//! the cache's `debug`) add the symbols a stripped binary lacks; they cannot stand alone
//! (their segments carry no file offsets). Without a build-id recorded, the recorded path
//! is used and said to be unchecked. What was found, or why nothing was, is kept per
//! binary for the report ([`BinaryReport`]).

use super::elf::ElfSymbols;
use std::path::{Path, PathBuf};

/// Where user-space binaries are looked for.
#[derive(Debug, Clone)]
pub struct BinaryLookup {
    /// `--symfs DIR`: a copy of the recording machine's files; DIR/PATH is tried first.
    /// Default: none.
    pub symfs: Option<PathBuf>,
    /// perf's build-id cache. Default: `$PERF_BUILDID_DIR`, else `$HOME/.debug`.
    pub buildid_dir: Option<PathBuf>,
    /// Where debug files are looked up by build-id. Default: [`super::DEBUG_ROOT`]; None:
    /// never (results that must not depend on this machine's debug packages).
    pub debug_root: Option<PathBuf>,
}

impl Default for BinaryLookup {
    fn default() -> BinaryLookup {
        BinaryLookup {
            symfs: None,
            buildid_dir: super::kernel::default_buildid_dir(),
            debug_root: Some(super::DEBUG_ROOT.into()),
        }
    }
}

/// Where a binary's names came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The file at the recorded path; `checked`: its build-id is the recorded one (false:
    /// none was recorded).
    Path { checked: bool },
    /// A file under `--symfs`.
    Symfs(PathBuf),
    /// perf's build-id cache.
    BuildIdCache(PathBuf),
    /// The recording's symbol map (`record --keep-symbols`).
    SymbolMap(PathBuf),
    /// This machine's running vDSO, read from memory (`[vdso]` recorded on this boot's
    /// kernel build).
    RunningVdso,
}

/// One binary as the report shows it: the recorded path and build-id, and where its names
/// came from or why there are none.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BinaryReport {
    pub path: String,
    /// The build-id the recording names for it, if any.
    pub recorded: Option<String>,
    /// Where its symbols came from, in words; None when it stayed unnamed.
    pub source: Option<String>,
    /// Why it stayed unnamed and how to supply it (None when named).
    pub unnamed: Option<String>,
}

/// A binary found for one (path, build-id): its symbols, or why none.
pub(super) struct Found {
    pub elf: Option<ElfSymbols>,
    pub origin: Option<Origin>,
    /// What was tried and refused (`FILE: build-id X`), for the reason.
    pub refused: Vec<String>,
}

fn hex_split(id: &str) -> Option<(&str, &str)> {
    (id.len() > 2 && id.is_char_boundary(2)).then(|| id.split_at(2))
}

/// A path under a root: `/usr/bin/x` under `/sym` is `/sym/usr/bin/x`.
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

impl BinaryLookup {
    /// The debug files that may hold symbols of build `id`, most specific first.
    fn debug_files(&self, id: &str) -> Vec<PathBuf> {
        let Some((nn, rest)) = hex_split(id) else { return Vec::new() };
        let mut out = Vec::new();
        let rel = format!(".build-id/{nn}/{rest}.debug");
        if let Some(s) = &self.symfs {
            out.push(s.join("usr/lib/debug").join(&rel));
        }
        if let Some(c) = &self.buildid_dir {
            out.push(c.join(".build-id").join(nn).join(rest).join("debug"));
        }
        if let Some(d) = &self.debug_root {
            out.push(d.join(&rel));
        }
        out
    }

    /// The binaries that may be build `id` of `path`, in perf's order, each with how it
    /// would be named.
    fn candidates(&self, path: &str, id: &str) -> Vec<(PathBuf, Origin)> {
        let mut out = Vec::new();
        if let Some(s) = &self.symfs {
            let p = under(s, path);
            out.push((p.clone(), Origin::Symfs(p)));
        }
        if let (Some(c), Some((nn, rest))) = (&self.buildid_dir, hex_split(id)) {
            // perf keeps the file as `elf` in a directory (older perf: the file itself);
            // the vDSO as `vdso`.
            let by_id = c.join(".build-id").join(nn).join(rest);
            let by_path = under(c, path).join(id);
            for base in [by_id, by_path] {
                for p in [base.join("elf"), base.join("vdso"), base.clone()] {
                    out.push((p.clone(), Origin::BuildIdCache(p)));
                }
            }
        }
        out.push((PathBuf::from(path), Origin::Path { checked: true }));
        out
    }

    /// The file of `path` as built `id`, in perf's order (`--symfs`, the build-id cache,
    /// the path), checked by its build-id note; the file at the path when no build-id was
    /// recorded. For readers of a binary's bytes rather than its symbols (the unwinder).
    pub fn file_of(&self, path: &str, id: Option<&str>) -> Option<PathBuf> {
        let Some(id) = id else { return Some(PathBuf::from(path)) };
        let build_id = |p: &Path| -> Option<String> {
            use object::Object;
            let f = std::fs::File::open(p).ok()?;
            // SAFETY: mapped read-only and dropped before returning.
            let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
            let file = object::File::parse(&*map).ok()?;
            let id = file.build_id().ok()??;
            Some(id.iter().map(|b| format!("{b:02x}")).collect())
        };
        self.candidates(path, id)
            .into_iter()
            .map(|(p, _)| p)
            .find(|p| p.is_file() && build_id(p).as_deref() == Some(id))
    }

    /// Find the symbols of `path` as built `id` (None: no build-id recorded).
    pub(super) fn find(&self, path: &str, id: Option<&str>) -> Found {
        let Some(id) = id else {
            // Nothing to check against: the file at the path, said to be unchecked.
            let elf = ElfSymbols::open(Path::new(path)).map(|mut e| {
                if let Some(own) = e.build_id.clone() {
                    e.add_debug_file(&self.debug_files(&own));
                }
                e
            });
            let origin = elf.as_ref().map(|_| Origin::Path { checked: false });
            return Found { elf, origin, refused: Vec::new() };
        };
        let mut refused = Vec::new();
        for (p, origin) in self.candidates(path, id) {
            if !p.is_file() {
                continue;
            }
            match ElfSymbols::open(&p) {
                Some(mut e) if e.build_id.as_deref() == Some(id) => {
                    e.add_debug_file(&self.debug_files(id));
                    return Found { elf: Some(e), origin: Some(origin), refused };
                }
                Some(e) => refused.push(format!(
                    "{}: build-id {}",
                    p.display(),
                    e.build_id.as_deref().unwrap_or("none (the file carries no build-id note)")
                )),
                None => refused.push(format!("{}: not a readable ELF file", p.display())),
            }
        }
        // The vDSO is no file: this machine's running image stands in when it is the
        // recorded build (the recording was made on this kernel build).
        if path == "[vdso]" {
            if let Some(img) = collector::buildid::running_vdso_image() {
                match collector::buildid::image_build_id(&img) {
                    Some(own) if own == id => {
                        let elf = ElfSymbols::from_image(img, Path::new("[vdso]"));
                        let origin = elf.as_ref().map(|_| Origin::RunningVdso);
                        return Found { elf, origin, refused };
                    }
                    own => refused
                        .push(format!("this machine's running vDSO: build-id {}", own.as_deref().unwrap_or("none"))),
                }
            }
        }
        Found { elf: None, origin: None, refused }
    }

    /// How a user supplies build `id` of `path`, in words.
    pub(super) fn how_to_supply(&self, path: &str, id: &str) -> String {
        let cache = self.buildid_dir.as_deref().map_or("~/.debug".to_string(), |d| d.display().to_string());
        if path.starts_with('[') {
            // The vDSO and its kin are no file: perf keeps their image in its cache.
            return format!(
                "copy the recording machine's perf build-id cache entry (~/.debug/{path}/{id}/, which `perf record` \
                 fills) to {cache}/{path}/{id}/"
            );
        }
        let slot = hex_split(id).map_or(String::new(), |(nn, rest)| format!("{cache}/.build-id/{nn}/{rest}/elf"));
        format!(
            "supply the recording machine's {path} with --symfs DIR (DIR{path}), or put it in perf's build-id cache \
             ({slot}: `perf buildid-cache -a {path}` on the recording machine, then copy {cache})"
        )
    }
}

impl Origin {
    /// Where the names came from, in words.
    pub fn describe(&self, elf: &ElfSymbols, recorded: Option<&str>) -> String {
        let id = recorded.or(elf.build_id.as_deref()).unwrap_or("none");
        let debug = elf.debug_file.as_ref().map_or(String::new(), |d| format!(" + debug file {}", d.display()));
        match self {
            Origin::Path { checked: true } => match &elf.debug_file {
                // Kept word for word from before (golden reports): the debug file by build-id.
                Some(d) => format!("debug file {} (by build-id)", d.display()),
                None => format!("its ELF symbol table (build-id {id}, as recorded)"),
            },
            Origin::Path { checked: false } => format!(
                "its ELF symbol table{debug} (no build-id recorded: unchecked; the file here is build-id {})",
                elf.build_id.as_deref().unwrap_or("none")
            ),
            Origin::Symfs(p) => format!("--symfs {}{debug} (build-id {id}, as recorded)", p.display()),
            Origin::BuildIdCache(p) => {
                format!("perf's build-id cache {}{debug} (build-id {id}, as recorded)", p.display())
            }
            Origin::RunningVdso => format!("this machine's running vDSO (build-id {id}, as recorded)"),
            Origin::SymbolMap(p) => {
                format!(
                    "the recording's symbol map {} (build-id {id}; the binary here is missing or rebuilt)",
                    p.display()
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vDSO is named from this machine's running image when the recorded build-id is
    /// its own, and never when it is another's.
    #[test]
    fn the_running_vdso_names_its_own_build_and_no_other() {
        let Some(img) = collector::buildid::running_vdso_image() else {
            eprintln!("skipped: no readable [vdso] mapping in this process");
            return;
        };
        let id = collector::buildid::image_build_id(&img).expect("vDSO build-id");
        let lookup = BinaryLookup { symfs: None, buildid_dir: None, debug_root: None };
        let found = lookup.find("[vdso]", Some(&id));
        assert_eq!(found.origin, Some(Origin::RunningVdso));
        let elf = found.elf.expect("symbols");
        // Independent expectation: the image's own dynamic symbol table, read with object.
        use object::{Object, ObjectSymbol};
        let file = object::File::parse(&*img).expect("ELF");
        let sym = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok("__vdso_clock_gettime") || s.name() == Ok("clock_gettime"))
            .expect("a clock_gettime symbol");
        // The vDSO is linked at 0: its file offsets are its addresses.
        let at = elf.at_offset(crate::symbolize::addr::FileOffset(sym.address() + 1)).expect("named");
        assert!(at.ends_with("clock_gettime"), "{at}");
        let other = "00".repeat(20);
        let refused = lookup.find("[vdso]", Some(&other));
        assert!(refused.elf.is_none());
        assert!(
            refused.refused.iter().any(|r| r.contains("running vDSO: build-id") && r.contains(&id)),
            "{:?}",
            refused.refused
        );
    }
}
