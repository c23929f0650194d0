//! `report --html`: one self-contained page for a sweep directory (`fwdscope sweep -o DIR`):
//! Mpps against the swept setting with 95% confidence intervals, stacked stage bars per
//! setting, rtstat time series (route-cache size, hits and GC per second) of each setting's
//! first run, the summary table, and a flame graph per run. For a live comparison's
//! directory (`sweep --live -o DIR`): every block's rate over time coloured by setting
//! (blocks left out drawn hollow), the distribution of the paired per-unit differences
//! against the baseline, and the table with its verdicts. Charts are SVG drawn with
//! plotters; flame graphs are inferno's SVG as data URIs (each keeps its own script).

use crate::results::{read_results, summarize, table_text, Summary};
use crate::{Error, Result};
use analyzer::rules::{Rules, APART, STAGE_ORDER};
use collector::recording::Recording;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

const W: u32 = 900;
const H: u32 = 380;
const STAGE_COLORS: [RGBColor; 8] = [
    RGBColor(230, 171, 2),
    RGBColor(217, 72, 1),
    RGBColor(166, 86, 40),
    RGBColor(55, 126, 184),
    RGBColor(77, 175, 74),
    RGBColor(153, 153, 153),
    RGBColor(102, 102, 102),
    RGBColor(204, 204, 204),
];

/// An axis label in SI form: 7000000 -> `7.0M`, 1500 -> `1.5k`, 0.25 -> `0.25`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (x, unit) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        return if a >= 10.0 || a == 0.0 { format!("{v:.0}") } else { format!("{v:.2}") };
    };
    format!("{x:.1}{unit}")
}

fn chart_err(e: impl std::fmt::Display) -> Error {
    Error::Chart(e.to_string())
}

/// One segment per setting (a segmented range a..b has b - a + 1 segments).
fn x_range(n: usize) -> std::ops::Range<usize> {
    0..n.saturating_sub(1).max(1)
}

/// A chart with one x segment per setting (labelled with its name) and a y axis from 0 to
/// `hi`, mesh drawn: the frame of the Mpps and the stage charts.
type SettingChart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<
        plotters::coord::ranged1d::SegmentedCoord<plotters::coord::types::RangedCoordusize>,
        plotters::coord::types::RangedCoordf64,
    >,
>;

fn setting_chart<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    sums: &[Summary],
    caption: &str,
    y_desc: &str,
    hi: f64,
) -> Result<SettingChart<'a, 'b>> {
    let n = sums.len();
    let mut ch = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range(n).into_segmented(), 0.0..hi)
        .map_err(chart_err)?;
    ch.configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .y_label_formatter(&|v| si(*v))
        .x_labels(n)
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => sums.get(*i).map_or(String::new(), |s| s.setting.clone()),
            _ => String::new(),
        })
        .draw()
        .map_err(chart_err)?;
    Ok(ch)
}

fn mpps_chart(sums: &[Summary]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let hi = sums.iter().map(|s| s.ci95.1.max(s.median)).fold(0.0f64, f64::max) * 1.15 + 1e-9;
        let caption = "Forwarded Mpps by setting (median, 95% CI of the mean)";
        let mut ch = setting_chart(&root, sums, caption, "Mpps", hi)?;
        ch.draw_series(sums.iter().enumerate().map(|(i, s)| {
            let style = if s.best { RED.filled() } else { BLUE.filled() };
            ErrorBar::new_vertical(SegmentValue::CenterOf(i), s.ci95.0, s.median, s.ci95.1, style, 12)
        }))
        .map_err(chart_err)?;
    }
    Ok(svg)
}

fn stage_chart(sums: &[Summary], unit: &str) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        // The forwarding stages only: the synthetic device and waiting are not the
        // forwarder's cost, and are listed apart in the table.
        let order: Vec<&str> = STAGE_ORDER.iter().copied().filter(|s| !APART.contains(s)).collect();
        let total = |s: &Summary| order.iter().filter_map(|st| s.stages.get(*st)).sum::<f64>();
        let hi = sums.iter().map(total).fold(0.0f64, f64::max) * 1.15 + 1e-9;
        let caption = format!("Forwarding cost per packet by stage ({unit}/packet, medians; device apart)");
        let mut ch = setting_chart(&root, sums, &caption, &format!("{unit}/packet"), hi)?;
        for (k, st) in order.iter().enumerate() {
            let color = STAGE_COLORS[k % STAGE_COLORS.len()];
            let bars: Vec<Rectangle<(SegmentValue<usize>, f64)>> = sums
                .iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    let v = *s.stages.get(*st)?;
                    let below: f64 = order[..k].iter().filter_map(|x| s.stages.get(*x)).sum();
                    Some(Rectangle::new(
                        [(SegmentValue::Exact(i), below), (SegmentValue::Exact(i + 1), below + v)],
                        color.filled(),
                    ))
                })
                .collect();
            if bars.is_empty() {
                continue;
            }
            ch.draw_series(bars)
                .map_err(chart_err)?
                .label(*st)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
        }
        ch.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(chart_err)?;
    }
    Ok(svg)
}

