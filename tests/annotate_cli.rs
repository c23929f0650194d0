//! `fwdscope annotate` on bad input, end to end: a symbol not found gets the nearest names;
//! a binary or kernel image of another build is refused naming both build-ids; a stripped
//! binary gives addresses only, saying so; a huge function its hottest windows only; a
//! kernel function without --vmlinux says why it is not annotated; a text profile is
//! refused. Inputs: the perf.data fixture of analyzer/tests/data/annotate (see its README)
//! and the kernel-forwarding perf.data.

mod common;

use common::{run, tmpdir};
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("analyzer/tests/data")
}

fn fixture() -> String {
    data().join("annotate/forwarder.perf.data").display().to_string()
}

fn symfs() -> String {
    data().join("annotate/symfs").display().to_string()
}

/// The recorded path of the forwarder binary (the one file under the fixture's symfs).
fn recorded_binary() -> PathBuf {
    let mut p = data().join("annotate/symfs");
    loop {
        let next = std::fs::read_dir(&p).unwrap().flatten().next().expect("a file under symfs").path();
        if next.is_file() {
            return next.strip_prefix(data().join("annotate/symfs")).unwrap().to_path_buf();
        }
        p = next;
    }
}

/// `fwdscope ARGS` with perf's build-id cache pointed at an empty directory, so that only
/// the files a test gives can name the samples.
fn run_isolated(args: &[&str], cache: &Path) -> std::process::Output {
    std::fs::create_dir_all(cache).unwrap();
    common::fwdscope().args(args).env("PERF_BUILDID_DIR", cache).output().expect("run fwdscope")
}

fn text(o: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_symbol_not_found_is_answered_with_the_nearest_names() {
    let o = run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), "Dir24::lookup"]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("symbol `Dir24::lookup` has no samples in this input"), "{err}");
    // Dir24::lookup was inlined into fwd_lookup_fib_dir24, whose name holds both words.
    assert!(err.contains("nearest names: `fwd_lookup_fib_dir24`"), "{err}");
    // A stage with no samples: the stages that have some.
    let o = run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), "--stage", "gc"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("stage `gc` has no samples in this input; its stages: ") && err.contains("lookup ("), "{err}");
}

