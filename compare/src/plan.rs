//! What a comparison runs: settings (each a label, its swept parameters, what it changes
//! live, typed, and the flags only a forwarder's start takes) and the order of runs; the bounds every plan is held to, whether its
//! figures came from flags or an experiment file ([`check_plan`]), and how long it will take
//! ([`estimate_seconds`]).

use crate::live_setting::LiveChange;
use std::collections::BTreeMap;

/// Runs per setting, at most (`--repeat` and an experiment's `repeat`).
pub const MAX_REPEAT: usize = 1000;
/// Settings one comparison holds, at most (the product of the swept axes, or an
/// experiment's `[[setting]]`s).
pub const MAX_SETTINGS: usize = 1000;
/// Seconds per run (or per live comparison), at most: one year, as the forwarder's
/// `--duration`.
pub const MAX_RUN_SECONDS: f64 = 31_536_000.0;
/// The shortest run: 0.1 s (a shorter run forwards little beyond its start-up, and its
/// figures are left out as contended or NaN).
pub const MIN_RUN_SECONDS: f64 = 0.1;
/// Start-up and finishing work per run besides its forwarding seconds (building the table
/// and FIB, writing the recording), counted in [`estimate_seconds`]: about what a run of the
/// generated table takes here; a run of the full real table takes longer.
pub const RUN_OVERHEAD_SECONDS: f64 = 1.5;
/// A plan longer than this asks for `--yes`.
pub const CONFIRM_SECONDS: f64 = 3600.0;

/// A figure of seconds as a person reads it (`1e308`, not 309 digits).
pub use fwd_abi::seconds::seconds_text;

/// The bounds of a plan: `repeat` 1 to [`MAX_REPEAT`], `duration` above 0 and at most
/// [`MAX_RUN_SECONDS`], 1 to [`MAX_SETTINGS`] settings. The message names the figure
/// (as `repeat`, `duration`, `settings`) and what was expected.
pub fn check_plan(repeat: usize, duration: f64, settings: usize) -> Result<(), String> {
    if !(1..=MAX_REPEAT).contains(&repeat) {
        return Err(format!("repeat {repeat}: expected 1 to {MAX_REPEAT} runs per setting"));
    }
    if !duration.is_finite() || !(MIN_RUN_SECONDS..=MAX_RUN_SECONDS).contains(&duration) {
        return Err(format!(
            "duration {}: expected {MIN_RUN_SECONDS} to {MAX_RUN_SECONDS} seconds (one year)",
            seconds_text(duration)
        ));
    }
    if !(1..=MAX_SETTINGS).contains(&settings) {
        return Err(format!("{settings} settings: expected 1 to {MAX_SETTINGS} (sweep fewer values at once)"));
    }
    Ok(())
}

/// How many settings the axes make (their values multiplied; axes without values count
/// once), saturating: checked before [`settings`] builds them.
pub fn setting_count(axes: &[Axis]) -> usize {
    axes.iter().filter(|a| !a.is_empty()).fold(1usize, |n, a| n.saturating_mul(a.len()))
}

/// Seconds a multi-process sweep takes at least: every run's forwarding plus
/// [`RUN_OVERHEAD_SECONDS`] each.
pub fn estimate_seconds(settings: usize, repeat: usize, duration: f64) -> f64 {
    (settings as f64) * (repeat as f64) * (duration + RUN_OVERHEAD_SECONDS)
}

/// A duration as hours, minutes and seconds (`2 h 05 min`, `3 min 20 s`, `12 s`).
pub fn duration_text(secs: f64) -> String {
    if !secs.is_finite() {
        return "forever".into();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ if s < 86_400 * 2 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        _ => format!("{:.1} days", secs / 86_400.0),
    }
}

/// One swept parameter and its values, typed: the live-changeable ones as what they
/// change ([`LiveChange`]), the others as the start flag `--NAME value` (the FIB engine,
/// the worker count: a forwarder process is started with them).
#[derive(Debug, Clone, PartialEq)]
pub enum Axis {
    Prefetch(Vec<fwd_abi::Prefetch>),
    Cache(Vec<fwd_abi::CacheMode>),
    SpinNs(Vec<u32>),
    /// A flag only a forwarder's start takes: its name without `--` and its values.
    Start {
        name: String,
        values: Vec<String>,
    },
}

impl Axis {
    /// A start-only axis: flag `--NAME` with `values`.
    pub fn start(name: &str, values: impl IntoIterator<Item = impl ToString>) -> Axis {
        Axis::Start { name: name.to_string(), values: values.into_iter().map(|v| v.to_string()).collect() }
    }

    /// The axis's name (its flag without `--`), as the setting labels and parameters show it.
    pub fn name(&self) -> &str {
        match self {
            Axis::Prefetch(_) => "prefetch",
            Axis::Cache(_) => "cache",
            Axis::SpinNs(_) => "spin-ns",
            Axis::Start { name, .. } => name,
        }
    }

    /// How many values it has.
    pub fn len(&self) -> usize {
        match self {
            Axis::Prefetch(v) => v.len(),
            Axis::Cache(v) => v.len(),
            Axis::SpinNs(v) => v.len(),
            Axis::Start { values, .. } => values.len(),
        }
    }

