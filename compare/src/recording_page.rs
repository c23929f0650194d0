//! `report -i IN --html` for one recording (`fwdscope record -o DIR`) or a perf.data file:
//! one self-contained page with the stage bars, the top symbols, a flame graph coloured by
//! stage, the two-instrument clocks check, and, for a recording, a timeline over the
//! recording: the forwarded rate (the forwarder's counters) above one track per busy thread
//! with its stage shares per time window (as a profiler's thread tracks show them: when GC
//! spiked, when the rate dropped); inside the stages, each stage's top symbols annotated
//! (source lines shaded by their share, instructions folded under them). Every figure says
//! where it came from: the event, the
//! clock, where the symbols came from. The figures are the analyzer's (stage table,
//! per-window attribution, export profile), not computed again here.

use crate::html::{chart_div, css, escape, Key, Keys, STYLE};
use crate::{Error, Result};
use analyzer::input::Input;
use analyzer::rules::{Rules, STAGE_ORDER};
use analyzer::stages::StageTable;
use analyzer::symbolize::SymbolPaths;
use analyzer::windows::{stage_totals_by_window, Window};
use collector::recording::Recording;
use plotters::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// What the page shows.
#[derive(Debug, Clone)]
pub struct RecordingPageOptions {
    /// Symbols listed (default 25).
    pub top: usize,
    /// Time windows of the timeline (default 40; fewer when the threads have few samples).
    pub windows: usize,
    /// Threads given a track, those with most samples (default 6; a thread needs 1% of the
    /// samples).
    pub threads: usize,
    /// Symbols of each stage given an annotated listing, those with most of its samples
    /// (default 2; 0: none).
    pub annotated: usize,
}

impl Default for RecordingPageOptions {
    fn default() -> Self {
        RecordingPageOptions { top: 25, windows: 40, threads: 6, annotated: 2 }
    }
}

/// Instructions a listing on the page shows at most (a longer function shows the windows
/// around its hottest ones, as `annotate` does).
const PAGE_MAX_INSTRUCTIONS: usize = 600;

/// A row's background: the stage's colour, as strong as the row's share of its function.
fn shade(stage: &str, percent: f64) -> String {
    let RGBColor(r, g, b) = stage_rgb(stage);
    let a = (percent / 100.0).clamp(0.0, 1.0) * 0.85;
    format!("background:rgba({r},{g},{b},{a:.2})")
}

/// Inside the stages: for each stage with samples, its top symbols annotated (as
/// `fwdscope annotate` does), each a collapsible listing of its source lines (hot lines
/// shaded in the stage's colour by their share of the function) with its instructions
/// folded under them. What cannot be annotated is said in place of the listings.
fn annotations_section(
    path: &Path,
    input: &Input,
    t: &StageTable,
    rules: &Rules,
    paths: &SymbolPaths,
    per_stage: usize,
) -> String {
    use analyzer::rules::{BINARY_UNKNOWN, KERNEL_UNKNOWN, OTHER, SHARED, STARTUP, UNLISTED};
    if per_stage == 0 {
        return String::new();
    }
    let skip = [OTHER, STARTUP, KERNEL_UNKNOWN, BINARY_UNKNOWN, UNLISTED, SHARED];
    let mut stages: Vec<&str> = t
        .stages
        .iter()
        .filter(|r| r.samples > 0 && !skip.contains(&r.stage.as_str()))
        .map(|r| r.stage.as_str())
        .collect();
    stages.sort_by_key(|s| stage_rank(s));
    let mut picks: Vec<(&str, Vec<&analyzer::stages::SymbolRow>)> = Vec::new();
    for st in &stages {
        let mut rows: Vec<&analyzer::stages::SymbolRow> = t.symbols.iter().filter(|r| r.stage == *st).collect();
        rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.symbol.cmp(&b.symbol)));
        rows.truncate(per_stage);
        picks.push((st, rows));
    }
    let mut out = String::from(
        "<h2>Inside the stages</h2>\n<p class=\"src\">Each stage's top symbols annotated as <code>fwdscope annotate</code> \
         does: samples per source line (with the call sites it was inlined through; shaded by the line's share of the \
         function) and, folded under them, per instruction. Samples land on the instruction after the one that \
         waited (skid).</p>\n<div id=\"annotations\">\n",
    );
    let names: Vec<String> = picks.iter().flat_map(|(_, rows)| rows.iter().map(|r| r.symbol.clone())).collect();
    if names.is_empty() {
        out.push_str("<p class=\"missing\">No stage has named symbols to annotate.</p>\n</div>\n");
        return out;
    }
    let o = analyzer::annotate::Options { names, max_instructions: PAGE_MAX_INSTRUCTIONS, ..Default::default() };
    let ann = match analyzer::annotate::annotate(input, path, rules, paths, &o) {
        Ok(a) => a,
        Err(e) => {
            out.push_str(&format!(
                "<p class=\"missing\">No annotated listings: {}.</p>\n</div>\n",
                escape(&e.to_string())
            ));
            return out;
        }
    };
    for (st, rows) in &picks {
        out.push_str(&format!(
            "<h3><span class=\"key\"><i style=\"background:{}\"></i>{}</span></h3>\n",
            css(&stage_rgb(st)),
            escape(st)
        ));
        for r in rows {
            let Some(a) = ann.symbols.iter().find(|a| a.symbol == r.symbol && a.dso == r.dso) else {
                out.push_str(&format!("<p class=\"src\">{}: not annotated.</p>\n", escape(&r.symbol)));
                continue;
            };
            out.push_str(&listing(st, r.samples, a));
        }
    }
    out.push_str("</div>\n");
    out
}

