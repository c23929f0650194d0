//! `sweep`'s flags (clap, with the `clap` feature) and what they become: the settings
//! compared (an experiment's, or the product of the swept axes), every run's forwarder
//! flags checked before anything is created or replaced, the plan's length (above an
//! hour only with --yes), and the [`SweepOptions`] or [`LiveOptions`] the runners take.
//! compare never links the forwarder: the caller names the forwarder to start and lends
//! its flag check ([`Forwarder`]).

use crate::live::{LiveChange, LiveOptions, LiveSetting, RecordAlong};
use crate::plan::{check_plan, duration_text, estimate_seconds, seconds_text, setting_count, settings, Axis, Setting};
use crate::runner::{DatasetTarget, SweepOptions};
use crate::{Error, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
/// `fwdscope sweep`'s flags.
pub struct SweepArgs {
    /// Prefetch depths to sweep, e.g. 0,1,2,3,4,5.
    #[arg(long, value_delimiter = ',')]
    pub prefetch: Vec<fwd_abi::Prefetch>,
    /// Cache modes to sweep, e.g. rtcache,nocache,nhcache.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub cache: Vec<fwd_abi::CacheMode>,
    /// FIB engines to sweep, e.g. hash,lctrie,dir24.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub fib: Vec<fwd_abi::FibKind>,
    /// Worker counts to sweep, e.g. 1,2.
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// Calibration costs to sweep, ns per forwarded packet, e.g. 0,20 (a known difference
    /// to check that a comparison finds it).
    #[arg(long = "spin-ns", value_delimiter = ',')]
    pub spin_ns: Vec<u32>,
    /// Live mode: one forwarder (its synthetic device inline unless --device is given);
    /// the settings (prefetch, cache mode, calibration cost) alternate in short blocks in a
    /// balanced random order (ABBA for two), each compared with the first through paired
    /// differences of neighbouring blocks. --duration is then the whole comparison's length
    /// [default 30].
    #[arg(long)]
    pub live: bool,
    /// Live mode: block length in ms [default: 50, or the experiment's].
    #[arg(long, requires = "live", value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub block_ms: Option<u64>,
    /// Live mode: ms discarded as warm-up after each switch (measure with --settle; with
    /// `--device thread` use 50 and blocks of 100 or more) [default: 10, or the experiment's].
    #[arg(long, requires = "live", value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub discard_ms: Option<u64>,
    /// Live mode: seed of the block order [default: from the clock; printed].
    #[arg(long, requires = "live")]
    pub seed: Option<u64>,
    /// Live mode: compare the first setting with itself (A/A): the noise floor.
    #[arg(long, requires = "live")]
    pub aa: bool,
    /// Live mode: compare forwarder programs instead of settings (two builds of the
    /// forwarder, to decide a code change), given twice or more as `[LABEL=]PATH`, the first
    /// the baseline. Each runs as its own process with the flags after `--`; in each block
    /// only the one measured runs, the others stopped (SIGSTOP). A `fwdscope` binary is
    /// started as `fwdscope forward`, any other program with the forwarder flags alone.
    #[arg(long = "program", value_name = "[LABEL=]PATH", requires = "live",
          conflicts_with_all = ["prefetch", "cache", "spin_ns", "experiment", "aa", "record"])]
    pub programs: Vec<String>,
    /// Live mode: snapshot every 10 ms inside each block and print how long the rate took
    /// to settle after each kind of switch (to choose --discard-ms; adds wake-ups).
    #[arg(long, requires = "live")]
    pub settle: bool,
    /// Runs per setting, 1 to 1000 [default: 5, or the experiment's].
    #[arg(long, value_parser = clap::builder::TypedValueParser::map(
        clap::value_parser!(u64).range(1..=crate::plan::MAX_REPEAT as u64), |v| v as usize))]
    pub repeat: Option<usize>,
    /// Seconds of forwarding per run [default: 3, or the experiment's]; with --live, of the
    /// whole comparison [default: 30 per setting compared with the baseline].
    #[arg(long, value_parser = fwd_abi::seconds::parse_seconds)]
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
    /// Make the output readable by other users (0755 directories, 0644 files; private by
    /// default) and, run as root, allow an -o in a directory another user owns (another
    /// user's symlink on the path is refused with or without it).
    #[arg(long)]
    pub share: bool,
    /// Count the runs flagged for contention in the table anyway, marked `!` [default: they
    /// are left out; a setting with none left says `no counted run`].
    #[arg(long, conflicts_with = "live")]
    pub keep_contended: bool,
    /// Start a plan estimated to take more than an hour (it is refused without this,
    /// printing its estimate).
    #[arg(long)]
    pub yes: bool,
    /// Samples per second in each run's recording.
    #[arg(short = 'F', long, default_value_t = 999, value_parser = clap::value_parser!(u64).range(1..))]
    pub freq: u64,
    /// Record callchains (charges shared helpers to their caller's stage; costs a little).
    #[arg(short = 'g')]
    pub callchain: bool,
    /// With --live: sample the forwarder all along (-F, -g) and give each setting's stages
    /// from the samples, split into the blocks by the workers' own publish stamps.
    #[arg(long, requires = "live")]
    pub record: bool,
    /// Also add every run to this dataset (as `record --dataset` does): run names
    /// PREFIX-NNN, the setting's label as the run's setting. Not with --live.
    #[arg(long, value_name = "DIR", conflicts_with = "live")]
    pub dataset: Option<PathBuf>,
    /// The dataset's host partition [default: this machine's hostname].
    #[arg(long, requires = "dataset")]
    pub host: Option<String>,
    /// The prefix of the dataset's run names [default: the start time, UTC, and the PID].
    #[arg(long, requires = "dataset")]
    pub run_prefix: Option<String>,
    /// Forwarder flags every run shares (after `--`).
    #[arg(last = true)]
    pub rest: Vec<String>,
}

