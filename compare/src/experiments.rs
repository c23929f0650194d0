//! The historic experiments the project grew from, as embedded TOML files
//! (fixtures/experiments/): their settings as the posts ran them, and what was reported
//! then, printed beside today's figures as ratios to the first setting (the hardware
//! differs by two decades). A file of the same form works too.

use crate::live_setting::LiveChange;
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
    /// The settings are steps taken one after another on one running forwarder, as the
    /// post took them (default false): each setting's run replays the steps before it,
    /// each `duration` seconds long and switched live, and is measured over its own last
    /// step's second half. A step's flags are what it changes (live-changeable ones only).
    #[serde(default)]
    pub phased: bool,
    /// How the original hardware is modelled, in words (printed with the results).
    #[serde(default)]
    pub model: Option<String>,
    /// Live mode's timing for this experiment (default: live mode's own, unless the
    /// command line gives one): a device on a thread of its own adapts its pace to the
    /// worker's for tens of ms after each switch and needs longer blocks and discards.
    #[serde(default)]
    pub live: Option<LiveTiming>,
    pub setting: Vec<ExperimentSetting>,
    /// Each setting's flags as parsed at load: what it changes live, and its start flags.
    #[serde(skip)]
    pub parsed: Vec<(LiveChange, Vec<String>)>,
}

/// Block and discard lengths of a live comparison, in ms.
#[derive(Debug, Clone, Copy, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveTiming {
    pub block_ms: u64,
    pub discard_ms: u64,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentSetting {
    pub label: String,
    #[serde(default)]
    pub flags: Vec<String>,
    pub reported: Option<f64>,
    /// Route-cache entries reported then (rtstat's `size`), when the post gave them.
    #[serde(default)]
    pub reported_entries: Option<f64>,
    /// GC goal misses reported then in the step's first second (rtstat's `goal_miss`: GC
    /// runs that could not free as many entries as they aimed at), a phased step's.
    #[serde(default)]
    pub reported_goal_miss: Option<f64>,
    /// Fraction of the run (of its step, in a phased experiment) at which the route cache
    /// is flushed.
    pub flush_at: Option<f64>,
}

/// Largest experiment file read: 1 MiB.
pub const MAX_EXPERIMENT_BYTES: usize = 1 << 20;

/// Why an experiment file is refused: the line to name, if any, and what is wrong.
type Refusal = (Option<usize>, String);

/// An embedded experiment by name, or an experiment file; errors name the file and line.
pub fn load_experiment(name: &str) -> Result<Experiment> {
    let (origin, text) = experiment_text(name)?;
    let bad = |(line, msg): Refusal| Error::Experiment { origin: origin.clone(), line, msg };
    let e = parse_experiment(&text).map_err(&bad)?;
    check_printable(&e).map_err(|msg| bad((None, msg)))?;
    check_bounds(&e, &text).map_err(&bad)?;
    let parsed = parse_setting_flags(&e).map_err(|msg| bad((None, msg)))?;
    Ok(Experiment { parsed, ..e })
}

/// Where experiment `name` comes from (an embedded one's fixture path, or the file's) and
/// its text.
fn experiment_text(name: &str) -> Result<(String, String)> {
    match EXPERIMENTS.iter().find(|(n, _)| *n == name) {
        Some((n, t)) => Ok((format!("fixtures/experiments/{n}.toml"), t.to_string())),
        None => {
            let p = Path::new(name);
            if !p.exists() {
                let known: Vec<&str> = EXPERIMENTS.iter().map(|(n, _)| *n).collect();
                return Err(Error::Config(format!(
                    "--experiment {name}: no such experiment (known: {}) and no such file",
                    known.join(", ")
                )));
            }
            Ok((p.display().to_string(), collector::files::read_to_string(p, collector::files::Kind::Description)?))
        }
    }
}

/// The experiment in `text`, with at least one setting; TOML errors name their line.
fn parse_experiment(text: &str) -> std::result::Result<Experiment, Refusal> {
    // Checked before TOML builds its tables: 1000 settings of a few flags each fit in a
    // few hundred kB.
    if text.len() > MAX_EXPERIMENT_BYTES {
        return Err((
            None,
            format!(
                "{} bytes: an experiment file is at most {} KiB (at most {} settings)",
                text.len(),
                MAX_EXPERIMENT_BYTES >> 10,
                crate::plan::MAX_SETTINGS
            ),
        ));
    }
    let e: Experiment = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        (line, e.message().to_string())
    })?;
    if e.setting.is_empty() {
        return Err((None, "no [[setting]]".into()));
    }
    Ok(e)
}

