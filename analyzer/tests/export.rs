//! Exports of a hand-made recording (samples at real forwarder functions linked into this
//! test binary, one with a callchain) against hand-written expectations: folded stacks
//! exactly, and the same stacks and counts read back from pprof (decoded, and through
//! `go tool pprof` where Go is installed), speedscope JSON, Parquet, CSV and the SVG.

mod common;

use analyzer::export::recording_profile;
use analyzer::rules::Rules;
use analyzer::symbolize::Symbolizer;
use collector::recording::{Recording, RecordingWriter};
use std::io::Read;

fn recording(dir: &std::path::Path) -> Recording {
    let _ = std::fs::remove_dir_all(dir);
    let mut w = RecordingWriter::create(dir, true).unwrap();
    common::push_helper_scenario(&mut w, 5151, 250_000);
    common::finish(w, "cycles", "cpu-clock", None)
}

const FOLDED: &str = "\
fwd-worker-0;forwarder::packet::checksum 2
fwd-worker-0;fwd_lookup_fib_dir24;forwarder::packet::checksum 4
fwd-worker-1;fwd_slab_alloc 1
";

#[test]
fn exports_carry_the_hand_written_stacks() {
    let dir = std::env::temp_dir().join(format!("fwdscope-export-{}", std::process::id()));
    let rec = recording(&dir);
    let mut sym = Symbolizer::for_recording(&rec).unwrap();
    let p = recording_profile(&rec, &mut sym, &Rules::builtin()).unwrap();
    assert_eq!(p.event, "cpu-clock");
    assert_eq!(p.folded(), FOLDED);
    // Charged stages: the helper under lookup is lookup; alone it is other.
    let stages: Vec<(&str, u64)> = p.stacks.iter().map(|s| (s.stage.as_str(), s.samples)).collect();
    assert_eq!(stages, vec![("lookup", 4), ("other", 2), ("slab", 1)]);

    // CSV.
    let csv = p.csv();
    assert!(csv.starts_with("thread,stage,leaf,dso,stack,samples,period\n"), "{csv}");
    assert!(csv.contains("fwd-worker-0,lookup,forwarder::packet::checksum,"), "{csv}");
    assert!(csv.contains(",fwd_lookup_fib_dir24;forwarder::packet::checksum,4,1000000\n"), "{csv}");

    // speedscope: one profile per thread, frames shared, weights in samples.
    let ss: serde_json::Value = serde_json::from_str(&p.speedscope("t").unwrap()).unwrap();
    let profiles = ss["profiles"].as_array().unwrap();
    assert_eq!(profiles.len(), 2);
    assert_eq!(profiles[0]["name"], "fwd-worker-0");
    assert_eq!(profiles[0]["endValue"], 6);
    let frames = ss["shared"]["frames"].as_array().unwrap();
    let names: Vec<&str> = frames.iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let first = profiles[0]["samples"][0].as_array().unwrap();
    let stack: Vec<&str> = first.iter().map(|i| names[i.as_u64().unwrap() as usize]).collect();
    assert_eq!(stack, vec!["fwd_lookup_fib_dir24", "forwarder::packet::checksum"]);

    // Parquet, read back with polars.
    let mut pq = Vec::new();
    p.parquet(&mut pq).unwrap();
    let df = polars::prelude::ParquetReader::new(std::io::Cursor::new(pq)).finish().unwrap();
    use polars::prelude::SerReader;
    assert_eq!(df.height(), 3);
    let samples: u64 = df.column("samples").unwrap().u64().unwrap().iter().flatten().sum();
    assert_eq!(samples, 7);

    // SVG: every function drawn.
    let svg = String::from_utf8(p.svg("test").unwrap()).unwrap();
    for f in ["fwd_lookup_fib_dir24", "fwd_slab_alloc", "checksum"] {
        assert!(svg.contains(f), "{f} missing from the flame graph");
    }

    // pprof: decode and check values, labels and that the lookup frame has a source file.
    let gz = p.pprof(&mut sym).unwrap();
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut raw).unwrap();
    let pp: analyzer::export::pprof::PProfile = prost::Message::decode(&raw[..]).unwrap();
    let s = |i: i64| pp.string_table[i as usize].as_str();
    assert_eq!(s(pp.sample_type[0].r#type), "samples");
    // A clock event is CPU time as profile stores (Pyroscope, Parca) expect it:
    // cpu/nanoseconds, the period type the same, the mean sampling period as `period`.
    assert_eq!((s(pp.sample_type[1].r#type), s(pp.sample_type[1].unit)), ("cpu", "nanoseconds"));
    let pt = pp.period_type.as_ref().unwrap();
    assert_eq!((s(pt.r#type), s(pt.unit)), ("cpu", "nanoseconds"));
    assert_eq!(pp.period, 250_000);
    assert!(pp.comment.iter().any(|&c| s(c).contains("event used cpu-clock")));
    let total: i64 = pp.sample.iter().map(|x| x.value[0]).sum();
    let period: i64 = pp.sample.iter().map(|x| x.value[1]).sum();
    assert_eq!((total, period), (7, 1_750_000));
    // host, run and setting on every sample: the recording's machine and directory.
    let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
    for x in &pp.sample {
        let label = |k: &str| x.label.iter().find(|l| s(l.key) == k).map(|l| s(l.str).to_string());
        assert_eq!(label("run").as_deref(), Some(dir_name.as_str()));
        assert_eq!(label("host"), Some(rec.meta.machine.hostname.clone()));
        assert_eq!(label("setting").as_deref(), Some("-"), "no forwarder configuration in this recording");
    }
    let lookup_sample = pp.sample.iter().find(|x| x.value[0] == 4).unwrap();
    assert_eq!(lookup_sample.location_id.len(), 2);
    let stage = lookup_sample.label.iter().find(|l| s(l.key) == "stage").unwrap();
    assert_eq!(s(stage.str), "lookup");
    let caller = &pp.location[(lookup_sample.location_id[1] - 1) as usize];
    let f = &pp.function[(caller.line[0].function_id - 1) as usize];
    assert_eq!(s(f.name), "fwd_lookup_fib_dir24");
    assert!(s(f.filename).ends_with("dir24.rs"), "{}", s(f.filename));
    assert!(caller.line[0].line > 0);
    let m = &pp.mapping[(caller.mapping_id - 1) as usize];
    assert_eq!(s(m.filename), std::env::current_exe().unwrap().display().to_string());

    match std::process::Command::new("go").arg("version").output() {
        Err(_) => println!("SKIP: go is not installed; `go tool pprof` check not run"),
        Ok(_) => {
            let f = dir.join("profile.pb.gz");
            std::fs::write(&f, &gz).unwrap();
            let out = std::process::Command::new("go")
                .args(["tool", "pprof", "-top", "-sample_index=samples"])
                .arg(&f)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "go tool pprof failed: {}", String::from_utf8_lossy(&out.stderr));
            // flat samples: checksum 6, fwd_slab_alloc 1.
            let flat = |name: &str| -> Option<String> {
                text.lines()
                    .find(|l| l.trim_end().ends_with(name))
                    .map(|l| l.split_whitespace().next().unwrap().to_string())
            };
            assert_eq!(flat("forwarder::packet::checksum").as_deref(), Some("6"), "{text}");
            assert_eq!(flat("fwd_slab_alloc").as_deref(), Some("1"), "{text}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
