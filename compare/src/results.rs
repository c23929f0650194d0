//! A sweep's results: one [`RunResult`] per run, summarized per setting (median Mpps, the
//! mean's 95% confidence interval, the median cost per packet of each stage, the best
//! setting, and whether each other setting differs from the best significantly: Welch's
//! two-sided t-test, alpha 0.05); the table; results.parquet written and read back.

use crate::{Error, Result};
use analyzer::stats::{mean_ci95, median, welch_p};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// Significance level of the comparisons with the best setting.
pub const ALPHA: f64 = 0.05;

/// One run of one setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub setting: String,
    /// The swept parameters of the setting (e.g. prefetch = 2).
    pub params: BTreeMap<String, String>,
    pub repeat: usize,
    pub mpps: f64,
    /// Median route-cache entries over the measured part of the run, when the forwarder
    /// published them.
    #[serde(default)]
    pub cache_entries: Option<f64>,
    /// GC goal misses (all workers) in the first second of a phased run's last step.
    #[serde(default)]
    pub step_goal_miss: Option<f64>,
    /// Sampled cost per forwarded packet by stage (ns or events).
    pub stages: BTreeMap<String, f64>,
    /// The forwarder's stage clocks, ns per forwarded packet by stage (empty when off).
    #[serde(default)]
    pub clocks: BTreeMap<String, f64>,
    /// The largest share of the run any worker waited to run (its schedstat counters), when
    /// known.
    #[serde(default)]
    pub runq_share: Option<f64>,
    /// Why the run is left out of the statistics (contention); empty when it counts.
    #[serde(default)]
    pub contention: Vec<String>,
}

/// A setting against the best one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// This setting's median over the best's.
    pub ratio: f64,
    /// Welch's two-sided p-value.
    pub p: f64,
    pub significant: bool,
    /// Why no verdict can be given (too many runs left out for contention), if so.
    pub undecided: Option<String>,
}

/// More than this share of a setting's runs left out for contention: no verdict.
pub const MAX_CONTAMINATED: f64 = 0.25;

/// One setting summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub setting: String,
    /// Runs that count (runs flagged for contention are left out).
    pub runs: usize,
    /// Runs left out for contention.
    pub left_out: usize,
    /// Of `runs`, those flagged for contention and counted anyway ([`summarize_with`]'s
    /// `keep_contended`): the figures are marked as theirs.
    pub kept_contended: usize,
    pub median: f64,
    pub mean: f64,
    /// 95% confidence interval of the mean (equal to the mean with one run).
    pub ci95: (f64, f64),
    /// Median per-packet cost of each stage over the runs.
    pub stages: BTreeMap<String, f64>,
    /// Median stage clocks, ns per forwarded packet, over the runs that had them.
    pub clocks: BTreeMap<String, f64>,
    /// Median route-cache entries over the runs that published them.
    pub cache_entries: Option<f64>,
    /// Median GC goal misses in the first second of the last step, over phased runs.
    pub step_goal_miss: Option<f64>,
    pub best: bool,
    /// Against the best setting (none for the best itself).
    pub vs_best: Option<Comparison>,
}

/// Summarize runs per setting, settings in their first-seen order; runs flagged for
/// contention are left out of every figure.
pub fn summarize(runs: &[RunResult]) -> Vec<Summary> {
    summarize_with(runs, false)
}