/// One rtstat series of a recording: (seconds since its first row, value) where value is
/// the counter itself (`rate` false) or its per-second rate.
fn series(rec: &Recording, name: &str, rate: bool) -> Result<Vec<(f64, f64)>> {
    let mut by_time: BTreeMap<u64, u64> = BTreeMap::new();
    for r in rec.forwarder_counter(name)? {
        *by_time.entry(r.time).or_default() += r.value;
    }
    let t0 = by_time.keys().next().copied().unwrap_or(0);
    let pts: Vec<(f64, u64)> = by_time.into_iter().map(|(t, v)| ((t - t0) as f64 / 1e9, v)).collect();
    if !rate {
        return Ok(pts.into_iter().map(|(t, v)| (t, v as f64)).collect());
    }
    Ok(pts
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| (w[1].0, w[1].1.saturating_sub(w[0].1) as f64 / (w[1].0 - w[0].0)))
        .collect())
}

fn rtstat_chart(title: &str, lines: &[(String, Vec<(f64, f64)>)]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, 300)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let tmax = lines.iter().flat_map(|l| l.1.iter().map(|p| p.0)).fold(0.0f64, f64::max).max(1e-3);
        let vmax = lines.iter().flat_map(|l| l.1.iter().map(|p| p.1)).fold(0.0f64, f64::max) * 1.1 + 1.0;
        let mut ch = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..tmax, 0.0..vmax)
            .map_err(chart_err)?;
        ch.configure_mesh().x_desc("seconds").y_label_formatter(&|v| si(*v)).draw().map_err(chart_err)?;
        for (i, (label, pts)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            ch.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(chart_err)?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
        }
        ch.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(chart_err)?;
    }
    Ok(svg)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The page for sweep directory `dir` (its results.parquet and runs/NNN recordings).
