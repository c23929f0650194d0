//! `annotate`'s per-instruction sample counts against perf's own. The fixture
//! (tests/data/annotate, made as its README says) is a perf.data file of the bundled
//! forwarder recorded with `perf record -g -e cpu-clock`, the forwarder binary it recorded
//! (debug info stripped, symbols and build-id kept) under symfs/ at its recorded path, and
//! `perf annotate --stdio -n` of fwdscope's top five symbols (perf-annotate.txt, the exact
//! command in the README). For each of the five, every instruction's sample count must be
//! perf's. When perf is installed, it is run again now on the same files and compared too.

use analyzer::annotate::{annotate, Options, SymbolAnnotation};
use analyzer::input::open;
use analyzer::rules::Rules;
use analyzer::symbolize::SymbolPaths;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/annotate")
}

/// fwdscope's top five symbols of the forwarder binary. The kernel's are left out: perf
/// annotates them only with the recorded kernel's image, and without this machine's perf
/// build-id cache they fold into one unnamed entry, which would move the ranking.
fn fwdscope_top5() -> Vec<SymbolAnnotation> {
    let pd = dir().join("forwarder.perf.data");
    let input = open(&pd).unwrap();
    let paths = SymbolPaths { kallsyms: None, symfs: Some(dir().join("symfs")) };
    let o = Options { top: 10, ..Options::default() };
    let a = annotate(&input, &pd, &Rules::builtin(), &paths, &o).unwrap();
    assert_eq!(a.event, "cpu-clock");
    assert_eq!(a.samples, 1652);
    assert!(a.skid.contains("the instruction after the one that waited"));
    let top: Vec<SymbolAnnotation> = a.symbols.into_iter().filter(|s| s.dso == "fwdscope-forwarder").take(5).collect();
    let names: Vec<&str> = top.iter().map(|s| s.symbol.as_str()).collect();
    assert_eq!(
        names,
        [
            "fwd_idle_poll",
            "forwarder::nic::synthetic::run_device_thread",
            "fwd_nic_generate",
            "fwd_lookup_fib_dir24",
            // 39 samples, as fwd_lookup_burst: ties go by name.
            "forwarder::traffic::FlowGen::next_slot"
        ]
    );
    for s in &top {
        assert!(s.instructions_total > 0, "{}: not decoded: {:?}", s.symbol, s.notes);
        assert!(s.source.contains("8be2eb2e5b958d70fa3b64370f675163c86bc031"), "{}", s.source);
        // Every sample of the symbol sits on a decoded instruction.
        assert_eq!(s.instructions.iter().map(|r| r.samples).sum::<u64>(), s.samples, "{}", s.symbol);
    }
    top
}

/// Sample counts by address from `perf annotate --stdio -n` output: lines
/// `   COUNT :   ADDRESS:   INSTRUCTION`, counts of zero left out.
fn perf_counts(text: &str) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for l in text.lines() {
        let Some((n, rest)) = l.split_once(':') else { continue };
        let Ok(n) = n.trim().parse::<u64>() else { continue };
        let Some((addr, _)) = rest.trim_start().split_once(':') else { continue };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else { continue };
        if n > 0 {
            *out.entry(addr).or_default() += n;
        }
    }
    out
}

fn ours(s: &SymbolAnnotation) -> BTreeMap<u64, u64> {
    s.instructions.iter().filter(|r| r.samples > 0).map(|r| (r.address, r.samples)).collect()
}

/// The golden file's sections: `### SYMBOL` then perf's output for it.
fn golden() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir().join("perf-annotate.txt")).unwrap();
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut cur: Option<String> = None;
    for l in text.lines() {
        if let Some(name) = l.strip_prefix("### ") {
            cur = Some(name.to_string());
            out.insert(name.to_string(), String::new());
        } else if let Some(c) = &cur {
            let e = out.get_mut(c).unwrap();
            e.push_str(l);
            e.push('\n');
        }
    }
    out
}

#[test]
fn per_instruction_counts_equal_perf_annotate_golden() {
    let g = golden();
    for s in fwdscope_top5() {
        let perf = g.get(&s.symbol).unwrap_or_else(|| panic!("{}: not in perf-annotate.txt", s.symbol));
        let want = perf_counts(perf);
        assert!(!want.is_empty(), "{}: perf's section has no counts", s.symbol);
        assert_eq!(ours(&s), want, "{}", s.symbol);
    }
}

#[test]
fn per_instruction_counts_equal_perf_annotate_run_now() {
    if std::process::Command::new("perf").arg("--version").output().is_err() {
        println!("SKIP: perf is not installed: compared against the golden only");
        return;
    }
    let home = std::env::temp_dir().join(format!("fwdscope-annotate-perf-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    for s in fwdscope_top5() {
        // perf's build-id cache pointed at an empty directory: the fixture's binary only.
        let o = std::process::Command::new("perf")
            .args(["annotate", "--stdio", "-n", "--no-source", "-i"])
            .arg(dir().join("forwarder.perf.data"))
            .arg(format!("--symfs={}", dir().join("symfs").display()))
            .arg(format!("--symbol={}", s.symbol))
            .env("PERF_BUILDID_DIR", &home)
            .env("HOME", &home)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        let want = perf_counts(&text);
        if want.is_empty() {
            println!(
                "SKIP: perf annotate gave no counts for {} here (exit {:?}): {}",
                s.symbol,
                o.status.code(),
                String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("")
            );
            continue;
        }
        assert_eq!(ours(&s), want, "{}", s.symbol);
    }
    let _ = std::fs::remove_dir_all(&home);
}
