//! Which kernel symbols may name a recording's kernel samples: only those of the kernel
//! build that was recorded. A perf.data file records the kernel's build-id (its build-id
//! table) and a reference symbol's address (`_text`, in the kernel's MMAP record); a
//! native recording records the build-id in meta.json. Sources, in order: a kallsyms file
//! the user gives (`--kallsyms`, checked against the reference address), perf's build-id
//! cache (`~/.debug/[kernel.kallsyms]/BUILDID/kallsyms`, which `perf record` fills), this
//! machine's /proc/kallsyms when its build-id (/sys/kernel/notes) is the recorded one.
//! Between boots of one build the kernel moves (KASLR): addresses are corrected by the
//! difference of the reference symbol's recorded and found addresses, as perf does. With
//! no source, kernel samples stay unnamed (`[kernel.kallsyms]+0x...`, stage
//! `kernel-unknown`) and the report says which build-id it needed and how to supply it.

use super::Kallsyms;
use std::path::{Path, PathBuf};

/// What a recording says about its kernel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelIdentity {
    /// The kernel's GNU build-id, hex.
    pub build_id: Option<String>,
    /// The reference symbol and its address on the recording boot (`_text`).
    pub reference: Option<(String, u64)>,
}

/// Where to look for kernel symbols.
#[derive(Debug, Clone)]
pub struct KernelLookup {
    /// A kallsyms file the user gave (`--kallsyms`). Default: none.
    pub given: Option<PathBuf>,
    /// perf's build-id cache directory. Default: `$PERF_BUILDID_DIR`, else `$HOME/.debug`.
    pub buildid_dir: Option<PathBuf>,
    /// This machine's kernel. Default: [`ThisMachine::running`]; None to never use this
    /// machine (tests of foreign files).
    pub this_machine: Option<ThisMachine>,
}

/// Where this machine's kernel describes itself.
#[derive(Debug, Clone)]
pub struct ThisMachine {
    /// The kernel's ELF notes (its build-id). Default /sys/kernel/notes.
    pub notes: PathBuf,
    /// Its symbols. Default /proc/kallsyms.
    pub kallsyms: PathBuf,
    /// Its loaded modules (NAME/notes/.note.gnu.build-id, NAME/sections/.text). Default
    /// /sys/module.
    pub modules: PathBuf,
}

impl ThisMachine {
    /// The running kernel's files.
    pub fn running() -> ThisMachine {
        ThisMachine {
            notes: "/sys/kernel/notes".into(),
            kallsyms: "/proc/kallsyms".into(),
            modules: "/sys/module".into(),
        }
    }
}

/// perf's build-id cache directory: `$PERF_BUILDID_DIR`, else `$HOME/.debug`.
pub fn default_buildid_dir() -> Option<PathBuf> {
    std::env::var_os("PERF_BUILDID_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug")))
}

impl Default for KernelLookup {
    fn default() -> KernelLookup {
        KernelLookup { given: None, buildid_dir: default_buildid_dir(), this_machine: Some(ThisMachine::running()) }
    }
}

/// The kernel symbols chosen, where they came from, and what was wrong.
#[derive(Default)]
pub struct KernelSymbols {
    pub kallsyms: Option<Kallsyms>,
    /// One line: the source, and how it was checked.
    pub source: String,
    /// What the report must say (unnamed samples and how to name them, a contradicted
    /// reference address).
    pub warnings: Vec<String>,
    /// Address ranges (start, length) whose names cannot be trusted (a module of another
    /// build or load): left unnamed.
    pub unnamed: Vec<(u64, u64)>,
    /// Whether the symbols are this machine's running kernel's (its modules can then be
    /// checked against /sys/module).
    pub from_this_machine: bool,
}

pub use collector::buildid::build_id_from_notes;

/// This machine's kernel build-id, from `notes` (/sys/kernel/notes).
pub fn running_build_id(notes: &Path) -> Option<String> {
    build_id_from_notes(&std::fs::read(notes).ok()?)
}

/// The KASLR correction: shift `k` so that its reference symbol sits where the recording
/// saw it. Returns the shift applied, or None when `k` lacks the symbol.
fn align(k: &mut Kallsyms, reference: &(String, u64)) -> Option<i128> {
    let found = k.address_of(&reference.0)?;
    let delta = reference.1 as i128 - found as i128;
    if delta != 0 {
        k.shift(delta as i64);
    }
    Some(delta)
}

