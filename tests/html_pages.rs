//! `report -i IN --html` and `export -f svg` through the CLI, read in headless Chromium as a
//! person would: a recording made here (skipped, saying why, where perf may not sample), the
//! golden recording and the golden perf.data file each get a page whose text fits its boxes
//! and whose legends stay off the data; the exported flame graph's labels fit their frames
//! and nothing is drawn past its edge. Skips the browser part where no chromium is installed.

#[path = "../compare/tests/browser/mod.rs"]
mod browser;
mod common;

use common::{fwdscope, perf_allows, tmpdir, Need};
use std::path::Path;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data");

/// `report -i input --html` (with `extra` flags): the page, after checking it was written.
fn page_of(input: &Path, out: &Path, extra: &[&str]) -> String {
    let o = fwdscope().args(["report", "-i"]).arg(input).args(extra).arg("--html").arg(out).output().unwrap();
    assert!(o.status.success(), "report --html: {}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(out).expect("the page")
}

/// The flame graph `export -f svg` writes of `input`, checked in Chromium.
fn check_flame_svg(chromium: &str, input: &Path, dir: &Path, extra: &[&str]) {
    let svg = dir.join("flame.svg");
    let o =
        fwdscope().args(["export", "-i"]).arg(input).args(extra).args(["-f", "svg", "-o"]).arg(&svg).output().unwrap();
    assert!(o.status.success(), "export -f svg: {}", String::from_utf8_lossy(&o.stderr));
    let c = browser::check_svg(chromium, &std::fs::read(&svg).unwrap(), dir, "flame");
    println!(
        "{}: flame graph {} px wide, {} frames, {} labelled",
        input.display(),
        c["width"],
        c["frames"],
        c["labelled"]
    );
    assert!(c["frames"].as_u64().unwrap() > 10 && c["labelled"].as_u64().unwrap() > 5, "{c}");
    assert_eq!(c["overflowText"].as_array().unwrap().len(), 0, "labels wider than their frames: {}", c["overflowText"]);
    assert_eq!(c["outside"].as_array().unwrap().len(), 0, "text past the drawing: {}", c["outside"]);
}

#[test]
fn the_golden_recording_and_perf_data_pages_and_flame_graphs_read_in_chromium() {
    let dir = tmpdir("html-golden");
    std::fs::create_dir_all(&dir).unwrap();
    let rec = Path::new(DATA).join("forwarder-recording");
    let page = page_of(&rec, &dir.join("rec.html"), &[]);
    for id in ["stage-table", "symbols", "flame", "clocks", "rate", "timeline", "annotations"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "recording page: no {id}");
    }
    // The lookup stage's top symbol gets a listing.
    assert!(page.contains("<details class=\"ann\" data-symbol=\"fwd_lookup_"), "no annotated lookup symbol");
    let pd = Path::new(DATA).join("kernel-forwarding.perf.data");
    let ks = format!("{DATA}/kernel-forwarding.kallsyms.gz");
    let pd_page = page_of(&pd, &dir.join("pd.html"), &["--kallsyms", &ks]);
    assert!(pd_page.contains("fib_table_lookup") && pd_page.contains("id=\"flame\""), "perf.data page");
    assert!(pd_page.contains("No timeline"), "the perf.data page says why it has no timeline");
    // The golden perf.data file was recorded with callchains (perf record -g).
    assert!(pd_page.contains("(with callchains)"), "the flame graph's source misread");
    // --keep-contended is for sweep directories: a recording is refused, in words.
    let o = fwdscope()
        .args(["report", "-i"])
        .arg(&rec)
        .args(["--keep-contended", "--html"])
        .arg(dir.join("x.html"))
        .output()
        .unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("not a sweep directory"));
    let Some(chromium) = browser::chromium() else {
        println!("SKIP: no chromium installed: the pages are checked, their rendering is not");
        return;
    };
    browser::assert_readable("golden recording page", &browser::check_page(chromium, &page, &dir, "rec", 1280));
    browser::assert_readable("perf.data page", &browser::check_page(chromium, &pd_page, &dir, "pd", 1280));
    check_flame_svg(chromium, &rec, &dir, &[]);
    check_flame_svg(chromium, &pd, &dir, &["--kallsyms", &ks]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording made here with the built binary (1.5 s of the forwarder, callchains): its
/// page has a track for the worker thread and reads at 1280 px.
#[test]
fn a_recording_made_here_gets_its_page() {
    if !perf_allows(Need::Sample) {
        return;
    }
    let dir = tmpdir("html-record");
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec");
    let o = fwdscope()
        .args(["record", "-F", "999", "-g", "--duration", "1.5", "-o"])
        .arg(&rec)
        .args(["--", "--routes", "3000", "--flows", "2048", "--no-pin"])
        .output()
        .unwrap();
    assert!(o.status.success(), "record: {}", String::from_utf8_lossy(&o.stderr));
    let page = page_of(&rec, &dir.join("rec.html"), &[]);
    assert!(page.contains("thread fwd-worker-0"), "no track for the worker");
    assert!(page.contains("id=\"rate\""), "no forwarded rate over time");
    // Inside the stages: the lookup engine's listing with source lines from its DWARF
    // (the binary built here), shaded rows, and its instructions folded under them.
    let at = page.find("data-symbol=\"fwd_lookup_").expect("no listing for a lookup symbol");
    let listing = &page[at..page[at..].find("</details>\n</details>").map_or(page.len(), |e| at + e)];
    assert!(listing.contains(".rs:") && listing.contains("style=\"background:rgba("), "{listing}");
    assert!(listing.contains(" instructions</summary>"), "{listing}");
    let Some(chromium) = browser::chromium() else {
        println!("SKIP: no chromium installed: the page is checked, its rendering is not");
        return;
    };
    browser::assert_readable("recording page", &browser::check_page(chromium, &page, &dir, "rec", 1280));
    // The same page with every listing opened: its rows fit their boxes too.
    let opened = page.replace("<details class=\"ann\"", "<details open class=\"ann\"");
    browser::assert_readable(
        "recording page, listings open",
        &browser::check_page(chromium, &opened, &dir, "rec-open", 1280),
    );
    check_flame_svg(chromium, &rec, &dir, &[]);
    let _ = std::fs::remove_dir_all(&dir);
}