/// One function's collapsible listing: lines, then its instructions folded.
fn listing(stage: &str, in_stage: u64, a: &analyzer::annotate::SymbolAnnotation) -> String {
    let hottest =
        a.lines.first().map_or(String::new(), |l| format!("; hottest line {} ({:.0}%)", l.location, l.percent));
    let mut out = format!(
        "<details class=\"ann\" data-symbol=\"{}\"><summary><code>{}</code> ({}): {} samples in {}, {} in all{}</summary>\n",
        escape(&a.symbol),
        escape(&a.symbol),
        escape(&a.dso),
        in_stage,
        escape(stage),
        a.samples,
        escape(&hottest)
    );
    out.push_str(&format!("<p class=\"src\">bytes and names: {}</p>\n", escape(&a.source)));
    for n in &a.notes {
        out.push_str(&format!("<p class=\"src\">note: {}</p>\n", escape(n)));
    }
    out.push_str(
        "<table class=\"data ann\"><tr><th>samples</th><th>share</th><th class=\"l\">source line</th><th class=\"l\">function</th></tr>\n",
    );
    for l in &a.lines {
        let via = if l.inlined_at.is_empty() { String::new() } else { format!(" < {}", l.inlined_at.join(" < ")) };
        out.push_str(&format!(
            "<tr style=\"{}\"><td>{}</td><td>{:.1}%</td><td class=\"l code\">{}{}</td><td class=\"l code\">{}</td></tr>\n",
            shade(stage, l.percent),
            l.samples,
            l.percent,
            escape(&l.location),
            escape(&via),
            escape(&l.function)
        ));
    }
    out.push_str("</table>\n");
    if !a.instructions.is_empty() {
        out.push_str(&format!(
            "<details class=\"ann\"><summary>{} instructions</summary>\n<table class=\"data ann\"><tr><th>samples</th><th>share</th><th class=\"l\">address</th><th class=\"l\">instruction</th><th class=\"l\">stage</th></tr>\n",
            a.instructions.len()
        ));
        for i in &a.instructions {
            if i.after_gap {
                out.push_str("<tr><td></td><td></td><td class=\"l code\">...</td><td></td><td></td></tr>\n");
            }
            let st: Vec<String> = i.stages.iter().map(|s| s.stage.clone()).collect();
            out.push_str(&format!(
                "<tr style=\"{}\"><td>{}</td><td>{:.1}%</td><td class=\"l code\">{:#x}</td><td class=\"l code\">{}</td><td class=\"l\">{}</td></tr>\n",
                shade(stage, i.percent),
                i.samples,
                i.percent,
                i.address,
                escape(i.text.as_deref().unwrap_or("")),
                escape(&st.join(", "))
            ));
        }
        out.push_str("</table></details>\n");
    }
    out.push_str("</details>\n");
    out
}

