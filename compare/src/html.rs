//! `report --html`: one self-contained page for a sweep directory (`fwdscope sweep -o DIR`):
//! Mpps against the swept setting with 95% confidence intervals, stacked stage bars per
//! setting, the summary table, every run (left-out runs greyed with their reason), rtstat
//! time series (route-cache size, hits and GC per second) of each setting's first counted
//! run, and a flame graph per run; a setting without a counted run is said to have none,
//! never drawn at zero. For a live comparison's directory (`sweep --live -o DIR`): the
//! results table, every block's rate over time coloured by setting (blocks left out drawn
//! hollow), the distribution of the paired per-unit differences against the baseline (bars
//! side by side), and the printed table's notes. Charts are SVG drawn with plotters, their
//! legends HTML under them; flame graphs are inferno's SVG as data URIs (each keeps its own
//! script). The style, legend and escaping are `analyzer::export::page`'s, shared with
//! `recording_page` and the lab's bench page.

use crate::results::{read_results, summarize_with, table_text, RunResult, Summary};
use crate::{Error, Result};
pub use analyzer::export::page::si;
pub(crate) use analyzer::export::page::{escape, legend, Key, STYLE};
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
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 14))
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

/// "no counted run" at the place of each setting without one, halfway up the axis.
fn no_run_texts(
    sums: &[Summary],
    hi: f64,
) -> impl Iterator<Item = Text<'static, (SegmentValue<usize>, f64), &'static str>> + '_ {
    sums.iter().enumerate().filter(|(_, s)| s.runs == 0).map(move |(i, _)| {
        Text::new(
            "no counted run",
            (SegmentValue::CenterOf(i), hi / 2.0),
            ("sans-serif", 14).into_font().color(&NONE_GREY).pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Center,
            )),
        )
    })
}

/// A legend's entries.
pub(crate) type Keys = Vec<(String, String, Key)>;

const KEPT: RGBColor = RGBColor(230, 120, 0);
const NONE_GREY: RGBColor = RGBColor(120, 120, 120);

fn mpps_chart(sums: &[Summary]) -> Result<(String, Keys)> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        // Settings without a counted run have no figure: no point, words instead.
        let counted = |s: &&Summary| s.runs > 0;
        let hi = sums.iter().filter(counted).map(|s| s.ci95.1.max(s.median)).fold(0.0f64, f64::max) * 1.15;
        let hi = if hi > 0.0 && hi.is_finite() { hi } else { 1.0 };
        let caption = "Forwarded Mpps by setting (median, 95% CI of the mean)";
        let mut ch = setting_chart(&root, sums, caption, "Mpps", hi)?;
        ch.draw_series(sums.iter().enumerate().filter(|(_, s)| counted(s)).map(|(i, s)| {
            let style = if s.best {
                RED.filled()
            } else if s.kept_contended > 0 {
                KEPT.filled()
            } else {
                BLUE.filled()
            };
            ErrorBar::new_vertical(SegmentValue::CenterOf(i), s.ci95.0, s.median, s.ci95.1, style, 12)
        }))
        .map_err(chart_err)?;
        ch.draw_series(no_run_texts(sums, hi)).map_err(chart_err)?;
    }
    // A key for each colour drawn.
    let mut keys = vec![("best setting".to_string(), css(&RED), Key::Box)];
    if sums.iter().any(|s| s.runs > 0 && !s.best && s.kept_contended == 0) {
        keys.push(("other settings".to_string(), css(&BLUE), Key::Box));
    }
    if sums.iter().any(|s| s.kept_contended > 0 && !s.best) {
        keys.push(("counts runs flagged for contention".to_string(), css(&KEPT), Key::Box));
    }
    Ok((svg, keys))
}

/// Stacked stage bars per setting, or none when no setting has a stage figure.
fn stage_chart(sums: &[Summary], unit: &str) -> Result<Option<(String, Keys)>> {
    // The forwarding stages only: the synthetic device and waiting are not the
    // forwarder's cost, and are listed apart in the table.
    let order: Vec<&str> = STAGE_ORDER.iter().copied().filter(|s| !APART.contains(s)).collect();
    let total = |s: &Summary| order.iter().filter_map(|st| s.stages.get(*st)).sum::<f64>();
    let hi = sums.iter().map(total).fold(0.0f64, f64::max) * 1.15;
    if !(hi > 0.0 && hi.is_finite()) {
        return Ok(None);
    }
    let mut svg = String::new();
    let mut keys = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
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
            ch.draw_series(bars).map_err(chart_err)?;
            keys.push((st.to_string(), css(&color), Key::Box));
        }
        ch.draw_series(no_run_texts(sums, hi)).map_err(chart_err)?;
    }
    Ok(Some((svg, keys)))
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