    /// Whether it has no value (an axis not swept).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i` as text, and `setting` changed to it.
    fn apply(&self, i: usize, setting: &mut Setting) -> String {
        let c = &mut setting.change;
        match self {
            Axis::Prefetch(v) => {
                c.prefetch = Some(v[i]);
                v[i].to_string()
            }
            Axis::Cache(v) => {
                c.cache = Some(v[i]);
                v[i].name().to_string()
            }
            Axis::SpinNs(v) => {
                c.spin_ns = Some(v[i]);
                v[i].to_string()
            }
            Axis::Start { name, values } => {
                setting.start_flags.extend([format!("--{name}"), values[i].clone()]);
                values[i].clone()
            }
        }
    }
}

/// One setting: its label, its parameters, what it changes live and the flags only a
/// forwarder's start takes; [`Setting::flags`] are the forwarder flags that make it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Setting {
    pub label: String,
    /// The swept parameters as text (the results' columns), by axis name.
    pub params: BTreeMap<String, String>,
    /// Flags only a forwarder's start takes (`--fib dir24`, `--workers 2`, an experiment's
    /// other flags), in order.
    pub start_flags: Vec<String>,
    /// What it changes that a running forwarder can change too (typed once).
    pub change: LiveChange,
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

impl Setting {
    /// The forwarder flags that start a forwarder in this setting: the start flags, then
    /// what it changes ([`LiveChange::flags`]).
    pub fn flags(&self) -> Vec<String> {
        self.start_flags.iter().cloned().chain(self.change.flags()).collect()
    }
}

/// A step of a phased experiment: what it changes live, and when in the step the route
/// cache is flushed (a fraction of it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    pub label: String,
    pub change: LiveChange,
    pub flush_at: Option<f64>,
}

/// Every combination of the axes' values, first axis outermost (one setting, `base`, when
/// nothing is swept). Axes with no values are skipped.
pub fn settings(axes: &[Axis]) -> Vec<Setting> {
    let mut out = vec![Setting::default()];
    for axis in axes.iter().filter(|a| !a.is_empty()) {
        let name = axis.name();
        out = out
            .into_iter()
            .flat_map(|s| {
                (0..axis.len()).map(move |i| {
                    let mut n = s.clone();
                    let v = axis.apply(i, &mut n);
                    n.label =
                        if n.label.is_empty() { format!("{name} {v}") } else { format!("{}, {name} {v}", n.label) };
                    n.params.insert(name.to_string(), v);
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
        let p = |d| fwd_abi::Prefetch::new(d).unwrap();
        let s = settings(&[
            Axis::Prefetch(vec![p(0), p(2)]),
            Axis::Cache(vec![fwd_abi::CacheMode::Rtcache, fwd_abi::CacheMode::Nocache]),
            Axis::start("workers", [1]),
        ]);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "prefetch 0, cache rtcache, workers 1",
                "prefetch 0, cache nocache, workers 1",
                "prefetch 2, cache rtcache, workers 1",
                "prefetch 2, cache nocache, workers 1"
            ]
        );
        assert_eq!(s[3].flags(), ["--workers", "1", "--prefetch", "2", "--cache", "nocache"]);
        assert_eq!(s[3].params["cache"], "nocache");
        assert_eq!(s[3].change.prefetch, Some(p(2)));
        // 3 settings x 3 repeats: each round rotated; no setting twice in a row.
        let o = order(3, 3);
        assert_eq!(o.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        assert!(o.windows(2).all(|w| w[0].0 != w[1].0));
        assert_eq!(settings(&[])[0].label, "base");
        assert_eq!(settings(&[Axis::start("fib", Vec::<String>::new())])[0].label, "base");
    }

    #[test]
    fn plans_are_bounded_and_estimated_as_flags_and_files_alike() {
        assert_eq!(check_plan(5, 3.0, 4), Ok(()));
        assert_eq!(check_plan(0, 3.0, 4).unwrap_err(), "repeat 0: expected 1 to 1000 runs per setting");
        assert!(check_plan(1_000_000_000, 3.0, 4).unwrap_err().starts_with("repeat 1000000000: expected"));
        let e = check_plan(5, 1e308, 4).unwrap_err();
        assert_eq!(e, "duration 1e308: expected 0.1 to 31536000 seconds (one year)");
        assert_eq!(
            check_plan(5, 1e-300, 4).unwrap_err(),
            "duration 1e-300: expected 0.1 to 31536000 seconds (one year)"
        );
        assert!(check_plan(5, 0.05, 4).unwrap_err().starts_with("duration 0.05: expected 0.1"));
        assert!(check_plan(5, f64::NAN, 4).unwrap_err().starts_with("duration NaN"));
        assert!(check_plan(5, 0.0, 4).unwrap_err().starts_with("duration 0:"));
        assert!(check_plan(5, 3.0, 1_000_000).unwrap_err().starts_with("1000000 settings: expected 1 to 1000"));
        // The product of the axes, counted before it is built.
        let axes =
            [Axis::start("prefetch", 0..1000), Axis::start("cache", ["a", "b"]), Axis::start("fib", Vec::<u8>::new())];
        assert_eq!(setting_count(&axes), 2000);
        assert_eq!(setting_count(&[]), 1);
        // 4 settings x 5 runs x (3 s + 1.5 s) = 90 s.
        assert_eq!(estimate_seconds(4, 5, 3.0), 90.0);
        assert_eq!(duration_text(90.0), "1 min 30 s");
        assert_eq!(duration_text(7500.0), "2 h 05 min");
        assert_eq!(duration_text(6.0 * 86_400.0), "6.0 days");
        assert_eq!(duration_text(12.4), "12 s");
    }
}
