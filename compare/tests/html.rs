//! The HTML pages as a person sees them: `report --html` of a sweep directory built from the
//! golden forwarder recording (four runs of two settings; normal, every run left out for
//! contention, and those runs kept anyway), of a live comparison's directory, and of the
//! golden recording itself. Each page holds its charts, and headless Chromium at 1280 px
//! wide finds no text wider than its box, no type under 12 px and no legend on plotted data;
//! screenshots check what only pixels show (the charts' colours, no blended histogram bars).
//! Skips the Chromium part, saying why, where no chromium is installed.

mod browser;

use compare::results::{write_parquet, RunResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Removes a test's directory, unless FWDSCOPE_KEEP_PAGES is set (to look at the pages and
/// screenshots by eye).
fn cleanup(dir: &Path) {
    if std::env::var_os("FWDSCOPE_KEEP_PAGES").is_none() {
        let _ = std::fs::remove_dir_all(dir);
    } else {
        println!("kept {}", dir.display());
    }
}

fn sweep_dir() -> PathBuf {
    sweep_dir_with("normal", false)
}

/// Four runs of two settings, every one flagged for contention when `contended`.
fn sweep_dir_with(tag: &str, contended: bool) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fwdscope-html-{tag}-{}", std::process::id()));
    cleanup(&dir);
    std::fs::create_dir_all(dir.join("runs")).unwrap();
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../analyzer/tests/data/forwarder-recording");
    let mut runs = Vec::new();
    for k in 0..4usize {
        std::os::unix::fs::symlink(&golden, dir.join("runs").join(format!("{:03}", k + 1))).unwrap();
        let fast = k % 2 == 1;
        runs.push(RunResult {
            setting: if fast { "prefetch 2".into() } else { "prefetch 0".into() },
            params: BTreeMap::from([("prefetch".to_string(), if fast { "2" } else { "0" }.to_string())]),
            repeat: k / 2,
            cache_entries: None,
            step_goal_miss: None,
            mpps: if fast { 11.6 + k as f64 * 0.1 } else { 10.1 + k as f64 * 0.1 },
            stages: BTreeMap::from([
                ("lookup".to_string(), if fast { 21.0 } else { 31.0 }),
                ("driver".to_string(), 33.0),
            ]),
            clocks: BTreeMap::from([("lookup".to_string(), if fast { 20.0 } else { 30.0 })]),
            runq_share: None,
            contention: if contended {
                vec![format!("a worker waited to run {}% of the time (over 5%: another process had its core)", 20 + k)]
            } else {
                Vec::new()
            },
        });
    }
    write_parquet(&dir.join("results.parquet"), &runs).unwrap();
    dir
}

