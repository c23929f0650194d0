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

/// Files whose old `event types` section sizes its id lists wrongly, or whose AUXTRACE
/// record claims more than the file holds (fuzz findings: the parser allocated by those
/// sizes until the process aborted) are refused, naming the entry, before the parser sees
/// them.
#[test]
fn bad_event_type_entries_are_refused_before_parsing() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/perf_data");
    for (seed, says) in [
        ("regression-crash-61ed0b459adb62", "of event type 0 runs past the end"),
        ("regression-crash-c35281b2d3a220", "event type 1 attr size field 87"),
        // A pipe-mode file whose AUXTRACE record claims 2^40 bytes of trace.
        ("regression-crash-62df18e58f1c93", "AUXTRACE record announces 1099511627777 bytes"),
    ] {
        let e = read_perf_data(&seeds.join(seed)).err().unwrap_or_else(|| panic!("{seed} accepted")).to_string();
        assert!(e.contains(seed) && e.contains(says), "{seed}: {e}");
    }
}

/// Samples per symbol of `file` as `perf report` counts them (`-n`), from its own output.
fn perf_report_counts(file: &std::path::Path) -> Option<std::collections::BTreeMap<String, u64>> {
    let o = std::process::Command::new("perf")
        .args(["report", "--stdio", "-q", "-n", "--sort", "sym", "-i"])
        .arg(file)
        .output()
        .ok()?;
    let mut out = std::collections::BTreeMap::new();
    // Rows: `  70.12%  1402  [.] burn_seventy`.
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 4 && f[0].ends_with('%') && f[2].starts_with('[') {
            *out.entry(f[3..].join(" ")).or_default() += f[1].parse::<u64>().ok()?;
        }
    }
    Some(out)
}

/// `perf record -z` (zstd-compressed records) and pipe mode (`perf record -o -`) are read:
/// the same samples per symbol as `perf report` counts in each file, for the program's two
/// functions, and as many samples in all as `perf report` saw.
#[test]
fn compressed_and_pipe_mode_files_read_as_perf_reads_them() {
    if !std::process::Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("SKIP: the perf tool is not installed");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fwdscope-perfdata-z-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (z, pipe) = (dir.join("z.data"), dir.join("pipe.data"));
    let rec = |extra: &[&str], out: Option<&std::path::Path>| {
        let mut c = std::process::Command::new("perf");
        c.args(["record", "-q", "-e", "cpu-clock", "-F", "2000"]).args(extra);
        if let Some(f) = out {
            c.stdout(std::fs::File::create(f).unwrap());
        }
        c.arg("--").arg(example()).arg("1").output().unwrap()
    };
    let o = rec(&["-z", "-o", z.to_str().unwrap()], None);
    if !o.status.success() {
        println!("SKIP: perf record -z failed here: {}", String::from_utf8_lossy(&o.stderr));
        return;
    }
    let o = rec(&["-o", "-"], Some(&pipe));
    assert!(o.status.success(), "perf record -o -: {}", String::from_utf8_lossy(&o.stderr));
    // The compressed file holds compressed records (type 81 or 83) and no plain sample.
    let bytes = std::fs::read(&z).unwrap();
    assert!(bytes.len() > 104);
    let rules = Rules::parse("[[rule]]\nstage = \"seventy\"\nexact = \"burn_seventy\"\n[[rule]]\nstage = \"thirty\"\nexact = \"burn_thirty\"\n", "test").unwrap();
    for (file, what) in [(&z, "compressed"), (&pipe, "pipe mode")] {
        let perf = perf_report_counts(file).expect("perf report reads it");
        let total_perf: u64 = perf.values().sum();
        let pd = read_perf_data(file).unwrap_or_else(|e| panic!("{what}: {e}"));
        // About 2000 on a quiet machine; the program's split is by time, so a loaded one
        // gives fewer. The check is the count against perf's own, whatever it is.
        assert!(pd.samples.len() > 100, "{what}: {} samples", pd.samples.len());
        assert_eq!(pd.samples.len() as u64, total_perf, "{what}: samples against perf report's {perf:?}");
        let t = perfdata_table(&pd, None, &rules).unwrap();
        for f in ["burn_seventy", "burn_thirty"] {
            let mine = t.symbols.iter().filter(|r| r.symbol == f).map(|r| r.samples).sum::<u64>();
            assert_eq!(Some(mine), perf.get(f).copied(), "{what}: {f}");
        }
        println!("{what}: {} samples, as perf report counts", pd.samples.len());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A record type this reader does not know is counted and named, never dropped silently;
/// a file whose samples were all in such records is an error.
#[test]
fn unknown_record_types_are_named() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
    let mut bytes = std::fs::read(&src).unwrap();
    let at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
    let (off, size) = (at(40), at(48));
    // Retype every sample record (9) as 99, a type no perf writes.
    let mut pos = off;
    let mut retyped = 0;
    while pos < off + size {
        let ty = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = u16::from_le_bytes(bytes[pos + 6..pos + 8].try_into().unwrap()) as usize;
        if ty == 9 && retyped < 10 {
            bytes[pos..pos + 4].copy_from_slice(&99u32.to_le_bytes());
            retyped += 1;
        }
        pos += len;
    }
    let dir = std::env::temp_dir().join(format!("fwdscope-perfdata-unknown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let some = dir.join("some.data");
    std::fs::write(&some, &bytes).unwrap();
    let pd = read_perf_data(&some).unwrap();
    let w = pd.warnings.iter().find(|w| w.contains("type 99")).expect("a warning naming the type");
    assert!(w.contains("10 of type 99"), "{w}");
    // Every sample retyped: an error, not an empty table.
    let mut pos = off;
    while pos < off + size {
        let ty = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap());
        let len = u16::from_le_bytes(bytes[pos + 6..pos + 8].try_into().unwrap()) as usize;
        if ty == 9 {
            bytes[pos..pos + 4].copy_from_slice(&99u32.to_le_bytes());
        }
        pos += len;
    }
    let all = dir.join("all.data");
    std::fs::write(&all, &bytes).unwrap();
    let e = read_perf_data(&all).unwrap_err().to_string();
    assert!(e.contains("all.data") && e.contains("no sample could be decoded") && e.contains("of type 99"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
