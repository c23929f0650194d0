//! `fwdscope sweep`: the bundled forwarder over every combination of the swept settings
//! (prefetch depth, cache mode, FIB engine, workers), each repeated, in interleaved order
//! (round r runs the settings rotated by r, so drift spreads over all of them); every run
//! is a recording; then one results Parquet and the table (analyzer::sweep).
//!
//! `--experiment NAME` runs one of the historic experiments (fixtures/experiments/NAME.toml,
//! embedded in the binary; a path works too): its settings as the posts ran them, then its
//! table beside what was reported then, both as ratios to the first setting (the hardware
//! differs by two decades).

use crate::record::forwarder_command;
use analyzer::rules::Rules;
use analyzer::sweep::{summarize, table_text, write_parquet, RunResult};
use anyhow::{bail, Context, Result};
use collector::recording::Recording;
use collector::session::{record, RecordOptions, Target};
use forwarder::config::CacheMode;
use forwarder::fib::FibKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Prefetch depths to sweep, e.g. 0,1,2,3,4,5.
    #[arg(long, value_delimiter = ',')]
    pub prefetch: Vec<u8>,
    /// Cache modes to sweep, e.g. rtcache,nocache,nhcache.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub cache: Vec<CacheMode>,
    /// FIB engines to sweep, e.g. hash,lctrie,dir24.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub fib: Vec<FibKind>,
    /// Worker counts to sweep, e.g. 1,2.
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// Runs per setting [default: 5, or the experiment's].
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Seconds of forwarding per run [default: 3, or the experiment's].
    #[arg(long)]
    pub duration: Option<f64>,
    /// A historic experiment: prefetch-2005, rtcache-flood-2003, rtcache-removal-2012, or a
    /// TOML file of the same form.
    #[arg(long, conflicts_with_all = ["prefetch", "cache", "fib", "workers"])]
    pub experiment: Option<String>,
    /// Output directory: runs/NNN/ recordings, results.parquet, table.txt.
    #[arg(short = 'o', long, default_value = "sweep-out")]
    pub output: PathBuf,
    /// Replace an existing output directory.
    #[arg(long)]
    pub force: bool,
    /// Samples per second in each run's recording.
    #[arg(short = 'F', long, default_value_t = 999)]
    pub freq: u64,
    /// Record callchains (charges shared helpers to their caller's stage; costs a little).
    #[arg(short = 'g')]
    pub callchain: bool,
    /// Forwarder flags every run shares (after `--`).
    #[arg(last = true)]
    pub rest: Vec<String>,
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
}

/// The historic experiments, embedded (fixtures/experiments/).
pub const EXPERIMENTS: [(&str, &str); 3] = [
    ("prefetch-2005", include_str!("../fixtures/experiments/prefetch-2005.toml")),
    ("rtcache-flood-2003", include_str!("../fixtures/experiments/rtcache-flood-2003.toml")),
    ("rtcache-removal-2012", include_str!("../fixtures/experiments/rtcache-removal-2012.toml")),
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
                bail!("--experiment {name}: no such experiment (known: {}) and no such file", known.join(", "));
            }
            (p.display().to_string(), std::fs::read_to_string(p).with_context(|| format!("reading {name}"))?)
        }
    };
    let e: Experiment = toml::from_str(&text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start].matches('\n').count() + 1);
        anyhow::anyhow!("{origin}{}: {}", line.map_or(String::new(), |l| format!(":{l}")), e.message())
    })?;
    if e.setting.is_empty() {
        bail!("{origin}: no [[setting]]");
    }
    if let Some(s) = e.setting.iter().find(|s| s.flush_at.is_some_and(|f| !(0.0..1.0).contains(&f))) {
        bail!("{origin}: setting `{}`: flush_at is a fraction of the run, 0 to 1", s.label);
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

/// Every combination of the swept values (one setting, the base, when nothing is swept).
pub fn settings(a: &SweepArgs) -> Vec<Setting> {
    let mut axes: Vec<(&str, Vec<String>)> = Vec::new();
    let names = |v: Vec<String>| v;
    if !a.prefetch.is_empty() {
        axes.push(("prefetch", names(a.prefetch.iter().map(u8::to_string).collect())));
    }
    if !a.cache.is_empty() {
        axes.push(("cache", a.cache.iter().map(|c| c.name().to_string()).collect()));
    }
    if !a.fib.is_empty() {
        axes.push(("fib", a.fib.iter().map(|f| f.to_string()).collect()));
    }
    if !a.workers.is_empty() {
        axes.push(("workers", a.workers.iter().map(usize::to_string).collect()));
    }
    let mut out = vec![Setting::default()];
    for (name, values) in &axes {
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
/// in a row, and each setting takes each position in turn).
pub fn order(n_settings: usize, repeat: usize) -> Vec<(usize, usize)> {
    (0..repeat).flat_map(|r| (0..n_settings).map(move |i| ((i + r) % n_settings, r))).collect()
}

/// Forwarded Mpps of a recording: tx_packets of every worker, last minus first, over the
/// time between those counter rows.
fn mpps(rec: &Recording) -> Result<f64> {
    let rows: Vec<_> =
        rec.counters()?.into_iter().filter(|r| r.source == "forwarder" && r.name == "tx_packets").collect();
    let (Some(t0), Some(t1)) = (rows.iter().map(|r| r.time).min(), rows.iter().map(|r| r.time).max()) else {
        bail!("{}: no forwarder counters (did the forwarder start?)", rec.dir.display());
    };
    let at = |t: u64| -> u64 { rows.iter().filter(|r| r.time == t).map(|r| r.value).sum() };
    if t1 <= t0 {
        bail!("{}: the counters cover no time", rec.dir.display());
    }
    Ok((at(t1).saturating_sub(at(t0))) as f64 / ((t1 - t0) as f64 / 1e9) / 1e6)
}

/// The stats segment of a forwarder this process started (a child of ours), once running.
fn child_segment() -> Option<forwarder::stats::Segment> {
    let me = std::process::id();
    for e in std::fs::read_dir("/dev/shm").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) =
            name.to_str().and_then(|n| n.strip_prefix("fwdscope-")?.strip_suffix(".stats")?.parse::<u32>().ok())
        else {
            continue;
        };
        // /proc/PID/stat: `pid (comm) state ppid ...`; comm may hold spaces, so split after ')'.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(me) {
            if let Ok(seg) = forwarder::stats::Segment::open(&e.path()) {
                if seg.pid() == pid && seg.state() == forwarder::stats::State::Running {
                    return Some(seg);
                }
            }
        }
    }
    None
}