fn how_to_supply(id: &str, dir: Option<&Path>) -> String {
    let cache = dir.map_or("~/.debug".to_string(), |d| d.display().to_string());
    format!(
        "supply the symbols of kernel build-id {id}: --kallsyms FILE (a copy of /proc/kallsyms read as root on the \
         recording machine, any boot of that build), or perf's build-id cache ({cache}/[kernel.kallsyms]/{id}/kallsyms, \
         which `perf record` fills on the recording machine)"
    )
}

/// An address as the messages write it (`0xffffffff81000000`).
fn hex(a: u64) -> String {
    format!("{a:#x}")
}

/// Choose the kernel symbols for a recording whose kernel is `id`. `what` names the
/// recording in messages. Errors only for a given file that cannot be read or is not
/// kallsyms.
pub fn kernel_symbols(id: &KernelIdentity, look: &KernelLookup, what: &str) -> crate::Result<KernelSymbols> {
    // 1. A file the user gave.
    if let Some(p) = &look.given {
        return given_kallsyms(p, id, what);
    }
    let Some(build_id) = &id.build_id else {
        return Ok(without_build_id(id, look, what));
    };
    let mut out = KernelSymbols::default();
    // 2. perf's build-id cache.
    if let Some(dir) = &look.buildid_dir {
        match from_buildid_cache(dir, build_id, id) {
            Some(Ok((k, source))) => {
                out.source = source;
                out.kallsyms = Some(k);
                return Ok(out);
            }
            Some(Err(e)) => out.warnings.push(format!("perf's build-id cache: {e}")),
            None => {}
        }
    }
    // 3. This machine, when it runs that build.
    if let Some(m) = &look.this_machine {
        match from_this_machine(m, build_id, id) {
            Ok((k, source)) => {
                out.source = source;
                out.kallsyms = Some(k);
                out.from_this_machine = true;
                return Ok(out);
            }
            Err(none) => out.source = none,
        }
    } else {
        out.source = format!("kernel: none (recorded build-id {build_id})");
    }
    out.warnings.push(format!(
        "{what} was recorded on kernel build-id {build_id}, and no symbols of that build were found: kernel samples \
         stay unnamed ([kernel.kallsyms]+0x..., stage kernel-unknown); {}",
        how_to_supply(build_id, look.buildid_dir.as_deref())
    ));
    Ok(out)
}

/// The kallsyms file `p` the user gave: it has no build-id of its own, so the reference
/// address is the only check (a contradicted one is warned of, and the addresses moved to
/// it).
fn given_kallsyms(p: &Path, id: &KernelIdentity, what: &str) -> crate::Result<KernelSymbols> {
    let mut out = KernelSymbols::default();
    let mut k = Kallsyms::load(p)?;
    let mut checked = String::from("no reference address recorded: unchecked");
    if let Some(r) = &id.reference {
        match k.address_of(&r.0) {
            Some(a) if a == r.1 => checked = format!("{} at {} as recorded", r.0, hex(a)),
            Some(a) => {
                out.warnings.push(format!(
                    "{}: {} is at {} there, but {what} recorded it at {}: the file comes from another boot or \
                     another kernel build; addresses shifted by the difference (right for another boot of the \
                     same build, wrong for another build{})",
                    p.display(),
                    r.0,
                    hex(a),
                    hex(r.1),
                    id.build_id.as_deref().map_or(String::new(), |b| format!(": the recording's is build-id {b}"))
                ));
                align(&mut k, r);
                checked = format!("{} moved from {} to {} (KASLR)", r.0, hex(a), hex(r.1));
            }
            None => out.warnings.push(format!(
                "{}: no {} symbol to check against the address {what} recorded ({}): names unchecked",
                p.display(),
                r.0,
                hex(r.1)
            )),
        }
    }
    out.source = format!("kernel: --kallsyms {} ({checked})", p.display());
    out.kallsyms = Some(k);
    Ok(out)
}

