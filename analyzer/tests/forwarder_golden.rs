//! Golden native recording: the bundled forwarder (nocache + dir24) recorded with
//! callchains and `--keep-symbols`, its expected stage table in
//! results/forwarder-recording.stages (the arithmetic in its comments). The table must be
//! the same when the recorded binaries are gone (paths rewritten to nowhere): the symbol
//! maps shipped in the recording stand in for them.

use analyzer::rules::Rules;
use analyzer::stages::{stage_table, stage_table_reusing, StageTable};
use collector::recording::Recording;
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn rows(dir: &Path) -> Vec<String> {
    table_rows(&stage_table(&Recording::open(dir).unwrap(), &Rules::builtin()).unwrap())
}

fn table_rows(t: &StageTable) -> Vec<String> {
    assert_eq!(t.event, "cpu-clock");
    assert_eq!(t.packets, Some(14_184_480));
    t.stages
        .iter()
        .map(|r| format!("{} {} {:.2} {:.1}", r.stage, r.samples, r.percent, r.per_packet.unwrap_or(f64::NAN)))
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        // Follow the kallsyms symlink: copy what it points to.
        if std::fs::metadata(e.path()).unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

#[test]
fn forwarder_recording_matches_golden_with_and_without_its_binaries() {
    let want: Vec<String> = std::fs::read_to_string(data().join("results/forwarder-recording.stages"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    let rec = data().join("forwarder-recording");
    assert_eq!(rows(&rec), want);

    // The same recording with every mapped file moved away.
    let tmp = std::env::temp_dir().join(format!("fwdscope-golden-rec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    copy_dir(&rec, &tmp);
    let maps = std::fs::read_to_string(tmp.join("maps.json")).unwrap();
    let moved = maps.replace("\"path\": \"/", "\"path\": \"/nonexistent/");
    assert_ne!(maps, moved);
    std::fs::write(tmp.join("maps.json"), moved).unwrap();
    assert_eq!(rows(&tmp), want);

    // One symbolizer carried across recordings (as `sweep` does) gives the same tables:
    // the original, the copy without binaries, the original again.
    let mut sym = None;
    for dir in [&rec, &tmp, &rec] {
        let (t, s) = stage_table_reusing(&Recording::open(dir).unwrap(), &Rules::builtin(), sym.take()).unwrap();
        sym = Some(s);
        assert_eq!(table_rows(&t), want, "{}", dir.display());
    }

    // Without the symbol maps, the forwarder's functions can no longer be named: its
    // samples stay BINARY+0x... in a stage of their own, never guessed into another, and
    // the report says which binary of which build-id it lacked and how to supply it.
    std::fs::remove_dir_all(tmp.join("symbols")).unwrap();
    assert_ne!(rows(&tmp), want);
    let t = stage_table(&Recording::open(&tmp).unwrap(), &Rules::builtin()).unwrap();
    let unknown = t.stages.iter().find(|r| r.stage == analyzer::rules::BINARY_UNKNOWN).map_or(0, |r| r.samples);
    assert!(unknown > t.samples / 2, "binary-unknown {unknown} of {}", t.samples);
    assert!(t
        .stages
        .iter()
        .filter(|r| ["lookup", "ip", "slab", "driver"].contains(&r.stage.as_str()))
        .all(|r| r.samples == 0));
    let missing = t.binaries.iter().filter(|b| b.unnamed.is_some()).count();
    assert!(missing >= 1, "{:?}", t.binaries);
    let w = t.warnings.iter().find(|w| w.starts_with("/nonexistent/")).expect("a warning per unnamed binary");
    assert!(w.contains("no file of the recorded build-id") && w.contains("--symfs"), "{w}");
    std::fs::remove_dir_all(&tmp).unwrap();
}
