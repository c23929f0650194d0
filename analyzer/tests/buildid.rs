//! User-space samples are named only from a file of the build the perf.data recorded.
//! Two variants of one small C program are built here at the same path (their hot
//! functions differ in name and place); `perf record` samples variant A (its build-id cache
//! in a home of the test's own), then B replaces it. The report must not name A's samples from B: they stay `prog+0x...` in their own
//! stage with a warning naming both build-ids, unless A's build is found by build-id: in
//! perf's build-id cache (as `perf record` lays it out), or under `--symfs`. Skips with a
//! reason where perf, a C compiler or perf_event_open is not available.

use analyzer::input::open;
use analyzer::rules::{Rules, BINARY_UNKNOWN};
use analyzer::stages::StageTable;
use analyzer::symbolize::SymbolPaths;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Variant A burns in `alpha_hot`, B in `beta_hot` placed after a large filler function, so
/// A's hot addresses fall elsewhere (another function) in B.
const PROGRAM: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
#ifdef VARIANT_B
__attribute__((noinline)) void beta_filler(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) { sink += i * 7; sink ^= i >> 3; sink += i * 11; sink ^= i << 2; }
    for (unsigned long i = 0; i < n; i++) { sink += i * 13; sink ^= i >> 5; sink += i * 17; sink ^= i << 4; }
    for (unsigned long i = 0; i < n; i++) { sink += i * 19; sink ^= i >> 7; sink += i * 23; sink ^= i << 6; }
}
__attribute__((noinline)) void beta_hot(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i; }
#define HOT beta_hot
#else
__attribute__((noinline)) void alpha_hot(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i * 3; }
#define HOT alpha_hot
#endif
/* A fixed amount of work, not of time: its samples do not shrink on a loaded machine. */
int main(int argc, char **argv) {
    long calls = argc > 1 ? atol(argv[1]) : 3000;
    for (long c = 0; c < calls; c++) HOT(100000);
    return 0;
}
"#;

fn build(dir: &Path, out: &Path, variant_b: bool) -> Result<(), String> {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).map_err(|e| e.to_string())?;
    let mut c = Command::new("cc");
    c.args(["-O1", "-fno-omit-frame-pointer", "-Wl,--build-id=sha1", "-o"]).arg(out).arg(&src);
    if variant_b {
        c.arg("-DVARIANT_B");
    }
    let o = c.output().map_err(|e| format!("cc: {e}"))?;
    o.status.success().then_some(()).ok_or_else(|| String::from_utf8_lossy(&o.stderr).into_owned())
}

fn build_id(p: &Path) -> String {
    analyzer::symbolize::ElfSymbols::open(p).and_then(|e| e.build_id).expect("the test program carries a build-id")
}

struct Setup {
    dir: PathBuf,
    prog: PathBuf,
    data: PathBuf,
    cache: PathBuf,
    id_a: String,
    id_b: String,
}