/// No build-id recorded (an old perf, or the file's feature sections were cut): this
/// machine's symbols only when the reference address proves the same boot.
fn without_build_id(id: &KernelIdentity, look: &KernelLookup, what: &str) -> KernelSymbols {
    let mut out = KernelSymbols::default();
    let Some(ThisMachine { kallsyms, .. }) = &look.this_machine else {
        out.source = "kernel: none (no build-id recorded)".into();
        return out;
    };
    let here = Kallsyms::load(kallsyms).ok();
    match (&id.reference, here) {
        (Some(r), Some(k)) if k.address_of(&r.0) == Some(r.1) => {
            out.source = format!(
                "kernel: this machine's {} (no build-id recorded; {} at {} as recorded: the same boot)",
                kallsyms.display(),
                r.0,
                hex(r.1)
            );
            out.kallsyms = Some(k);
            out.from_this_machine = true;
        }
        _ => {
            out.source = "kernel: none (no build-id recorded, and this machine's kernel is not provably the \
                          recorded one)"
                .into();
            out.warnings.push(format!(
                "{what} records no kernel build-id and this machine's kernel symbols do not provably match it: \
                 kernel samples stay unnamed ([kernel.kallsyms]+0x..., stage kernel-unknown); give the recording \
                 machine's kallsyms with --kallsyms FILE"
            ));
        }
    }
    out
}

/// The symbols of build `build_id` in perf's build-id cache `dir`, moved to the recorded
/// reference address, with the source line; None when the cache lacks them, an error when
/// its file cannot be read as kallsyms.
fn from_buildid_cache(dir: &Path, build_id: &str, id: &KernelIdentity) -> Option<crate::Result<(Kallsyms, String)>> {
    let p = dir.join("[kernel.kallsyms]").join(build_id).join("kallsyms");
    if !p.is_file() {
        return None;
    }
    Some(Kallsyms::load(&p).map(|mut k| {
        let moved = id.reference.as_ref().and_then(|r| align(&mut k, r).filter(|d| *d != 0));
        let source = format!(
            "kernel: perf's build-id cache {} (build-id {build_id}{})",
            p.display(),
            if moved.is_some() { ", moved to the recorded _text (KASLR)" } else { "" }
        );
        (k, source)
    }))
}