pub(crate) fn rtstat_chart(title: &str, lines: &[(String, Vec<(f64, f64)>)]) -> Result<(String, Keys)> {
    let mut svg = String::new();
    let mut keys = Vec::new();
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
        ch.configure_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .x_desc("seconds")
            .y_label_formatter(&|v| si(*v))
            .draw()
            .map_err(chart_err)?;
        for (i, (label, pts)) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            ch.draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2))).map_err(chart_err)?;
            keys.push((label.clone(), css(&color), Key::Line));
        }
    }
    Ok((svg, keys))
}

/// A CSS colour of a plotters colour.
pub(crate) fn css(c: &impl Color) -> String {
    let (r, g, b) = c.rgb();
    format!("rgb({r},{g},{b})")
}

/// A chart and its legend, in one `div.chart` with `id`.
pub(crate) fn chart_div(id: &str, svg: &str, keys: &[(String, String, Key)]) -> String {
    format!(
        "<div class=\"chart\" id=\"{id}\">{svg}{}</div>\n",
        if keys.is_empty() { String::new() } else { legend(keys) }
    )
}

/// How the sweep page is made.
#[derive(Debug, Clone, Default)]
pub struct PageOptions {
    /// Count the runs flagged for contention in the figures, marked (default false: they
    /// are left out, listed greyed with their reason).
    pub keep_contended: bool,
}

/// The page for sweep directory `dir` (its results.parquet and runs/NNN recordings).
pub fn sweep_page(dir: &Path, rules: &Rules) -> Result<String> {
    sweep_page_with(dir, rules, &PageOptions::default())
}

/// [`sweep_page`] with options.
pub fn sweep_page_with(dir: &Path, rules: &Rules, o: &PageOptions) -> Result<String> {
    let runs = read_results(dir)?;
    if runs.is_empty() {
        return no_run_page(dir);
    }
    let sums = summarize_with(&runs, o.keep_contended);
    let first = Recording::open(&run_dir(dir, 0))?;
    let event = first.meta.sampling.used.clone();
    let unit = collector::events::period_unit(&event);
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope sweep</title>\n<style>{STYLE}</style></head><body>\n"
    );
    html.push_str(&sweep_intro(dir, &runs, &sums, &first, o));
    if sums.iter().any(|s| s.runs > 0) {
        html.push_str(&rate_and_stage_charts(&sums, &unit)?);
    }
    let stages: Vec<&str> = STAGE_ORDER.iter().copied().filter(|s| *s != "other" && *s != "idle").collect();
    html.push_str(&summary_table(&sums, &stages, &unit));
    html.push_str(&runs_table(&runs, o.keep_contended));
    html.push_str(&rtstat_section(dir, &runs, &sums)?);
    html.push_str("<h2>Flame graphs</h2>\n");
    for (k, r) in runs.iter().enumerate() {
        html.push_str(&flame_graph(dir, k, r, rules, o.keep_contended));
    }
    html.push_str("</body></html>\n");
    Ok(html)
}

/// Run `k`'s recording in sweep directory `dir` (`runs/NNN`, from 001).
fn run_dir(dir: &Path, k: usize) -> std::path::PathBuf {
    dir.join("runs").join(format!("{:03}", k + 1))
}

/// The page of a sweep stopped before its first run finished: a page that says so, not an
/// error (an error when the sweep did not say it ended early).
fn no_run_page(dir: &Path) -> Result<String> {
    let why = collector::files::read_to_string(&dir.join(crate::runner::INCOMPLETE), collector::files::Kind::Text);
    match why {
        Ok(why) => Ok(format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope sweep</title>\n<style>{STYLE}</style>\
             </head><body>\n<h1>fwdscope sweep</h1>\n<p id=\"incomplete\" style=\"border:2px solid #b00;padding:.5em\">\
             <b>Incomplete sweep:</b> {}; no run finished, so there is nothing to draw.</p>\n</body></html>\n",
            escape(why.chars().take(2000).collect::<String>().trim())
        )),
        Err(_) => Err(Error::Results { path: dir.join("results.parquet"), msg: "holds no runs".into() }),
    }
}