fn chart_err(e: impl std::fmt::Display) -> Error {
    Error::Chart(e.to_string())
}

/// A stage's colour as the flame graph draws it.
fn stage_rgb(stage: &str) -> RGBColor {
    let hex = analyzer::export::stage_colour(stage).trim_start_matches('#');
    let c = |i: usize| hex.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).unwrap_or(200);
    RGBColor(c(0), c(2), c(4))
}

/// Stages in the table's order, the ones it does not know after.
fn stage_rank(stage: &str) -> usize {
    STAGE_ORDER.iter().position(|s| *s == stage).unwrap_or(STAGE_ORDER.len())
}

/// The page for `path`, already opened as `input` (a recording or a perf.data file).
pub fn recording_page(
    path: &Path,
    input: &Input,
    rules: &Rules,
    paths: &SymbolPaths,
    o: &RecordingPageOptions,
) -> Result<String> {
    if !matches!(input, Input::Recording(_) | Input::PerfData(_)) {
        return Err(Error::Config(format!(
            "--html: {} is a {}; the page is made for a recording directory (fwdscope record -o), a perf.data \
             file, a sweep directory (sweep -o) or a live comparison's (sweep --live -o)",
            path.display(),
            input.kind()
        )));
    }
    let mut t = input.stage_table(rules, paths)?;
    let (profile, _) = input.profile(rules, paths)?;
    let title = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut html = page_head(path, input, &t, &title);
    let (sources, symbols_from) = symbol_sources(&t);
    html.push_str(&sources);
    let rules_from: Vec<String> = t.rule_sources.iter().map(|(f, n)| format!("{f} ({n})")).collect();
    html.push_str(&stage_section(&t, &symbols_from, &rules_from));
    html.push_str(&symbols_section(&mut t, o.top, &symbols_from));
    html.push_str(&flame_section(input, &profile, &t, &title, &symbols_from)?);
    html.push_str(&annotations_section(path, input, &t, rules, paths, o.annotated));
    html.push_str(&clocks_section(&t));
    html.push_str("<h2>Timeline</h2>\n");
    match input {
        Input::Recording(rec) => html.push_str(&timeline(rec, rules, o, &symbols_from)?),
        _ => html.push_str(
            "<p class=\"missing\" id=\"timeline\">No timeline: a perf.data file is read as one table here; record with \
             <code>fwdscope record</code> for the stage shares over time.</p>\n",
        ),
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

/// The page's head and heading: what `path` is, its samples and event, how it was
/// recorded, and the stage table's warnings.
fn page_head(path: &Path, input: &Input, t: &StageTable, title: &str) -> String {
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope report: {}</title>\n<style>{STYLE}</style></head><body>\n",
        escape(title)
    );
    html.push_str(&format!(
        "<h1>fwdscope report</h1>\n<p>{} <code>{}</code>: {} samples of <b>{}</b>{}{}.</p>\n",
        input.kind(),
        escape(&path.display().to_string()),
        t.samples,
        escape(&t.event),
        t.fallback.as_ref().map_or(String::new(), |f| format!(" ({})", escape(f))),
        t.recorded.as_ref().map_or(String::new(), |r| format!("; {}", escape(r)))
    ));
    for w in &t.warnings {
        html.push_str(&format!("<p class=\"missing\">{}</p>\n", escape(w)));
    }
    html
}

/// Where the names came from, in full once (a folded list, none when no source is
/// named), and briefly, as each figure names them.
fn symbol_sources(t: &StageTable) -> (String, String) {
    if t.symbol_sources.is_empty() {
        return (String::new(), "symbols: none named".to_string());
    }
    let short: Vec<&str> = t
        .symbol_sources
        .iter()
        .map(|s| {
            let head = s.split(':').next().unwrap_or(s);
            head.rsplit('/').next().unwrap_or(head)
        })
        .collect();
    let html = format!(
        "<details id=\"sources\"><summary>Sources of the symbols</summary><ul>{}</ul></details>\n",
        t.symbol_sources.iter().map(|s| format!("<li>{}</li>", escape(s))).collect::<String>()
    );
    (html, format!("symbols: {} (how each was read: Sources of the symbols, above)", short.join(", ")))
}

/// The flame graph: the same samples' stacks, as `export -f svg` writes them. A perf.data
/// file's table is read without its callchains (the stage table needs the leaves only), so
/// whether it has them is seen in the stacks.
fn flame_section(
    input: &Input,
    profile: &analyzer::export::Profile,
    t: &StageTable,
    title: &str,
    symbols_from: &str,
) -> Result<String> {
    use base64::Engine;
    let callchains = match input {
        Input::PerfData(_) => profile.stacks.iter().any(|s| s.frames.len() > 1),
        _ => t.callchains,
    };
    let svg = profile.svg(title)?;
    Ok(format!(
        "<h2>Flame graph</h2>\n<p class=\"src\">Stacks of the {} samples of {} ({}), coloured by the stage each \
         function's samples went to; {}.</p>\n<img class=\"flame\" id=\"flame\" alt=\"flame graph\" src=\"data:image/svg+xml;base64,{}\">\n",
        t.samples,
        escape(&t.event),
        match (&t.unwinding, callchains) {
            // A `--call-graph dwarf` file: how its user callchains were made, and how many cut short.
            (Some(u), _) => escape(&format!("with callchains; {u}")),
            (None, true) => "with callchains".to_string(),
            (None, false) => "leaf frames only: recorded without -g".to_string(),
        },
        escape(symbols_from),
        base64::engine::general_purpose::STANDARD.encode(svg)
    ))
}

/// The two-instrument check: the samples against the stage clocks, or why there is none.
fn clocks_section(t: &StageTable) -> String {
    let mut html = String::from("<h2>Two instruments: samples against the stage clocks</h2>\n");
    match (&t.clock_check, &t.clocks_absent) {
        (Some(c), _) => html.push_str(&format!("<pre class=\"notes\" id=\"clocks\">{}</pre>\n", escape(&c.text()))),
        (None, Some(why)) => html.push_str(&format!("<p class=\"missing\" id=\"clocks\">No clocks check: {}.</p>\n", escape(why))),
        (None, None) => html.push_str(
            "<p class=\"missing\" id=\"clocks\">No clocks check: the input is not a recording of the forwarder with its stage clocks.</p>\n",
        ),
    }
    html
}

/// One bar per stage (share of the samples), with its samples and cost per packet.
fn stage_section(t: &StageTable, symbols_from: &str, rules_from: &[String]) -> String {
    let mut out = format!(
        "<h2>Stages</h2>\n<p class=\"src\">Samples of {} by stage (rules: {}); cost per packet in {} from the \
         forwarder's packet counters{}; {}.</p>\n<table class=\"data\" id=\"stage-table\"><tr><th class=\"l\">stage</th><th>samples</th><th>share</th><th>{}/packet</th><th class=\"l\" style=\"width:50%\"></th></tr>\n",
        escape(&t.event),
        escape(&rules_from.join(", ")),
        escape(&t.unit),
        t.packets.map_or(" (none recorded: no per-packet figures)".to_string(), |p| format!(", {p} packets")),
        escape(symbols_from),
        escape(&t.unit)
    );
    let max = t.stages.iter().map(|r| r.percent).fold(0.0f64, f64::max).max(1e-9);
    for r in &t.stages {
        out.push_str(&format!(
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{:.1}%</td><td>{}</td><td class=\"l\"><div class=\"bar\" style=\"width:{:.1}%;height:14px;background:{}\"></div></td></tr>\n",
            escape(&r.stage),
            r.samples,
            r.percent,
            r.per_packet.map_or("&mdash;".to_string(), |v| format!("{v:.1}")),
            100.0 * r.percent / max,
            css(&stage_rgb(&r.stage))
        ));
    }
    out.push_str("</table>\n");
    out
}

/// The symbols with most samples.
fn symbols_section(t: &mut StageTable, top: usize, symbols_from: &str) -> String {
    t.sort_symbols(analyzer::stages::SortKey::Samples);
    let mut out = format!(
        "<h2>Top symbols</h2>\n<p class=\"src\">The {} symbols with most samples of {}; {}.</p>\n<table class=\"data\" id=\"symbols\" style=\"table-layout:fixed;width:100%\"><colgroup><col style=\"width:5.5em\"><col style=\"width:4.5em\"><col><col style=\"width:6em\"><col style=\"width:22%\"></colgroup><tr><th>samples</th><th>share</th><th class=\"l\">symbol</th><th class=\"l\">stage</th><th class=\"l\">binary</th></tr>\n",
        top.min(t.symbols.len()),
        escape(&t.event),
        escape(symbols_from)
    );
    for r in t.symbols.iter().take(top) {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{:.1}%</td><td class=\"l\">{}</td><td class=\"l\"><span class=\"key\"><i style=\"background:{}\"></i>{}</span></td><td class=\"l\">{}</td></tr>\n",
            r.samples,
            r.percent,
            escape(&r.symbol),
            css(&stage_rgb(&r.stage)),
            escape(&r.stage),
            escape(&r.dso)
        ));
    }
    out.push_str("</table>\n");
    out
}

