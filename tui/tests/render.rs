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
use tui::view::{draw, plan, AbView, Focus, Ui};

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
    m.forwarder =
        rec.meta.forwarder.as_ref().map(|v| ForwarderInfo::from_published(&fwd_abi::Published::from_value(v)));
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
    m.apply(Batch::Tasks(rec.tasks().expect("tasks")));
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
        match (l.per_packet, row.per_packet) {
            (Some(a), Some(b)) => assert!((a - b).abs() < 1e-9, "{}: {a} vs {b}", row.stage),
            (a, b) => assert_eq!(a, b, "{}: per packet", row.stage),
        }
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
    // (idle) and the forwarder's start-up (`start`) apart: eleven rows. Every one must be
    // on screen at a usual terminal size, not cut by the panel's border.
    let (_, m) = golden_model();
    let names: Vec<String> = m.stages.iter().map(|l| tui::view::stage_label(&l.stage)).collect();
    assert_eq!(names.len(), 11, "{names:?}");
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
    let ui = Ui {
        requested_prefetch: fwd_abi::Prefetch::new(5),
        requested_cache: Some(fwd_abi::CacheMode::Rtcache),
        ..Ui::default()
    };
    let head = lines(&render(&m, &ui, 160, 40)).remove(0);
    assert!(head.contains("prefetch requested 5 (running 2)"), "{head}");
    assert!(head.contains("cache requested rtcache (running nocache)"), "{head}");
    let head = lines(&render(&m, &Ui::default(), 160, 40)).remove(0);
    assert!(head.contains("prefetch 2") && !head.contains("requested"), "{head}");
}

/// An A/B two thirds of the way: 12 clean units, 3 of 52 blocks flagged, B 2.34% faster.
fn ab_view(a: &str, b: &str) -> AbView {
    use compare::paired::{Effect, Verdict};
    let effect = Effect { units: 12, left_out: 1, ratio: 1.0234, ci: (1.0101, 1.0369), p: 0.00123, p_holm: 0.00123 };
    let status = compare::live::AbStatus {
        a: a.into(),
        b: b.into(),
        blocks: 52,
        flagged: 3,
        effect,
        verdict: Verdict::Significant,
    };
    AbView { a: a.into(), b: b.into(), status: Some(status), stopped: false }
}

/// The golden model's figures as the stage panel writes them, for each stage row: every
/// one must be on the screen whole, on its stage's row.
fn assert_stage_figures_whole(lines: &[String], m: &Model) {
    for l in &m.stages {
        let Some(row) = lines.iter().find(|r| r.starts_with(&format!("│{} ", tui::view::stage_label(&l.stage))))
        else {
            continue;
        };
        let pct = format!("{:5.1}%", l.share.unwrap_or(l.percent));
        assert!(row.contains(pct.trim()), "{}: {pct} not on its row: {row}", l.stage);
        if let Some(pp) = l.per_packet {
            assert!(row.contains(&format!(" {pp:.1} ")), "{}: {pp:.1} not whole: {row}", l.stage);
        }
    }
}

#[test]
fn at_80x24_nothing_is_cut_and_the_panels_that_do_not_fit_are_dropped() {
    let (_, m) = golden_model();
    let t = render(&m, &Ui::default(), 80, 24);
    insta::assert_snapshot!("full_80x24", t.backend());
    let lines = lines(&t);
    // The header keeps every setting (a shorter form), the rates line its three figures.
    assert!(
        lines[0].contains("prefetch 2") && lines[0].contains("nocache") && lines[0].contains("dir24"),
        "{}",
        lines[0]
    );
    assert!(
        lines[2].contains("rx 11.627") && lines[2].contains("tx 11.627") && lines[2].contains("0.000"),
        "{}",
        lines[2]
    );
    // rtstat: whole column headers, those that do not fit left out from the right.
    let p = plan(80, 24, &m, &Ui::default());
    assert_eq!(p.rtstat_cols, 4, "{p:?}");
    assert!(lines[4].contains("size   hit/s  tot/s  gc/s  "), "{}", lines[4]);
    assert!(!lines[4].contains("ign"), "{}", lines[4]);
    // Every stage row, and the symbols panel with rows: the workers panel gave way.
    assert_eq!(p.workers, 0, "{p:?}");
    assert!(lines.iter().any(|l| l.contains("fwd_nic_generate")), "no symbol rows:\n{}", lines.join("\n"));
    for l in &m.stages {
        assert!(
            lines.iter().any(|r| r.starts_with(&format!("│{} ", tui::view::stage_label(&l.stage)))),
            "stage {} missing",
            l.stage
        );
    }
    assert_stage_figures_whole(&lines, &m);
}

#[test]
fn at_160x48_every_panel() {
    let (_, m) = golden_model();
    let t = render(&m, &Ui::default(), 160, 48);
    insta::assert_snapshot!("full_160x48", t.backend());
    let p = plan(160, 48, &m, &Ui::default());
    assert_eq!((p.rtstat_cols, p.workers > 0), (7, true), "{p:?}");
    assert_stage_figures_whole(&lines(&t), &m);
}