/// The page's heading and the paragraphs under it: what was swept and sampled, whether the
/// sweep ended early, and what contention left out (or what it counted anyway).
fn sweep_intro(dir: &Path, runs: &[RunResult], sums: &[Summary], first: &Recording, o: &PageOptions) -> String {
    let mut html = String::new();
    let left_out = runs.iter().filter(|r| !r.contention.is_empty()).count();
    html.push_str(&format!(
        "<h1>fwdscope sweep</h1>\n<p>{} runs of {} settings from <code>{}</code>; stages sampled with <b>{}</b>{}; {} run(s) {}.</p>\n",
        runs.len(),
        sums.len(),
        escape(&dir.display().to_string()),
        escape(&first.meta.sampling.used),
        first.meta.sampling.fallback.as_ref().map_or(String::new(), |f| format!(" ({})", escape(f))),
        left_out,
        if o.keep_contended {
            "flagged for contention, counted anyway (--keep-contended)"
        } else {
            "left out for contention"
        }
    ));
    // A sweep that ended early says so first (its reason, as the runner wrote it).
    if let Ok(why) =
        collector::files::read_to_string(&dir.join(crate::runner::INCOMPLETE), collector::files::Kind::Text)
    {
        let why: String = why.chars().take(2000).collect();
        html.push_str(&format!(
            "<p id=\"incomplete\" style=\"border:2px solid #b00;padding:.5em\"><b>Incomplete sweep:</b> {}; \
             the page shows the {} run(s) that finished.</p>\n",
            escape(why.trim()),
            runs.len()
        ));
    }
    html.push_str(&contention_note(runs.len(), sums));
    html
}

/// What contention did to the figures, when it did anything: no run counted at all, or
/// flagged runs counted anyway (`--keep-contended`); `runs`: how many runs there are.
fn contention_note(runs: usize, sums: &[Summary]) -> String {
    let counted = sums.iter().any(|s| s.runs > 0);
    let kept: usize = sums.iter().map(|s| s.kept_contended).sum();
    if !counted {
        format!(
            "<p class=\"missing\" id=\"no-counted-run\"><b>No counted run:</b> every one of the {} runs was left out \
             for contention (a worker waited to run, or the host stole time, over 5% of the run), so this sweep gives \
             no rate, no stage cost and no verdict. The runs are listed below, greyed, with their reasons. \
             <code>fwdscope report -i DIR --html OUT --keep-contended</code> shows their figures anyway, marked; \
             a quieter machine gives figures to trust.</p>\n",
            runs
        )
    } else if kept > 0 {
        format!(
            "<p class=\"missing\" id=\"kept-contended\"><b>Contended runs counted:</b> {kept} run(s) flagged for \
             contention are counted in these figures (<code>--keep-contended</code>): marked <code>!</code> in the \
             summary, drawn in orange on the rate chart (the best setting stays red). A busy machine slows runs \
             unevenly: read them as rough.</p>\n"
        )
    } else {
        String::new()
    }
}

/// The rate chart and the stage chart (or why there is none) of the counted runs.
fn rate_and_stage_charts(sums: &[Summary], unit: &str) -> Result<String> {
    let mut html = String::new();
    let (svg, keys) = mpps_chart(sums)?;
    html.push_str(&format!("<h2>Forwarding rate</h2>\n{}", chart_div("mpps", &svg, &keys)));
    match stage_chart(sums, unit)? {
        Some((svg, keys)) => html.push_str(&format!("<h2>Stages</h2>\n{}", chart_div("stages", &svg, &keys))),
        None => html.push_str("<h2>Stages</h2>\n<p class=\"missing\">No stage figures: the counted runs have no samples in the forwarding stages.</p>\n"),
    }
    Ok(html)
}