/// A check of forwarder flags: `Err` says what is wrong (`what`: where they came from).
pub type FlagCheck = dyn Fn(&[String], &str) -> std::result::Result<(), String>;

/// The forwarder the runs start, and its flag check.
pub struct Forwarder<'a> {
    /// The program and its first arguments (`fwdscope forward`).
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Parses forwarder flags as the forwarder would and checks the configuration they
    /// describe; `what` says where the flags came from in the message.
    pub check: &'a FlagCheck,
}

/// A plan ready to run: its options, and the line saying how long it takes.
pub struct Planned<O> {
    pub options: O,
    pub estimate: String,
}

/// The experiment named, if any, and the settings compared: the experiment's, or the
/// product of the swept axes (axes given no values are left out), at most
/// [`crate::plan::MAX_SETTINGS`] of them.
fn experiment_and_settings(a: &SweepArgs) -> Result<(Option<crate::experiments::Experiment>, Vec<Setting>)> {
    let exp = a.experiment.as_deref().map(crate::experiments::load_experiment).transpose()?;
    let sets = match &exp {
        Some(e) => e.settings(),
        None => {
            // Typed from clap on: the live-changeable axes as what they change, the
            // others as the start flags they are.
            let axes = [
                Axis::Prefetch(a.prefetch.clone()),
                Axis::Cache(a.cache.clone()),
                Axis::start("fib", &a.fib),
                Axis::start("workers", &a.workers),
                Axis::SpinNs(a.spin_ns.clone()),
            ];
            let n = setting_count(&axes);
            if n > crate::plan::MAX_SETTINGS {
                return Err(Error::Config(format!(
                    "the swept values make {n} settings: at most {} in one sweep (sweep fewer values at once)",
                    crate::plan::MAX_SETTINGS
                )));
            }
            settings(&axes)
        }
    };
    Ok((exp, sets))
}

/// Run `fwd`'s flag check, its message as a [`Error::Config`].
fn check(fwd: &Forwarder, flags: &[String], what: &str) -> Result<()> {
    (fwd.check)(flags, what).map_err(Error::Config)
}

/// Every run's forwarder flags (the shared ones, then its setting's, in the order the
/// runners give them), checked as the forwarder would check them, before the first run
/// starts or anything is replaced.
fn check_settings(fwd: &Forwarder, shared: &[String], sets: &[Setting]) -> Result<()> {
    for s in sets {
        let flags: Vec<String> = shared.iter().cloned().chain(s.flags()).collect();
        let what = if s.label.is_empty() { "the runs".to_string() } else { format!("setting `{}`", s.label) };
        check(fwd, &flags, &format!("{what}: forwarder flags `{}`", flags.join(" ")))?;
    }
    Ok(())
}