/// Flush the route cache of the forwarder we start next once it has run for `after`.
fn flush_later(after: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Some(seg) = child_segment() {
                std::thread::sleep(after);
                seg.request_flush();
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// What every run of a sweep shares, and where its time went.
struct Runner<'a> {
    a: &'a SweepArgs,
    duration: f64,
    program: PathBuf,
    base: Vec<String>,
    /// One symbolizer for the whole sweep: the binary and the kernel are the same each run.
    sym: Option<analyzer::symbolize::Symbolizer>,
    /// The forwarder's start-up, its runs and writing the recordings.
    recording: Duration,
    /// Reading the recordings back and their stage tables.
    analysis: Duration,
}

impl Runner<'_> {
    fn run_one(&mut self, s: &Setting, dir: &Path) -> Result<RunResult> {
        let (a, duration) = (self.a, self.duration);
        let mut args = self.base.clone();
        args.extend(a.rest.iter().cloned());
        args.extend(s.flags.iter().cloned());
        args.extend(["--duration".to_string(), duration.to_string(), "-i".into(), duration.to_string()]);
        let flusher = s.flush_at.map(|f| flush_later(Duration::from_secs_f64(duration * f)));
        let mut o = RecordOptions::new(dir.to_path_buf(), Target::Forwarder { program: self.program.clone(), args });
        o.force = true;
        o.freq = Some(a.freq);
        o.callchain = a.callchain;
        let t_rec = Instant::now();
        record(&o, &AtomicBool::new(false), None, &mut |_| {})?;
        self.recording += t_rec.elapsed();
        if let Some(f) = flusher {
            let _ = f.join();
        }
        let t_an = Instant::now();
        let rec = Recording::open(dir)?;
        let (t, sym) = analyzer::stages::stage_table_reusing(&rec, &Rules::builtin(), self.sym.take())?;
        self.sym = Some(sym);
        let res = RunResult {
            setting: s.label.clone(),
            params: s.params.clone(),
            repeat: 0,
            mpps: mpps(&rec)?,
            stages: t.stages.iter().filter_map(|r| Some((r.stage.clone(), r.per_packet?))).collect(),
        };
        self.analysis += t_an.elapsed();
        Ok(res)
    }
}