/// The route cache's rtstat series (size, hits and GC runs per second) of the first run of
/// each setting (a counted one when there is one), a chart each.
fn rtstat_section(dir: &Path, runs: &[RunResult], sums: &[Summary]) -> Result<String> {
    let mut size = Vec::new();
    let mut hits = Vec::new();
    let mut gc = Vec::new();
    for s in sums {
        let of = |r: &&RunResult| r.setting == s.setting;
        let Some(k) =
            runs.iter().position(|r| of(&r) && r.contention.is_empty()).or_else(|| runs.iter().position(|r| of(&r)))
        else {
            continue;
        };
        let rec = Recording::open(&run_dir(dir, k))?;
        let label =
            if runs[k].contention.is_empty() { s.setting.clone() } else { format!("{} (run left out)", s.setting) };
        size.push((label.clone(), series(&rec, "rt_entries", false)?));
        hits.push((label.clone(), series(&rec, "rt_in_hit", true)?));
        gc.push((label, series(&rec, "rt_gc_total", true)?));
    }
    let mut html = String::from("<h2>Route cache (rtstat), first run of each setting</h2>\n");
    for (id, title, lines) in [
        ("rt-size", "cache size (entries)", &size),
        ("rt-hits", "hits per second", &hits),
        ("rt-gc", "GC runs per second", &gc),
    ] {
        let (svg, keys) = rtstat_chart(title, lines)?;
        html.push_str(&chart_div(id, &svg, &keys));
    }
    Ok(html)
}

/// Run `k`'s flame graph, folded under a header with its rate (or why it was left out); a
/// recording that cannot be drawn (a part unreadable, no stacks left) is said in its place,
/// so that the rest of the page stands.
fn flame_graph(dir: &Path, k: usize, r: &RunResult, rules: &Rules, keep_contended: bool) -> String {
    use base64::Engine;
    let title = format!("run {:03}: {} (repeat {})", k + 1, r.setting, r.repeat + 1);
    let drawn = (|| -> Result<Vec<u8>> {
        let rec = Recording::open(&run_dir(dir, k))?;
        let mut sym = analyzer::symbolize::Symbolizer::for_recording(&rec)?;
        let p = analyzer::export::recording_profile(&rec, &mut sym, rules)?;
        Ok(p.svg(&title)?)
    })();
    let svg = match drawn {
        Ok(svg) => svg,
        Err(e) => {
            return format!(
                "<details><summary class=\"out\">{} &mdash; no flame graph: {}</summary></details>\n",
                escape(&title),
                escape(&e.to_string())
            );
        }
    };
    // A left-out run's rate is no result: its header says why, greyed.
    let head = if r.contention.is_empty() {
        format!("<summary>{} &mdash; {:.3} Mpps</summary>", escape(&title), r.mpps)
    } else {
        format!(
            "<summary class=\"out\">{} &mdash; left out: {}{}</summary>",
            escape(&title),
            escape(&r.contention.join("; ")),
            if keep_contended { format!(" (counted anyway: {:.3} Mpps)", r.mpps) } else { String::new() }
        )
    };
    format!(
        "<details{}>{head}<img class=\"flame\" alt=\"flame graph\" src=\"data:image/svg+xml;base64,{}\"></details>\n",
        if k == 0 { " open" } else { "" },
        base64::engine::general_purpose::STANDARD.encode(svg)
    )
}

