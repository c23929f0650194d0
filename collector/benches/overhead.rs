//! Collector overhead: the forwarder's Mpps with no profiling, with fwdscope's collector
//! sampling at 1 kHz and 10 kHz, and with `perf record -F` at the same rates, in one run.
//! Settings are interleaved (round-robin over repeats) so drift spreads evenly; the median
//! of each setting is compared with the median without profiling.
//!
//! Run: `cargo bench -p collector --bench overhead` (needs the release fwdscope-forwarder:
//! `cargo build --release`). FWDSCOPE_OVERHEAD_SECS per run (default 3),
//! FWDSCOPE_OVERHEAD_REPEATS (default 5).

use collector::session::{record, RecordOptions, Target};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::AtomicBool;

fn forwarder() -> PathBuf {
    let exe = std::env::current_exe().expect("bench exe");
    // target/release/deps/overhead-* -> target/release/fwdscope-forwarder
    exe.parent().and_then(|p| p.parent()).expect("target dir").join("fwdscope-forwarder")
}

fn mpps_from_json(out: &str) -> Option<f64> {
    let last = out.lines().rev().find(|l| l.contains("\"summary\""))?;
    let v: serde_json::Value = serde_json::from_str(last).ok()?;
    v["total_mpps"].as_f64()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let secs: f64 = std::env::var("FWDSCOPE_OVERHEAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let repeats: usize = std::env::var("FWDSCOPE_OVERHEAD_REPEATS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let fwd = forwarder();
    assert!(fwd.exists(), "{} missing: cargo build --release first", fwd.display());
    let args: Vec<String> =
        ["--duration", &secs.to_string(), "--cache", "nhcache", "--fib", "dir24", "--prefetch", "4", "--json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let perf_ok = Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success());
    let settings: Vec<(&str, Option<u64>, bool)> = vec![
        ("none", None, false),
        ("fwdscope 1 kHz", Some(1000), false),
        ("perf 1 kHz", Some(1000), true),
        ("fwdscope 10 kHz", Some(10_000), false),
        ("perf 10 kHz", Some(10_000), true),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    let tmp = std::env::temp_dir().join(format!("fwdscope-overhead-{}", std::process::id()));
    for r in 0..repeats {
        for (i, (name, freq, perf)) in settings.iter().enumerate() {
            let mpps = match (freq, perf) {
                (None, _) => {
                    let out = Command::new(&fwd).args(&args).output().expect("run forwarder");
                    mpps_from_json(&String::from_utf8_lossy(&out.stdout))
                }
                (Some(f), true) => {
                    if !perf_ok {
                        continue;
                    }
                    let data = tmp.with_extension("perf.data");
                    let out = Command::new("perf")
                        .args(["record", "-q", "-F", &f.to_string(), "-o"])
                        .arg(&data)
                        .arg("--")
                        .arg(&fwd)
                        .args(&args)
                        .output()
                        .expect("run perf record");
                    let _ = std::fs::remove_file(&data);
                    mpps_from_json(&String::from_utf8_lossy(&out.stdout))
                }
                (Some(f), false) => {
                    let dir = tmp.join(format!("rec-{r}-{i}"));
                    let mut o =
                        RecordOptions::new(dir.clone(), Target::Forwarder { program: fwd.clone(), args: args.clone() });
                    o.freq = Some(*f);
                    record(&o, &AtomicBool::new(false), None, &mut |_| {}).expect("record");
                    let log = std::fs::read_to_string(dir.join("target.log")).unwrap_or_default();
                    let _ = std::fs::remove_dir_all(&dir);
                    mpps_from_json(&log)
                }
            };
            match mpps {
                Some(m) => results[i].push(m),
                None => eprintln!("{name}: no summary from the forwarder"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let median = |v: &mut Vec<f64>| -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        Some(v[v.len() / 2])
    };
    let base = median(&mut results[0].clone());
    println!("collector overhead: nhcache + dir24, {secs} s x {repeats} interleaved repeats, median Mpps");
    for (i, (name, _, _)) in settings.iter().enumerate() {
        let mut v = results[i].clone();
        match (median(&mut v), base) {
            (Some(m), Some(b)) => println!(
                "{name:>16}: {m:7.3} Mpps  ({:+.1}% vs none)  runs {:?}",
                (m / b - 1.0) * 100.0,
                results[i].iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>()
            ),
            _ => println!("{name:>16}: not measured"),
        }
    }
}