pub fn sweep_page(dir: &Path, rules: &Rules) -> Result<String> {
    use base64::Engine;
    let runs = read_results(dir)?;
    if runs.is_empty() {
        return Err(Error::Results { path: dir.join("results.parquet"), msg: "holds no runs".into() });
    }
    let sums = summarize(&runs);
    let run_dir = |k: usize| dir.join("runs").join(format!("{:03}", k + 1));
    let first = Recording::open(&run_dir(0))?;
    let event = first.meta.sampling.used.clone();
    let unit = collector::events::period_unit(&event);
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope sweep</title>\n<style>body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}pre{background:#f6f6f6;padding:1em;overflow-x:auto}pre.table{font-size:min(12px,0.62vw);width:max-content;max-width:none;overflow-x:visible}.chart{margin:1em 0}img.flame{width:100%;border:1px solid #ddd}</style></head><body>\n",
    );
    html.push_str(&format!(
        "<h1>fwdscope sweep</h1>\n<p>{} runs of {} settings from <code>{}</code>; stages sampled with <b>{}</b>{}.</p>\n",
        runs.len(),
        sums.len(),
        escape(&dir.display().to_string()),
        escape(&event),
        first.meta.sampling.fallback.as_ref().map_or(String::new(), |f| format!(" ({})", escape(f)))
    ));
    // A sweep that ended early says so first (its reason, as the runner wrote it).
    if let Ok(why) = std::fs::read_to_string(dir.join(crate::runner::INCOMPLETE)) {
        let why: String = why.chars().take(2000).collect();
        html.push_str(&format!(
            "<p id=\"incomplete\" style=\"border:2px solid #b00;padding:.5em\"><b>Incomplete sweep:</b> {}; \
             the page shows the {} run(s) that finished.</p>\n",
            escape(why.trim()),
            runs.len()
        ));
    }
    html.push_str(&format!(
        "<h2>Forwarding rate</h2>\n<div class=\"chart\" id=\"mpps\">{}</div>\n",
        mpps_chart(&sums)?
    ));
    html.push_str(&format!(
        "<h2>Stages</h2>\n<div class=\"chart\" id=\"stages\">{}</div>\n",
        stage_chart(&sums, &unit)?
    ));
    let stages: Vec<&str> = STAGE_ORDER.iter().copied().filter(|s| *s != "other" && *s != "idle").collect();
    // The whole table on screen (its verdict column last): sized to fit, not scrolled.
    html.push_str(&format!("<pre class=\"table\">{}</pre>\n", escape(&table_text(&sums, &stages, &unit))));
    // rtstat series: the first run of each setting.
    let mut size = Vec::new();
    let mut hits = Vec::new();
    let mut gc = Vec::new();
    for s in &sums {
        let Some(k) = runs.iter().position(|r| r.setting == s.setting) else { continue };
        let rec = Recording::open(&run_dir(k))?;
        size.push((s.setting.clone(), series(&rec, "rt_entries", false)?));
        hits.push((s.setting.clone(), series(&rec, "rt_in_hit", true)?));
        gc.push((s.setting.clone(), series(&rec, "rt_gc_total", true)?));
    }
    html.push_str("<h2>Route cache (rtstat), first run of each setting</h2>\n");
    for (id, title, lines) in [
        ("rt-size", "cache size (entries)", &size),
        ("rt-hits", "hits per second", &hits),
        ("rt-gc", "GC runs per second", &gc),
    ] {
        html.push_str(&format!("<div class=\"chart\" id=\"{id}\">{}</div>\n", rtstat_chart(title, lines)?));
    }
    html.push_str("<h2>Flame graphs</h2>\n");
    for (k, r) in runs.iter().enumerate() {
        let rec = Recording::open(&run_dir(k))?;
        let mut sym = analyzer::symbolize::Symbolizer::for_recording(&rec)?;
        let p = analyzer::export::recording_profile(&rec, &mut sym, rules)?;
        let title = format!("run {:03}: {} (repeat {})", k + 1, r.setting, r.repeat + 1);
        let svg = p.svg(&title)?;
        html.push_str(&format!(
            "<details{}><summary>{} &mdash; {:.3} Mpps</summary><img class=\"flame\" alt=\"flame graph\" src=\"data:image/svg+xml;base64,{}\"></details>\n",
            if k == 0 { " open" } else { "" },
            escape(&title),
            r.mpps,
            base64::engine::general_purpose::STANDARD.encode(svg)
        ));
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

/// One block of a live comparison, as live.json holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveBlock {
    pub unit: usize,
    pub setting: usize,
    /// Seconds since the first block began (the workers' own stamps).
    pub t: f64,
    pub mpps: Option<f64>,
    pub flagged: bool,
}

fn live_err(dir: &Path, msg: impl Into<String>) -> Error {
    Error::Results { path: dir.join("live.json"), msg: msg.into() }
}

/// The setting labels (baseline first) and blocks of a live comparison's live.json.
pub fn live_blocks(dir: &Path, j: &serde_json::Value) -> Result<(Vec<String>, Vec<LiveBlock>)> {
    let labels: Vec<String> = j["results"]
        .as_array()
        .ok_or_else(|| live_err(dir, "no `results` array"))?
        .iter()
        .map(|r| r["setting"]["label"].as_str().unwrap_or("?").to_string())
        .collect();
    let raw = j["blocks"].as_array().ok_or_else(|| live_err(dir, "no `blocks` array"))?;
    let start = |b: &serde_json::Value| {
        b["workers"].as_array().and_then(|w| w.iter().filter_map(|w| w["start_mono_ns"].as_u64()).min())
    };
    let t0 = raw.iter().filter_map(start).min().unwrap_or(0);
    let mut blocks = Vec::with_capacity(raw.len());
    for (i, b) in raw.iter().enumerate() {
        let field = |k: &str| b[k].as_u64().ok_or_else(|| live_err(dir, format!("block {i}: no `{k}`")));
        let setting = field("setting")? as usize;
        if setting >= labels.len() {
            return Err(live_err(dir, format!("block {i}: setting {setting} of {}", labels.len())));
        }
        blocks.push(LiveBlock {
            unit: field("unit")? as usize,
            setting,
            t: start(b).map_or(0.0, |s| s.saturating_sub(t0) as f64 / 1e9),
            mpps: b["mpps"].as_f64(),
            flagged: b["flags"].as_array().is_some_and(|f| !f.is_empty()),
        });
    }
    Ok((labels, blocks))
}