/// The summary as an HTML table (the rows `table_text` prints): per setting its counted
/// runs, median rate and interval, or that it has no counted run; the stage costs; the
/// verdict against the best.
fn summary_table(sums: &[Summary], stages: &[&str], unit: &str) -> String {
    let shown: Vec<&str> =
        stages.iter().copied().filter(|st| sums.iter().any(|s| s.stages.contains_key(*st))).collect();
    let mut out = String::from(
        "<h2>Summary</h2>\n<table class=\"data\" id=\"summary\"><tr><th class=\"l\">setting</th><th>runs</th><th>flagged for contention</th><th>Mpps (median)</th><th>95% CI of the mean</th>",
    );
    for st in &shown {
        out.push_str(&format!("<th>{} {}/pkt</th>", escape(st), escape(unit)));
    }
    out.push_str("<th class=\"l\">vs best (Welch p)</th></tr>\n");
    for s in sums {
        let mark = match (s.best, s.kept_contended > 0) {
            (true, true) => "*! ",
            (true, false) => "* ",
            (false, true) => "! ",
            (false, false) => "",
        };
        let (mpps, ci) = if s.runs == 0 {
            ("no counted run".to_string(), "&mdash;".to_string())
        } else {
            (format!("{:.3}", s.median), format!("[{:.3}, {:.3}]", s.ci95.0, s.ci95.1))
        };
        out.push_str(&format!(
            "<tr{}><td class=\"l s\">{mark}{}</td><td>{}</td><td>{}</td><td>{mpps}</td><td>{ci}</td>",
            if s.runs == 0 { " class=\"out\"" } else { "" },
            escape(&s.setting),
            s.runs,
            s.left_out
        ));
        for st in &shown {
            out.push_str(&s.stages.get(*st).map_or("<td>&mdash;</td>".to_string(), |v| format!("<td>{v:.1}</td>")));
        }
        let verdict = match &s.vs_best {
            None if s.best => "best".to_string(),
            None => format!("undecided: no run counts ({} left out for contention)", s.left_out),
            Some(crate::results::Comparison { undecided: Some(why), .. }) => why.clone(),
            Some(c) => format!(
                "{:+.1}% (p={:.3}, {})",
                (c.ratio - 1.0) * 100.0,
                c.p,
                if c.significant { "significant" } else { "not significant" }
            ),
        };
        out.push_str(&format!("<td class=\"l\">{}</td></tr>\n", escape(&verdict)));
    }
    out.push_str("</table>\n");
    let kept: usize = sums.iter().map(|s| s.kept_contended).sum();
    let left: usize = sums.iter().map(|s| s.left_out).sum();
    if kept > 0 {
        out.push_str(&format!(
            "<p class=\"src\">! {kept} run(s) flagged for contention are counted in these figures (--keep-contended).</p>\n"
        ));
    } else if left > 0 {
        out.push_str(&format!(
            "<p class=\"src\">{left} run(s) left out for contention (a worker waited to run over 5% of the run, or the host \
             stole over 5%); <code>--keep-contended</code> counts them, marked.</p>\n"
        ));
    }
    if sums.iter().any(|s| !s.clocks.is_empty()) {
        out.push_str(&format!(
            "<details><summary>The table as printed, with the stage clocks (ns/packet, TSC, medians)</summary><pre class=\"table\">{}</pre></details>\n",
            escape(&table_text(sums, stages, unit))
        ));
    }
    out
}

/// Every run: its setting and rate, or, greyed, why it was left out.
fn runs_table(runs: &[RunResult], keep_contended: bool) -> String {
    let mut out = String::from(
        "<h2>Runs</h2>\n<table class=\"data\" id=\"runs\"><tr><th>run</th><th class=\"l\">setting</th><th>repeat</th><th>Mpps</th><th class=\"l\">counted</th></tr>\n",
    );
    for (k, r) in runs.iter().enumerate() {
        let (class, mpps, note) = if r.contention.is_empty() {
            ("", format!("{:.3}", r.mpps), "yes".to_string())
        } else if keep_contended {
            (
                "",
                format!("{:.3} !", r.mpps),
                format!("counted anyway (--keep-contended); flagged: {}", r.contention.join("; ")),
            )
        } else {
            (" class=\"out\"", "&mdash;".to_string(), format!("left out: {}", r.contention.join("; ")))
        };
        out.push_str(&format!(
            "<tr{class}><td>{:03}</td><td class=\"l s\">{}</td><td>{}</td><td>{mpps}</td><td class=\"l\">{}</td></tr>\n",
            k + 1,
            escape(&r.setting),
            r.repeat + 1,
            escape(&note)
        ));
    }
    out.push_str("</table>\n");
    out
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

fn blocks_chart(labels: &[String], blocks: &[LiveBlock]) -> Result<(String, Keys)> {
    let mut svg = String::new();
    let mut keys = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(chart_err)?;
        let tmax = blocks.iter().map(|b| b.t).fold(0.0f64, f64::max).max(1e-3) * 1.02;
        let rates: Vec<f64> = blocks.iter().filter_map(|b| b.mpps).filter(|m| m.is_finite()).collect();
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
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .x_desc("seconds")
            .y_desc("Mpps")
            .y_label_formatter(&|v| si(*v))
            .draw()
            .map_err(chart_err)?;
        for (s, label) in labels.iter().enumerate() {
            let color = Palette99::pick(s).to_rgba();
            let pts: Vec<(f64, f64, bool)> = blocks
                .iter()
                .filter(|b| b.setting == s)
                .filter_map(|b| Some((b.t, b.mpps.filter(|m| m.is_finite())?, b.flagged)))
                .collect();
            ch.draw_series(pts.iter().map(|&(t, m, flagged)| {
                let style = if flagged { color.stroke_width(1) } else { color.filled() };
                Circle::new((t, m), 3, style)
            }))
            .map_err(chart_err)?;
            keys.push((label.clone(), css(&color), Key::Dot));
        }
        if blocks.iter().any(|b| b.flagged) {
            keys.push(("left out (any setting)".to_string(), "rgb(90,90,90)".to_string(), Key::Hollow));
        }
    }
    Ok((svg, keys))
}

