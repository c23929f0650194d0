//! `lab bench --html`: one self-contained page for a lab benchmark: a stacked horizontal
//! bar per forwarder (nanoseconds of CPU per forwarded packet, split by stage), its legend,
//! the benchmark's table beside it, and where the figures come from (events, clocks, rule
//! files, runs counted and left out). The page is built from a [`BenchPage`] the lab fills
//! in; [`stage_ns`] is the bar arithmetic (a stage split's shares times the CPU per packet).
//!
//! The bars are plain SVG rectangles written here rather than through plotters: each one
//! carries its forwarder, stage and nanoseconds as `data-` attributes (and a tooltip), so the
//! page can be read back and checked against the text table. Style, legend and stage
//! colours are the other pages' (`analyzer::export::page`, `analyzer::export::stage_colour`).

use analyzer::export::page::{escape, legend, si, Key, STYLE};
use analyzer::rules::{stage_rank, APART};

/// One forwarder's bar.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchBar {
    /// The forwarder's name (`--forwarders` value) and its row label.
    pub name: String,
    pub label: String,
    /// Stages and nanoseconds per forwarded packet, in drawing order ([`stage_ns`]); empty
    /// when there is no figure.
    pub segments: Vec<(String, f64)>,
    /// Why there is no bar (no clean run, no CPU figure, no stage split), when there is none.
    pub missing: Option<String>,
}

impl BenchBar {
    /// The bar's length: its segments' sum.
    pub fn total(&self) -> f64 {
        self.segments.iter().map(|s| s.1).sum()
    }
}

/// Everything on the page (default: all empty).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BenchPage {
    /// The benchmark's first report line (what ran, how long, where).
    pub heading: String,
    pub bars: Vec<BenchBar>,
    /// The table: header cells, then one row of cells per forwarder.
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Provenance lines: events, clocks, rule files, runs counted and left out.
    pub provenance: Vec<String>,
    /// The report's notes (skipped forwarders with their reasons, ratios, CPU notes).
    pub notes: Vec<String>,
}

/// A stage's fill colour: the other pages' (`analyzer::export::stage_colour`), and for a
/// stage that has none there (which all share one grey), one of its own, so that no two
/// legend keys look alike.
fn colour(stage: &str) -> &'static str {
    const GREY: &str = "#c7c7c7";
    let c = analyzer::export::stage_colour(stage);
    if c != GREY || stage == analyzer::rules::OTHER {
        return c;
    }
    const MORE: [&str; 6] = ["#ff9da6", "#17becf", "#8c564b", "#bcbd22", "#393b79", "#e377c2"];
    let h = stage.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(b as usize));
    MORE[h % MORE.len()]
}

/// The bar arithmetic: a stage split's samples per stage (`stages`) turned into nanoseconds
/// per packet, given the CPU per packet `ns`. Stages apart from forwarding work (the idle
/// loop, the machine's own traffic and the sender's program, the synthetic device, start-up:
/// [`APART`]) are left out and the rest share `ns` by their samples, in the stage tables'
/// order; stages without samples are dropped. Empty when nothing is left to share or `ns`
/// is not a positive number.
pub fn stage_ns(ns: f64, stages: &[(String, u64)]) -> Vec<(String, f64)> {
    let mut work: Vec<(&str, u64)> =
        stages.iter().filter(|(s, n)| *n > 0 && !APART.contains(&s.as_str())).map(|(s, n)| (s.as_str(), *n)).collect();
    let total: u64 = work.iter().map(|w| w.1).sum();
    if total == 0 || !(ns.is_finite() && ns > 0.0) {
        return Vec::new();
    }
    work.sort_by(|a, b| stage_rank(a.0).cmp(&stage_rank(b.0)).then(a.0.cmp(b.0)));
    work.iter().map(|(s, n)| (s.to_string(), ns * *n as f64 / total as f64)).collect()
}

const BAR_W: f64 = 360.0;
const LABEL_W: f64 = 124.0;
const ROW_H: f64 = 34.0;
const BAR_H: f64 = 22.0;

/// A round axis step for a maximum of `hi`: 1, 2 or 5 times a power of ten, 4 to 10 ticks.
fn tick_step(hi: f64) -> f64 {
    let raw = hi / 5.0;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * p).find(|s| hi / s <= 6.0).unwrap_or(10.0 * p)
}