/// Record variant A into `perf.data` (perf's build-id cache in `cache`), then replace it
/// with variant B at the same path. None (with the reason printed) where it cannot run.
fn setup(name: &str) -> Option<Setup> {
    if !Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("SKIP: the perf tool is not installed");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("fwdscope-buildid-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let (prog, b) = (dir.join("bin/prog"), dir.join("prog-b"));
    if let Err(e) = build(&dir, &prog, false).and_then(|_| build(&dir, &b, true)) {
        println!("SKIP: no C compiler to build the test program: {e}");
        return None;
    }
    // perf record fills the build-id cache under $HOME/.debug: a home of the test's own.
    let (data, cache) = (dir.join("perf.data"), dir.join("home/.debug"));
    let o = Command::new("perf")
        .env("HOME", dir.join("home"))
        .args(["record", "-q", "-e", "cpu-clock", "-F", "2000", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .arg("3000")
        .output()
        .unwrap();
    if !o.status.success() {
        println!("SKIP: perf record failed here: {}", String::from_utf8_lossy(&o.stderr));
        return None;
    }
    let id_a = build_id(&prog);
    std::fs::rename(&b, &prog).unwrap();
    let id_b = build_id(&prog);
    assert_ne!(id_a, id_b, "the two variants are two builds");
    Some(Setup { dir, prog, data, cache, id_a, id_b })
}

fn table(s: &Setup, paths: &SymbolPaths, cache: Option<&Path>) -> StageTable {
    // perf's build-id cache is found through PERF_BUILDID_DIR, as perf finds it.
    match cache {
        Some(c) => std::env::set_var("PERF_BUILDID_DIR", c),
        None => std::env::set_var("PERF_BUILDID_DIR", s.dir.join("no-cache")),
    }
    open(&s.data).unwrap().stage_table(&Rules::builtin(), paths).unwrap()
}

fn samples_of(t: &StageTable, pred: impl Fn(&str) -> bool) -> u64 {
    t.symbols.iter().filter(|r| r.dso == "prog" && pred(&r.symbol)).map(|r| r.samples).sum()
}

/// One test for the three cases: they set PERF_BUILDID_DIR, which tests running in parallel
/// threads must not race on.
#[test]
fn samples_are_named_only_from_the_recorded_build() {
    let Some(s) = setup("all") else { return };
    let prog = s.prog.display().to_string();

    // 1. The binary at the recorded path was rebuilt, and nothing else holds A: unnamed.
    let t = table(&s, &SymbolPaths::default(), None);
    let in_prog = samples_of(&t, |_| true);
    // Fixed work at 2000 Hz of the task's own CPU time: about 300-600 samples, fewer where a
    // busy sibling thread slows the core; 100 are plenty for the equalities below.
    assert!(in_prog > 100, "samples in the program: {in_prog}");
    assert_eq!(samples_of(&t, |n| n.contains("beta")), 0, "named from the rebuilt binary: {:?}", t.symbols);
    assert_eq!(samples_of(&t, |n| n.starts_with("prog+0x")), in_prog, "{:?}", t.symbols);
    let unknown = t.stages.iter().find(|r| r.stage == BINARY_UNKNOWN).map_or(0, |r| r.samples);
    let prog_unknown: u64 =
        t.symbols.iter().filter(|r| r.dso == "prog" && r.stage == BINARY_UNKNOWN).map(|r| r.samples).sum();
    assert_eq!(prog_unknown, in_prog, "counted apart in their own stage");
    assert!(unknown >= in_prog, "the stage row holds them: {unknown}");
    let w = t.warnings.iter().find(|w| w.starts_with(&prog)).expect("a warning for the binary");
    assert!(w.contains(&s.id_a) && w.contains(&s.id_b) && w.contains("--symfs"), "{w}");
    let listed = t.binaries.iter().find(|b| b.path == prog).unwrap();
    assert_eq!((listed.recorded.as_deref(), listed.source.is_none()), (Some(s.id_a.as_str()), true));
    assert!(t.buildid_list().contains(&format!("{} {prog}\n    UNNAMED", s.id_a)), "{}", t.buildid_list());

    // 2. perf's build-id cache, as `perf record` filled it: A's names.
    let t = table(&s, &SymbolPaths::default(), Some(&s.cache));
    assert!(samples_of(&t, |n| n == "alpha_hot") as f64 > 0.9 * in_prog as f64, "{:?}", t.symbols);
    assert_eq!(samples_of(&t, |n| n.contains("beta") || n.starts_with("prog+0x")), 0);
    let src = t.symbol_sources.iter().find(|l| l.starts_with(&prog)).unwrap();
    assert!(src.contains("perf's build-id cache") && src.contains(&s.id_a), "{src}");

    // 3. --symfs: a copy of the recording machine's files, tried first.
    let symfs = s.dir.join("symfs");
    let copy = symfs.join(prog.trim_start_matches('/'));
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    build(&s.dir, &copy, false).unwrap();
    assert_eq!(build_id(&copy), s.id_a, "the same source and flags give the same build");
    let t = table(&s, &SymbolPaths { symfs: Some(symfs.clone()), ..Default::default() }, None);
    assert!(samples_of(&t, |n| n == "alpha_hot") as f64 > 0.9 * in_prog as f64, "{:?}", t.symbols);
    let src = t.symbol_sources.iter().find(|l| l.starts_with(&prog)).unwrap();
    assert!(src.contains("--symfs") && src.contains(&copy.display().to_string()), "{src}");
    // A --symfs copy of another build is refused and named.
    std::fs::copy(&s.prog, &copy).unwrap();
    let t = table(&s, &SymbolPaths { symfs: Some(symfs), ..Default::default() }, None);
    assert_eq!(samples_of(&t, |n| n.contains("beta")), 0);
    let w = t.warnings.iter().find(|w| w.starts_with(&prog)).unwrap();
    assert!(w.contains(&copy.display().to_string()), "{w}");
    std::env::remove_var("PERF_BUILDID_DIR");
    std::fs::remove_dir_all(&s.dir).unwrap();
}