/// The paired differences of each setting against the baseline as a histogram, the
/// settings' bars side by side in each bin (opaque: no blended colours), the range padded
/// by a bin each side so the outer bars are whole.
fn diffs_chart(diffs: &[(String, Vec<f64>)]) -> Result<(String, Keys)> {
    let mut svg = String::new();
    let mut keys = Vec::new();
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
            .build_cartesian_2d((lo - width)..(hi + width), 0.0..top)
            .map_err(chart_err)?;
        ch.configure_mesh()
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .x_desc("% change of the rate")
            .y_desc("units")
            .draw()
            .map_err(chart_err)?;
        let k = diffs.len().max(1) as f64;
        // Each bin holds every setting's bar side by side, a tenth of the bin kept as a gap.
        let sub = width * 0.9 / k;
        for (j, ((label, _), c)) in diffs.iter().zip(&counts).enumerate() {
            let color = Palette99::pick(j + 1).to_rgba();
            let bars: Vec<Rectangle<(f64, f64)>> = c
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| {
                    let x0 = lo + i as f64 * width + width * 0.05 + j as f64 * sub;
                    Rectangle::new([(x0, 0.0), (x0 + sub, *n as f64)], color.filled())
                })
                .collect();
            ch.draw_series(bars).map_err(chart_err)?;
            keys.push((label.clone(), css(&color), Key::Box));
        }
    }
    Ok((svg, keys))
}

/// A figure of live.json, or a dash where it is missing (never NaN, never zero).
fn num(v: &serde_json::Value, prec: usize) -> String {
    v.as_f64().filter(|x| x.is_finite()).map_or("&mdash;".to_string(), |x| format!("{x:.prec$}"))
}

/// The live comparison's results as an HTML table: each setting's median rate, blocks,
/// ratio to the baseline with its interval, ns/packet against the baseline, p-values and
/// verdict.
fn live_results_table(j: &serde_json::Value) -> String {
    let mut out = String::from(
        "<table class=\"data\" id=\"results\"><tr><th class=\"l\">setting</th><th>Mpps</th><th>blocks</th><th>ratio</th>\
         <th>95% interval</th><th>ns/packet vs baseline [95%]</th><th>p</th><th>p (Holm)</th><th class=\"l\">verdict</th></tr>\n",
    );
    let empty = Vec::new();
    for (i, r) in j["results"].as_array().unwrap_or(&empty).iter().enumerate() {
        let label = escape(r["setting"]["label"].as_str().unwrap_or("?"));
        let mpps = if r["median_mpps"].as_f64().is_some_and(f64::is_finite) {
            num(&r["median_mpps"], 3)
        } else {
            "no counted block".to_string()
        };
        let blocks = r["blocks"].as_u64().unwrap_or(0);
        let e = &r["effect"];
        let row = if i == 0 || e.is_null() {
            "<td>1</td><td>&mdash;</td><td>&mdash;</td><td>&mdash;</td><td>&mdash;</td><td class=\"l\">baseline</td>"
                .to_string()
        } else {
            let d = &r["delta_ns"];
            let delta = if d[0].as_f64().is_some_and(f64::is_finite) {
                format!("{} [{}, {}]", num(&d[0], 2), num(&d[1], 2), num(&d[2], 2))
            } else {
                "&mdash;".to_string()
            };
            let p = |v: &serde_json::Value| match v.as_f64() {
                Some(p) if p < 1e-16 => "&lt;1e-16".to_string(),
                Some(p) => format!("{p:.2e}"),
                None => "&mdash;".to_string(),
            };
            let verdict = match r["verdict"]["kind"].as_str() {
                Some("significant") => match e["ratio"].as_f64() {
                    Some(x) => {
                        format!("{} by {:.1}%", if x < 1.0 { "slower" } else { "faster" }, (x - 1.0).abs() * 100.0)
                    }
                    None => "significant".to_string(),
                },
                Some("no_difference") => {
                    format!("no difference (within &plusmn;{:.0}%)", crate::paired::EQUIVALENCE * 100.0)
                }
                Some("undecided") => format!("undecided: {}", escape(r["verdict"]["reason"].as_str().unwrap_or(""))),
                Some(other) => escape(other),
                None => "&mdash;".to_string(),
            };
            format!(
                "<td>{}</td><td>{}..{}</td><td>{delta}</td><td>{}</td><td>{}</td><td class=\"l\">{verdict}</td>",
                num(&e["ratio"], 4),
                num(&e["ci"][0], 4),
                num(&e["ci"][1], 4),
                p(&e["p"]),
                p(&e["p_holm"])
            )
        };
        out.push_str(&format!("<tr><td class=\"l s\">{label}</td><td>{mpps}</td><td>{blocks}</td>{row}</tr>\n"));
    }
    out.push_str("</table>\n");
    out
}