/// The chart: one row per bar, the x axis in ns/packet.
fn chart(bars: &[BenchBar]) -> String {
    let hi = bars.iter().map(BenchBar::total).fold(0.0f64, f64::max);
    let step = if hi > 0.0 { tick_step(hi) } else { 1.0 };
    let axis_max = if hi > 0.0 { (hi / step).ceil() * step } else { 1.0 };
    let scale = BAR_W / axis_max;
    let top = 10.0;
    let h = top + ROW_H * bars.len() as f64 + 46.0;
    let w = LABEL_W + BAR_W + 30.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" \
         font-family=\"sans-serif\" data-ns-per-px=\"{:.6}\">\n",
        1.0 / scale
    );
    let axis_y = top + ROW_H * bars.len() as f64;
    // Grid lines and ticks.
    let mut t = 0.0;
    while t <= axis_max + step / 2.0 {
        let x = LABEL_W + t * scale;
        s.push_str(&format!(
            "<line x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{axis_y:.1}\" stroke=\"#e4e4e4\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n",
            axis_y + 16.0,
            si(t)
        ));
        t += step;
    }
    s.push_str(&format!(
        "<line x1=\"{LABEL_W}\" y1=\"{axis_y:.1}\" x2=\"{:.1}\" y2=\"{axis_y:.1}\" stroke=\"#444\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"middle\" fill=\"#222\">ns of CPU per forwarded packet, by stage</text>\n",
        LABEL_W + BAR_W,
        LABEL_W + BAR_W / 2.0,
        axis_y + 36.0
    ));
    for (i, b) in bars.iter().enumerate() {
        let y = top + ROW_H * i as f64 + (ROW_H - BAR_H) / 2.0;
        s.push_str(&format!(
            "<g class=\"bar\" data-forwarder=\"{}\" data-ns=\"{:.3}\">\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"13\" text-anchor=\"end\" fill=\"#222\">{}</text>\n",
            escape(&b.name),
            b.total(),
            LABEL_W - 8.0,
            y + BAR_H / 2.0 + 4.5,
            escape(&b.name)
        ));
        let mut x = LABEL_W;
        for (stage, ns) in &b.segments {
            let width = ns * scale;
            s.push_str(&format!(
                "<rect class=\"seg\" data-stage=\"{}\" data-ns=\"{ns:.3}\" x=\"{x:.2}\" y=\"{y:.1}\" width=\"{width:.2}\" \
                 height=\"{BAR_H}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"0.5\"><title>{}: {}: {ns:.0} ns/packet</title></rect>\n",
                escape(stage),
                colour(stage),
                escape(&b.name),
                escape(stage),
            ));
            x += width;
        }
        if b.segments.is_empty() {
            let why = b.missing.as_deref().unwrap_or("no figure");
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"#777\">{}</text>\n",
                LABEL_W + 6.0,
                y + BAR_H / 2.0 + 4.0,
                escape(why)
            ));
        } else {
            s.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" fill=\"#222\">{:.0}</text>\n",
                x + 5.0,
                y + BAR_H / 2.0 + 4.0,
                b.total()
            ));
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>");
    s
}