/// [`summarize`], or with `keep_contended` the runs flagged for contention counted too
/// (each summary says how many in `kept_contended`; no verdict is given where too many
/// were busy, as without).
pub fn summarize_with(runs: &[RunResult], keep_contended: bool) -> Vec<Summary> {
    let mut order: Vec<&str> = Vec::new();
    for r in runs {
        if !order.contains(&r.setting.as_str()) {
            order.push(&r.setting);
        }
    }
    // Runs flagged for contention count for nothing but the left-out tally.
    let of = |s: &str| -> Vec<&RunResult> {
        runs.iter().filter(|r| r.setting == s && (keep_contended || r.contention.is_empty())).collect()
    };
    let left_out = |s: &str| runs.iter().filter(|r| r.setting == s && !r.contention.is_empty()).count();
    let busy = |s: &str| {
        let (out, all) = (left_out(s), runs.iter().filter(|r| r.setting == s).count());
        (all > 0 && out as f64 > MAX_CONTAMINATED * all as f64).then(|| {
            format!("undecided: the machine was busy ({out} of {all} runs of {s} had a worker waiting to run or steal)")
        })
    };
    let mpps = |s: &str| -> Vec<f64> { of(s).iter().map(|r| r.mpps).collect() };
    // The best among settings with runs that count (none when every run was left out).
    let best = order
        .iter()
        .copied()
        .filter(|s| !mpps(s).is_empty())
        .max_by(|a, b| median(&mpps(a)).total_cmp(&median(&mpps(b))))
        .map(str::to_string);
    order
        .iter()
        .map(|s| {
            let xs = mpps(s);
            let (mean, ci95) = mean_ci95(&xs);
            let mut stage_vals: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut clock_vals: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for r in of(s) {
                for (k, v) in &r.stages {
                    stage_vals.entry(k.clone()).or_default().push(*v);
                }
                for (k, v) in &r.clocks {
                    clock_vals.entry(k.clone()).or_default().push(*v);
                }
            }
            let is_best = best.as_deref() == Some(*s);
            let vs_best = match (&best, is_best) {
                (Some(b), false) => {
                    let bx = mpps(b);
                    let p = welch_p(&xs, &bx);
                    let undecided = busy(s).or_else(|| busy(b));
                    Some(Comparison {
                        ratio: median(&xs) / median(&bx),
                        p,
                        significant: p < ALPHA && undecided.is_none(),
                        undecided,
                    })
                }
                _ => None,
            };
            Summary {
                setting: s.to_string(),
                runs: xs.len(),
                left_out: left_out(s),
                kept_contended: if keep_contended { left_out(s) } else { 0 },
                median: median(&xs),
                mean,
                ci95,
                stages: stage_vals.into_iter().map(|(k, v)| (k, median(&v))).collect(),
                clocks: clock_vals.into_iter().map(|(k, v)| (k, median(&v))).collect(),
                cache_entries: {
                    let e: Vec<f64> = of(s).iter().filter_map(|r| r.cache_entries).collect();
                    (!e.is_empty()).then(|| median(&e))
                },
                step_goal_miss: {
                    let e: Vec<f64> = of(s).iter().filter_map(|r| r.step_goal_miss).collect();
                    (!e.is_empty()).then(|| median(&e))
                },
                best: is_best,
                vs_best,
            }
        })
        .collect()
}

/// The widest the setting column of a table is padded to (longer labels overflow it).
pub(crate) const MAX_LABEL_WIDTH: usize = 120;
/// Longest setting label read back from results.parquet, in bytes (an experiment's
/// labels are a few dozen).
pub const MAX_LABEL_BYTES: usize = 4096;
/// Longest contention note of one run read back (a few sentences).
const MAX_CONTENTION_BYTES: usize = 64 * 1024;

/// The summary as a table: one row per setting, the best marked `*`, per-stage costs in
/// `unit` per packet for `stages` (in that order).
pub fn table_text(sums: &[Summary], stages: &[&str], unit: &str) -> String {
    use std::fmt::Write;
    // The column is as wide as the longest label, up to a bound: a label read from a file
    // may be of any length (a width past 65535 made the formatter panic).
    let w = sums.iter().map(|s| s.setting.len()).max().unwrap_or(7).clamp(7, MAX_LABEL_WIDTH);
    let mut out = format!("  {:<w$} {:>4} {:>8} {:>19}", "setting", "runs", "Mpps", "95% CI (mean)");
    for st in stages {
        let _ = write!(out, " {:>8}", format!("{st}"));
    }
    let _ = writeln!(out, "  vs best (Welch p)   [stages: {unit}/packet, medians]");
    for s in sums {
        out.push_str(&summary_row(s, w, stages));
    }
    out.push_str(&contention_footer(sums));
    if sums.iter().any(|s| !s.clocks.is_empty()) {
        out.push_str(&clock_rows(sums, w, stages));
    }
    out
}

/// A setting's row of the table, `w` wide in its label: its runs, rate and interval (or
/// that it has none), its stage costs, and how it compares with the best.
fn summary_row(s: &Summary, w: usize, stages: &[&str]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mark = if s.best {
        "*"
    } else if s.kept_contended > 0 {
        "!"
    } else {
        " "
    };
    if s.runs == 0 {
        // Missing is not a figure: no NaN, no zero.
        let _ = write!(out, "{mark} {:<w$} {:>4} {:>28}", collector::printable(s.setting.clone()), 0, "no counted run");
    } else {
        let _ = write!(
            out,
            "{mark} {:<w$} {:>4} {:>8.3} [{:>7.3}, {:>7.3}]",
            collector::printable(s.setting.clone()),
            s.runs,
            s.median,
            s.ci95.0,
            s.ci95.1
        );
    }
    out.push_str(&stage_cells(&s.stages, stages));
    let _ = writeln!(out, "  {}", against_best(s));
    out
}