/// Per setting after the baseline: the per-unit paired differences as percent change of
/// the rate (`exp(d) - 1`, d the difference of mean log rates), as the statistics use them.
pub fn paired_percent(labels: &[String], blocks: &[LiveBlock]) -> Vec<(String, Vec<f64>)> {
    let rates: Vec<crate::paired::BlockRate> = blocks
        .iter()
        .map(|b| crate::paired::BlockRate { unit: b.unit, setting: b.setting, rate: b.mpps, flagged: b.flagged })
        .collect();
    (1..labels.len())
        .map(|s| {
            let (d, _) = crate::paired::unit_differences(&rates, s, 0);
            (labels[s].clone(), d.iter().map(|x| (x.exp() - 1.0) * 100.0).collect())
        })
        .collect()
}

fn blocks_chart(labels: &[String], blocks: &[LiveBlock]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let tmax = blocks.iter().map(|b| b.t).fold(0.0f64, f64::max).max(1e-3) * 1.02;
        let rates: Vec<f64> = blocks.iter().filter_map(|b| b.mpps).collect();
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(0.0f64, f64::max);
        let (lo, hi) = if rates.is_empty() { (0.0, 1.0) } else { (lo * 0.97, hi * 1.03 + 1e-9) };
        let mut ch = ChartBuilder::on(&root)
            .caption("Forwarded Mpps per block, by setting (hollow: left out)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..tmax, lo..hi)
            .map_err(chart_err)?;
        ch.configure_mesh()
            .x_desc("seconds")
            .y_desc("Mpps")
            .y_label_formatter(&|v| si(*v))
            .draw()
            .map_err(chart_err)?;
        for (s, label) in labels.iter().enumerate() {
            let color = Palette99::pick(s).to_rgba();
            let pts: Vec<(f64, f64, bool)> =
                blocks.iter().filter(|b| b.setting == s).filter_map(|b| Some((b.t, b.mpps?, b.flagged))).collect();
            ch.draw_series(pts.iter().map(|&(t, m, flagged)| {
                let style = if flagged { color.stroke_width(1) } else { color.filled() };
                Circle::new((t, m), 3, style)
            }))
            .map_err(chart_err)?
            .label(label.as_str())
            .legend(move |(x, y)| Circle::new((x + 5, y), 4, color.filled()));
        }
        ch.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(chart_err)?;
    }
    Ok(svg)
}

fn diffs_chart(diffs: &[(String, Vec<f64>)]) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, 320)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let all: Vec<f64> = diffs.iter().flat_map(|d| d.1.iter().copied()).filter(|v| v.is_finite()).collect();
        let (lo, hi) = match (all.iter().copied().reduce(f64::min), all.iter().copied().reduce(f64::max)) {
            (Some(a), Some(b)) if b > a => (a, b),
            (Some(a), _) => (a - 1.0, a + 1.0),
            _ => (-1.0, 1.0),
        };
        const BINS: usize = 30;
        let width = (hi - lo) / BINS as f64;
        let counts: Vec<Vec<usize>> = diffs
            .iter()
            .map(|(_, v)| {
                let mut c = vec![0usize; BINS];
                for x in v.iter().filter(|x| x.is_finite()) {
                    c[(((x - lo) / width) as usize).min(BINS - 1)] += 1;
                }
                c
            })
            .collect();
        let top = counts.iter().flatten().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
        let mut ch = ChartBuilder::on(&root)
            .caption("Paired differences per unit against the baseline (% of rate)", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(lo..hi, 0.0..top)
            .map_err(chart_err)?;
        ch.configure_mesh().x_desc("% change of the rate").y_desc("units").draw().map_err(chart_err)?;
        for (k, ((label, _), c)) in diffs.iter().zip(&counts).enumerate() {
            let color = Palette99::pick(k + 1).to_rgba();
            let bars: Vec<Rectangle<(f64, f64)>> = c
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let x0 = lo + i as f64 * width;
                    Rectangle::new([(x0, 0.0), (x0 + width, *n as f64)], color.mix(0.5).filled())
                })
                .collect();
            ch.draw_series(bars)
                .map_err(chart_err)?
                .label(label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.mix(0.5).filled()));
        }
        ch.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(chart_err)?;
    }
    Ok(svg)
}