/// This machine's symbols when it runs build `build_id`, moved to the recorded reference
/// address, with the source line; else the source line saying none, and what runs here.
fn from_this_machine(
    m: &ThisMachine,
    build_id: &str,
    id: &KernelIdentity,
) -> std::result::Result<(Kallsyms, String), String> {
    let running = running_build_id(&m.notes);
    if running.as_deref() == Some(build_id) {
        if let Ok(mut k) = Kallsyms::load(&m.kallsyms) {
            let moved = id.reference.as_ref().and_then(|r| align(&mut k, r).filter(|d| *d != 0));
            let source = format!(
                "kernel: this machine's {} (build-id {build_id} matches the running kernel{})",
                m.kallsyms.display(),
                if moved.is_some() { "; another boot: moved to the recorded _text (KASLR)" } else { "" }
            );
            return Ok((k, source));
        }
    }
    Err(format!(
        "kernel: none (recorded build-id {build_id}; this machine runs {})",
        running.as_deref().unwrap_or("a kernel of unknown build-id")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(id: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        // A Xen note first (type 6, name "Xen\0"), then the build-id.
        v.extend_from_slice(&4u32.to_le_bytes());
        v.extend_from_slice(&4u32.to_le_bytes());
        v.extend_from_slice(&6u32.to_le_bytes());
        v.extend_from_slice(b"Xen\0");
        v.extend_from_slice(&[1, 2, 3, 4]);
        v.extend_from_slice(&4u32.to_le_bytes());
        v.extend_from_slice(&(id.len() as u32).to_le_bytes());
        v.extend_from_slice(&3u32.to_le_bytes());
        v.extend_from_slice(b"GNU\0");
        v.extend_from_slice(id);
        v
    }

    #[test]
    fn build_id_is_read_from_a_notes_blob() {
        assert_eq!(build_id_from_notes(&notes(&[0xa3, 0xe4, 0xcd, 0x60])).as_deref(), Some("a3e4cd60"));
        assert_eq!(build_id_from_notes(&[1, 2, 3]), None);
        assert_eq!(build_id_from_notes(&notes(&[])[..20]), None, "cut inside the first note");
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fwdscope-kid-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    const KS: &str = "ffffffff81000000 T _text\nffffffff81000100 t fib_table_lookup\nffffffff81000200 T ip_rcv\n";

    #[test]
    fn only_the_recorded_build_names_kernel_samples() {
        let d = dir("choose");
        std::fs::write(d.join("notes"), notes(&[0xaa; 20])).unwrap();
        std::fs::write(d.join("kallsyms"), KS).unwrap();
        let here =
            Some(ThisMachine { notes: d.join("notes"), kallsyms: d.join("kallsyms"), modules: d.join("module") });
        let aa = "aa".repeat(20);
        let look = KernelLookup { given: None, buildid_dir: Some(d.join("cache")), this_machine: here.clone() };
        // Same build, same boot: this machine.
        let id = KernelIdentity { build_id: Some(aa.clone()), reference: Some(("_text".into(), 0xffffffff81000000)) };
        let k = kernel_symbols(&id, &look, "x.data").unwrap();
        assert!(k.source.contains("matches the running kernel"), "{}", k.source);
        assert_eq!(k.kallsyms.unwrap().lookup(0xffffffff81000150), Some("fib_table_lookup"));
        // Same build, another boot (KASLR moved _text by 0x200000): corrected.
        let id = KernelIdentity { build_id: Some(aa.clone()), reference: Some(("_text".into(), 0xffffffff81200000)) };
        let k = kernel_symbols(&id, &look, "x.data").unwrap();
        assert!(k.source.contains("KASLR"), "{}", k.source);
        assert_eq!(k.kallsyms.unwrap().lookup(0xffffffff81200150), Some("fib_table_lookup"));
        // Another build: nothing, and the warning names the build-id and the ways to supply it.
        let bb = "bb".repeat(20);
        let id = KernelIdentity { build_id: Some(bb.clone()), reference: Some(("_text".into(), 0xffffffff81000000)) };
        let k = kernel_symbols(&id, &look, "x.data").unwrap();
        assert!(k.kallsyms.is_none());
        assert!(k.warnings[0].contains(&bb) && k.warnings[0].contains("--kallsyms"), "{:?}", k.warnings);
        assert!(k.warnings[0].contains(&format!("[kernel.kallsyms]/{bb}/kallsyms")), "{:?}", k.warnings);
        // ... unless perf's build-id cache holds that build.
        let c = d.join("cache/[kernel.kallsyms]").join(&bb);
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("kallsyms"), KS.replace("fib_table_lookup", "fn_hash_lookup")).unwrap();
        let k = kernel_symbols(&id, &look, "x.data").unwrap();
        assert!(k.source.contains("build-id cache"), "{}", k.source);
        assert_eq!(k.kallsyms.unwrap().lookup(0xffffffff81000150), Some("fn_hash_lookup"));
        // No build-id recorded: this machine only when the reference address proves the boot.
        let id = KernelIdentity { build_id: None, reference: Some(("_text".into(), 0xffffffff81000000)) };
        assert!(kernel_symbols(&id, &look, "x").unwrap().kallsyms.is_some());
        let id = KernelIdentity { build_id: None, reference: Some(("_text".into(), 0xffffffff82000000)) };
        let k = kernel_symbols(&id, &look, "x").unwrap();
        assert!(k.kallsyms.is_none() && k.warnings[0].contains("unnamed"), "{:?}", k.warnings);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_given_kallsyms_contradicting_the_recorded_address_is_warned_of() {
        let d = dir("given");
        std::fs::write(d.join("k"), KS).unwrap();
        let look = KernelLookup { given: Some(d.join("k")), buildid_dir: None, this_machine: None };
        let id =
            KernelIdentity { build_id: Some("cc".repeat(20)), reference: Some(("_text".into(), 0xffffffff9a000000)) };
        let k = kernel_symbols(&id, &look, "x.data").unwrap();
        assert!(
            k.warnings[0].contains("0xffffffff81000000") && k.warnings[0].contains("0xffffffff9a000000"),
            "{:?}",
            k.warnings
        );
        assert_eq!(k.kallsyms.unwrap().lookup(0xffffffff9a000150), Some("fib_table_lookup"));
        // Not kallsyms at all: an error naming the file.
        std::fs::write(d.join("junk"), "hello\nworld\n").unwrap();
        let look = KernelLookup { given: Some(d.join("junk")), ..look };
        let e = kernel_symbols(&id, &look, "x.data").err().unwrap().to_string();
        assert!(e.contains("junk") && e.contains("ADDRESS TYPE NAME"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