/// Thread names by tid from the recording's COMM events (the last name wins).
fn thread_names(rec: &Recording) -> Result<HashMap<u32, String>> {
    Ok(analyzer::stages::thread_names(&rec.tasks()?))
}

/// The forwarded rate over the recording: (seconds since `t0`, Mpps) between successive
/// rows of the forwarder's `tx_packets` counter (all workers).
fn rate_series(rec: &Recording, t0: u64) -> Result<Vec<(f64, f64)>> {
    let mut by_time: BTreeMap<u64, u64> = BTreeMap::new();
    for r in rec.forwarder_counter("tx_packets")? {
        *by_time.entry(r.time).or_default() += r.value;
    }
    let pts: Vec<(u64, u64)> = by_time.into_iter().collect();
    Ok(pts
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| {
            let dt = (w[1].0 - w[0].0) as f64 / 1e9;
            (w[1].0.saturating_sub(t0) as f64 / 1e9, w[1].1.saturating_sub(w[0].1) as f64 / dt / 1e6)
        })
        .collect())
}

/// The forwarded rate chart and one stage-share track per busy thread, on one time axis.
fn timeline(rec: &Recording, rules: &Rules, o: &RecordingPageOptions, symbols_from: &str) -> Result<String> {
    let df = rec.samples_df()?;
    let bad = |e: polars::prelude::PolarsError| Error::Chart(format!("reading the samples' time and thread: {e}"));
    let times: Vec<u64> = df.column("time").map_err(bad)?.u64().map_err(bad)?.into_no_null_iter().collect();
    let tids: Vec<u32> = df.column("tid").map_err(bad)?.u32().map_err(bad)?.into_no_null_iter().collect();
    let (Some(&t0), Some(&t1)) = (times.iter().min(), times.iter().max()) else {
        return Ok("<p class=\"missing\" id=\"timeline\">No timeline: the recording holds no samples.</p>\n".into());
    };
    if t1 <= t0 {
        return Ok(
            "<p class=\"missing\" id=\"timeline\">No timeline: every sample has the same time stamp.</p>\n".into()
        );
    }
    let mut per_tid: HashMap<u32, usize> = HashMap::new();
    for t in &tids {
        *per_tid.entry(*t).or_default() += 1;
    }
    let mut busy: Vec<(u32, usize)> = per_tid.into_iter().filter(|(_, n)| *n * 100 >= times.len()).collect();
    busy.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    busy.truncate(o.threads.max(1));
    // About 20 samples per window of the busiest thread at least, 5 windows at least.
    let n = (busy.first().map_or(0, |b| b.1) / 20).clamp(5, o.windows.max(5));
    let span = t1 - t0 + 1;
    let edge = |i: usize| t0 + (span as u128 * i as u128 / n as u128) as u64;
    let windows: Vec<Window> = busy
        .iter()
        .flat_map(|&(tid, _)| (0..n).map(move |i| Window { tid, start_ns: edge(i), end_ns: edge(i + 1) }))
        .collect();
    let totals = stage_totals_by_window(rec, rules, &windows)?;
    let names = thread_names(rec)?;
    let secs = span as f64 / 1e9;
    let mut out = format!(
        "<p class=\"src\">Samples of {} by their time stamps (CLOCK_MONOTONIC), {n} windows of {:.0} ms over {:.2} s, \
         each window's stages by the stage table's attribution, share of the window's sampled {}; the rate from the \
         forwarder's <code>tx_packets</code> counter (its stats segment, read on the same clock); {}.</p>\n",
        escape(&totals.event),
        secs * 1000.0 / n as f64,
        secs,
        escape(&totals.unit),
        escape(symbols_from)
    );
    let rate = rate_series(rec, t0)?;
    if rate.is_empty() {
        out.push_str("<p class=\"missing\">No rate: the recording has no forwarder counters.</p>\n");
    } else {
        let svg = rate_chart(&rate, secs)?;
        out.push_str(&chart_div("rate", &svg, &[]));
    }
    let mut seen: Vec<String> = Vec::new();
    for (k, &(tid, samples)) in busy.iter().enumerate() {
        let per_window = &totals.windows[k * n..(k + 1) * n];
        for w in per_window {
            for st in w.keys() {
                if !seen.contains(st) {
                    seen.push(st.clone());
                }
            }
        }
        let name = names.get(&tid).map_or("?", String::as_str);
        let caption = format!("thread {name} (tid {tid}): {samples} samples");
        let svg = track_chart(&caption, per_window, n, span)?;
        out.push_str(&chart_div(&format!("track-{tid}"), &svg, &[]));
    }
    seen.sort_by_key(|s| (stage_rank(s), s.clone()));
    let keys: Keys = seen.iter().map(|s| (s.clone(), css(&stage_rgb(s)), Key::Box)).collect();
    out.push_str(&format!("<div id=\"timeline\">{}</div>\n", crate::html::legend(&keys)));
    Ok(out)
}