/// The page for a live comparison's directory (live.json, table.txt).
pub fn live_page(dir: &Path) -> Result<String> {
    let path = dir.join("live.json");
    let text = collector::files::read_to_string(&path, collector::files::Kind::Description)?;
    let j: serde_json::Value = serde_json::from_str(&text).map_err(|e| live_err(dir, e.to_string()))?;
    let (labels, blocks) = live_blocks(dir, &j)?;
    let table =
        collector::files::read_to_string(&dir.join("table.txt"), collector::files::Kind::Text).unwrap_or_default();
    let mut html = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope live comparison</title>\n<style>body{font-family:sans-serif;max-width:960px;margin:2em auto;color:#222}pre.table{background:#f6f6f6;padding:1em;font-size:min(12px,0.62vw);width:max-content;max-width:none}.chart{margin:1em 0}</style></head><body>\n",
    );
    let measured = blocks.iter().filter(|b| b.mpps.is_some()).count();
    let left_out = blocks.iter().filter(|b| b.flagged).count();
    html.push_str(&format!(
        "<h1>fwdscope live comparison</h1>\n<p>{} settings in one forwarder, {} blocks of {} ms ({} ms discarded after each switch), {measured} measured, {left_out} left out; from <code>{}</code>{}.</p>\n",
        labels.len(),
        blocks.len(),
        j["block_ms"].as_f64().unwrap_or(0.0),
        j["discard_ms"].as_f64().unwrap_or(0.0),
        escape(&dir.display().to_string()),
        j["incomplete"].as_str().map_or(String::new(), |w| format!("; <b>incomplete</b>: {}", escape(w)))
    ));
    html.push_str(&format!(
        "<h2>Blocks</h2>\n<div class=\"chart\" id=\"blocks\">{}</div>\n",
        blocks_chart(&labels, &blocks)?
    ));
    let diffs = paired_percent(&labels, &blocks);
    if !diffs.is_empty() {
        html.push_str(&format!(
            "<h2>Paired differences</h2>\n<div class=\"chart\" id=\"diffs\">{}</div>\n",
            diffs_chart(&diffs)?
        ));
    }
    html.push_str(&format!("<pre class=\"table\">{}</pre>\n</body></html>\n", escape(&table)));
    Ok(html)
}

#[cfg(test)]
mod tests {
    #[test]
    fn axis_labels_in_si() {
        assert_eq!(super::si(7_000_000.0), "7.0M");
        assert_eq!(super::si(1500.0), "1.5k");
        assert_eq!(super::si(250.0), "250");
        assert_eq!(super::si(0.25), "0.25");
        assert_eq!(super::si(0.0), "0");
        assert_eq!(super::si(2.5e9), "2.5G");
    }

    /// Two units of ABBA blocks: A at 10 Mpps throughout, B at 9.8 then 9.9 (one B block of
    /// the second unit left out, so that unit drops): differences -2% and nothing else.
    #[test]
    fn live_page_shows_blocks_and_the_paired_differences() {
        let dir = std::env::temp_dir().join(format!("fwdscope-live-page-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let block = |unit: u64, setting: u64, start: u64, mpps: f64, flagged: bool| {
            serde_json::json!({"unit": unit, "setting": setting, "mpps": mpps,
                "flags": if flagged { vec!["waited to run"] } else { vec![] },
                "workers": [{"start_mono_ns": start}]})
        };
        let j = serde_json::json!({
            "block_ms": 50.0, "discard_ms": 10.0,
            "results": [{"setting": {"label": "prefetch 0"}}, {"setting": {"label": "prefetch 2"}}],
            "blocks": [
                block(0, 0, 1_000_000_000, 10.0, false), block(0, 1, 1_050_000_000, 9.8, false),
                block(0, 1, 1_100_000_000, 9.8, false), block(0, 0, 1_150_000_000, 10.0, false),
                block(1, 0, 1_200_000_000, 10.0, false), block(1, 1, 1_250_000_000, 9.9, true),
                block(1, 1, 1_300_000_000, 9.9, false), block(1, 0, 1_350_000_000, 10.0, false),
            ]
        });
        std::fs::write(dir.join("live.json"), j.to_string()).unwrap();
        std::fs::write(dir.join("table.txt"), "setting  ratio  verdict\nprefetch 2  0.980  significant\n").unwrap();
        let (labels, blocks) = super::live_blocks(&dir, &j).unwrap();
        assert_eq!(labels, ["prefetch 0", "prefetch 2"]);
        assert!((blocks[3].t - 0.15).abs() < 1e-9);
        let d = super::paired_percent(&labels, &blocks);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].1.len(), 1, "the unit with a left-out block drops: {:?}", d);
        assert!((d[0].1[0] + 2.0).abs() < 1e-9, "{:?}", d);
        let page = super::live_page(&dir).unwrap();
        for want in ["id=\"blocks\"", "id=\"diffs\"", "prefetch 2", "significant", "1 left out"] {
            assert!(page.contains(want), "{want} missing");
        }
        // Eight blocks: eight points (one hollow), plus the legend's two.
        assert_eq!(page.matches("<circle").count(), 10);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
