//! The historic experiments the project grew from, as embedded TOML files
//! (fixtures/experiments/): their settings as the posts ran them, and what was reported
//! then, printed beside today's figures as ratios to the first setting (the hardware
//! differs by two decades). A file of the same form works too.

use crate::plan::Setting;
use crate::results::Summary;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;

/// The historic experiments, embedded (fixtures/experiments/).
pub const EXPERIMENTS: [(&str, &str); 3] = [
    ("prefetch-2005", include_str!("../../fixtures/experiments/prefetch-2005.toml")),
    ("rtcache-flood-2003", include_str!("../../fixtures/experiments/rtcache-flood-2003.toml")),
    ("rtcache-removal-2012", include_str!("../../fixtures/experiments/rtcache-removal-2012.toml")),
];

/// An experiment file.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub title: String,
    pub source: String,
    pub unit: String,
    pub repeat: usize,
    pub duration: f64,
    /// Forwarder flags every setting shares.
    #[serde(default)]
    pub flags: Vec<String>,
    pub setting: Vec<ExperimentSetting>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSetting {
    pub label: String,
    #[serde(default)]
    pub flags: Vec<String>,
    pub reported: Option<f64>,
    /// Fraction of the run at which the route cache is flushed.
    pub flush_at: Option<f64>,
}

/// An embedded experiment by name, or an experiment file; errors name the file and line.
pub fn load_experiment(name: &str) -> Result<Experiment> {
    let (origin, text) = match EXPERIMENTS.iter().find(|(n, _)| *n == name) {
        Some((n, t)) => (format!("fixtures/experiments/{n}.toml"), t.to_string()),
        None => {
            let p = Path::new(name);
            if !p.exists() {
                let known: Vec<&str> = EXPERIMENTS.iter().map(|(n, _)| *n).collect();
                return Err(Error::Config(format!(
                    "--experiment {name}: no such experiment (known: {}) and no such file",
                    known.join(", ")
                )));
            }
            (p.display().to_string(), std::fs::read_to_string(p).map_err(|e| Error::io(p, e))?)
        }
    };
    let bad = |line: Option<usize>, msg: String| Error::Experiment { origin: origin.clone(), line, msg };
    let e: Experiment = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        bad(line, e.message().to_string())
    })?;
    if e.setting.is_empty() {
        return Err(bad(None, "no [[setting]]".into()));
    }
    if let Some(s) = e.setting.iter().find(|s| s.flush_at.is_some_and(|f| !(0.0..1.0).contains(&f))) {
        return Err(bad(None, format!("setting `{}`: flush_at is a fraction of the run, 0 to 1", s.label)));
    }
    Ok(e)
}

impl Experiment {
    pub fn settings(&self) -> Vec<Setting> {
        self.setting
            .iter()
            .map(|s| Setting {
                label: s.label.clone(),
                params: BTreeMap::new(),
                flags: self.flags.iter().chain(&s.flags).cloned().collect(),
                flush_at: s.flush_at,
                reported: s.reported,
            })
            .collect()
    }
}

/// An experiment's settings beside what was reported then, each as a ratio to the first
/// setting (absolute rates are not comparable across two decades of hardware).
pub fn then_and_now(sets: &[Setting], sums: &[Summary], unit: &str) -> String {
    let w = sets.iter().map(|s| s.label.len()).max().unwrap_or(7).max(7);
    let base_then = sets.first().and_then(|s| s.reported);
    let base_now = sums.first().map(|s| s.median);
    let mut out = format!("\nthen and now, as ratios to `{}`:\n", sets.first().map_or("", |s| s.label.as_str()));
    out.push_str(&format!(
        "  {:<w$} {:>14} {:>8} {:>12} {:>8}\n",
        "setting",
        format!("then ({unit})"),
        "ratio",
        "now (Mpps)",
        "ratio"
    ));
    for s in sets {
        let now = sums.iter().find(|x| x.setting == s.label).map(|x| x.median);
        let ratio = |v: Option<f64>, b: Option<f64>| match (v, b) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.3}", v / b),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "  {:<w$} {:>14} {:>8} {:>12} {:>8}\n",
            s.label,
            s.reported.map_or("-".into(), |v| format!("{v:.0}")),
            ratio(s.reported, base_then),
            now.map_or("-".into(), |v| format!("{v:.3}")),
            ratio(now, base_now),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_parses_and_bad_files_name_their_line() {
        for (name, _) in EXPERIMENTS {
            let e = load_experiment(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(e.setting.len() >= 2, "{name}");
            assert!(e.settings().iter().all(|s| s.flags.starts_with(&e.flags)));
        }
        let e = load_experiment("prefetch-2005").unwrap();
        let reported: Vec<f64> = e.setting.iter().filter_map(|s| s.reported).collect();
        assert_eq!(reported, [756.0, 805.0, 821.0, 803.0]);
        let p = std::env::temp_dir().join(format!("fwdscope-exp-{}.toml", std::process::id()));
        std::fs::write(&p, "title = \"t\"\nsource = \"s\"\nunit = \"kpps\"\nrepeat = 1\nduration = 1.0\n[[setting]]\nlabel = \"a\"\nflagz = []\n").unwrap();
        let err = load_experiment(p.to_str().unwrap()).unwrap_err().to_string();
        assert!(err.contains(":8:") && err.contains("flagz"), "{err}");
        assert!(load_experiment("no-such-experiment").unwrap_err().to_string().contains("known: prefetch-2005"));
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn then_and_now_in_ratios() {
        let e = load_experiment("prefetch-2005").unwrap();
        let sets = e.settings();
        let sums: Vec<Summary> = [1.0, 1.1]
            .iter()
            .zip(&sets)
            .map(|(m, s)| Summary {
                setting: s.label.clone(),
                runs: 1,
                left_out: 0,
                median: *m,
                mean: *m,
                ci95: (*m, *m),
                stages: BTreeMap::new(),
                clocks: BTreeMap::new(),
                best: false,
                vs_best: None,
            })
            .collect();
        let t = then_and_now(&sets, &sums, "kpps");
        let row = t.lines().find(|l| l.trim_start().starts_with("prefetch 1")).unwrap();
        // 805 / 756 = 1.065 then; 1.1 / 1.0 now.
        assert!(row.contains("805") && row.contains("1.065") && row.contains("1.100"), "{row}");
        let row = t.lines().find(|l| l.trim_start().starts_with("prefetch 5")).unwrap();
        assert!(row.ends_with("-"), "not measured: {row}");
    }
}