/// Words that are printed (tables, the page, table.txt) hold no control characters, which
/// a terminal would take as commands.
fn check_printable(e: &Experiment) -> std::result::Result<(), String> {
    let words =
        [("title", Some(&e.title)), ("source", Some(&e.source)), ("unit", Some(&e.unit)), ("model", e.model.as_ref())]
            .map(|(k, v)| (k.to_string(), v));
    let labels = e.setting.iter().enumerate().map(|(i, s)| (format!("[[setting]] {} label", i + 1), Some(&s.label)));
    for (key, value) in words.into_iter().chain(labels) {
        let Some(v) = value else { continue };
        if let Some(c) = v.chars().find(|c| c.is_control() && *c != '\n') {
            return Err(format!(
                "{key} `{}`: holds control character U+{:04X}; expected printable text",
                collector::printable(v.chars().take(60).collect()),
                c as u32
            ));
        }
    }
    Ok(())
}

/// The bounds the command line's flags have (named by the key's line in `text`), the live
/// timing's and the flush fraction's.
fn check_bounds(e: &Experiment, text: &str) -> std::result::Result<(), Refusal> {
    if let Err(msg) = crate::plan::check_plan(e.repeat, e.duration, e.setting.len()) {
        let key = if msg.starts_with("repeat") {
            "repeat"
        } else if msg.starts_with("duration") {
            "duration"
        } else {
            "[[setting]]"
        };
        let line = text.lines().position(|l| l.trim_start().starts_with(key)).map(|i| i + 1);
        return Err((line, msg));
    }
    if let Some(t) = e.live.filter(|t| t.block_ms == 0 || t.block_ms > 60_000 || t.discard_ms >= t.block_ms) {
        return Err((
            None,
            format!(
                "[live]: block_ms {} and discard_ms {}: a block is 1 to 60000 ms and keeps some of it after the discard",
                t.block_ms, t.discard_ms
            ),
        ));
    }
    if let Some(s) = e.setting.iter().find(|s| s.flush_at.is_some_and(|f| !(0.0..1.0).contains(&f))) {
        return Err((None, format!("setting `{}`: flush_at is a fraction of the run, 0 to 1", s.label)));
    }
    Ok(())
}

/// Each setting's flags, parsed once: what changes live typed, the rest kept as start
/// flags (a phased experiment's later steps switch live, so they have none).
fn parse_setting_flags(e: &Experiment) -> std::result::Result<Vec<(LiveChange, Vec<String>)>, String> {
    let mut parsed = Vec::with_capacity(e.setting.len());
    for (i, s) in e.setting.iter().enumerate() {
        let p = if e.phased && i > 0 {
            LiveChange::live_only(&s.label, &s.flags).map(|c| (c, Vec::new()))
        } else {
            LiveChange::split_flags(&s.label, &s.flags)
        };
        parsed.push(p.map_err(|x| x.to_string())?);
    }
    Ok(parsed)
}