/// The page for a live comparison's directory (live.json, table.txt).
pub fn live_page(dir: &Path) -> Result<String> {
    let path = dir.join("live.json");
    let text = collector::files::read_to_string(&path, collector::files::Kind::Description)?;
    let j: serde_json::Value = serde_json::from_str(&text).map_err(|e| live_err(dir, e.to_string()))?;
    let (labels, blocks) = live_blocks(dir, &j)?;
    let table =
        collector::files::read_to_string(&dir.join("table.txt"), collector::files::Kind::Text).unwrap_or_default();
    let mut html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>fwdscope live comparison</title>\n<style>{STYLE}</style></head><body>\n"
    );
    let measured = blocks.iter().filter(|b| b.mpps.is_some()).count();
    let left_out = blocks.iter().filter(|b| b.flagged).count();
    // Programs compared (`--program`): one process each, so more than one pid.
    let what = if j["pids"].as_array().is_some_and(|p| p.len() > 1) {
        format!("{} forwarder programs, one running at a time", labels.len())
    } else {
        format!("{} settings in one forwarder", labels.len())
    };
    html.push_str(&format!(
        "<h1>fwdscope live comparison</h1>\n<p>{what}, {} blocks of {} ms ({} ms discarded after each switch), {measured} measured, {left_out} left out; from <code>{}</code>{}.</p>\n",
        blocks.len(),
        j["block_ms"].as_f64().unwrap_or(0.0),
        j["discard_ms"].as_f64().unwrap_or(0.0),
        escape(&dir.display().to_string()),
        j["incomplete"].as_str().map_or(String::new(), |w| format!("; <b>incomplete</b>: {}", escape(w)))
    ));
    html.push_str("<h2>Results</h2>\n");
    html.push_str(&live_results_table(&j));
    let (svg, keys) = blocks_chart(&labels, &blocks)?;
    html.push_str(&format!("<h2>Blocks</h2>\n{}", chart_div("blocks", &svg, &keys)));
    let diffs = paired_percent(&labels, &blocks);
    if diffs.iter().any(|d| !d.1.is_empty()) {
        let (svg, keys) = diffs_chart(&diffs)?;
        html.push_str(&format!("<h2>Paired differences</h2>\n{}", chart_div("diffs", &svg, &keys)));
    } else if !diffs.is_empty() {
        html.push_str("<h2>Paired differences</h2>\n<p class=\"missing\">No paired difference: no unit has every block counted.</p>\n");
    }
    // The printed table's notes (what the figures are, contention, stages per setting);
    // its rows are the table above.
    let notes: Vec<&str> = table
        .lines()
        .filter(|l| !l.starts_with("setting ") && !labels.iter().any(|s| l.starts_with(&format!("{s} "))))
        .collect();
    html.push_str(&format!(
        "<h2>Notes</h2>\n<pre class=\"notes\">{}</pre>\n</body></html>\n",
        escape(notes.join("\n").trim())
    ));
    Ok(html)
}

