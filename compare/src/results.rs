//! A sweep's results: one [`RunResult`] per run, summarized per setting (median Mpps, the
//! mean's 95% confidence interval, the median cost per packet of each stage, the best
//! setting, and whether each other setting differs from the best significantly: Welch's
//! two-sided t-test, alpha 0.05); the table; results.parquet written and read back.

use crate::stats::{mean_ci95, median, welch_p};
use crate::{Error, Result};
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
    /// Sampled cost per forwarded packet by stage (ns or events).
    pub stages: BTreeMap<String, f64>,
    /// The forwarder's stage clocks, ns per forwarded packet by stage (empty when off).
    #[serde(default)]
    pub clocks: BTreeMap<String, f64>,
}

/// A setting against the best one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// This setting's median over the best's.
    pub ratio: f64,
    /// Welch's two-sided p-value.
    pub p: f64,
    pub significant: bool,
}

/// One setting summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub setting: String,
    pub runs: usize,
    pub median: f64,
    pub mean: f64,
    /// 95% confidence interval of the mean (equal to the mean with one run).
    pub ci95: (f64, f64),
    /// Median per-packet cost of each stage over the runs.
    pub stages: BTreeMap<String, f64>,
    /// Median stage clocks, ns per forwarded packet, over the runs that had them.
    pub clocks: BTreeMap<String, f64>,
    pub best: bool,
    /// Against the best setting (none for the best itself).
    pub vs_best: Option<Comparison>,
}

/// Summarize runs per setting, settings in their first-seen order.
pub fn summarize(runs: &[RunResult]) -> Vec<Summary> {
    let mut order: Vec<&str> = Vec::new();
    for r in runs {
        if !order.contains(&r.setting.as_str()) {
            order.push(&r.setting);
        }
    }
    let of = |s: &str| -> Vec<&RunResult> { runs.iter().filter(|r| r.setting == s).collect() };
    let mpps = |s: &str| -> Vec<f64> { of(s).iter().map(|r| r.mpps).collect() };
    let best = order.iter().copied().max_by(|a, b| median(&mpps(a)).total_cmp(&median(&mpps(b)))).map(str::to_string);
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
                    Some(Comparison { ratio: median(&xs) / median(&bx), p, significant: p < ALPHA })
                }
                _ => None,
            };
            Summary {
                setting: s.to_string(),
                runs: xs.len(),
                median: median(&xs),
                mean,
                ci95,
                stages: stage_vals.into_iter().map(|(k, v)| (k, median(&v))).collect(),
                clocks: clock_vals.into_iter().map(|(k, v)| (k, median(&v))).collect(),
                best: is_best,
                vs_best,
            }
        })
        .collect()
}

/// The summary as a table: one row per setting, the best marked `*`, per-stage costs in
/// `unit` per packet for `stages` (in that order).
pub fn table_text(sums: &[Summary], stages: &[&str], unit: &str) -> String {
    use std::fmt::Write;
    let w = sums.iter().map(|s| s.setting.len()).max().unwrap_or(7).max(7);
    let mut out = format!("  {:<w$} {:>4} {:>8} {:>19}", "setting", "runs", "Mpps", "95% CI (mean)");
    for st in stages {
        let _ = write!(out, " {:>8}", format!("{st}"));
    }
    let _ = writeln!(out, "  vs best (Welch p)   [stages: {unit}/packet, medians]");
    for s in sums {
        let _ = write!(
            out,
            "{} {:<w$} {:>4} {:>8.3} [{:>7.3}, {:>7.3}]",
            if s.best { "*" } else { " " },
            s.setting,
            s.runs,
            s.median,
            s.ci95.0,
            s.ci95.1
        );
        for st in stages {
            match s.stages.get(*st) {
                Some(v) => {
                    let _ = write!(out, " {v:>8.1}");
                }
                None => {
                    let _ = write!(out, " {:>8}", "-");
                }
            }
        }
        match &s.vs_best {
            None => out.push_str("  best\n"),
            Some(c) => {
                let _ = writeln!(
                    out,
                    "  {:>+6.1}% (p={:.3}{})",
                    (c.ratio - 1.0) * 100.0,
                    c.p,
                    if c.significant { ", significant" } else { ", not significant" }
                );
            }
        }
    }
    if sums.iter().any(|s| !s.clocks.is_empty()) {
        let _ = write!(out, "  {:<w$} {:>4} {:>8} {:>19}", "", "", "", "stage clocks:");
        for st in stages {
            let _ = write!(out, " {:>8}", format!("{st}"));
        }
        let _ = writeln!(out, "  [ns/packet, TSC, medians]");
        for s in sums {
            let _ = write!(out, "  {:<w$} {:>4} {:>8} {:>19}", s.setting, "", "", "");
            for st in stages {
                match s.clocks.get(*st) {
                    Some(v) => {
                        let _ = write!(out, " {v:>8.1}");
                    }
                    None => {
                        let _ = write!(out, " {:>8}", "-");
                    }
                }
            }
            out.push('\n');
        }
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
    let mut df = DataFrame::new_infer_height(cols).map_err(err)?;
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    ParquetWriter::new(f).finish(&mut df).map_err(err)?;
    Ok(())
}

/// The runs of a sweep's results.parquet, in run order.
pub fn read_results(dir: &Path) -> Result<Vec<RunResult>> {
    use polars::prelude::*;
    let path = dir.join("results.parquet");
    let f = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
    let bad = |what: &str| Error::Results { path: path.clone(), msg: what.to_string() };
    let df = ParquetReader::new(f).finish().map_err(|e| bad(&e.to_string()))?;
    let col = |n: &str| df.column(n).map_err(|_| bad(&format!("no column `{n}`")));
    let settings: Vec<String> = col("setting")?
        .str()
        .map_err(|_| bad("`setting` is not text"))?
        .iter()
        .map(|s| s.unwrap_or("").to_string())
        .collect();
    let repeats: Vec<u32> =
        col("repeat")?.u32().map_err(|_| bad("`repeat` is not u32"))?.iter().map(|v| v.unwrap_or(0)).collect();
    let mpps: Vec<f64> =
        col("mpps")?.f64().map_err(|_| bad("`mpps` is not f64"))?.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
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
            stages: stages.iter().filter_map(|(s, v)| Some((s.clone(), v[i]?))).collect(),
            clocks: clocks.iter().filter_map(|(s, v)| Some((s.clone(), v[i]?))).collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

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
                    stages: BTreeMap::new(),
                    clocks: BTreeMap::new(),
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
        let p = std::env::temp_dir().join(format!("fwdscope-sweep-{}.parquet", std::process::id()));
        write_parquet(&p, &all).expect("write");
        use polars::prelude::SerReader;
        let df = polars::prelude::ParquetReader::new(std::fs::File::open(&p).expect("open")).finish().expect("read");
        assert_eq!(df.height(), 3);
        let names: Vec<String> = df.get_column_names().iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["setting", "repeat", "prefetch", "mpps", "lookup_per_packet"]);
        let mpps = df.column("mpps").expect("mpps").f64().expect("f64").get(1).expect("value");
        assert_eq!(mpps, all[1].mpps);
        std::fs::remove_file(&p).expect("remove");
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
}