impl Experiment {
    /// The settings compared (each without the experiment's shared `flags`, which start
    /// every run).
    pub fn settings(&self) -> Vec<Setting> {
        self.setting
            .iter()
            .enumerate()
            .map(|(i, s)| {
                // Phased: every run starts as the first step; the later steps switch live.
                let (change, start_flags) =
                    self.parsed.get(if self.phased { 0 } else { i }).cloned().unwrap_or_default();
                Setting {
                    label: s.label.clone(),
                    params: BTreeMap::new(),
                    start_flags,
                    change,
                    flush_at: if self.phased { None } else { s.flush_at },
                    reported: s.reported,
                    reported_entries: s.reported_entries,
                    reported_goal_miss: s.reported_goal_miss,
                    steps: if self.phased {
                        self.setting[1..=i]
                            .iter()
                            .zip(&self.parsed[1..=i])
                            .map(|(x, (change, _))| crate::plan::Step {
                                label: x.label.clone(),
                                change: *change,
                                flush_at: x.flush_at,
                            })
                            .collect()
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect()
    }
}

/// An experiment's settings beside what was reported then, each as a ratio to the first
/// setting (absolute rates are not comparable across two decades of hardware), with the
/// route-cache sizes then and now when the experiment reports sizes, and whether the
/// settings come out in the same order.
pub fn then_and_now(sets: &[Setting], sums: &[Summary], unit: &str) -> String {
    // A label from an experiment file pads its column up to 120 characters (a longer one
    // overflows its row; a width past 65,535 would panic the formatter).
    let w = sets.iter().map(|s| s.label.len()).max().unwrap_or(7).clamp(7, crate::results::MAX_LABEL_WIDTH);
    let base_then = sets.first().and_then(|s| s.reported);
    let base_now = sums.first().map(|s| s.median);
    let sizes = sets.iter().any(|s| s.reported_entries.is_some());
    let misses = sets.iter().any(|s| s.reported_goal_miss.is_some());
    let mut out = format!("\nthen and now, as ratios to `{}`:\n", sets.first().map_or("", |s| s.label.as_str()));
    out.push_str(&format!(
        "  {:<w$} {:>14} {:>8} {:>12} {:>8}",
        "setting",
        format!("then ({unit})"),
        "ratio",
        "now (Mpps)",
        "ratio"
    ));
    if sizes {
        out.push_str(&format!(" {:>13} {:>13}", "then entries", "now entries"));
    }
    if misses {
        out.push_str(&format!(" {:>12} {:>12}", "then misses", "now misses"));
    }
    out.push('\n');
    let now_of = |s: &Setting| sums.iter().find(|x| x.setting == s.label);
    for s in sets {
        let now = now_of(s).map(|x| x.median);
        let ratio = |v: Option<f64>, b: Option<f64>| match (v, b) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.3}", v / b),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "  {:<w$} {:>14} {:>8} {:>12} {:>8}",
            s.label,
            s.reported.map_or("-".into(), |v| format!("{v:.0}")),
            ratio(s.reported, base_then),
            now.map_or("-".into(), |v| format!("{v:.3}")),
            ratio(now, base_now),
        ));
        if sizes {
            let e = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
            out.push_str(&format!(" {:>13} {:>13}", e(s.reported_entries), e(now_of(s).and_then(|x| x.cache_entries))));
        }
        if misses {
            let e = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.0}"));
            out.push_str(&format!(
                " {:>12} {:>12}",
                e(s.reported_goal_miss),
                e(now_of(s).and_then(|x| x.step_goal_miss))
            ));
        }
        out.push('\n');
    }
    if misses {
        out.push_str(
            "  misses: GC goal misses in the step's first second (rtstat's goal_miss: runs that freed fewer entries \
             than they aimed at; each halves GC's expire)\n",
        );
    }
    // The order then and now, slowest first.
    let order = |key: &dyn Fn(&Setting) -> Option<f64>| -> Option<Vec<&str>> {
        // Only when every setting has a number (runs all left out give NaN: no order).
        let mut v: Vec<(&str, f64)> =
            sets.iter().map(|s| Some((s.label.as_str(), key(s).filter(|x| x.is_finite())?))).collect::<Option<_>>()?;
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        Some(v.into_iter().map(|x| x.0).collect())
    };
    if let (Some(then), Some(now)) = (order(&|s| s.reported), order(&|s| now_of(s).map(|x| x.median))) {
        let same = then == now;
        out.push_str(&format!(
            "  order, slowest first: then {}; now {}{}\n",
            then.join(" < "),
            now.join(" < "),
            if same { " (the same)" } else { " (DIFFERENT)" }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_words_with_control_characters_are_refused() {
        let p = std::env::temp_dir().join(format!("fwdscope-exp-esc-{}.toml", std::process::id()));
        let ok =
            "title = \"t\"\nsource = \"s\"\nunit = \"kpps\"\nrepeat = 1\nduration = 1.0\n[[setting]]\nlabel = \"a\"\n\
                  [[setting]]\nlabel = \"b\"\n";
        std::fs::write(&p, ok).unwrap();
        assert!(load_experiment(p.to_str().unwrap()).is_ok());
        for (from, to, want) in [
            (
                "label = \"b\"",
                "label = \"\\u001b[31mRED\\u001b]0;pwned\\u0007\"",
                "[[setting]] 2 label `\\u{1b}[31mRED",
            ),
            ("title = \"t\"", "title = \"t\\u001b[2J\"", "title `t\\u{1b}[2J`"),
            ("unit = \"kpps\"", "unit = \"k\\u009bpps\"", "unit `k\\u{9b}pps`: holds control character U+009B"),
        ] {
            std::fs::write(&p, ok.replace(from, to)).unwrap();
            let e = load_experiment(p.to_str().unwrap()).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\u{1b}'), "{e}");
        }
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn every_experiment_parses_and_bad_files_name_their_line() {
        for (name, _) in EXPERIMENTS {
            let e = load_experiment(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(e.setting.len() >= 2, "{name}");
            // The file's flags, parsed once: each setting starts a forwarder with its own
            // (a phased run with the first step's); the shared ones are not in the setting.
            for (i, s) in e.settings().iter().enumerate() {
                let want = &e.setting[if e.phased { 0 } else { i }].flags;
                assert_eq!(&s.flags(), want, "{name} setting {i}");
            }
        }
        let e = load_experiment("prefetch-2005").unwrap();
        let reported: Vec<f64> = e.setting.iter().filter_map(|s| s.reported).collect();
        assert_eq!(reported, [756.0, 805.0, 821.0, 803.0]);
        let p = std::env::temp_dir().join(format!("fwdscope-exp-{}.toml", std::process::id()));
        std::fs::write(&p, "title = \"t\"\nsource = \"s\"\nunit = \"kpps\"\nrepeat = 1\nduration = 1.0\n[[setting]]\nlabel = \"a\"\nflagz = []\n").unwrap();
        let err = load_experiment(p.to_str().unwrap()).unwrap_err().to_string();
        assert!(err.contains(":8:") && err.contains("flagz"), "{err}");
        assert!(load_experiment("no-such-experiment").unwrap_err().to_string().contains("known: prefetch-2005"));
        // The 2005 experiment models 2005's hardware: the device on a core of its own,
        // writing frames past the caches, and live blocks long enough for that device.
        let flags = e.flags.join(" ");
        assert!(flags.contains("--device thread") && flags.contains("--dma nt"), "{flags}");
        assert!(e.model.as_deref().is_some_and(|m| m.contains("non-temporal")));
        assert!(matches!(e.live, Some(LiveTiming { block_ms: 200, discard_ms: 50 })));
        // A live timing that leaves nothing to measure is refused.
        std::fs::write(
            &p,
            "title = \"t\"\nsource = \"s\"\nunit = \"kpps\"\nrepeat = 1\nduration = 1.0\n[live]\nblock_ms = 100\n\
             discard_ms = 100\n[[setting]]\nlabel = \"a\"\n[[setting]]\nlabel = \"b\"\n",
        )
        .unwrap();
        let err = load_experiment(p.to_str().unwrap()).unwrap_err().to_string();
        assert!(err.contains("[live]") && err.contains("discard_ms 100"), "{err}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn experiment_files_keep_the_command_lines_bounds() {
        let p = std::env::temp_dir().join(format!("fwdscope-exp-bounds-{}.toml", std::process::id()));
        let file = |repeat: &str, duration: &str| {
            format!(
                "title = \"t\"\nsource = \"s\"\nunit = \"kpps\"\nrepeat = {repeat}\nduration = {duration}\n\
                 [[setting]]\nlabel = \"a\"\n[[setting]]\nlabel = \"b\"\n"
            )
        };
        let origin = p.display().to_string();
        std::fs::write(&p, file("1000000000", "1.0")).unwrap();
        let e = load_experiment(&origin).unwrap_err().to_string();
        assert_eq!(e, format!("{origin}:4: repeat 1000000000: expected 1 to 1000 runs per setting"));
        std::fs::write(&p, file("1", "1e308")).unwrap();
        let e = load_experiment(&origin).unwrap_err().to_string();
        assert_eq!(e, format!("{origin}:5: duration 1e308: expected 0.1 to 31536000 seconds (one year)"));
        std::fs::write(&p, file("1", "-2")).unwrap();
        assert!(load_experiment(&origin).unwrap_err().to_string().contains(":5: duration -2: expected"));
        std::fs::write(&p, file("1000", "1.0")).unwrap();
        assert!(load_experiment(&origin).is_ok());
        std::fs::write(&p, file("1", "1e-300")).unwrap();
        let e = load_experiment(&origin).unwrap_err().to_string();
        assert!(e.contains(":5: duration 1e-300: expected 0.1 to"), "{e}");
        // Far too many settings: refused by size before TOML builds them.
        let mut big = file("1", "1.0");
        big.push_str(&"[[setting]]\nlabel = \"x\"\nflags = []\n".repeat(40_000));
        std::fs::write(&p, big).unwrap();
        let e = load_experiment(&origin).unwrap_err().to_string();
        assert!(e.contains("an experiment file is at most 1024 KiB"), "{e}");
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
                kept_contended: 0,
                median: *m,
                mean: *m,
                ci95: (*m, *m),
                stages: BTreeMap::new(),
                clocks: BTreeMap::new(),
                cache_entries: None,
                step_goal_miss: None,
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
        // The post reported no goal misses: no such columns.
        assert!(!t.contains("misses"), "{t}");
    }

    /// A phased experiment: every run starts as the first step, and setting k replays
    /// steps 1..=k live (the flush where its step asks); sizes then and now and the order
    /// are printed.
    #[test]
    fn phased_settings_replay_the_steps_before_them() {
        let e = load_experiment("rtcache-flood-2003").unwrap();
        assert!(e.phased);
        let sets = e.settings();
        assert_eq!(sets.len(), 4);
        assert!(sets.iter().all(|s| s.flags() == e.setting[0].flags), "every run starts as the first step");
        let steps: Vec<Vec<&str>> = sets.iter().map(|s| s.steps.iter().map(|x| x.label.as_str()).collect()).collect();
        assert_eq!(steps[0], Vec::<&str>::new());
        assert_eq!(steps[3], ["gc_min_interval 0", "then flush", "then small gc_thresh"]);
        assert_eq!(sets[3].steps[1].flush_at, Some(0.1));
        assert_eq!(sets[3].steps[0].change.gc.min_interval_ms, Some(0));
        assert_eq!(sets[3].steps[2].change.gc.thresh, Some(1024));
        let misses = [None, Some(1.0), Some(2670.0), Some(4068.0)];
        let sums: Vec<Summary> = [(1.0, 65000.0), (0.9, 60000.0), (2.0, 8200.0), (3.0, 1400.0)]
            .iter()
            .zip(&sets)
            .zip(misses)
            .map(|((&(m, n), s), miss)| Summary {
                setting: s.label.clone(),
                runs: 1,
                left_out: 0,
                kept_contended: 0,
                median: m,
                mean: m,
                ci95: (m, m),
                stages: BTreeMap::new(),
                clocks: BTreeMap::new(),
                cache_entries: Some(n),
                step_goal_miss: miss,
                best: false,
                vs_best: None,
            })
            .collect();
        let t = then_and_now(&sets, &sums, "kpps");
        let row = t.lines().find(|l| l.trim_start().starts_with("then flush")).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        // then, ratio, now, ratio, entries then and now, goal misses then and now.
        assert_eq!(cols[cols.len() - 4..], ["8204", "8200", "89", "2670"], "{row}");
        let row = t.lines().find(|l| l.trim_start().starts_with("default gc")).unwrap();
        assert!(row.ends_with("-            -"), "the first step has no switch: {row}");
        assert!(t.contains("then misses") && t.contains("misses: GC goal misses in the step's first second"), "{t}");
        let order = t.lines().find(|l| l.contains("order, slowest first")).unwrap();
        assert!(order.contains("now gc_min_interval 0 < default gc") && order.ends_with("(DIFFERENT)"), "{order}");
        // A setting whose runs were all left out has no rate: no order is claimed.
        let mut gone = sums.clone();
        gone[1].median = f64::NAN;
        assert!(!then_and_now(&sets, &gone, "kpps").contains("order, slowest first"));
        // A step that cannot change live is refused at load, naming it.
        let p = std::env::temp_dir().join(format!("fwdscope-phased-{}.toml", std::process::id()));
        std::fs::write(
            &p,
            "title = \"t\"\nsource = \"s\"\nunit = \"kpps\"\nrepeat = 1\nduration = 1.0\nphased = true\n[[setting]]\nlabel = \"a\"\n[[setting]]\nlabel = \"b\"\nflags = [\"--fib\", \"hash\"]\nreported = 1.0\n",
        )
        .unwrap();
        let err = load_experiment(p.to_str().unwrap()).unwrap_err().to_string();
        assert!(err.contains("setting b: --fib cannot change while the forwarder runs"), "{err}");
        std::fs::remove_file(&p).unwrap();
    }
}