/// How long the plan takes; above an hour, refused without --yes.
fn confirm(what: &str, secs: f64, yes: bool) -> Result<String> {
    if secs > crate::plan::CONFIRM_SECONDS && !yes {
        return Err(Error::Config(format!(
            "{what}: about {} in all: more than an hour; give --yes to start it",
            duration_text(secs)
        )));
    }
    Ok(format!("sweep: {what}: about {} in all", duration_text(secs)))
}

/// The multi-process sweep `a` describes. Every run's flags are checked before the output
/// directory is claimed (and, with --force, replaced): a typo after `--` leaves the
/// previous results in place. The stop flag is the caller's to set.
pub fn sweep_options(a: &SweepArgs, fwd: Forwarder) -> Result<Planned<SweepOptions>> {
    let (exp, sets) = experiment_and_settings(a)?;
    check(&fwd, &a.rest, "forwarder flags after `--`")?;
    // An experiment's shared flags start every run, before those after `--`.
    let shared: Vec<String> = exp.iter().flat_map(|e| e.flags.iter()).chain(&a.rest).cloned().collect();
    check_settings(&fwd, &shared, &sets)?;
    let mut o = SweepOptions::new(a.output.clone(), sets, fwd.program, fwd.args);
    o.force = a.force;
    o.share = a.share;
    o.keep_contended = a.keep_contended;
    o.repeat = a.repeat.or(exp.as_ref().map(|e| e.repeat)).unwrap_or(o.repeat);
    o.duration = a.duration.or(exp.as_ref().map(|e| e.duration)).unwrap_or(o.duration);
    check_plan(o.repeat, o.duration, o.settings.len()).map_err(Error::Config)?;
    // The dataset's path, as root, before the output directory is made (its own check
    // comes at the first run, after the sweep's directory exists).
    if let Some(d) = &a.dataset {
        collector::outdir::check_path(d, a.share).map_err(|why| {
            Error::Config(format!(
                "--dataset {}: {why}, and fwdscope runs as root: that user could redirect root's writes; {}",
                d.display(),
                why.advice("choose another --dataset")
            ))
        })?;
    }
    let estimate = confirm(
        &format!(
            "{} settings x {} runs x {} s (+ about {} s start-up each)",
            o.settings.len(),
            o.repeat,
            seconds_text(o.duration),
            crate::plan::RUN_OVERHEAD_SECONDS
        ),
        estimate_seconds(o.settings.len(), o.repeat, o.duration),
        a.yes,
    )?;
    o.freq = a.freq;
    o.callchain = a.callchain;
    o.shared_flags = shared;
    o.experiment = exp;
    o.dataset = a.dataset.as_ref().map(|dir| DatasetTarget {
        dir: dir.clone(),
        host: a.host.clone().unwrap_or_else(|| collector::recording::Machine::current().hostname),
        run_prefix: a.run_prefix.clone().unwrap_or_else(analyzer::dataset::default_run_name),
    });
    Ok(Planned { options: o, estimate })
}

/// The live settings of `sets`: each must switch on a running forwarder (no timed flush,
/// no flag only a start takes); with `aa`, the first compared with itself.
fn live_settings(sets: &[Setting], aa: bool) -> Result<Vec<LiveSetting>> {
    let mut live = Vec::new();
    for s in sets {
        if s.flush_at.is_some() {
            return Err(Error::Config(format!(
                "setting {}: a timed route-cache flush has no place in live blocks",
                s.label
            )));
        }
        // An experiment's shared flags start the forwarder; a setting's changes switch
        // live, and a flag only a start takes is refused, naming it.
        LiveChange::live_only(&s.label, &s.start_flags)?;
        let mut l = LiveSetting::new(&s.label, s.change);
        l.reported = s.reported;
        live.push(l);
    }
    if aa {
        let mut again = live[0].clone();
        again.label = format!("{} (again)", live[0].label);
        again.reported = None;
        live.truncate(1);
        live.push(again);
    }
    Ok(live)
}