pub fn run(a: &SweepArgs) -> Result<()> {
    let t0 = Instant::now();
    let exp = a.experiment.as_deref().map(load_experiment).transpose()?;
    let repeat = a.repeat.or(exp.as_ref().map(|e| e.repeat)).unwrap_or(5);
    let duration = a.duration.or(exp.as_ref().map(|e| e.duration)).unwrap_or(3.0);
    if repeat == 0 || !duration.is_finite() || duration <= 0.0 {
        bail!("--repeat must be at least 1 and --duration positive");
    }
    if a.output.exists() {
        if !a.force {
            bail!("{} exists (use --force to replace it)", a.output.display());
        }
        std::fs::remove_dir_all(&a.output).with_context(|| format!("removing {}", a.output.display()))?;
    }
    std::fs::create_dir_all(a.output.join("runs"))?;
    let sets = match &exp {
        Some(e) => e.settings(),
        None => settings(a),
    };
    let plan = order(sets.len(), repeat);
    let (program, base) = forwarder_command(&None)?;
    let bar = indicatif::ProgressBar::new(plan.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {elapsed} elapsed, {eta} left  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results = Vec::new();
    let mut runner =
        Runner { a, duration, program, base, sym: None, recording: Duration::ZERO, analysis: Duration::ZERO };
    for (k, &(si, r)) in plan.iter().enumerate() {
        let s = &sets[si];
        bar.set_message(format!("{} (repeat {})", s.label, r + 1));
        let dir = a.output.join("runs").join(format!("{:03}", k + 1));
        let mut res = runner.run_one(s, &dir).with_context(|| format!("run {} ({})", k + 1, s.label))?;
        res.repeat = r;
        results.push(res);
        bar.inc(1);
    }
    bar.finish_and_clear();
    write_parquet(&a.output.join("results.parquet"), &results)?;
    let sums = summarize(&results);
    let wall = t0.elapsed();
    let stages = ["lookup", "gc", "slab", "driver", "ip"];
    let event = Recording::open(&a.output.join("runs").join("001")).map(|r| r.meta.sampling.used).unwrap_or_default();
    let mut text = String::new();
    if let Some(e) = &exp {
        text.push_str(&format!("experiment: {}\nsource: {}\n", e.title, e.source));
    }
    text.push_str(&format!(
        "sweep: {} settings x {repeat} repeats, {duration:.1} s each, interleaved; stages sampled with {event}\n",
        sets.len(),
    ));
    text.push_str(&table_text(&sums, &stages, if event.ends_with("clock") { "ns" } else { &event }));
    if let Some(e) = &exp {
        text.push_str(&then_and_now(&sets, &sums, &e.unit));
    }
    let forwarding = Duration::from_secs_f64(duration * plan.len() as f64);
    let overhead = wall.saturating_sub(forwarding);
    let secs = |d: Duration| d.as_secs_f64();
    text.push_str(&format!(
        "time: {:.2} s in all, {:.2} s forwarding; overhead {:.2} s = {:.1}% (start-up and recording {:.2} s, \
         analysis {:.2} s, the rest {:.2} s)\n",
        secs(wall),
        secs(forwarding),
        secs(overhead),
        100.0 * secs(overhead) / secs(wall).max(1e-9),
        secs(runner.recording.saturating_sub(forwarding)),
        secs(runner.analysis),
        secs(wall.saturating_sub(runner.recording + runner.analysis)),
    ));
    std::fs::write(a.output.join("table.txt"), &text)?;
    print!("{text}");
    println!("runs: {}/runs/NNN  results: {}/results.parquet", a.output.display(), a.output.display());
    Ok(())
}

/// An experiment's settings beside what was reported then, each as a ratio to the first
/// setting (absolute rates are not comparable across two decades of hardware).
pub fn then_and_now(sets: &[Setting], sums: &[analyzer::sweep::Summary], unit: &str) -> String {
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
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        a: SweepArgs,
    }

    #[test]
    fn settings_are_the_product_and_runs_interleave() {
        let c = Cli::parse_from(["x", "--prefetch", "0,2", "--cache", "rtcache,nocache", "--", "--routes", "1000"]);
        let s = settings(&c.a);
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
        assert_eq!(c.a.rest, ["--routes", "1000"]);
        // 3 settings x 3 repeats: each round rotated; no setting twice in a row.
        let o = order(3, 3);
        assert_eq!(o.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        assert!(o.windows(2).all(|w| w[0].0 != w[1].0));
        assert_eq!(settings(&Cli::parse_from(["x"]).a)[0].label, "base");
    }

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
        let sums: Vec<analyzer::sweep::Summary> = [1.0, 1.1]
            .iter()
            .zip(&sets)
            .map(|(m, s)| analyzer::sweep::Summary {
                setting: s.label.clone(),
                runs: 1,
                median: *m,
                mean: *m,
                ci95: (*m, *m),
                stages: BTreeMap::new(),
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
