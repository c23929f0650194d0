//! Attribution through inline frames against a hand-computed stage table. The probes below
//! are compiled into this test binary: a loop function with no stage of its own into which
//! a lookup-stage and a driver-stage function are inlined (`#[inline(always)]`), and a
//! helper without a stage that the inlined driver code calls. Which instruction addresses
//! belong to which inlined function is read with binutils (`nm`, `addr2line -i`), not with
//! the analyzer's own DWARF reader, so the test checks the analyzer against another tool.

use analyzer::rules::Rules;
use analyzer::stages::stage_table;
use collector::recording::{CounterRow, RecordingWriter};
use collector::records::Sample;
use std::hint::black_box;
use std::process::Command;

mod common;

#[inline(always)]
fn fwd_lookup_inline_probe(x: &mut [u64; 64], n: u64) -> u64 {
    let mut acc = n;
    for v in x.iter_mut() {
        acc = acc.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ *v;
        *v = acc;
    }
    acc
}

#[inline(never)]
fn helper_probe(x: &[u64; 64], n: u64) -> u64 {
    x.iter().fold(n, |a, b| a.rotate_left(5) ^ b)
}

#[inline(always)]
fn fwd_driver_tx_inline_probe(x: &mut [u64; 64], n: u64) -> u64 {
    let h = helper_probe(x, n);
    x[(h % 64) as usize] = h;
    h ^ 7
}

#[inline(never)]
fn loop_probe(x: &mut [u64; 64], rounds: u64) -> u64 {
    let mut t = 0u64;
    for r in 0..rounds {
        t ^= fwd_lookup_inline_probe(x, r);
        t = t.wrapping_mul(3).wrapping_add(r * r);
        t ^= fwd_driver_tx_inline_probe(x, t);
    }
    t
}

const RULES: &str = r#"
version = 1
[[rule]]
stage = "lookup"
prefix = "inline_attribution::fwd_lookup_"
[[rule]]
stage = "driver"
prefix = "inline_attribution::fwd_driver_"
[[rule]]
stage = "slab"
prefix = "fwd_slab_"
"#;

fn tool(name: &str, args: &[String]) -> Option<String> {
    let out = Command::new(name).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// ELF address and size of the function whose demangled name contains `name`, from `nm`.
fn nm_symbol(exe: &str, name: &str) -> Option<(u64, u64)> {
    let out = tool("nm", &["-C".into(), "-S".into(), exe.into()])?;
    out.lines().find_map(|l| {
        let f: Vec<&str> = l.splitn(4, ' ').collect();
        (f.len() == 4 && f[2].eq_ignore_ascii_case("t") && f[3].contains(name))
            .then(|| Some((u64::from_str_radix(f[0], 16).ok()?, u64::from_str_radix(f[1], 16).ok()?)))
            .flatten()
    })
}

/// For each ELF address in [start, start + len): the inline chain binutils reports,
/// innermost function first.
fn inline_chains(exe: &str, start: u64, len: u64) -> Option<Vec<(u64, Vec<String>)>> {
    let mut args: Vec<String> = vec!["-a".into(), "-f".into(), "-i".into(), "-C".into(), "-e".into(), exe.into()];
    args.extend((start..start + len).map(|a| format!("{a:#x}")));
    let out = tool("addr2line", &args)?;
    let mut chains: Vec<(u64, Vec<String>)> = Vec::new();
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x") {
            chains.push((u64::from_str_radix(hex, 16).ok()?, Vec::new()));
        } else if let Some(last) = chains.last_mut() {
            last.1.push(l.to_string());
            lines.next(); // file:line
        }
    }
    Some(chains)
}

