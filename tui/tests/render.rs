//! The screen from fixed inputs: the golden recording of the bundled forwarder
//! (analyzer/tests/data/forwarder-recording) fed through the model as `top` would see it
//! live, rendered with ratatui's TestBackend and compared with insta snapshots; and the
//! stage panel checked against the analyzer's offline stage table of the same recording
//! (polars aggregation, an independent path).

use analyzer::rules::Rules;
use analyzer::stages::{stage_table, Attributor};
use analyzer::symbolize::Symbolizer;
use collector::recording::Recording;
use collector::stream::Batch;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::PathBuf;
use tui::model::{ForwarderInfo, Model};
use tui::view::{draw, Focus, Ui};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../analyzer/tests/data/forwarder-recording")
}

/// The golden recording through the model: the first counter snapshot and a tick (as the
/// first second of `top`), then every sample and the remaining counters, and a second tick.
fn golden_model() -> (Recording, Model) {
    let rec = Recording::open(&golden_dir()).expect("golden recording");
    // What the recording names, not what debug files on this machine would add (libc's
    // internal functions, with libc6-dbg installed): the snapshots must not depend on it.
    let sym = Symbolizer::for_recording(&rec).expect("symbolizer").without_debug_files();
    let at = Attributor::new(sym, Rules::builtin());
    let mut m = Model::new("replay golden", at);
    m.forwarder = rec.meta.forwarder.as_ref().map(ForwarderInfo::from_json);
    m.apply(Batch::Started {
        sampling: rec.meta.sampling.clone(),
        counting: rec.meta.counting.clone(),
        target_pid: rec.meta.target_pid,
    });
    let mut counters = rec.counters().expect("counters");
    counters.sort_by_key(|r| r.time);
    let mut groups: Vec<(u64, Vec<_>)> = Vec::new();
    for r in counters {
        match groups.last_mut() {
            Some((t, rows)) if *t == r.time => rows.push(r),
            _ => groups.push((r.time, vec![r])),
        }
    }
    let mut groups = groups.into_iter();
    // Up to the first snapshot of the forwarder's segment (the first rows are PMU only).
    for (t, rows) in groups.by_ref() {
        let fwd = rows.iter().any(|r| r.is_forwarder());
        m.apply(Batch::Counters { time: t, rows });
        if fwd {
            break;
        }
    }
    m.tick();
    m.apply(Batch::Samples(rec.samples().expect("samples")));
    for (t, rows) in groups {
        m.apply(Batch::Counters { time: t, rows });
    }
    m.tick();
    (rec, m)
}

fn render(m: &Model, ui: &Ui, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    t.draw(|f| draw(f, m, ui)).expect("draw");
    t
}

#[test]
fn the_stage_panel_agrees_with_the_offline_stage_table() {
    let (rec, m) = golden_model();
    let table = stage_table(&rec, &Rules::builtin()).expect("stage table");
    assert_eq!(m.interval_samples, table.samples);
    assert_eq!(m.interval_packets, table.packets);
    for row in &table.stages {
        let l = m.stages.iter().find(|l| l.stage == row.stage).expect("stage in panel");
        assert_eq!(l.samples, row.samples, "{}", row.stage);
        assert!((l.percent - row.percent).abs() < 1e-9, "{}", row.stage);
        let (a, b) = (l.per_packet.expect("per packet"), row.per_packet.expect("per packet"));
        assert!((a - b).abs() < 1e-9, "{}: {a} vs {b}", row.stage);
    }
    // The symbol table holds the same symbols (one tick of samples, before any decay).
    let top = &table.symbols[0];
    assert_eq!((m.symbols[0].symbol.as_str(), m.symbols[0].weight), (top.symbol.as_str(), top.samples as f64));
}

#[test]
fn full_screen() {
    let (_, m) = golden_model();
    insta::assert_snapshot!("full_100x32", render(&m, &Ui::default(), 100, 32).backend());
}

#[test]
fn every_stage_row_fits_at_120x40() {
    // The panel lists the forwarding stages, other, shared machinery no staged caller took
    // (one kernel lock release in the golden recording), then the device and the waiting
    // (idle) apart: ten rows. Every one must be on screen at a usual terminal size, not
    // cut by the panel's border.
    let (_, m) = golden_model();
    let names: Vec<String> = m.stages.iter().map(|l| l.stage.clone()).collect();
    assert_eq!(names.len(), 10, "{names:?}");
    let t = render(&m, &Ui::default(), 120, 40);
    let buf = t.backend().buffer();
    let lines: Vec<String> =
        (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_string()).collect()).collect();
    for name in &names {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!("│{name} "))),
            "stage row {name} missing from the panel:\n{}",
            lines.join("\n")
        );
    }
}

#[test]
fn compact_screen_and_too_small() {
    let (_, m) = golden_model();
    insta::assert_snapshot!("compact_70x20", render(&m, &Ui::default(), 70, 20).backend());
    insta::assert_snapshot!("too_small_36x10", render(&m, &Ui::default(), 36, 10).backend());
}

#[test]
fn help_paused_ended_and_no_sampling() {
    let (_, mut m) = golden_model();
    m.ended = Some("target exited with status 0".into());
    m.sampling_error = Some("perf_event_open: permission denied (kernel.perf_event_paranoid = 3)".into());
    let ui = Ui {
        paused: true,
        help: true,
        focus: Focus::Stages,
        message: Some("no control here: -p, -a and --replay only observe".into()),
        ..Ui::default()
    };
    insta::assert_snapshot!("help_ended_100x32", render(&m, &ui, 100, 32).backend());
}

/// The screen's rows as text.
fn lines(t: &Terminal<TestBackend>) -> Vec<String> {
    let buf = t.backend().buffer();
    (0..buf.area.height).map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_string()).collect()).collect()
}

#[test]
fn a_requested_setting_shows_beside_the_one_running() {
    // The golden forwarder runs prefetch 2 with nocache; a key asked for 5 and rtcache.
    let (_, m) = golden_model();
    let ui = Ui { requested_prefetch: Some(5), requested_cache: Some("rtcache".into()), ..Ui::default() };
    let head = lines(&render(&m, &ui, 160, 40)).remove(0);
    assert!(head.contains("prefetch requested 5 (running 2)"), "{head}");
    assert!(head.contains("cache requested rtcache (running nocache)"), "{head}");
    let head = lines(&render(&m, &Ui::default(), 160, 40)).remove(0);
    assert!(head.contains("prefetch 2") && !head.contains("requested"), "{head}");
}