#[cfg(test)]
mod tests {
    /// A sweep stopped before its first run finished: a page saying so, not an error; a
    /// directory with no runs and no such mark is still refused.
    #[test]
    fn a_sweep_stopped_before_its_first_run_gets_a_page_saying_so() {
        let d = std::env::temp_dir().join(format!("fwdscope-empty-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        crate::results::write_parquet(&d.join("results.parquet"), &[]).expect("empty results");
        let rules = analyzer::rules::Rules::builtin();
        let e = super::sweep_page(&d, &rules).expect_err("refused").to_string();
        assert!(e.contains("holds no runs"), "{e}");
        std::fs::write(d.join(crate::runner::INCOMPLETE), "stopped by SIGINT during run 1 of 4\n").unwrap();
        let page = super::sweep_page(&d, &rules).expect("a page");
        assert!(page.contains("Incomplete sweep:</b> stopped by SIGINT during run 1 of 4; no run finished"), "{page}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn axis_labels_in_si() {
        assert_eq!(super::si(7_000_000.0), "7.0M");
        assert_eq!(super::si(1500.0), "1.5k");
        assert_eq!(super::si(250.0), "250");
        assert_eq!(super::si(0.25), "0.25");
        assert_eq!(super::si(0.0), "0");
        assert_eq!(super::si(2.5e9), "2.5G");
        assert_eq!(super::si(10.2), "10.2");
        assert_eq!(super::si(10.0), "10");
        assert_eq!(super::si(9.55), "9.55");
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
            "results": [{"setting": {"label": "prefetch 0"}, "median_mpps": 10.0, "blocks": 4},
                {"setting": {"label": "prefetch 2"}, "median_mpps": 9.85, "blocks": 3,
                 "effect": {"ratio": 0.98, "ci": [0.97, 0.99], "p": 0.001, "p_holm": 0.001},
                 "delta_ns": [2.0, 1.0, 3.0], "verdict": {"kind": "significant"}}],
            "blocks": [
                block(0, 0, 1_000_000_000, 10.0, false), block(0, 1, 1_050_000_000, 9.8, false),
                block(0, 1, 1_100_000_000, 9.8, false), block(0, 0, 1_150_000_000, 10.0, false),
                block(1, 0, 1_200_000_000, 10.0, false), block(1, 1, 1_250_000_000, 9.9, true),
                block(1, 1, 1_300_000_000, 9.9, false), block(1, 0, 1_350_000_000, 10.0, false),
            ]
        });
        std::fs::write(dir.join("live.json"), j.to_string()).unwrap();
        std::fs::write(
            dir.join("table.txt"),
            "setting  ratio  verdict\nprefetch 2  0.980  significant\nratio: rate against the baseline's\n",
        )
        .unwrap();
        let (labels, blocks) = super::live_blocks(&dir, &j).unwrap();
        assert_eq!(labels, ["prefetch 0", "prefetch 2"]);
        assert!((blocks[3].t - 0.15).abs() < 1e-9);
        let d = super::paired_percent(&labels, &blocks);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].1.len(), 1, "the unit with a left-out block drops: {:?}", d);
        assert!((d[0].1[0] + 2.0).abs() < 1e-9, "{:?}", d);
        let page = super::live_page(&dir).unwrap();
        for want in ["id=\"blocks\"", "id=\"diffs\"", "prefetch 2", "slower by 2.0%", "1 left out", "id=\"results\""] {
            assert!(page.contains(want), "{want} missing");
        }
        // The printed rows are the HTML table; the notes keep the rest.
        let notes = &page[page.find("class=\"notes\"").expect("notes")..];
        assert!(notes.contains("ratio: rate against") && !notes.contains("0.980"), "{notes}");
        // Eight blocks: eight points (one hollow); the legend is HTML under the chart.
        assert_eq!(page.matches("<circle").count(), 8);
        assert_eq!(page.matches("class=\"key\"").count(), 2 + 1 + 1, "two settings and left out; one histogram key");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
