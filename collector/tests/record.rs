//! Recording real targets: a program with a known 70/30 split of CPU time, a tiny ring at a
//! high rate (LOST records counted), and the bundled forwarder (samples in its stage
//! symbols, packet counts in counters.parquet). Skips with a reason where perf is not usable.

mod common;

use collector::events::EventId;
use collector::recording::Recording;
use collector::session::{record, RecordOptions, Target};
use common::*;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fwdscope-rec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn samples_split_seventy_thirty() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("7030");
    let prog = example("split_70_30");
    let mut opts = RecordOptions::new(out.clone(), Target::Command { program: prog.clone(), args: vec!["2".into()] });
    opts.freq = Some(2000);
    let mut notes = Vec::new();
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |n| notes.push(n.to_string())).unwrap();
    assert_eq!(meta.status, "complete");
    // The event actually used is named, and a fallback is explained.
    assert!(meta.sampling.used == "cycles" || meta.sampling.used == "cpu-clock");
    if meta.sampling.used == "cpu-clock" {
        assert!(meta.sampling.fallback.as_deref().is_some_and(|f| f.contains("cycles")), "{:?}", meta.sampling);
        assert!(notes.iter().any(|n| n.contains("cpu-clock")));
    }
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    assert_eq!(samples.len() as u64, meta.samples);
    let maps = rec.maps().unwrap();
    let m = maps.iter().find(|m| m.path.ends_with("split_70_30")).expect("mapping of the program");
    assert!(m.build_id.as_deref().is_some_and(|b| b.len() >= 16), "build-id in maps.json");
    let elf = Elf::load(&prog);
    let (mut a, mut b) = (0u64, 0u64);
    for s in &samples {
        match symbolize(s, &maps, "split_70_30", &elf) {
            Some("burn_seventy") => a += s.period,
            Some("burn_thirty") => b += s.period,
            _ => {}
        }
    }
    let share = a as f64 / (a + b) as f64;
    println!("70/30 program: {a} vs {b} ({:.1}%) of {} samples", share * 100.0, samples.len());
    assert!(samples.len() > 1000, "too few samples: {}", samples.len());
    assert!((0.65..=0.75).contains(&share), "burn_seventy share {share}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_tiny_ring_at_a_high_rate_loses_records_and_says_so() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("lost");
    let mut opts =
        RecordOptions::new(out.clone(), Target::Command { program: example("split_70_30"), args: vec!["1".into()] });
    opts.event = Some(EventId::CpuClock);
    opts.period = Some(20_000); // one sample per 20 us of CPU
    opts.ring_pages = 1;
    opts.callchain = true;
    opts.poll_interval = Duration::from_millis(300);
    let mut notes = Vec::new();
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |n| notes.push(n.to_string())).unwrap();
    println!("lost {} throttled {} samples {}", meta.lost, meta.throttled, meta.samples);
    assert!(meta.lost > 0, "no LOST records with a one-page ring");
    assert!(notes.iter().any(|n| n.contains("lost")), "{notes:?}");
    let again = Recording::open(&out).unwrap();
    assert_eq!(again.meta.lost, meta.lost);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn recording_the_forwarder() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("fwd");
    let bin = forwarder_bin();
    let args = ["--duration", "2", "--routes", "5000", "--flows", "4096", "--no-pin"].map(String::from).to_vec();
    let mut opts = RecordOptions::new(out.clone(), Target::Forwarder { program: bin.clone(), args });
    opts.freq = Some(1000);
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |_| {}).unwrap();
    assert!(meta.ended_by.as_deref().unwrap_or("").contains("exited"), "{:?}", meta.ended_by);
    let cfg = meta.forwarder.as_ref().expect("forwarder config from its stats segment");
    assert_eq!(cfg["config"]["cache"], "rtcache");
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    let maps = rec.maps().unwrap();
    let elf = Elf::load(&bin);
    // Samples of the worker thread fall in the forwarder's stage symbols.
    let tasks: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("tasks.json")).unwrap()).unwrap();
    let worker_tids: Vec<u64> = tasks
        .iter()
        .filter(|t| t["type"] == "comm" && t["comm"] == "fwd-worker-0")
        .filter_map(|t| t["tid"].as_u64())
        .collect();
    assert!(!worker_tids.is_empty(), "COMM record of the worker thread");
    let worker: Vec<_> = samples.iter().filter(|s| worker_tids.contains(&u64::from(s.tid))).collect();
    let in_stages = worker
        .iter()
        .filter(|s| symbolize(s, &maps, "fwdscope-forwarder", &elf).is_some_and(|n| n.starts_with("fwd_")))
        .count();
    println!("worker samples {} in fwd_* {}", worker.len(), in_stages);
    assert!(worker.len() > 500, "worker samples {}", worker.len());
    assert!(in_stages as f64 > 0.5 * worker.len() as f64, "{in_stages} of {} in stage symbols", worker.len());
    // counters.parquet holds the forwarder's packet counts, rising.
    let tx: Vec<u64> = rec
        .counters()
        .unwrap()
        .iter()
        .filter(|r| r.source == "forwarder" && r.name == "tx_packets")
        .map(|r| r.value)
        .collect();
    assert!(tx.len() >= 5, "{} tx_packets rows", tx.len());
    assert!(
        tx.windows(2).all(|w| w[0] <= w[1]) && *tx.last().unwrap() > 100_000,
        "{:?}",
        &tx[tx.len().saturating_sub(3)..]
    );
    std::fs::remove_dir_all(&out).unwrap();
}
