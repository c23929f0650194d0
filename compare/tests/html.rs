//! `report --html` of a sweep directory built from the golden forwarder recording (four
//! runs of two settings): the page holds every chart and a flame graph per run, and headless
//! Chromium renders it (the charts' colours are on the screenshot). Skips the Chromium part,
//! saying why, where no chromium is installed.

use compare::results::{write_parquet, RunResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn sweep_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fwdscope-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
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
            contention: Vec::new(),
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

    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    let Some(chromium) = chromium else {
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
    let _ = std::fs::remove_dir_all(&dir);
}
