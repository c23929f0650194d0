//! `fwdscope forward` as a user runs it: JSON output that adds up, rtstat text columns,
//! and clear errors (never a panic) for bad flags and bad table files.

use std::process::Command;

fn fwdscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fwdscope")).args(args).output().expect("run fwdscope")
}

#[test]
fn forward_json_lines_add_up() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "1.2",
        "-i",
        "0.4",
        "--json",
        "--routes",
        "4000",
        "--flows",
        "2048",
        "--stage-clock",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(lines[0]["type"], "start");
    assert_eq!(lines[0]["config"]["cache"], "rtcache");
    let intervals = lines.iter().filter(|l| l["type"] == "interval").count();
    assert!((2..=4).contains(&intervals), "{intervals} intervals");
    let s = lines.last().unwrap();
    assert_eq!(s["type"], "summary");
    let rx = s["rx_packets"].as_u64().unwrap();
    let tx = s["tx_packets"].as_u64().unwrap();
    let dropped = s["dropped"].as_u64().unwrap();
    assert!(tx > 10_000, "tx {tx}");
    assert_eq!(rx, tx + dropped, "every packet forwarded or counted as dropped");
    let by_reason: u64 = s["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(by_reason, dropped);
    let clocks = s["stage_ns_per_packet"].as_object().expect("stage clocks on");
    assert!(clocks["lookup"].as_f64().unwrap() > 0.0);
    assert!(s["rtstat"]["in_slow_tot"].as_u64().unwrap() > 0);
}

#[test]
fn forward_text_has_rtstat_columns() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "0.6",
        "-i",
        "0.3",
        "--routes",
        "2000",
        "--cache",
        "nhcache",
        "--fib",
        "dir24",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().nth(1).unwrap();
    for col in [
        "size",
        "IN: hit",
        "tot",
        "mc",
        "no_rt",
        "bcast",
        "madst",
        "masrc",
        "OUT: hit",
        "GC: tot",
        "ignored",
        "goal_miss",
        "ovrf",
        "Mpps",
    ] {
        assert!(header.contains(col), "missing column {col}: {header}");
    }
    assert!(text.contains("summary:") && text.contains("cache nhcache, fib dir24"), "{text}");
}

#[test]
fn bad_input_gets_clear_errors() {
    let dir = std::env::temp_dir().join(format!("fwdscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "198.18.0.0/16 198.19.0.1\n198.18.1.0/24 via nowhere\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["forward".into(), "--prefetch".into(), "9".into()], "--prefetch"),
        (vec!["forward".into(), "--size".into(), "40".into()], "--size"),
        (vec!["forward".into(), "--table".into(), dir.join("missing.txt").display().to_string()], "missing.txt"),
        (
            vec!["forward".into(), "--table".into(), bad.display().to_string(), "--duration".into(), "0.2".into()],
            "bad.txt:2: `via nowhere`: expected an IPv4 gateway address",
        ),
        (vec!["forward".into(), "--rate".into(), "fast".into()], "expected packets per second"),
        (
            vec!["forward".into(), "--rt-hash-buckets".into(), "1000".into(), "--duration".into(), "0.1".into()],
            "power of two",
        ),
        (vec!["forward".into(), "--aggregates".into()], "--aggregates needs --table"),
    ];
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = fwdscope(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: stderr was {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_workers_share_the_flows_by_rss() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "0.8",
        "--json",
        "--routes",
        "3000",
        "--workers",
        "2",
        "--cache",
        "nhcache",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let s: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let w = s["workers"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    let (a, b) = (w[0]["tx_packets"].as_u64().unwrap(), w[1]["tx_packets"].as_u64().unwrap());
    assert!(a > 1000 && b > 1000, "per-worker packets {a} {b}");
    // Two workers on two cores leave none for a device thread: it runs inline.
    assert_eq!(s["info"]["gen_mode"], "inline");
    assert_eq!(s["rx_packets"].as_u64().unwrap(), s["tx_packets"].as_u64().unwrap() + s["dropped"].as_u64().unwrap());
}