/// The figures of `stages` in the table's columns, `-` for one without a figure.
fn stage_cells(figures: &BTreeMap<String, f64>, stages: &[&str]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    for st in stages {
        match figures.get(*st) {
            Some(v) => {
                let _ = write!(out, " {v:>8.1}");
            }
            None => {
                let _ = write!(out, " {:>8}", "-");
            }
        }
    }
    out
}

/// The table's last column for a setting: best, its difference from the best with Welch's
/// p, or why there is no verdict.
fn against_best(s: &Summary) -> String {
    match &s.vs_best {
        None if s.best => "best".to_string(),
        None => format!("undecided: no run counts ({} left out for contention)", s.left_out),
        Some(Comparison { undecided: Some(why), .. }) => why.clone(),
        Some(c) => format!(
            "{:>+6.1}% (p={:.3}{})",
            (c.ratio - 1.0) * 100.0,
            c.p,
            if c.significant { ", significant" } else { ", not significant" }
        ),
    }
}

/// The line under the table on the runs contention flagged: counted anyway, or left out
/// (none when no run was flagged).
fn contention_footer(sums: &[Summary]) -> String {
    let left: usize = sums.iter().map(|s| s.left_out).sum();
    let kept: usize = sums.iter().map(|s| s.kept_contended).sum();
    if kept > 0 {
        format!(
            "! {kept} run(s) flagged for contention are counted in these figures (--keep-contended): a busy machine \
             slows runs unevenly, so read them as rough\n"
        )
    } else if left > 0 {
        format!(
            "  {left} run(s) left out for contention (a worker waited to run over 5% of the run, or the host stole over 5%): \
             see results.parquet's `contention` column; --keep-contended counts them, marked\n"
        )
    } else {
        String::new()
    }
}

/// The stage clocks under the table: a header, then each setting's ns per packet by stage
/// in the stage columns.
fn clock_rows(sums: &[Summary], w: usize, stages: &[&str]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = write!(out, "  {:<w$} {:>4} {:>8} {:>19}", "", "", "", "stage clocks:");
    for st in stages {
        let _ = write!(out, " {:>8}", format!("{st}"));
    }
    let _ = writeln!(out, "  [ns/packet, TSC, medians]");
    for s in sums {
        let _ = write!(out, "  {:<w$} {:>4} {:>8} {:>19}", s.setting, "", "", "");
        out.push_str(&stage_cells(&s.clocks, stages));
        out.push('\n');
    }
    out
}

/// Every run as one Parquet file: setting, repeat, one column per swept parameter, mpps,
/// `<stage>_per_packet` per sampled stage and `clock_<stage>_ns` per clocked stage (null
/// where a run has none).
pub fn write_parquet(path: &Path, runs: &[RunResult]) -> Result<()> {
    use polars::prelude::*;
    let err = |e: PolarsError| Error::Results { path: path.into(), msg: e.to_string() };
    let mut params: Vec<&String> = runs.iter().flat_map(|r| r.params.keys()).collect();
    params.sort();
    params.dedup();
    let mut stages: Vec<&String> = runs.iter().flat_map(|r| r.stages.keys()).collect();
    stages.sort();
    stages.dedup();
    let mut cols = vec![
        Column::new("setting".into(), runs.iter().map(|r| r.setting.as_str()).collect::<Vec<_>>()),
        Column::new("repeat".into(), runs.iter().map(|r| r.repeat as u32).collect::<Vec<_>>()),
    ];
    for p in &params {
        cols.push(Column::new(
            p.as_str().into(),
            runs.iter().map(|r| r.params.get(*p).map(String::as_str)).collect::<Vec<_>>(),
        ));
    }
    cols.push(Column::new("mpps".into(), runs.iter().map(|r| r.mpps).collect::<Vec<_>>()));
    cols.push(Column::new("cache_entries".into(), runs.iter().map(|r| r.cache_entries).collect::<Vec<_>>()));
    cols.push(Column::new("step_goal_miss".into(), runs.iter().map(|r| r.step_goal_miss).collect::<Vec<_>>()));
    for st in &stages {
        cols.push(Column::new(
            format!("{st}_per_packet").into(),
            runs.iter().map(|r| r.stages.get(*st).copied()).collect::<Vec<_>>(),
        ));
    }
    let mut clocks: Vec<&String> = runs.iter().flat_map(|r| r.clocks.keys()).collect();
    clocks.sort();
    clocks.dedup();
    for st in &clocks {
        cols.push(Column::new(
            format!("clock_{st}_ns").into(),
            runs.iter().map(|r| r.clocks.get(*st).copied()).collect::<Vec<_>>(),
        ));
    }
    cols.push(Column::new("runq_share".into(), runs.iter().map(|r| r.runq_share).collect::<Vec<_>>()));
    cols.push(Column::new("contention".into(), runs.iter().map(|r| r.contention.join("; ")).collect::<Vec<_>>()));
    let mut df = DataFrame::new_infer_height(cols).map_err(err)?;
    collector::outdir::write_parquet(path, 0o644, &mut df)?;
    Ok(())
}