/// The page.
pub fn bench_page(p: &BenchPage) -> String {
    let mut stages: Vec<&str> = p.bars.iter().flat_map(|b| b.segments.iter().map(|s| s.0.as_str())).collect();
    stages.sort_by(|a, b| stage_rank(a).cmp(&stage_rank(b)).then(a.cmp(b)));
    stages.dedup();
    let keys: Vec<(String, String, Key)> =
        stages.iter().map(|s| (s.to_string(), colour(s).to_string(), Key::Box)).collect();
    // The chart's column is as wide as the chart (its legend wraps under it), the table
    // beside it on a page 1150 px wide or more.
    let chart_w = LABEL_W + BAR_W + 30.0;
    let mut h = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope lab bench</title>\n<style>{STYLE}\
         body{{max-width:1500px}}.side{{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start}}\
         @media (min-width:1150px){{.side{{flex-wrap:nowrap}}}}.side .chart svg{{max-width:none}}\
         .side .chart{{max-width:{chart_w:.0}px}}\
         .side table.data td.l,.side table.data th.l{{white-space:nowrap;overflow-wrap:normal}}\
         .side .chart{{flex:0 0 auto;margin-top:0}}.side table.data{{flex:0 1 auto;margin-top:0;font-size:13px}}.side table.data th,.side table.data td{{padding:.2em .45em}}.legend{{margin-left:{LABEL_W}px}}</style></head><body>\n\
         <h1>fwdscope lab bench</h1>\n<p class=\"src\">{}</p>\n",
        escape(&p.heading)
    );
    h.push_str("<div class=\"side\">\n<div class=\"chart\" id=\"bars\">");
    h.push_str(&chart(&p.bars));
    if !keys.is_empty() {
        h.push_str(&legend(&keys));
    }
    h.push_str("</div>\n<table class=\"data\" id=\"table\"><tr>");
    for (i, c) in p.header.iter().enumerate() {
        h.push_str(&format!("<th{}>{}</th>", if i == 0 { " class=\"l\"" } else { "" }, escape(c)));
    }
    h.push_str("</tr>\n");
    for r in &p.rows {
        h.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            h.push_str(&format!("<td{}>{}</td>", if i == 0 { " class=\"l\"" } else { "" }, escape(c)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n</div>\n<h2>Where the figures come from</h2>\n<ul id=\"provenance\">\n");
    for l in &p.provenance {
        h.push_str(&format!("<li>{}</li>\n", escape(l)));
    }
    h.push_str("</ul>\n");
    if !p.notes.is_empty() {
        h.push_str("<h2>Notes</h2>\n<ul id=\"notes\">\n");
        for l in &p.notes {
            h.push_str(&format!("<li>{}</li>\n", escape(l)));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(s, n)| (s.to_string(), *n)).collect()
    }

    /// Forwarding stages share the CPU per packet by their samples; what is apart (idle,
    /// local) does not; the order is the stage tables'.
    #[test]
    fn stage_shares_times_cpu_per_packet() {
        let s = stage_ns(400.0, &st(&[("idle", 900), ("driver", 30), ("lookup", 10), ("local", 50), ("ip", 0)]));
        assert_eq!(s, vec![("lookup".to_string(), 100.0), ("driver".to_string(), 300.0)]);
        assert!(stage_ns(400.0, &st(&[("idle", 5)])).is_empty());
        assert!(stage_ns(f64::NAN, &st(&[("lookup", 5)])).is_empty());
        assert!(stage_ns(-1.0, &st(&[("lookup", 5)])).is_empty());
        // Shares of three add up to the whole, whatever the rounding of each.
        let s = stage_ns(100.0, &st(&[("lookup", 1), ("driver", 1), ("other", 1)]));
        assert!((s.iter().map(|x| x.1).sum::<f64>() - 100.0).abs() < 1e-9);
    }

    /// Stages without a colour of their own (netfilter) are told apart from `other`.
    #[test]
    fn every_stage_has_a_colour_of_its_own() {
        assert_eq!(colour("lookup"), analyzer::export::stage_colour("lookup"));
        assert_eq!(colour("other"), analyzer::export::stage_colour("other"));
        assert_ne!(colour("netfilter"), colour("other"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(980.0), 200.0);
        assert_eq!(tick_step(100.0), 20.0);
        assert_eq!(tick_step(3.0), 0.5);
    }

    /// One bar group per forwarder, its segments' data adding up to the group's total and
    /// their widths proportional to it; a missing figure is said in words; text is escaped.
    #[test]
    fn the_page_has_a_bar_per_forwarder_and_escapes_text() {
        let page = BenchPage {
            heading: "lab bench <test>".into(),
            bars: vec![
                BenchBar {
                    name: "kernel".into(),
                    label: "kernel".into(),
                    segments: vec![("lookup".into(), 120.0), ("driver".into(), 80.0)],
                    missing: None,
                },
                BenchBar {
                    name: "xdp".into(),
                    label: "xdp".into(),
                    segments: vec![],
                    missing: Some("no clean run".into()),
                },
            ],
            header: vec!["forwarder".into(), "pps".into()],
            rows: vec![vec!["kernel".into(), "1000".into()]],
            provenance: vec!["events: cpu-clock".into()],
            notes: vec!["skipped dpdk-afxdp: no <libxdp>".into()],
        };
        let html = bench_page(&page);
        assert_eq!(html.matches("<g class=\"bar\"").count(), 2);
        assert!(html.contains("data-forwarder=\"kernel\" data-ns=\"200.000\""), "{html}");
        assert!(html.contains("data-stage=\"lookup\" data-ns=\"120.000\""));
        assert!(html.contains(">no clean run<") && html.contains("no &lt;libxdp&gt;") && !html.contains("<test>"));
        assert!(html.contains("<span class=\"key\">") && html.contains(">lookup</span>"));
    }
}
