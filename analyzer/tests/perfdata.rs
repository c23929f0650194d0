//! perf.data import: a program with a known 70/30 CPU split, recorded once by `perf record`
//! and once by fwdscope, gives the same stage table (within 5 points of 70/30) through the
//! same rules. Skips with a reason where perf or perf_event_open is not available.

use analyzer::perfdata::read_perf_data;
use analyzer::rules::Rules;
use analyzer::stages::{perfdata_table, stage_table, StageTable};
use collector::recording::Recording;
use collector::session::{record, RecordOptions, Target};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|p| p.parent()).unwrap().join("examples/analyzer_split_70_30")
}

fn share(t: &StageTable, stage: &str) -> f64 {
    let burn: u64 = t.stages.iter().filter(|r| r.stage == "seventy" || r.stage == "thirty").map(|r| r.samples).sum();
    let s = t.stages.iter().find(|r| r.stage == stage).map_or(0, |r| r.samples);
    s as f64 / burn.max(1) as f64
}

#[test]
fn perf_data_and_native_recording_give_the_same_split() {
    if !std::process::Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("SKIP: the perf tool is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fwdscope-perfdata-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("perf.data");
    let st = std::process::Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-F", "2000", "-o"])
        .arg(&data)
        .arg("--")
        .arg(example())
        .arg("2")
        .output()
        .unwrap();
    if !st.status.success() {
        println!("SKIP: perf record failed here: {}", String::from_utf8_lossy(&st.stderr));
        return;
    }
    let rules = Rules::parse("[[rule]]\nstage = \"seventy\"\nexact = \"burn_seventy\"\n[[rule]]\nstage = \"thirty\"\nexact = \"burn_thirty\"\n", "test").unwrap();
    let pd = read_perf_data(&data).unwrap();
    assert_eq!(pd.event, "cpu-clock");
    assert!(pd.samples.len() > 1000, "{} samples", pd.samples.len());
    let from_perf = perfdata_table(&pd, None, &rules).unwrap();
    let p70 = share(&from_perf, "seventy");
    println!("perf.data: {} samples, burn_seventy share {:.3}", pd.samples.len(), p70);
    assert!((0.65..=0.75).contains(&p70), "perf.data share {p70}");

    let out = dir.join("native");
    let mut opts = RecordOptions::new(out.clone(), Target::Command { program: example(), args: vec!["2".into()] });
    opts.freq = Some(2000);
    record(&opts, &AtomicBool::new(false), None, &mut |_| {}).unwrap();
    let native = stage_table(&Recording::open(&out).unwrap(), &rules).unwrap();
    let n70 = share(&native, "seventy");
    println!("native: burn_seventy share {n70:.3}");
    assert!((p70 - n70).abs() < 0.05, "perf.data {p70} vs native {n70}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_truncated_perf_data_file_is_an_error_naming_it() {
    let dir = std::env::temp_dir().join(format!("fwdscope-perfdata-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("broken.data");
    std::fs::write(&p, b"PERFILE2\x00\x00\x00").unwrap();
    let e = read_perf_data(&p).unwrap_err().to_string();
    assert!(e.contains("broken.data") && e.contains("perf.data"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Files whose old `event types` section sizes its id lists wrongly (fuzz findings: the
/// parser allocated by those sizes until the process aborted) are refused, naming the
/// entry, before the parser sees them.
#[test]
fn bad_event_type_entries_are_refused_before_parsing() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/perf_data");
    for (seed, says) in [
        ("regression-crash-61ed0b459adb62", "of event type 0 runs past the end"),
        ("regression-crash-c35281b2d3a220", "event type 1 attr size field 87"),
    ] {
        let e = read_perf_data(&seeds.join(seed)).err().unwrap_or_else(|| panic!("{seed} accepted")).to_string();
        assert!(e.contains(seed) && e.contains(says), "{seed}: {e}");
    }
}
