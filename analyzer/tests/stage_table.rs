//! The stage table against a hand-computed expectation: a recording written by hand, whose
//! samples sit at the addresses of real forwarder stage functions linked into this test
//! binary (resolved through its own ELF symbol table, as for any recording).

use analyzer::rules::Rules;
use analyzer::stages::stage_table;
use collector::recording::{CounterRow, RecordingWriter};
use collector::records::Sample;

mod common;

#[test]
fn hand_made_recording_gives_the_hand_computed_table() {
    let dir = std::env::temp_dir().join(format!("fwdscope-stagetable-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let lookup = forwarder::fib::dir24::fwd_lookup_fib_dir24 as *const () as usize as u64;
    let slab = forwarder::slab::fwd_slab_alloc as *const () as usize as u64;
    let driver = forwarder::stages::driver_tx::fwd_driver_tx_doorbell as *const () as usize as u64;
    let plain = forwarder::packet::checksum as *const () as usize as u64; // no rule: other
    let pid = 4242;
    let mut w = RecordingWriter::create(&dir, false).unwrap();
    // 5 samples in lookup, 3 in slab, 1 in driver, 1 in other; each 1000 ns (cpu-clock);
    // one kernel sample (kallsyms snapshot below) in fib_table_lookup: lookup too.
    let mut push = |ip: u64, n: usize, kernel: bool| {
        for i in 0..n {
            w.push_sample(Sample {
                time: i as u64,
                pid,
                tid: pid,
                cpu: 0,
                ip: ip + 1,
                period: 1000,
                kernel,
                callchain: vec![],
            });
        }
    };
    push(lookup, 5, false);
    push(slab, 3, false);
    push(driver, 1, false);
    push(plain, 1, false);
    push(0xffff_ffff_8100_0150, 1, true);
    for (t, v) in [(1u64, 500u64), (2, 1500)] {
        w.push_counter(CounterRow {
            time: t,
            source: "forwarder".into(),
            worker: 0,
            name: "tx_packets".into(),
            value: v,
        });
    }
    common::map_functions(&mut w, &[lookup, slab, driver, plain], pid);
    std::fs::write(
        dir.join("kallsyms"),
        "ffffffff81000000 T _text\nffffffff81000100 t fib_table_lookup\nffffffff81000200 T ip_rcv\n",
    )
    .unwrap();
    let rec = common::finish(w, "cycles", "cpu-clock", Some("no PMU"));
    let t = stage_table(&rec, &Rules::builtin()).unwrap();
    assert_eq!(t.event, "cpu-clock");
    assert_eq!(t.unit, "ns");
    assert_eq!(t.samples, 11);
    assert_eq!(t.packets, Some(1000));
    let got: Vec<(&str, u64, String, Option<String>)> = t
        .stages
        .iter()
        .map(|r| (r.stage.as_str(), r.samples, format!("{:.2}", r.percent), r.per_packet.map(|v| format!("{v:.1}"))))
        .collect();
    let want = vec![
        ("lookup", 6, "54.55".to_string(), Some("6.0".to_string())),
        ("slab", 3, "27.27".into(), Some("3.0".into())),
        ("driver", 1, "9.09".into(), Some("1.0".into())),
        ("other", 1, "9.09".into(), Some("1.0".into())),
    ];
    assert_eq!(got, want);
    assert_eq!(t.symbols[0].symbol, "fwd_lookup_fib_dir24");
    assert_eq!(t.symbols[0].samples, 5);
    assert!(t.unmatched[0].0.ends_with("checksum"), "{:?}", t.unmatched);
    let text = t.text(10);
    assert!(text.starts_with("# event: cpu-clock (11 samples); no PMU"), "{text}");
    assert!(text.contains("fib_table_lookup") && text.contains("[kernel.kallsyms]"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Samples in a helper no rule matches, with a callchain through a lookup function, are
/// charged to lookup; without a callchain they stay in `other`. Per-thread tables take
/// thread names from COMM records and per-packet figures from each worker's counters.
#[test]
fn callchains_charge_helpers_and_workers_get_their_own_tables() {
    let dir = std::env::temp_dir().join(format!("fwdscope-chains-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pid = 4343;
    let mut w = RecordingWriter::create(&dir, true).unwrap();
    common::push_helper_scenario(&mut w, pid, 1000);
    for (worker, a, b) in [(0, 100u64, 300u64), (1, 0, 100)] {
        for (t, v) in [(1u64, a), (2, b)] {
            w.push_counter(CounterRow {
                time: t,
                source: "forwarder".into(),
                worker,
                name: "tx_packets".into(),
                value: v,
            });
        }
    }
    let rec = common::finish(w, "cpu-clock", "cpu-clock", None);

    let t = stage_table(&rec, &Rules::builtin()).unwrap();
    let rows = |r: &[analyzer::stages::StageRow]| -> Vec<(String, u64, Option<String>)> {
        r.iter().map(|r| (r.stage.clone(), r.samples, r.per_packet.map(|v| format!("{v:.1}")))).collect()
    };
    assert_eq!(t.samples, 7);
    assert_eq!(t.charged, 4);
    assert_eq!(t.packets, Some(300));
    assert_eq!(
        rows(&t.stages),
        vec![
            ("lookup".into(), 4, Some("13.3".into())),
            ("slab".into(), 1, Some("3.3".into())),
            ("other".into(), 2, Some("6.7".into())),
        ]
    );
    // The helper shows twice: charged to lookup, and alone in other.
    let helper_rows: Vec<(&str, u64)> =
        t.symbols.iter().filter(|s| s.symbol.ends_with("checksum")).map(|s| (s.stage.as_str(), s.samples)).collect();
    assert_eq!(helper_rows, vec![("lookup", 4), ("other", 2)]);
    assert!(t.unmatched[0].0.ends_with("checksum") && t.unmatched[0].1 == 6, "{:?}", t.unmatched);
    let workers: Vec<(&str, u64, Option<u64>)> =
        t.workers.iter().map(|w| (w.thread.as_str(), w.samples, w.packets)).collect();
    assert_eq!(workers, vec![("fwd-worker-0", 6, Some(200)), ("fwd-worker-1", 1, Some(100))]);
    assert_eq!(
        rows(&t.workers[0].stages),
        vec![("lookup".into(), 4, Some("20.0".into())), ("other".into(), 2, Some("10.0".into()))]
    );
    assert_eq!(rows(&t.workers[1].stages), vec![("slab".into(), 1, Some("10.0".into()))]);
    let csv = t.csv(10);
    assert!(csv.starts_with("section,thread,stage,symbol,dso,samples,percent,period,per_packet,event\n"), "{csv}");
    assert!(csv.contains("\nstage,,lookup,,,4,57.1429,4000,13.333,cpu-clock\n"), "{csv}");
    assert!(csv.contains("\nthread,fwd-worker-1,slab,,,1,100.0000,1000,10.000,cpu-clock\n"), "{csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A recording's kallsyms snapshot must be of the kernel the recording names (meta.json's
/// kernel `_text`): a snapshot from another boot or build names no kernel sample.
#[test]
fn a_snapshot_contradicting_the_recorded_kernel_names_nothing() {
    let dir = std::env::temp_dir().join(format!("fwdscope-kernel-meta-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut w = RecordingWriter::create(&dir, false).unwrap();
    w.push_sample(Sample {
        time: 1,
        pid: 1,
        tid: 1,
        cpu: 0,
        ip: 0xffff_ffff_8100_0150,
        period: 1,
        kernel: true,
        callchain: vec![],
    });
    std::fs::write(dir.join("kallsyms"), "ffffffff81000000 T _text\nffffffff81000100 t fib_table_lookup\n").unwrap();
    let rec = common::finish(w, "cpu-clock", "cpu-clock", None);
    let table = |text: &str| {
        let p = dir.join("meta.json");
        let mut meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        meta["machine"]["kernel_build_id"] = "ab".repeat(20).into();
        meta["machine"]["kernel_text"] = text.into();
        std::fs::write(&p, serde_json::to_string(&meta).unwrap()).unwrap();
        stage_table(&collector::recording::Recording::open(&rec.dir).unwrap(), &Rules::builtin()).unwrap()
    };
    let t = table("0xffffffff81000000");
    assert_eq!(t.symbols[0].symbol, "fib_table_lookup", "{:?}", t.symbol_sources);
    assert!(t.symbol_sources[0].contains("snapshot") && t.symbol_sources[0].contains(&"ab".repeat(20)));
    let t = table("0xffffffff9c000000");
    assert_eq!(t.symbols[0].symbol, "[kernel.kallsyms]+0xffffffff81000150");
    assert_eq!(t.symbols[0].stage, "kernel-unknown");
    assert!(
        t.warnings.iter().any(|w| w.contains("0xffffffff81000000") && w.contains("0xffffffff9c000000")),
        "{:?}",
        t.warnings
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