const TW: u32 = 900;

fn rate_chart(rate: &[(f64, f64)], secs: f64) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (TW, 200)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let hi = rate.iter().map(|p| p.1).fold(0.0f64, f64::max) * 1.15;
        let hi = if hi > 0.0 && hi.is_finite() { hi } else { 1.0 };
        let mut ch = ChartBuilder::on(&root)
            .caption("forwarded Mpps (all workers)", ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..secs, 0.0..hi)
            .map_err(chart_err)?;
        ch.configure_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .y_desc("Mpps")
            .y_label_formatter(&|v| crate::html::si(*v))
            .draw()
            .map_err(chart_err)?;
        ch.draw_series(LineSeries::new(rate.iter().copied(), BLACK.stroke_width(2))).map_err(chart_err)?;
    }
    Ok(svg)
}

/// One thread's stage shares per window, stacked to 100%; a window without samples stays
/// empty (not a zero share).
fn track_chart(caption: &str, windows: &[BTreeMap<String, (u64, u64)>], n: usize, span: u64) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (TW, 170)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let secs = span as f64 / 1e9;
        let mut ch = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 15))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..secs, 0.0..100.0)
            .map_err(chart_err)?;
        ch.configure_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .disable_mesh()
            .x_desc("seconds")
            .y_desc("% of window")
            .y_labels(3)
            .draw()
            .map_err(chart_err)?;
        let w = secs / n as f64;
        let mut bars = Vec::new();
        for (i, win) in windows.iter().enumerate() {
            let total: u64 = win.values().map(|v| v.1).sum();
            if total == 0 {
                continue;
            }
            let mut stages: Vec<(&String, u64)> = win.iter().map(|(s, v)| (s, v.1)).collect();
            stages.sort_by_key(|(s, _)| (stage_rank(s), (*s).clone()));
            let mut below = 0.0;
            for (st, p) in stages {
                let share = 100.0 * p as f64 / total as f64;
                bars.push(Rectangle::new(
                    [(i as f64 * w, below), ((i + 1) as f64 * w, below + share)],
                    stage_rgb(st).filled(),
                ));
                below += share;
            }
        }
        ch.draw_series(bars).map_err(chart_err)?;
    }
    Ok(svg)
}