#[test]
fn the_ab_panel_puts_its_figures_first() {
    let (_, m) = golden_model();
    let ui = Ui { ab: Some(ab_view("prefetch 2 nocache", "prefetch 3 nocache")), ..Ui::default() };
    for (w, h) in [(160, 48), (80, 24)] {
        let t = render(&m, &ui, w, h);
        let lines = lines(&t);
        let at = lines.iter().position(|l| l.starts_with("A/B ratio")).expect("the A/B panel");
        // Its first line holds every figure, whole, at 80 columns too.
        assert!(
            lines[at].starts_with("A/B ratio 1.0234 [1.0101, 1.0369]  p 1.2e-3  12 units  3/52 blocks flagged"),
            "{w}x{h}: {}",
            lines[at]
        );
        assert!(
            lines[at + 1].starts_with("faster by 2.3%: B prefetch 3 nocache against A prefetch 2 nocache"),
            "{}",
            lines[at + 1]
        );
        // Just above the status line.
        assert_eq!(at + 2, lines.len() - 1, "{w}x{h}");
        if w == 160 {
            insta::assert_snapshot!("ab_160x48", t.backend());
        }
    }
    // The same setting twice is said to be an A/A.
    let aa = AbView { status: None, ..ab_view("prefetch 2 nocache", "prefetch 2 nocache") };
    let [first, second] = aa.lines();
    assert_eq!(first, "A/B: first unit running");
    assert!(second.starts_with("A/A, prefetch 2 nocache against itself"), "{second}");
}

/// Enter on the stage panel's `lookup` row, then on its top symbol, as the screen shows
/// them at 160x48: the symbol panel lists lookup's symbols only, then the function's source
/// lines; the selected rows are drawn reversed.
#[test]
fn drilling_into_lookup_and_its_top_symbol() {
    use ratatui::style::Modifier;
    let (_, mut m) = golden_model();
    let top_lookup = m.symbols.iter().find(|s| s.stage == "lookup").expect("a lookup symbol").clone();
    m.set_drill(tui::model::Drill::Stage("lookup".into()));
    assert!(m.symbols.iter().all(|s| s.stage == "lookup") && !m.symbols.is_empty());
    let t = render(&m, &Ui::default(), 160, 48);
    let screen = lines(&t);
    assert!(screen.iter().any(|l| l.contains("symbols of lookup (decaying, by samples) · esc: all")), "{screen:#?}");
    assert!(screen.iter().any(|l| l.contains(&top_lookup.symbol)), "{screen:#?}");
    // The first symbol row (the one Enter goes into) is reversed while the panel has focus.
    let y = screen.iter().position(|l| l.contains(&top_lookup.symbol)).unwrap() as u16;
    assert!(t.backend().buffer()[(10, y)].modifier.contains(Modifier::REVERSED));
    m.set_drill(tui::model::Drill::Symbol {
        stage: "lookup".into(),
        symbol: top_lookup.symbol.clone(),
        dso: top_lookup.dso.clone(),
    });
    // Its lines hold all of its samples (decayed once since the table was drawn).
    let total: f64 = m.inside.iter().map(|l| l.weight).sum();
    let want = top_lookup.weight * tui::model::DECAY;
    assert!((total - want).abs() < 1e-9, "{total} of {want}");
    let screen = lines(&render(&m, &Ui::default(), 160, 48));
    let title = format!("inside {} (decaying): hottest source lines · esc: back", top_lookup.symbol);
    assert!(screen.iter().any(|l| l.contains(&title)), "{screen:#?}");
    assert!(screen.iter().any(|l| l.contains("source line")), "{screen:#?}");
    // The stage panel's selected row, with the focus there.
    let ui = Ui { focus: Focus::Stages, stage_sel: 0, ..Ui::default() };
    let t = render(&m, &ui, 160, 48);
    let screen = lines(&t);
    let y = screen.iter().position(|l| l.contains("│lookup")).unwrap() as u16;
    assert!(t.backend().buffer()[(2, y)].modifier.contains(Modifier::REVERSED));
}

/// A target that publishes no packet counters (DPDK's l3fwd watched by PID, the whole
/// machine): the golden recording's samples alone. The header says the rates are unknown
/// rather than printing `rx 0.000 Mpps`; the stage panel still fills from the samples.
#[test]
fn a_target_without_packet_counters_says_so_instead_of_zero_rates() {
    let rec = Recording::open(&golden_dir()).expect("golden recording");
    let sym = Symbolizer::for_recording(&rec).expect("symbolizer").without_debug_files();
    let mut m = Model::new("pid 77", Attributor::new(sym, Rules::builtin()));
    m.apply(Batch::Started {
        sampling: rec.meta.sampling.clone(),
        counting: rec.meta.counting.clone(),
        target_pid: rec.meta.target_pid,
    });
    m.apply(Batch::Tasks(rec.tasks().expect("tasks")));
    m.apply(Batch::Samples(rec.samples().expect("samples")));
    m.tick();
    assert!(!m.has_counters());
    for (w, h, expect) in [
        (160, 48, "no packet counters: this target publishes none (rates unknown; samples only)"),
        (80, 24, "no packet counters: this target publishes none (rates unknown; samples only)"),
        (60, 20, "no packet counters (samples only)"),
    ] {
        let screen = lines(&render(&m, &Ui::default(), w, h));
        assert!(!screen.iter().any(|l| l.contains("Mpps")), "{w}x{h}: a rate was printed:\n{}", screen.join("\n"));
        assert!(screen.iter().any(|l| l.contains(expect)), "{w}x{h}: no `{expect}`:\n{}", screen.join("\n"));
        assert!(screen.iter().any(|l| l.contains("lookup")), "{w}x{h}: the stage panel is empty");
    }
    // With the forwarder's segment attached but no snapshot yet: waiting, not zero.
    m.forwarder = Some(ForwarderInfo::default());
    let screen = lines(&render(&m, &Ui::default(), 160, 48));
    assert!(screen.iter().any(|l| l.contains("waiting for the forwarder's counters")), "{}", screen.join("\n"));
}
