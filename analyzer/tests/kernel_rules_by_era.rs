//! The Linux rules against a reviewed coverage table (tests/data/linux-symbols-by-era.tsv):
//! kernel function names of the forwarding path from 2.4 to 6.x, each with the stage it
//! must get, and the table's own shape (enough names, every era, every stage).

use analyzer::rules::Rules;
use std::collections::BTreeSet;

#[test]
fn every_reviewed_kernel_name_gets_its_stage_in_every_era() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/linux-symbols-by-era.tsv");
    let text = std::fs::read_to_string(&path).unwrap();
    let rules = Rules::builtin();
    let mut rows = 0;
    let mut eras = BTreeSet::new();
    let mut stages = BTreeSet::new();
    let mut wrong = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 3, "line {}: expected era, symbol, stage: {line:?}", i + 1);
        let (era, sym, want) = (f[0], f[1], f[2]);
        rows += 1;
        eras.insert(era);
        stages.insert(want);
        let got = rules.stage_in(sym, "[kernel.kallsyms]");
        if got != want {
            wrong.push(format!("line {}: {era} {sym}: {got}, expected {want}", i + 1));
        }
    }
    assert!(wrong.is_empty(), "{} of {rows} names mis-staged:\n{}", wrong.len(), wrong.join("\n"));
    assert!(rows >= 200, "the table holds {rows} names; at least 200 expected");
    assert_eq!(eras.into_iter().collect::<Vec<_>>(), ["2.4", "2.6", "3.x", "4.x", "5.x", "6.x"]);
    for s in ["lookup", "gc", "slab", "driver", "ip", "netfilter", "local", "idle", "other"] {
        assert!(stages.contains(s), "no name expected in stage {s}");
    }
}

#[test]
fn user_space_load_generators_are_local_by_their_binary_but_libc_is_not() {
    let r = Rules::builtin();
    assert_eq!(r.stage_in("_PyEval_EvalFrameDefault", "libpython3.11.so.1.0"), "local");
    assert_eq!(
        r.stage_in("sock_sendto", "/usr/lib/python3.11/lib-dynload/_socket.cpython-311-x86_64-linux-gnu.so"),
        "local"
    );
    assert_eq!(r.stage_in("main", "/usr/bin/iperf3"), "local");
    // libc is shared with the bundled forwarder, whose helpers are charged to their callers.
    assert_eq!(r.stage_in("sendto", "libc.so.6"), "other");
    // A `dso` pattern never matches a kernel pseudo-file.
    assert_eq!(r.stage_in("python3_thing", "[kernel.kallsyms]"), "other");
    // The forwarder's own rules still come first.
    assert_eq!(r.stage_in("fwd_lookup_fib_dir24", "fwdscope-forwarder"), "lookup");
}