#[test]
fn the_page_holds_every_chart_and_chromium_renders_them() {
    let dir = sweep_dir();
    let page = compare::html::sweep_page(&dir, &analyzer::rules::Rules::builtin()).expect("page");
    for id in ["mpps", "stages", "rt-size", "rt-hits", "rt-gc"] {
        let at = page.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no chart {id}"));
        assert!(
            page[at..].trim_start_matches(|c| c != '<').starts_with("><svg") || page[at..at + 40].contains("<svg"),
            "{id} is no SVG"
        );
    }
    assert_eq!(page.matches("class=\"flame\"").count(), 4, "a flame graph per run");
    // The first flame graph, decoded, holds the golden recording's forwarder symbols.
    use base64::Engine;
    let at = page.find("base64,").unwrap() + 7;
    let end = at + page[at..].find('"').unwrap();
    let svg = base64::engine::general_purpose::STANDARD.decode(&page[at..end]).unwrap();
    assert!(String::from_utf8_lossy(&svg).contains("fwd_lookup_fib_dir24"));
    assert!(page.contains("* prefetch 2"), "the best setting is marked");
    assert!(page.contains("id=\"summary\"") && page.contains("<td>31.0</td>"), "the summary's stage costs");

    let Some(chromium) = browser::chromium() else {
        println!("SKIP: no chromium installed: the page is checked, its rendering is not");
        return;
    };
    let html = dir.join("report.html");
    std::fs::write(&html, &page).unwrap();
    let png = dir.join("shot.png");
    let out = std::process::Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1000,2600"])
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("chromium");
    assert!(png.exists(), "no screenshot: {}", String::from_utf8_lossy(&out.stderr));
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let count = |want: [u8; 3]| {
        buf[..info.buffer_size()]
            .chunks(px)
            .filter(|p| p[..3].iter().zip(want).all(|(a, b)| (*a as i32 - b as i32).abs() <= 8))
            .count()
    };
    // Stage bars: lookup's yellow and driver's blue; the best setting's red error bar.
    let (lookup, driver, best) = (count([230, 171, 2]), count([55, 126, 184]), count([255, 0, 0]));
    println!("pixels: lookup {lookup}, driver {driver}, best-setting red {best}");
    assert!(lookup > 2000 && driver > 2000, "stage bars not rendered");
    assert!(best > 20, "Mpps chart not rendered");
    let c = browser::check_page(chromium, &page, &dir, "sweep", 1280);
    browser::assert_readable("sweep page", &c);
    for id in ["mpps", "stages", "rt-size", "rt-hits", "rt-gc"] {
        let ch = &c["charts"][id];
        assert!(ch["marks"].as_u64().unwrap() > 0 && ch["legends"] == 1, "chart {id}: {ch}");
    }
    // Two stages charged, two keys; every key's colour is drawn on the chart.
    assert_eq!(c["charts"]["stages"]["keys"], 2, "{}", c["charts"]["stages"]);
    cleanup(&dir);
}

