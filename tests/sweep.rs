//! `fwdscope sweep`: every historic experiment parses and runs for a short duration, and
//! prints its table beside what was reported then; a swept setting list runs interleaved
//! and writes a run directory per run and results.parquet. Needs perf_event_open (root or a
//! low perf_event_paranoid); skips, saying why, without it.

mod common;
use common::{fwdscope, perf_allows, Need};

fn can_sample() -> bool {
    perf_allows(Need::Sample)
}

/// Sweeps share two cores: one at a time (a sweep beside another has its workers wait to
/// run, and the contention detector rightly leaves those runs out).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn sweep(args: &[&str], out: &std::path::Path) -> String {
    let o = fwdscope().arg("sweep").arg("-o").arg(out).arg("--force").args(args).output().expect("sweep");
    assert!(o.status.success(), "sweep {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn every_experiment_runs_briefly_and_prints_then_and_now() {
    if !can_sample() {
        return;
    }
    let _g = serial();
    for (name, settings) in [("prefetch-2005", 4), ("rtcache-flood-2003", 4), ("rtcache-removal-2012", 3)] {
        let out = std::env::temp_dir().join(format!("fwdscope-sweep-{name}-{}", std::process::id()));
        let text = sweep(&["--experiment", name, "--repeat", "1", "--duration", "0.3"], &out);
        println!("{text}");
        assert!(text.contains("experiment: ") && text.contains("then and now"), "{text}");
        if name == "prefetch-2005" {
            // 2005's hardware, modelled: the device on a core of its own writing frames
            // with non-temporal stores, said with the results.
            assert!(text.contains("model: frames written by the device on a core of its own"), "{text}");
        }
        assert_eq!(std::fs::read_dir(out.join("runs")).expect("runs").count(), settings);
        assert!(out.join("results.parquet").exists() && out.join("table.txt").exists());
        assert_eq!(text.lines().filter(|l| l.starts_with('*')).count(), 1, "one best setting: {text}");
        if name == "rtcache-flood-2003" {
            // Goal misses in each step's first second, counted from the workers' switch
            // stamps: measured for every step after the first.
            let runs = compare::results::read_results(&out).expect("results.parquet");
            for r in &runs {
                assert_eq!(r.step_goal_miss.is_some(), r.setting != "default gc", "{r:?}");
            }
            let row = text
                .lines()
                .skip_while(|l| !l.starts_with("then and now"))
                .find(|l| l.trim_start().starts_with("gc_min_interval 0 "))
                .expect("then-and-now row");
            assert!(row.split_whitespace().last().is_some_and(|v| v.parse::<u64>().is_ok()), "{row}");
        }
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn a_swept_list_runs_every_setting_each_repeat() {
    if !can_sample() {
        return;
    }
    let _g = serial();
    let out = std::env::temp_dir().join(format!("fwdscope-sweep-list-{}", std::process::id()));
    let text =
        sweep(&["--cache", "rtcache,nocache", "--repeat", "2", "--duration", "0.3", "--", "--routes", "5000"], &out);
    println!("{text}");
    assert_eq!(std::fs::read_dir(out.join("runs")).expect("runs").count(), 4);
    // One kallsyms copy for the whole sweep: every run's snapshot is the first run's file.
    {
        use std::os::unix::fs::MetadataExt;
        let ks = |n: &str| std::fs::metadata(out.join("runs").join(n).join("kallsyms")).map(|m| (m.dev(), m.ino()));
        let first = ks("001").expect("runs/001/kallsyms");
        for n in ["002", "003", "004"] {
            assert_eq!(ks(n).expect("kallsyms"), first, "runs/{n}/kallsyms is a copy of its own");
        }
    }
    // Every run is in results.parquet; the table's runs column counts those the contention
    // detector kept, and a run it left out is said so.
    let all = compare::results::read_results(&out).expect("results.parquet");
    for label in ["cache rtcache", "cache nocache"] {
        let row = text.lines().find(|l| l[2..].starts_with(label)).unwrap_or_else(|| panic!("{label}: {text}"));
        let runs: usize = row[2..].split_whitespace().nth(2).and_then(|n| n.parse().ok()).expect("runs column");
        let mine: Vec<_> = all.iter().filter(|r| r.setting == label).collect();
        let left_out = mine.iter().filter(|r| !r.contention.is_empty()).count();
        assert_eq!((mine.len(), runs + left_out), (2, 2), "{row}");
        assert!(mine.iter().all(|r| r.runq_share.is_some()), "every run has its run-queue share");
        if left_out > 0 {
            assert!(text.contains("left out for contention"), "{text}");
        }
    }
    // `time: W s in all, F s forwarding; overhead O s = P% (start-up and recording R s,
    // analysis A s, the rest X s)`: the parts add up to the overhead, and it is W - F.
    let line = text.lines().find(|l| l.starts_with("time: ")).unwrap_or_else(|| panic!("no time line: {text}"));
    let nums: Vec<f64> = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter(|w| !w.is_empty() && *w != ".")
        .map(|w| w.parse().unwrap_or_else(|e| panic!("{w:?} in {line}: {e}")))
        .collect();
    let [wall, fwd, over, pct, rec, an, rest] = nums[..] else { panic!("seven figures expected: {line}") };
    assert!((fwd - 4.0 * 0.3).abs() < 0.05, "{line}");
    assert!((wall - fwd - over).abs() < 0.02, "{line}");
    assert!((rec + an + rest - over).abs() < 0.03, "{line}");
    assert!((100.0 * over / wall - pct).abs() < 0.3, "{line}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A run whose forwarder fails prints the forwarder's own error, not a pointer at its
/// run directory.
#[test]
fn a_failing_run_prints_the_forwarders_own_error() {
    let _serial = serial();
    if !can_sample() {
        return;
    }
    let out = std::env::temp_dir().join(format!("fwdscope-sweep-fail-{}", std::process::id()));
    let o = fwdscope()
        .args(["sweep", "--force", "--repeat", "1", "--duration", "0.3", "--prefetch", "0,2", "-o"])
        .arg(&out)
        .args(["--", "--table", "/nonexistent/table.txt"])
        .output()
        .expect("sweep");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("the forwarder failed") && err.contains("/nonexistent/table.txt"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}
