//! What a comparison runs: settings (each a label, its swept parameters and the forwarder
//! flags that make it) and the order of runs.

use std::collections::BTreeMap;

/// One swept parameter: its forwarder flag name (`prefetch` for `--prefetch`) and values.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub name: String,
    pub values: Vec<String>,
}

impl Axis {
    pub fn new(name: &str, values: impl IntoIterator<Item = impl ToString>) -> Axis {
        Axis { name: name.to_string(), values: values.into_iter().map(|v| v.to_string()).collect() }
    }
}

/// One setting: its label, its parameters, and the forwarder flags that make it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Setting {
    pub label: String,
    pub params: BTreeMap<String, String>,
    pub flags: Vec<String>,
    /// Flush the route cache at this fraction of the run (through the control block).
    pub flush_at: Option<f64>,
    /// What was reported then, in the experiment's unit.
    pub reported: Option<f64>,
    /// Route-cache entries reported then (an experiment's), when known.
    pub reported_entries: Option<f64>,
    /// GC goal misses reported then in the first second of this setting's step (rtstat's
    /// `goal_miss`), when known.
    pub reported_goal_miss: Option<f64>,
    /// A phased experiment's steps after the first, applied live one after another, each
    /// a run duration apart (empty: an ordinary run).
    pub steps: Vec<Step>,
}

/// A step of a phased experiment: live-changeable flags, and when in the step the route
/// cache is flushed (a fraction of it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    pub label: String,
    pub flags: Vec<String>,
    pub flush_at: Option<f64>,
}

/// Every combination of the axes' values, first axis outermost (one setting, `base`, when
/// nothing is swept). Axes with no values are skipped.
pub fn settings(axes: &[Axis]) -> Vec<Setting> {
    let mut out = vec![Setting::default()];
    for Axis { name, values } in axes.iter().filter(|a| !a.values.is_empty()) {
        out = out
            .into_iter()
            .flat_map(|s| {
                values.iter().map(move |v| {
                    let mut n = s.clone();
                    n.label =
                        if n.label.is_empty() { format!("{name} {v}") } else { format!("{}, {name} {v}", n.label) };
                    n.params.insert(name.to_string(), v.clone());
                    n.flags.extend([format!("--{name}"), v.clone()]);
                    n
                })
            })
            .collect();
    }
    if out.len() == 1 && out[0].label.is_empty() {
        out[0].label = "base".into();
    }
    out
}

/// The run order: round r runs the settings rotated by r (interleaved: no setting's repeats
/// in a row, and each setting takes each position in turn). Pairs of (setting, round).
pub fn order(n_settings: usize, repeat: usize) -> Vec<(usize, usize)> {
    (0..repeat).flat_map(|r| (0..n_settings).map(move |i| ((i + r) % n_settings, r))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_the_product_and_runs_interleave() {
        let s = settings(&[Axis::new("prefetch", [0, 2]), Axis::new("cache", ["rtcache", "nocache"])]);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "prefetch 0, cache rtcache",
                "prefetch 0, cache nocache",
                "prefetch 2, cache rtcache",
                "prefetch 2, cache nocache"
            ]
        );
        assert_eq!(s[3].flags, ["--prefetch", "2", "--cache", "nocache"]);
        // 3 settings x 3 repeats: each round rotated; no setting twice in a row.
        let o = order(3, 3);
        assert_eq!(o.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        assert!(o.windows(2).all(|w| w[0].0 != w[1].0));
        assert_eq!(settings(&[])[0].label, "base");
        assert_eq!(settings(&[Axis::new("fib", Vec::<String>::new())])[0].label, "base");
    }
}