/// `--program`'s settings (one per program, labelled by LABEL or the path) and programs.
fn programs(a: &SweepArgs) -> Result<(Vec<LiveSetting>, Vec<crate::live_procs::Program>)> {
    if a.programs.len() < 2 {
        return Err(Error::Config(format!(
            "--program given {} time: compare at least two programs (the first is the baseline)",
            a.programs.len()
        )));
    }
    let mut settings: Vec<LiveSetting> = Vec::new();
    let mut programs = Vec::new();
    for spec in &a.programs {
        let (label, path) = match spec.split_once('=') {
            Some((l, p)) if !l.is_empty() && !l.contains('/') => (l.to_string(), p),
            _ => (spec.clone(), spec.as_str()),
        };
        if settings.iter().any(|s| s.label == label) {
            return Err(Error::Config(format!("--program {spec}: the label `{label}` is given twice")));
        }
        programs.push(crate::live_procs::Program::from_path(PathBuf::from(path))?);
        settings.push(LiveSetting::new(&label, LiveChange::default()));
    }
    Ok((settings, programs))
}

/// The live comparison `a` describes (`--live`): one forwarder the shared flags start,
/// the settings switched through its control block. The stop flag is the caller's to set.
pub fn live_options(a: &SweepArgs, fwd: Forwarder) -> Result<Planned<LiveOptions>> {
    if !a.fib.is_empty() || !a.workers.is_empty() {
        return Err(Error::Config(format!(
            "--{} cannot change while the forwarder runs: compare it with the multi-process sweep (without --live)",
            if a.fib.is_empty() { "workers" } else { "fib" }
        )));
    }
    let (exp, sets) = experiment_and_settings(a)?;
    let (live, programs) = if a.programs.is_empty() { (live_settings(&sets, a.aa)?, Vec::new()) } else { programs(a)? };
    if let Some(e) = exp.as_ref().filter(|e| e.phased) {
        return Err(Error::Config(format!(
            "experiment `{}` is phased: its steps build on one another on one forwarder, in order, so they cannot \
             alternate in blocks; run it without --live",
            e.title
        )));
    }
    let mut shared = exp.as_ref().map(|e| e.flags.clone()).unwrap_or_default();
    shared.extend(a.rest.iter().cloned());
    check(&fwd, &shared, "forwarder flags after `--`")?;
    let mut o = LiveOptions::new(a.output.clone(), live, fwd.program.clone(), fwd.args.clone());
    o.programs = programs;
    o.force = a.force;
    o.share = a.share;
    let timing = exp.as_ref().and_then(|e| e.live);
    o.block = a.block_ms.or(timing.map(|t| t.block_ms)).map_or(crate::live::BLOCK, std::time::Duration::from_millis);
    o.discard =
        a.discard_ms.or(timing.map(|t| t.discard_ms)).map_or(crate::live::DISCARD, std::time::Duration::from_millis);
    // Each comparison with the baseline gets 30 s of blocks: with several settings the
    // blocks are shared, and 30 s in all left the 2005 experiment's four settings
    // undecided (intervals about ±1.2%) where 90 s narrowed them.
    o.duration = a.duration.unwrap_or(30.0 * o.settings.len().saturating_sub(1).max(1) as f64);
    check_plan(1, o.duration, o.settings.len()).map_err(Error::Config)?;
    // Each setting's flags switch the one forwarder the shared flags start.
    check_settings(&fwd, &shared, &sets)?;
    let estimate = confirm(
        &if o.programs.is_empty() {
            format!("{} settings switched live for {} s", o.settings.len(), seconds_text(o.duration))
        } else {
            format!("{} programs alternated live for {} s", o.programs.len(), seconds_text(o.duration))
        },
        o.duration,
        a.yes,
    )?;
    o.trace = a.settle;
    o.record = a.record.then_some(RecordAlong { freq: a.freq, callchain: a.callchain });
    if let Some(seed) = a.seed {
        o.seed = seed;
    }
    o.shared_flags = shared;
    o.experiment = exp;
    Ok(Planned { options: o, estimate })
}
