//! The stage table against a hand-computed expectation: a recording written by hand, whose
//! samples sit at the addresses of real forwarder stage functions linked into this test
//! binary (resolved through its own ELF symbol table, as for any recording).

use analyzer::rules::Rules;
use analyzer::stages::stage_table;
use collector::recording::{CounterRow, Meta, Recording, RecordingWriter, SamplingInfo, FORMAT_VERSION};
use collector::records::{Mapping, Sample};

/// The executable mapping of this test binary that holds `addr`.
fn own_mapping(addr: u64, pid: u32) -> Mapping {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        if addr >= a && addr < b {
            return Mapping {
                time: 0,
                pid,
                tid: pid,
                start: a,
                len: b - a,
                pgoff: u64::from_str_radix(f[2], 16).unwrap(),
                path: f[5].to_string(),
                build_id: None,
            };
        }
    }
    panic!("no mapping for {addr:#x}");
}

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
    w.maps.push(own_mapping(lookup, pid));
    for a in [slab, driver, plain] {
        let m = own_mapping(a, pid);
        if !w.maps.contains(&m) {
            w.maps.push(m);
        }
    }
    w.flush().unwrap();
    w.write_maps_and_tasks().unwrap();
    std::fs::write(
        dir.join("kallsyms"),
        "ffffffff81000000 T _text\nffffffff81000100 t fib_table_lookup\nffffffff81000200 T ip_rcv\n",
    )
    .unwrap();
    let meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        sampling: SamplingInfo {
            requested: "cycles".into(),
            used: "cpu-clock".into(),
            fallback: Some("no PMU".into()),
            ..Default::default()
        },
        status: "complete".into(),
        ..Default::default()
    };
    w.write_meta(&meta).unwrap();

    let rec = Recording::open(&dir).unwrap();
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