/// Every run left out for contention: the page says so in words, draws no rate at all (no
/// point at zero, no axis of zeros), lists the four runs greyed with their reason, and
/// prints no NaN; with --keep-contended the figures come back, marked.
#[test]
fn a_sweep_with_no_counted_run_says_so_and_draws_nothing_as_zero() {
    let dir = sweep_dir_with("contended", true);
    let rules = analyzer::rules::Rules::builtin();
    let page = compare::html::sweep_page(&dir, &rules).expect("page");
    assert!(page.contains("id=\"no-counted-run\""), "no words for the missing figures");
    assert!(!page.contains("id=\"mpps\"") && !page.contains("id=\"stages\""), "a chart of nothing");
    assert!(!page.contains("NaN"), "NaN on the page");
    let runs = &page[page.find("id=\"runs\"").expect("the runs")..];
    let runs = &runs[..runs.find("</table>").unwrap()];
    assert_eq!(runs.matches("<tr class=\"out\">").count(), 4, "the four runs, greyed");
    assert_eq!(page.matches("<summary class=\"out\">").count(), 4, "flame-graph headers say left out");
    assert!(page.contains("left out: a worker waited to run 21% of the time"), "each run's reason");
    assert!(!page.contains(" Mpps</summary>"), "a left-out run's rate printed as a result");
    let kept = compare::html::sweep_page_with(&dir, &rules, &compare::html::PageOptions { keep_contended: true })
        .expect("page with --keep-contended");
    assert!(kept.contains("id=\"kept-contended\"") && kept.contains("id=\"mpps\""), "kept figures not shown");
    assert!(kept.contains("counted anyway") && !kept.contains("NaN"));
    assert!(kept.contains("! prefetch 0"), "the table marks the kept setting");
    assert_eq!(page.matches("no counted run</td>").count(), 2, "the summary says it per setting");

    // One setting with counted runs, one without: the chart has the one's point and says
    // "no counted run" at the other's place, its axis from the counted figures.
    let mut runs = compare::results::read_results(&dir).unwrap();
    for r in runs.iter_mut().filter(|r| r.setting == "prefetch 2") {
        r.contention.clear();
    }
    write_parquet(&dir.join("results.parquet"), &runs).unwrap();
    let half = compare::html::sweep_page(&dir, &rules).expect("page");
    let mpps = &half[half.find("id=\"mpps\"").expect("the rate chart")..];
    let mpps = &mpps[..mpps.find("</svg>").unwrap()];
    assert!(
        mpps.lines().any(|l| l.trim() == "no counted run"),
        "{}",
        mpps.lines().filter(|l| !l.starts_with('<')).collect::<Vec<_>>().join(" | ")
    );
    assert!(!half.contains("NaN") && !half.contains("id=\"no-counted-run\""));
    write_parquet(
        &dir.join("results.parquet"),
        &compare::results::read_results(&dir)
            .unwrap()
            .into_iter()
            .map(|mut r| {
                r.contention = vec![format!(
                    "a worker waited to run {}% of the time (over 5%: another process had its core)",
                    20 + r.repeat * 2 + usize::from(r.setting == "prefetch 2")
                )];
                r
            })
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let Some(chromium) = browser::chromium() else {
        println!("SKIP: no chromium installed: the pages are checked, their rendering is not");
        return;
    };
    let c = browser::check_page(chromium, &half, &dir, "half", 1280);
    browser::assert_readable("half-counted page", &c);
    let c = browser::check_page(chromium, &page, &dir, "contended", 1280);
    browser::assert_readable("no-counted-run page", &c);
    assert_eq!(c["greyRows"], 20, "four runs of five cells in grey");
    let text = c["text"].as_str().unwrap();
    assert!(text.contains("No counted run:") && !text.contains("NaN"), "{text:.500}");
    let html = dir.join("contended.html");
    std::fs::write(&html, &page).unwrap();
    let shot = browser::screenshot(chromium, &html, 1280, 2400);
    let near = |p: [u8; 3], q: [u8; 3]| p.iter().zip(q).all(|(a, b)| (*a as i32 - b as i32).abs() <= 8);
    let count = |want: [u8; 3]| shot.rgb.iter().filter(|p| near(**p, want)).count();
    // No error bar (red best, blue others) and no stage bar anywhere on the screenshot.
    println!(
        "no-counted-run page: red {} blue {} lookup {}",
        count([255, 0, 0]),
        count([0, 0, 255]),
        count([230, 171, 2])
    );
    assert_eq!(count([255, 0, 0]) + count([0, 0, 255]), 0, "a rate drawn: {}", shot.path.display());
    assert_eq!(count([230, 171, 2]), 0, "a stage bar drawn: {}", shot.path.display());
    let k = browser::check_page(chromium, &kept, &dir, "kept", 1280);
    browser::assert_readable("kept-contended page", &k);
    let html = dir.join("kept.html");
    std::fs::write(&html, &kept).unwrap();
    let shot = browser::screenshot(chromium, &html, 1280, 1200);
    let orange = shot.rgb.iter().filter(|p| near(**p, [230, 120, 0])).count();
    println!("kept page: orange (contended counted) {orange}");
    assert!(orange > 20, "the kept setting is not marked on the chart: {}", shot.path.display());
    cleanup(&dir);
}

/// A live comparison of three settings over twelve units: the page at 1280 px reads without
/// zoom (results at 14 px in their box, the notes wrapped inside theirs), legends off the
/// data, and the differences histogram draws each setting's bars side by side in the
/// legend's colours only (no blend of overlapping translucent bars), none cut at the edge.
#[test]
fn the_live_page_reads_at_1280_px_and_its_histogram_has_only_legend_colours() {
    let dir = std::env::temp_dir().join(format!("fwdscope-html-live-{}", std::process::id()));
    cleanup(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut blocks = Vec::new();
    let mut t = 1_000_000_000u64;
    for unit in 0..12u64 {
        for setting in [0u64, 1, 2, 2, 1, 0] {
            // Settings 1 and 2 differ from the baseline by the same amount in even units (their
            // bars share bins: overlapping translucent bars would blend there), by their own
            // in odd ones.
            let shift = match setting {
                0 => 0.0,
                _ if unit % 2 == 0 => 0.012 + 0.002 * ((unit / 2) % 3) as f64,
                s => 0.01 * s as f64 + 0.002 * ((unit * 7) % 5) as f64,
            };
            let mpps = 10.0 * (1.0 - shift);
            blocks.push(serde_json::json!({"unit": unit, "setting": setting, "mpps": mpps,
                "flags": if unit == 3 && setting == 1 { vec!["a worker waited to run 9% of the time"] } else { vec![] },
                "workers": [{"start_mono_ns": t}]}));
            t += 50_000_000;
        }
    }
    let effect = |r: f64| serde_json::json!({"units": 11, "left_out": 1, "ratio": r, "ci": [r - 0.003, r + 0.003], "p": 1e-5, "p_holm": 2e-5});
    let j = serde_json::json!({
        "block_ms": 50.0, "discard_ms": 10.0,
        "results": [
            {"setting": {"label": "prefetch 0"}, "median_mpps": 9.95, "blocks": 24},
            {"setting": {"label": "prefetch 2"}, "median_mpps": 9.85, "blocks": 22, "effect": effect(0.99),
             "delta_ns": [1.02, 0.9, 1.1], "verdict": {"kind": "significant"}},
            {"setting": {"label": "prefetch 4 with a long label"}, "median_mpps": 9.75, "blocks": 24, "effect": effect(0.98),
             "delta_ns": [null, null, null], "verdict": {"kind": "undecided", "reason": "the machine was busy (3 of 12 units had a block with contention), and this reason is long enough to wrap in its cell"}}],
        "blocks": blocks
    });
    std::fs::write(dir.join("live.json"), j.to_string()).unwrap();
    // The printed table as `sweep --live` writes it: long notes, rows wider than 1280 px at 13 px.
    let note = "ratio: rate against the baseline's, 20% trimmed mean of paired log differences, Tukey-McLaughlin t interval; p: paired test, Holm-corrected over the 2 comparisons, significant below 0.01; ns/packet: a worker's time per packet against the baseline's (not diluted by costs every setting shares)";
    let row = format!(
        "{:<24} {:>8.3} {:>7} {:>9.4} {:>9.4}..{:<9.4} {:>22} {:>9} {:>9}  {}",
        "prefetch 2", 9.85, 22, 0.99, 0.987, 0.993, "+1.02 [ +0.90,  +1.10]", "1.00e-5", "2.00e-5", "slower by 1.0%"
    );
    std::fs::write(
        dir.join("table.txt"),
        format!("live comparison: one forwarder\n\nsetting   Mpps  blocks\n{row}\n{note}\n"),
    )
    .unwrap();
    let page = compare::html::live_page(&dir).expect("page");
    assert!(!page.contains("NaN"));
    assert!(page.contains(note), "the notes are on the page");
    let Some(chromium) = browser::chromium() else {
        println!("SKIP: no chromium installed: the page is checked, its rendering is not");
        return;
    };
    let c = browser::check_page(chromium, &page, &dir, "live", 1280);
    browser::assert_readable("live page", &c);
    assert!(c["minFont"].as_f64().unwrap() >= 13.0, "type under 13 px: {}", c["tinyText"]);
    let blocks_chart = &c["charts"]["blocks"];
    assert_eq!(blocks_chart["circles"], 72, "a point per block: {blocks_chart}");
    let diffs = &c["charts"]["diffs"];
    assert_eq!(diffs["keys"], 2, "{diffs}");
    // The histogram's plotted area on a screenshot of the same layout: every coloured pixel
    // is one of the two legend colours (a blend of overlapping translucent bars is neither).
    let html = dir.join("live.html");
    std::fs::write(&html, &page).unwrap();
    let shot = browser::screenshot(chromium, &html, 1280, 2400);
    let keys: Vec<[u8; 3]> =
        diffs["keyColours"].as_array().unwrap().iter().map(|k| browser::rgb_of(k.as_str().unwrap())).collect();
    let b = &diffs["svg"];
    let (x0, y0) = (b["x"].as_f64().unwrap() as usize, b["y"].as_f64().unwrap() as usize);
    let (w, h) = (b["w"].as_f64().unwrap() as usize, b["h"].as_f64().unwrap() as usize);
    assert!(y0 + h <= shot.height, "the histogram is below the screenshot: {b}");
    let near = |p: [u8; 3], q: [u8; 3]| p.iter().zip(q).all(|(a, b)| (*a as i32 - b as i32).abs() <= 10);
    let (mut coloured, mut per_key, mut other) = (0usize, vec![0usize; keys.len()], 0usize);
    for y in y0..y0 + h {
        for x in x0..(x0 + w).min(shot.width) {
            let p = shot.at(x, y);
            let spread = p.iter().max().unwrap() - p.iter().min().unwrap();
            if spread < 40 {
                continue; // white, greys, black: paper, grid and text
            }
            coloured += 1;
            match keys.iter().position(|k| near(p, *k)) {
                Some(i) => per_key[i] += 1,
                None => other += 1,
            }
        }
    }
    println!("histogram: {coloured} coloured pixels, by key {per_key:?}, other {other} ({})", shot.path.display());
    assert!(per_key.iter().all(|n| *n > 100), "a setting's bars missing: {per_key:?}");
    // The even units' differences are the same for both settings: a bin holds both.
    let d = compare::html::paired_percent(
        &["a".into(), "b".into(), "c".into()],
        &compare::html::live_blocks(&dir, &j).unwrap().1,
    );
    assert!(d[0].1.iter().any(|x| d[1].1.iter().any(|y| (x - y).abs() < 1e-9)), "no shared bin: {d:?}");
    assert!(other * 100 <= coloured, "colours not in the legend: {other} of {coloured} pixels");
    cleanup(&dir);
}

/// The golden recording's own page: stage bars, top symbols, the flame graph, the clocks
/// check's place, and the timeline (rate and a track per busy thread) readable at 1280 px.
#[test]
fn a_single_recording_has_its_page() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("../analyzer/tests/data/forwarder-recording");
    let input = analyzer::input::open(&golden).expect("golden recording");
    let rules = analyzer::rules::Rules::builtin();
    let o = compare::recording_page::RecordingPageOptions::default();
    let page = compare::recording_page::recording_page(&golden, &input, &rules, &Default::default(), &o).expect("page");
    for id in ["stage-table", "symbols", "flame", "clocks", "rate", "timeline"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no {id}");
    }
    // The golden recording's threads: the device, the worker and the main thread.
    assert_eq!(page.matches("id=\"track-").count(), 3, "a track per busy thread");
    assert!(page.contains("fwd_lookup_fib_dir24") && page.contains("cpu-clock"));
    assert!(page.contains("CLOCK_MONOTONIC") && page.contains("kallsyms"), "the sources of the figures");
    let dir = std::env::temp_dir().join(format!("fwdscope-html-rec-{}", std::process::id()));
    cleanup(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(chromium) = browser::chromium() else {
        println!("SKIP: no chromium installed: the page is checked, its rendering is not");
        return;
    };
    let c = browser::check_page(chromium, &page, &dir, "recording", 1280);
    browser::assert_readable("recording page", &c);
    // The worker's track: lookup (blue) and driver (green) share most of every window.
    let html = dir.join("recording.html");
    std::fs::write(&html, &page).unwrap();
    let shot = browser::screenshot(chromium, &html, 1280, 3200);
    let near = |p: [u8; 3], q: [u8; 3]| p.iter().zip(q).all(|(a, b)| (*a as i32 - b as i32).abs() <= 8);
    let count = |want: [u8; 3]| shot.rgb.iter().filter(|p| near(**p, want)).count();
    let (lookup, driver, nic) = (count([0x4c, 0x78, 0xa8]), count([0x54, 0xa2, 0x4b]), count([0x9d, 0x75, 0x5d]));
    println!("recording page: lookup {lookup} driver {driver} nic {nic} ({})", shot.path.display());
    assert!(lookup > 5000 && driver > 5000 && nic > 20000, "the timeline's stage shares are not drawn");
    cleanup(&dir);
}