/// The runs of a sweep's results.parquet, in run order.
pub fn read_results(dir: &Path) -> Result<Vec<RunResult>> {
    let path = dir.join("results.parquet");
    let bytes = collector::files::read(&path, collector::files::Kind::Part)?;
    let bad = |what: &str| Error::Results { path: path.clone(), msg: what.to_string() };
    // The counts polars would trust are checked first (a padded footer hid millions of
    // rows that took gigabytes to decode), and the decoded size charged to a budget.
    let mut budget = collector::recording::decode::DecodeBudget::from_env();
    let df = collector::recording::decode::decode(bytes, None, &mut budget).map_err(|e| bad(&e.to_string()))?;
    let col = |n: &str| df.column(n).map_err(|_| bad(&format!("no column `{n}`")));
    // Labels are at most MAX_LABEL_BYTES: a 1 MiB label repeated by a dictionary in every
    // row of a 517 KB file took over 12 GB once copied per row.
    let settings = collector::recording::decode::texts(&df, "setting", MAX_LABEL_BYTES, &mut budget)
        .map_err(|e| bad(&e.to_string()))?;
    let repeats: Vec<u32> =
        col("repeat")?.u32().map_err(|_| bad("`repeat` is not u32"))?.iter().map(|v| v.unwrap_or(0)).collect();
    let mpps: Vec<f64> =
        col("mpps")?.f64().map_err(|_| bad("`mpps` is not f64"))?.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
    // Written since the contention detector; older results have neither column.
    let entries: Vec<Option<f64>> = match df.column("cache_entries") {
        Ok(c) => c.f64().map_err(|_| bad("`cache_entries` is not f64"))?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    // Written since the phased experiments' goal-miss column; older results lack it.
    let misses: Vec<Option<f64>> = match df.column("step_goal_miss") {
        Ok(c) => c.f64().map_err(|_| bad("`step_goal_miss` is not f64"))?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    let runq: Vec<Option<f64>> = match df.column("runq_share") {
        Ok(c) => c.f64().map_err(|_| bad("`runq_share` is not f64"))?.iter().collect(),
        Err(_) => vec![None; df.height()],
    };
    let contention: Vec<Vec<String>> = match df.column("contention") {
        Ok(_) => collector::recording::decode::texts(&df, "contention", MAX_CONTENTION_BYTES, &mut budget)
            .map_err(|e| bad(&e.to_string()))?
            .into_iter()
            .map(|t| if t.is_empty() { Vec::new() } else { t.split("; ").map(str::to_string).collect() })
            .collect(),
        Err(_) => vec![Vec::new(); df.height()],
    };
    let mut stages: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    let mut clocks: Vec<(String, Vec<Option<f64>>)> = Vec::new();
    for c in df.columns() {
        let floats = || -> Result<Vec<Option<f64>>> {
            Ok(c.f64().map_err(|_| bad(&format!("`{}` is not f64", c.name())))?.iter().collect())
        };
        if let Some(st) = c.name().strip_suffix("_per_packet") {
            stages.push((st.to_string(), floats()?));
        } else if let Some(st) = c.name().strip_prefix("clock_").and_then(|s| s.strip_suffix("_ns")) {
            clocks.push((st.to_string(), floats()?));
        }
    }
    Ok((0..df.height())
        .map(|i| RunResult {
            setting: settings[i].clone(),
            params: BTreeMap::new(),
            repeat: repeats[i] as usize,
            mpps: mpps[i],
            cache_entries: entries[i],
            step_goal_miss: misses[i],
            stages: stages.iter().filter_map(|(s, v)| Some((s.clone(), v[i]?))).collect(),
            clocks: clocks.iter().filter_map(|(s, v)| Some((s.clone(), v[i]?))).collect(),
            runq_share: runq[i],
            contention: contention[i].clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn runs_with_contention_are_left_out_and_too_many_refuse_a_verdict() {
        let mut a = runs("a", 10.0, 0.01, 8, 1);
        let mut b = runs("b", 9.0, 0.01, 8, 2);
        // One busy run of b, far too slow: left out, the rest still decide.
        b[0].mpps = 2.0;
        b[0].contention = vec!["a worker waited to run 40% of the run".into()];
        let sums = summarize(&[a.clone(), b.clone()].concat());
        let sb = &sums[1];
        assert_eq!((sb.runs, sb.left_out), (7, 1));
        assert!(sb.ci95.0 > 8.5, "the slow busy run is not in the interval: {:?}", sb.ci95);
        let c = sb.vs_best.as_ref().expect("vs best");
        assert!(c.significant && c.undecided.is_none(), "{c:?}");
        let text = table_text(&sums, &[], "ns");
        assert!(text.contains("1 run(s) left out for contention"), "{text}");
        // Three of eight runs of a busy: no verdict, whatever the p-value.
        for r in a.iter_mut().take(3) {
            r.contention = vec!["the hypervisor stole 12% of the CPU time".into()];
        }
        let sums = summarize(&[a.clone(), b.clone()].concat());
        let c = sums[1].vs_best.as_ref().expect("vs best");
        assert!(!c.significant, "{c:?}");
        assert!(c.undecided.as_deref().is_some_and(|w| w.contains("3 of 8 runs of a")), "{c:?}");
        assert!(table_text(&sums, &[], "ns").contains("undecided: the machine was busy"));
        // Every run left out: no best, no figures presented as one.
        for r in a.iter_mut().chain(b.iter_mut()) {
            r.contention = vec!["busy".into()];
        }
        let sums = summarize(&[a.clone(), b.clone()].concat());
        assert!(sums.iter().all(|s| !s.best && s.runs == 0 && s.vs_best.is_none()));
        let text = table_text(&sums, &[], "ns");
        assert_eq!(text.matches("undecided: no run counts (8 left out for contention)").count(), 2, "{text}");
        assert_eq!(text.matches("no counted run").count(), 2, "{text}");
        assert!(!text.contains("NaN"), "missing is no figure: {text}");
        // Kept anyway: the figures are the runs', marked, and still no verdict.
        let all = [a, b].concat();
        let sums = summarize_with(&all, true);
        assert_eq!((sums[0].runs, sums[0].kept_contended), (8, 8));
        assert!((sums[0].median - median(&all[..8].iter().map(|r| r.mpps).collect::<Vec<_>>())).abs() < 1e-12);
        assert!(sums[1].vs_best.as_ref().is_some_and(|c| !c.significant && c.undecided.is_some()));
        let text = table_text(&sums, &[], "ns");
        assert!(!text.contains("NaN") && !text.contains("no counted run"), "{text}");
        assert!(text.lines().nth(2).is_some_and(|l| l.starts_with("! b")), "{text}");
        assert!(text.contains("16 run(s) flagged for contention are counted"), "{text}");
    }

    /// Runs of a setting around `mean` Mpps with a relative noise `sd` (normal, seeded).
    fn runs(setting: &str, mean: f64, sd: f64, n: usize, seed: u64) -> Vec<RunResult> {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                // Box-Muller from two uniforms.
                let (u1, u2): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen());
                let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                RunResult {
                    setting: setting.into(),
                    params: BTreeMap::new(),
                    repeat: i,
                    mpps: mean * (1.0 + sd * z),
                    cache_entries: None,
                    step_goal_miss: None,
                    stages: BTreeMap::new(),
                    clocks: BTreeMap::new(),
                    runq_share: Some(0.01),
                    contention: Vec::new(),
                }
            })
            .collect()
    }

    #[test]
    fn a_planted_three_percent_difference_is_significant_at_five_repeats() {
        // 1% run-to-run noise, five repeats (the sweep's default): a 3% difference is found
        // in at least 19 of 20 seeded trials (the test's power there is about 0.97); two
        // equal settings are found different in at most 2 of 20 (a 5% test errs about once
        // in twenty).
        let (mut found, mut false_alarms) = (0, 0);
        for trial in 0..20u64 {
            let mut all = runs("prefetch 2", 1.03, 0.01, 5, 100 + trial);
            all.extend(runs("prefetch 0", 1.00, 0.01, 5, 200 + trial));
            let s = summarize(&all);
            assert!(s[0].best, "the faster setting is best");
            if s[1].vs_best.as_ref().is_some_and(|c| c.significant) {
                found += 1;
            }
            let mut same = runs("a", 1.0, 0.01, 5, 300 + trial);
            same.extend(runs("b", 1.0, 0.01, 5, 400 + trial));
            let s = summarize(&same);
            if s.iter().any(|x| x.vs_best.as_ref().is_some_and(|c| c.significant)) {
                false_alarms += 1;
            }
        }
        assert!(found >= 19, "3% difference found in {found} of 20");
        assert!(false_alarms <= 2, "{false_alarms} false alarms in 20");
    }

    #[test]
    fn results_parquet_reads_back() {
        let mut all = runs("prefetch 2", 1.0, 0.01, 3, 1);
        for r in &mut all {
            r.params.insert("prefetch".into(), "2".into());
            r.stages.insert("lookup".into(), 21.5);
        }
        all[2].contention = vec!["a worker waited to run 9% of the time".into(), "steal".into()];
        all[1].cache_entries = Some(8204.0);
        all[2].step_goal_miss = Some(6.0);
        let dir = std::env::temp_dir().join(format!("fwdscope-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("results.parquet");
        write_parquet(&p, &all).expect("write");
        // Read back whole, the contention figures included.
        let back = read_results(&dir).expect("read back");
        assert_eq!(back[2].contention, all[2].contention);
        assert_eq!((back[0].runq_share, back[0].contention.len()), (Some(0.01), 0));
        assert_eq!((back[0].cache_entries, back[1].cache_entries), (None, Some(8204.0)));
        assert_eq!((back[0].step_goal_miss, back[2].step_goal_miss), (None, Some(6.0)));
        use polars::prelude::SerReader;
        let df = polars::prelude::ParquetReader::new(std::fs::File::open(&p).expect("open")).finish().expect("read");
        assert_eq!(df.height(), 3);
        let names: Vec<String> = df.get_column_names().iter().map(|s| s.to_string()).collect();
        assert_eq!(
            names,
            [
                "setting",
                "repeat",
                "prefetch",
                "mpps",
                "cache_entries",
                "step_goal_miss",
                "lookup_per_packet",
                "runq_share",
                "contention"
            ]
        );
        let mpps = df.column("mpps").expect("mpps").f64().expect("f64").get(1).expect("value");
        assert_eq!(mpps, all[1].mpps);
        std::fs::remove_dir_all(&dir).expect("remove");
    }

    #[test]
    fn the_table_marks_the_best_and_the_significance() {
        let mut all = runs("cache rtcache", 2.0, 0.01, 4, 1);
        all.extend(runs("cache nocache", 1.5, 0.01, 4, 2));
        for r in &mut all {
            r.stages.insert("lookup".into(), if r.setting.ends_with("rtcache") { 100.0 } else { 150.0 });
        }
        let t = table_text(&summarize(&all), &["lookup", "gc"], "ns");
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].starts_with("* cache rtcache") && lines[1].ends_with("best"), "{t}");
        assert!(lines[2].contains("-25.") && lines[2].contains("significant") && lines[2].contains("150.0"), "{t}");
        assert!(lines[2].contains(" - "), "a stage without figures shows -: {t}");
    }

    /// An experiment file's label reaches the terminal escaped: an ESC sequence or a
    /// bidirectional override in it is shown, not obeyed.
    #[test]
    fn settings_are_printed_with_control_characters_escaped() {
        let t = table_text(&summarize(&runs("pf \u{1b}]0;owned\u{7} \u{202e}x", 2.0, 0.01, 3, 1)), &[], "ns");
        assert!(!t.contains('\u{1b}') && !t.contains('\u{202e}'), "{t:?}");
        assert!(t.contains("\\u{1b}]0;owned\\u{7}") && t.contains("\\u{202e}x"), "{t}");
        // A label longer than any format width (a hostile results.parquet held 70,000
        // bytes): printed whole, padded no further, no panic.
        let long = "x".repeat(70_000);
        let t = table_text(&summarize(&runs(&long, 2.0, 0.01, 3, 1)), &[], "ns");
        assert!(t.contains(&long), "the label is printed whole");
    }
}
