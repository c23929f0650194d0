//! Sweep statistics: the runs of several settings (repeated, interleaved) summarized per
//! setting: median Mpps, the mean's 95% confidence interval (Student's t), the median cost
//! per packet of each stage, the best setting (highest median), and whether each other
//! setting differs from the best significantly (Welch's two-sided t-test, alpha 0.05).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::BTreeMap;

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
    pub best: bool,
    /// Against the best setting (none for the best itself).
    pub vs_best: Option<Comparison>,
}

pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn mean_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = if xs.len() > 1 { xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (m, v)
}

/// The mean and its 95% confidence interval (Student's t with n-1 degrees of freedom).
pub fn mean_ci95(xs: &[f64]) -> (f64, (f64, f64)) {
    let (m, v) = mean_var(xs);
    if xs.len() < 2 || v == 0.0 {
        return (m, (m, m));
    }
    let t = StudentsT::new(0.0, 1.0, (xs.len() - 1) as f64).map_or(f64::NAN, |d| d.inverse_cdf(0.975));
    let h = t * (v / xs.len() as f64).sqrt();
    (m, (m - h, m + h))
}

/// Welch's two-sided t-test p-value for a difference of means (1.0 when it cannot be
/// computed: fewer than two runs on a side).
pub fn welch_p(a: &[f64], b: &[f64]) -> f64 {
    if a.len() < 2 || b.len() < 2 {
        return 1.0;
    }
    let ((ma, va), (mb, vb)) = (mean_var(a), mean_var(b));
    let (sa, sb) = (va / a.len() as f64, vb / b.len() as f64);
    if sa + sb == 0.0 {
        return if ma == mb { 1.0 } else { 0.0 };
    }
    let t = (ma - mb) / (sa + sb).sqrt();
    let df = (sa + sb).powi(2) / (sa * sa / (a.len() - 1) as f64 + sb * sb / (b.len() - 1) as f64);
    match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => (2.0 * (1.0 - d.cdf(t.abs()))).clamp(0.0, 1.0),
        Err(_) => 1.0,
    }
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
            for r in of(s) {
                for (k, v) in &r.stages {
                    stage_vals.entry(k.clone()).or_default().push(*v);
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
    out
}

/// Every run as one Parquet file: setting, repeat, one column per swept parameter, mpps,
/// and `<stage>_per_packet` per stage (null where a run has none).
pub fn write_parquet(path: &std::path::Path, runs: &[RunResult]) -> crate::Result<()> {
    use polars::prelude::*;
    let err = |e: PolarsError| crate::Error::Export(format!("{}: {e}", path.display()));
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
    let mut df = DataFrame::new_infer_height(cols).map_err(err)?;
    let f = std::fs::File::create(path).map_err(|e| crate::Error::Io { path: path.into(), source: e })?;
    ParquetWriter::new(f).finish(&mut df).map_err(err)?;
    Ok(())
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
    fn statistics_by_hand() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        // Mean 2, sd 1, n 3: t(0.975, 2) = 4.302653 -> half width 4.302653 / sqrt(3).
        let (m, (lo, hi)) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert_eq!(m, 2.0);
        assert!((hi - 2.0 - 4.302653 / 3f64.sqrt()).abs() < 1e-5, "{lo} {hi}");
        // Welch by hand: a = 1,2,3 b = 4,5,6: t = -3 / sqrt(2/3), df = 4, p = 0.0213.
        assert!((welch_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]) - 0.02131).abs() < 1e-4);
        assert_eq!(welch_p(&[1.0], &[2.0, 3.0]), 1.0, "one run: no test");
        assert_eq!(welch_p(&[2.0, 2.0], &[2.0, 2.0]), 1.0);
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