#[test]
fn a_binary_of_another_build_is_refused_naming_both_build_ids() {
    let dir = tmpdir("annotate-wrong-build");
    let rel = recorded_binary();
    let planted = dir.join("symfs").join(&rel);
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    // Another build: this test binary itself.
    let me = std::env::current_exe().unwrap();
    std::fs::copy(&me, &planted).unwrap();
    let mine = analyzer::symbolize::ElfSymbols::open(&me).unwrap().build_id.unwrap();
    let sym = dir.join("symfs").display().to_string();
    let o = run_isolated(&["annotate", "-i", &fixture(), "--symfs", &sym, "--top", "1"], &dir.join("cache"));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let recorded =
        analyzer::symbolize::ElfSymbols::open(&data().join("annotate/symfs").join(&rel)).unwrap().build_id.unwrap();
    assert!(out.contains(&format!("no file of the recorded build-id {recorded} was found")), "{out}");
    assert!(out.contains(&format!("build-id {mine}")), "{out}");
    assert!(out.contains("addresses only"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stripped_binary_gives_addresses_only() {
    if !common::have("strip", &[]) {
        return;
    }
    let dir = tmpdir("annotate-stripped");
    let rel = recorded_binary();
    let stripped = dir.join("symfs").join(&rel);
    std::fs::create_dir_all(stripped.parent().unwrap()).unwrap();
    let st = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(data().join("annotate/symfs").join(&rel))
        .status()
        .unwrap();
    assert!(st.success());
    let sym = dir.join("symfs").display().to_string();
    let o = run_isolated(&["annotate", "-i", &fixture(), "--symfs", &sym, "--top", "1"], &dir.join("cache"));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("(no symbol)"), "{out}");
    assert!(out.contains("stripped of the symbols naming these addresses"), "{out}");
    assert!(out.contains("(address only)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_huge_function_shows_its_hottest_windows_only() {
    let o = run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), "--top", "1", "--max-instructions", "10"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("over 10: the ") && out.contains("window(s) around the hottest instructions only"), "{out}");
}

#[test]
fn kernel_functions_need_a_vmlinux_of_the_recorded_build() {
    let pd = data().join("kernel-forwarding.perf.data").display().to_string();
    let ks = data().join("kernel-forwarding.kallsyms.gz").display().to_string();
    let o = run(&["annotate", "-i", &pd, "--kallsyms", &ks, "--top", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("kernel function: kallsyms gives names and addresses only"), "{out}");
    assert!(out.contains("--vmlinux FILE"), "{out}");
    // Another build's image: refused, naming both.
    let me = std::env::current_exe().unwrap();
    let mine = analyzer::symbolize::ElfSymbols::open(&me).unwrap().build_id.unwrap();
    let vm = me.display().to_string();
    let o = run(&["annotate", "-i", &pd, "--kallsyms", &ks, "--top", "1", "--vmlinux", &vm]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!(
            "build-id {mine}, but the recording's kernel is build-id 48dc540c8b76393804ca8088dbfa7d42911a9444"
        )),
        "{err}"
    );
}

#[test]
fn a_text_profile_has_no_addresses_to_annotate() {
    let p = data().join("perf-report-veth-forwarding.txt").display().to_string();
    let o = run(&["annotate", "-i", &p]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("annotate reads a recording directory (fwdscope record) or a perf.data file"), "{err}");
}

#[test]
fn a_recordings_symbol_map_names_functions_but_gives_addresses_only() {
    let rec = data().join("forwarder-recording").display().to_string();
    let o = run(&["annotate", "-i", &rec, "--top", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("== fwd_nic_generate (fwdscope-forwarder): 575 samples of cpu-clock"), "{out}");
    assert!(out.contains("a symbol map names the function but holds no instruction bytes: addresses only"), "{out}");
    assert!(out.contains("995a5b0c41324fecc8306a59598ccb4bdf6ac0af"), "{out}");
}

/// `--against`: an input set beside itself moves nothing (every line and instruction
/// +0.00, the same counts on both sides, the counts those of the plain annotation); the
/// JSON rows add up to the function's samples on each side.
#[test]
fn an_input_against_itself_moves_nothing() {
    let sym = "fwd_lookup_fib_dir24";
    let o = run(&["annotate", "-i", &fixture(), "--against", &fixture(), "--symfs", &symfs(), sym]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let head = out.lines().find(|l| l.starts_with("== fwd_lookup_fib_dir24")).unwrap_or_default();
    let plain = text(&run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), sym])).0;
    let n = plain
        .lines()
        .find(|l| l.starts_with("== fwd_lookup_fib_dir24"))
        .and_then(|l| l.split("): ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    assert!(head.contains(&format!("A {n} samples")) && head.contains(&format!("B {n} samples")), "{head}\n{plain}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("0x") || l.contains(".rs:")).collect();
    assert!(rows.len() > 3, "{out}");
    assert!(rows.iter().all(|l| l.contains("   +0.00  ")), "{out}");
    let o = run(&["annotate", "-i", &fixture(), "--against", &fixture(), "--symfs", &symfs(), "--format", "json", sym]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let s = &v["symbols"][0];
    let sum = |key: &str, side: &str| s[key].as_array().unwrap().iter().map(|r| r[side].as_u64().unwrap()).sum::<u64>();
    let total = s["a_samples"].as_u64().unwrap();
    assert_eq!(total.to_string(), n);
    for key in ["lines", "instructions"] {
        assert_eq!((sum(key, "a_samples"), sum(key, "b_samples")), (total, total), "{key}");
    }
}