#[test]
fn samples_in_inlined_stage_code_find_their_stage() {
    let exe = std::env::current_exe().unwrap().to_string_lossy().into_owned();
    let mut data = [1u64; 64];
    black_box(loop_probe(black_box(&mut data), black_box(3)));
    let loop_rt = loop_probe as *const () as usize as u64;
    let helper_rt = helper_probe as *const () as usize as u64;
    let slab_rt = forwarder::slab::fwd_slab_alloc as *const () as usize as u64;
    let Some((loop_elf, loop_len)) = nm_symbol(&exe, "inline_attribution::loop_probe") else {
        eprintln!("SKIP: binutils nm not available or loop_probe not found in {exe}");
        return;
    };
    let Some(chains) = inline_chains(&exe, loop_elf, loop_len) else {
        eprintln!("SKIP: binutils addr2line not available");
        return;
    };
    // A release build gives this crate no debug info (the workspace's release profile):
    // without inline frames there is nothing to test. A debug build must have them.
    if !cfg!(debug_assertions) && !chains.iter().any(|(_, c)| c.len() >= 2) {
        eprintln!("SKIP: {exe} has no inline frames (a release build: analyzer is built with debug = false)");
        return;
    }
    // Runtime address = ELF address + load bias.
    let bias = loop_rt.wrapping_sub(loop_elf);
    let inner_is = |c: &Vec<String>, f: &str| c.first().is_some_and(|n| n.contains(f));
    let find = |pred: &dyn Fn(&Vec<String>) -> bool| {
        chains.iter().find(|(_, c)| pred(c)).map(|(a, _)| a.wrapping_add(bias)).expect("address class in loop_probe")
    };
    // An address inside the inlined lookup probe, one inside the inlined driver probe, and
    // one that binutils puts in the loop itself (a single frame).
    let in_lookup = find(&|c| inner_is(c, "fwd_lookup_inline_probe") && c.len() >= 2);
    let in_driver = find(&|c| inner_is(c, "fwd_driver_tx_inline_probe") && c.len() >= 2);
    let in_loop = find(&|c| c.len() == 1 && inner_is(c, "loop_probe"));

    let dir = std::env::temp_dir().join(format!("fwdscope-inline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pid = 5151;
    let mut w = RecordingWriter::create(&dir, false).unwrap();
    let mut push = |ip: u64, n: usize, callchain: Vec<u64>| {
        for i in 0..n {
            w.push_sample(Sample {
                time: i as u64,
                pid,
                tid: pid,
                cpu: 0,
                ip,
                period: 1000,
                kernel: false,
                callchain: callchain.clone(),
            });
        }
    };
    // The expected table, by hand (16 samples of 1000 ns, 1000 packets):
    //   6 in the inlined lookup probe: the loop has no stage, its innermost inlined frame
    //     does -> lookup, by inline frame;
    //   4 in helper_probe (no stage, not inlined) called from the inlined driver probe: the
    //     return address (call site + 1) resolves to the driver probe -> driver, by callchain;
    //   3 in fwd_slab_alloc -> slab, by symbol;
    //   2 in the loop's own code and 1 in helper_probe without a callchain -> other, not
    //     attributed.
    // lookup 6 = 37.50% 6.0 ns/pkt; slab 3 = 18.75% 3.0; driver 4 = 25.00% 4.0;
    // other 3 = 18.75% 3.0 (rows in the stage order lookup, gc, slab, driver, ..., other).
    push(in_lookup, 6, vec![]);
    push(helper_rt + 1, 4, vec![helper_rt + 1, in_driver + 1]);
    push(slab_rt + 1, 3, vec![]);
    push(in_loop, 2, vec![]);
    push(helper_rt + 1, 1, vec![]);
    for (t, v) in [(1u64, 0u64), (2, 1000)] {
        w.push_counter(CounterRow {
            time: t,
            source: "forwarder".into(),
            worker: 0,
            name: "tx_packets".into(),
            value: v,
        });
    }
    common::map_functions(&mut w, &[loop_rt, helper_rt, slab_rt], pid);
    let rec = common::finish(w, "cpu-clock", "cpu-clock", None);
    let rules = Rules::parse(RULES, "inline test rules").unwrap();
    let t = stage_table(&rec, &rules).unwrap();
    let got: Vec<(&str, u64, String, Option<String>)> = t
        .stages
        .iter()
        .map(|r| (r.stage.as_str(), r.samples, format!("{:.2}", r.percent), r.per_packet.map(|v| format!("{v:.1}"))))
        .collect();
    let want = vec![
        ("lookup", 6, "37.50".to_string(), Some("6.0".to_string())),
        ("slab", 3, "18.75".into(), Some("3.0".into())),
        ("driver", 4, "25.00".into(), Some("4.0".into())),
        ("other", 3, "18.75".into(), Some("3.0".into())),
    ];
    assert_eq!(got, want, "addresses: lookup {in_lookup:#x} driver {in_driver:#x} loop {in_loop:#x}");
    let a = &t.attribution;
    assert_eq!((a.symbol, a.inline, a.callchain, a.none), (3, 6, 4, 3));
    let text = t.text(10);
    assert!(
        text.contains("# attributed by symbol 3, by inlined function 6, by callchain 4 (helpers charged to the nearest staged caller), not at all 3"),
        "{text}"
    );
    // Every export labels a stack with the stage the report charged it to: summed by
    // stage, the exported stacks give the same table (inline frames included).
    let mut sym = analyzer::symbolize::Symbolizer::for_recording(&rec).unwrap();
    let p = analyzer::export::recording_profile(&rec, &mut sym, &rules).unwrap();
    let mut by_stage: std::collections::BTreeMap<&str, u64> = Default::default();
    for s in &p.stacks {
        *by_stage.entry(s.stage.as_str()).or_default() += s.samples;
    }
    let want: std::collections::BTreeMap<&str, u64> = [("lookup", 6), ("slab", 3), ("driver", 4), ("other", 3)].into();
    assert_eq!(by_stage, want);
    let _ = std::fs::remove_dir_all(&dir);
}
