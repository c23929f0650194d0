//! Running a sweep: every setting, `repeat` times, in interleaved order; each run a
//! recording of the bundled forwarder (`runs/NNN/`); then results.parquet and the table
//! (`table.txt`), with what the sweep cost beyond forwarding.

use crate::experiments::{then_and_now, Experiment};
use crate::plan::{order, Setting};
use crate::results::{summarize_with, table_text, write_parquet, RunResult};
use crate::{Error, Result};
use analyzer::rules::Rules;
use collector::recording::Recording;
use collector::session::{record, RecordOptions, Target};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Options of a sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Output directory: runs/NNN/ recordings, results.parquet, table.txt.
    pub output: PathBuf,
    /// Replace an output directory an earlier fwdscope made (default false; a directory
    /// without fwdscope's marker is never replaced, see `collector::outdir`).
    pub force: bool,
    /// Output readable by others (0755 directories) and, as root, allowed in another
    /// user's directory (default false: private, refused).
    pub share: bool,
    /// The settings compared.
    pub settings: Vec<Setting>,
    /// The historic experiment these settings come from, if any (its then-and-now table
    /// is added).
    pub experiment: Option<Experiment>,
    /// Runs per setting (default 5).
    pub repeat: usize,
    /// Seconds of forwarding per run (default 3).
    pub duration: f64,
    /// Samples per second in each run's recording (default 999).
    pub freq: u64,
    /// Record callchains (default false).
    pub callchain: bool,
    /// The forwarder to start: its program and the arguments before its flags (`fwdscope`
    /// and `forward`, or `fwdscope-forwarder` and nothing).
    pub program: PathBuf,
    pub program_args: Vec<String>,
    /// Forwarder flags every run shares (default none).
    pub shared_flags: Vec<String>,
    /// Also add every run to this dataset (default none): see [`DatasetTarget`].
    pub dataset: Option<DatasetTarget>,
    /// Set (by a signal handler) to stop the sweep (default none): the run in progress is
    /// stopped and left out, the finished ones are written and reported, marked incomplete.
    pub stop: Option<std::sync::Arc<AtomicBool>>,
    /// Count the runs flagged for contention in the table's figures, marked (default false:
    /// they are left out and the table says so; results.parquet keeps them either way).
    pub keep_contended: bool,
}

/// Where a sweep's runs go in a dataset: `DIR/host=HOST/run=PREFIX-NNN` (NNN the run's
/// number in the sweep), with the setting's label as the run's setting; the sweep's own
/// `runs/NNN` then links to the partition's recording.
#[derive(Debug, Clone)]
pub struct DatasetTarget {
    pub dir: PathBuf,
    pub host: String,
    pub run_prefix: String,
}

impl SweepOptions {
    /// A sweep of `settings` with the defaults above.
    pub fn new(output: PathBuf, settings: Vec<Setting>, program: PathBuf, program_args: Vec<String>) -> SweepOptions {
        SweepOptions {
            output,
            force: false,
            share: false,
            settings,
            experiment: None,
            repeat: 5,
            duration: 3.0,
            freq: 999,
            callchain: false,
            program,
            program_args,
            shared_flags: Vec::new(),
            dataset: None,
            stop: None,
            keep_contended: false,
        }
    }
}

/// Forwarded Mpps of a recording: tx_packets of every worker, last minus first, over the
/// time between those counter rows.
pub fn recording_mpps(rec: &Recording) -> Result<f64> {
    let rows = rec.forwarder_counter("tx_packets")?;
    let no_time = |msg: &str| Error::Config(format!("{}: {msg}", rec.dir.display()));
    let (Some(t0), Some(t1)) = (rows.iter().map(|r| r.time).min(), rows.iter().map(|r| r.time).max()) else {
        // The forwarder's own words say why, when it said any.
        let tail = collector::files::log_tail(&rec.dir.join("target.log"), 3);
        let ended = rec.meta.ended_by.as_deref().unwrap_or("it did not start");
        return Err(no_time(&if tail.is_empty() {
            format!("no forwarder counters: the forwarder never published any ({ended})")
        } else {
            format!("the forwarder failed ({ended}): {tail}")
        }));
    };
    let at = |t: u64| -> u64 { rows.iter().filter(|r| r.time == t).map(|r| r.value).sum() };
    if t1 <= t0 {
        return Err(no_time("the counters cover no time"));
    }
    Ok((at(t1).saturating_sub(at(t0))) as f64 / ((t1 - t0) as f64 / 1e9) / 1e6)
}

/// The largest share of a recording any worker spent waiting to run: its `sched_wait_ns`
/// over `sched_run_ns + sched_wait_ns` between its first and last counter rows (`None`
/// when the forwarder did not publish them).
pub fn recording_runq_share(rec: &Recording) -> Result<Option<f64>> {
    let (wait, run) = (rec.forwarder_counter("sched_wait_ns")?, rec.forwarder_counter("sched_run_ns")?);
    let span = |rows: &[fwd_abi::CounterRow], w: i32| -> Option<u64> {
        let mine: Vec<&fwd_abi::CounterRow> = rows.iter().filter(|r| r.worker == w).collect();
        let first = mine.iter().min_by_key(|r| r.time)?;
        let last = mine.iter().max_by_key(|r| r.time)?;
        Some(last.value.saturating_sub(first.value))
    };
    let mut workers: Vec<i32> = wait.iter().map(|r| r.worker).filter(|w| *w >= 0).collect();
    workers.sort_unstable();
    workers.dedup();
    let mut worst: Option<f64> = None;
    for w in workers {
        if let (Some(dw), Some(dr)) = (span(&wait, w), span(&run, w)) {
            if dw + dr > 0 {
                let share = dw as f64 / (dw + dr) as f64;
                worst = Some(worst.map_or(share, |x| x.max(share)));
            }
        }
    }
    Ok(worst)
}

/// Flush the route cache of the forwarder whose PID arrives on `pid`, `after` it started.
fn flush_later(pid: std::sync::mpsc::Receiver<i32>, after: Duration) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let Ok(pid) = pid.recv_timeout(Duration::from_secs(30)) else { return };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Some(seg) = fwd_abi::Segment::find_for(pid as u32) {
                std::thread::sleep(after);
                seg.request_flush();
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// Apply a phased run's steps to the forwarder whose PID arrives on `pid`: step `j` at `j`
/// step lengths after its segment appeared (flushing the route cache `flush_at` into the
/// step when asked). Returns when the last step was applied (CLOCK_MONOTONIC ns).
fn steps_later(
    pid: std::sync::mpsc::Receiver<i32>,
    step: Duration,
    steps: Vec<crate::plan::Step>,
) -> std::thread::JoinHandle<Result<u64>> {
    std::thread::spawn(move || {
        let pid = pid
            .recv_timeout(Duration::from_secs(60))
            .map_err(|_| Error::Config("the forwarder of a phased run never started".into()))?;
        let t0 = Instant::now();
        let seg = loop {
            match fwd_abi::Segment::find_for(pid as u32) {
                Some(seg) => break seg,
                None if t0.elapsed() < Duration::from_secs(60) => std::thread::sleep(Duration::from_millis(5)),
                None => {
                    return Err(Error::Config(format!("forwarder {pid}: no stats segment to switch the steps through")))
                }
            }
        };
        let start = Instant::now();
        let mut applied = 0u64;
        for (j, st) in steps.iter().enumerate() {
            let at = step * (j as u32 + 1);
            std::thread::sleep(at.saturating_sub(start.elapsed()));
            let live = crate::live_setting::LiveSetting::new(&st.label, st.change);
            seg.apply(&live.request_over(&seg, j as u64 + 1));
            applied = fwd_abi::rows::mono_ns();
            if let Some(f) = st.flush_at {
                std::thread::sleep((at + step.mul_f64(f)).saturating_sub(start.elapsed()));
                seg.request_flush();
            }
        }
        Ok(applied)
    })
}

/// A run's figures over a window: from `from_ns` (CLOCK_MONOTONIC) to its end.
struct Measured {
    mpps: f64,
    /// Median route-cache entries (all workers) at the counter snapshots in the window.
    entries: Option<f64>,
    /// Sampled cost per forwarded packet by stage (the workers' samples in the window).
    stages: std::collections::BTreeMap<String, f64>,
    /// The stage clocks' ns per forwarded packet over the window.
    clocks: std::collections::BTreeMap<String, f64>,
}

fn measure_window(rec: &Recording, from_ns: u64) -> Result<Measured> {
    let forwarded: u64 = analyzer::crosscheck::worker_deltas_since(rec, from_ns)?
        .into_iter()
        .filter(|((_, name), _)| name == "tx_packets")
        .map(|(_, d)| d)
        .sum();
    let rows: Vec<_> = rec
        .counters()?
        .into_iter()
        .filter(|r| r.is_forwarder() && r.time >= from_ns && (r.name == "tx_packets" || r.name == "rt_entries"))
        .collect();
    let tx = rows.iter().filter(|r| r.name == "tx_packets").map(|r| r.time);
    let secs = match (tx.clone().min(), tx.max()) {
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
        _ => {
            return Err(Error::Config(format!(
                "{}: no forwarder counters in the measured window (the last step's second half)",
                rec.dir.display()
            )))
        }
    };
    let entries = median_entries(rows.iter().filter(|r| r.name == "rt_entries"));
    // Samples of the workers inside the window.
    let windows: Vec<analyzer::windows::Window> = analyzer::windows::worker_tids(rec)?
        .into_iter()
        .map(|(_, tid)| analyzer::windows::Window { tid, start_ns: from_ns, end_ns: u64::MAX })
        .collect();
    let mut stages = std::collections::BTreeMap::new();
    if !windows.is_empty() && forwarded > 0 {
        let totals = analyzer::windows::stage_totals_by_window(rec, &Rules::builtin(), &windows)?;
        for w in &totals.windows {
            for (st, (_, period)) in w {
                *stages.entry(st.clone()).or_insert(0.0) += *period as f64 / forwarded as f64;
            }
        }
    }
    let clocks = analyzer::crosscheck::clock_report_since(rec, from_ns)?
        .filter(|c| !c.unsure())
        .map(|c| c.ns_by_stage().into_iter().collect())
        .unwrap_or_default();
    Ok(Measured { mpps: forwarded as f64 / secs / 1e6, entries, stages, clocks })
}

/// GC goal misses (all workers) in the first second after each worker applied the last
/// step: per worker, its `rt_gc_goal_miss` at the first snapshot a second or more after its
/// switch stamp (`switch_mono_ns`; or its last snapshot) less the count it stamped at the
/// switch (`switch_gc_goal_miss`). None without such counters.
fn step_goal_misses(rec: &Recording) -> Result<Option<f64>> {
    let name = |c: fwd_abi::Ctr| fwd_abi::COUNTER_NAMES[c as usize];
    let (miss, at, at_miss) =
        (name(fwd_abi::Ctr::RtGcGoalMiss), name(fwd_abi::Ctr::SwitchMonoNs), name(fwd_abi::Ctr::SwitchGcGoalMiss));
    let mut rows: Vec<_> = rec
        .counters()?
        .into_iter()
        .filter(|r| r.is_forwarder() && (r.name == miss || r.name == at || r.name == at_miss))
        .collect();
    rows.sort_by_key(|r| (r.worker, r.time));
    let mut total: Option<u64> = None;
    for w in rows.chunk_by(|a, b| a.worker == b.worker) {
        let last = |n: &str| w.iter().rev().find(|r| r.name == n).map(|r| r.value);
        let (Some(switch_ns), Some(start)) = (last(at), last(at_miss)) else { continue };
        if switch_ns == 0 {
            continue;
        }
        let end = w
            .iter()
            .find(|r| r.name == miss && r.time >= switch_ns + 1_000_000_000)
            .or_else(|| w.iter().rev().find(|r| r.name == miss))
            .map_or(start, |r| r.value);
        total = Some(total.unwrap_or(0) + end.saturating_sub(start));
    }
    Ok(total.map(|t| t as f64))
}

/// Median route-cache entries (all workers) over a recording's counter snapshots.
fn recording_median_entries(rec: &Recording) -> Result<Option<f64>> {
    Ok(median_entries(rec.forwarder_counter("rt_entries")?.iter()))
}

/// The median over snapshots of `rt_entries` rows summed over workers (rows of one
/// snapshot share its time).
fn median_entries<'a>(rows: impl Iterator<Item = &'a fwd_abi::CounterRow>) -> Option<f64> {
    let mut by_time: std::collections::BTreeMap<u64, u64> = std::collections::BTreeMap::new();
    for r in rows {
        *by_time.entry(r.time).or_default() += r.value;
    }
    let sizes: Vec<f64> = by_time.values().map(|&v| v as f64).collect();
    (!sizes.is_empty()).then(|| analyzer::stats::median(&sizes))
}

/// What every run of a sweep shares, and where its time went.
struct Runner<'a> {
    o: &'a SweepOptions,
    /// One symbolizer for the whole sweep: the binary and the kernel are the same each run.
    sym: Option<analyzer::symbolize::Symbolizer>,
    /// The forwarder's start-up, its runs and writing the recordings.
    recording: Duration,
    /// Reading the recordings back and their stage tables.
    analysis: Duration,
    /// The first run's kallsyms snapshot, which later runs link to.
    kallsyms: Option<PathBuf>,
    /// The event the first run sampled (empty before it).
    event: String,
}

/// A run as recorded ([`Runner::record_run`]).
struct RecordedRun {
    /// Where it is read back: runs/NNN, or in a dataset the partition it was published to.
    read_dir: PathBuf,
    /// When a phased run's last step was applied (CLOCK_MONOTONIC ns).
    last_step: Option<u64>,
    /// The host's steal share over the run, when /proc/stat told.
    steal: Option<f64>,
}

impl Runner<'_> {
    /// Run `number` of the sweep: setting `s` recorded into `dir`, then read back and
    /// measured.
    fn run_one(&mut self, s: &Setting, dir: &Path, number: usize) -> Result<RunResult> {
        let run = self.record_run(s, dir, number)?;
        // Every later run of the sweep shares this run's kallsyms (one boot, one copy).
        if self.kallsyms.is_none() {
            self.kallsyms = Some(run.read_dir.join("kallsyms")).filter(|p| p.is_file());
        }
        let t_an = Instant::now();
        let res = self.measure_run(s, &run)?;
        self.analysis += t_an.elapsed();
        Ok(res)
    }

    /// The recorder's options for setting `s` into `out`: the forwarder with the sweep's
    /// and the setting's flags for the whole run, sharing the first run's kallsyms.
    fn record_options(&self, s: &Setting, out: PathBuf) -> RecordOptions {
        let o = self.o;
        // A phased run replays the steps before this setting: one run duration each.
        let total = o.duration * (s.steps.len() + 1) as f64;
        let mut args = o.program_args.clone();
        args.extend(o.shared_flags.iter().cloned());
        args.extend(s.flags());
        args.extend(["--duration".to_string(), total.to_string(), "-i".into(), total.to_string()]);
        let mut ro = RecordOptions::new(out, Target::Forwarder { program: o.program.clone(), args });
        ro.force = true;
        ro.shared = o.share;
        ro.kallsyms_from = self.kallsyms.clone();
        ro.freq = Some(o.freq);
        ro.call_graph = if o.callchain {
            collector::perf_abi::CallGraph::FramePointer
        } else {
            collector::perf_abi::CallGraph::None
        };
        ro
    }

    /// Record setting `s`'s run (its flush and phased steps applied by threads of their
    /// own), published to the dataset when the sweep writes one; its time is added to the
    /// recording's.
    fn record_run(&mut self, s: &Setting, dir: &Path, number: usize) -> Result<RecordedRun> {
        let (o, duration) = (self.o, self.o.duration);
        let staging = match &o.dataset {
            Some(d) => {
                Some(analyzer::dataset::Staging::new(&d.dir, &d.host, &format!("{}-{number:03}", d.run_prefix))?)
            }
            None => None,
        };
        let out = staging.as_ref().map_or_else(|| dir.to_path_buf(), |st| st.recording_dir());
        let mut ro = self.record_options(s, out);
        let flusher = s.flush_at.map(|f| {
            let (tx, rx) = std::sync::mpsc::channel();
            ro.notify_pid = Some(tx);
            flush_later(rx, Duration::from_secs_f64(duration * f))
        });
        let stepper = (!s.steps.is_empty()).then(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            ro.notify_pid = Some(tx);
            steps_later(rx, Duration::from_secs_f64(duration), s.steps.clone())
        });
        let t_rec = Instant::now();
        let host0 = collector::contention::read_host();
        let never = AtomicBool::new(false);
        let recorded = record(&ro, o.stop.as_deref().unwrap_or(&never), None, &mut |_| {});
        let host1 = collector::contention::read_host();
        drop(ro);
        if let Some(f) = flusher {
            let _ = f.join();
        }
        let last_step = match stepper.map(|t| t.join()) {
            None => None,
            Some(Ok(r)) => Some(r?),
            Some(Err(_)) => return Err(Error::Config("the thread switching the steps panicked".into())),
        };
        recorded?;
        let read_dir = match staging {
            Some(st) => publish(st, s, dir)?,
            None => dir.to_path_buf(),
        };
        self.recording += t_rec.elapsed();
        let steal = match (host0, host1) {
            (Some(a), Some(b)) if b.all.total > a.all.total => {
                Some(b.all.steal.saturating_sub(a.all.steal) as f64 / (b.all.total - a.all.total) as f64)
            }
            _ => None,
        };
        Ok(RecordedRun { read_dir, last_step, steal })
    }

    /// Setting `s`'s run read back and measured: its rate, route-cache size, stage costs
    /// and clocks per packet (a phased run over its last step's second half, the whole run
    /// otherwise), and the contention it met.
    fn measure_run(&mut self, s: &Setting, run: &RecordedRun) -> Result<RunResult> {
        let rec = Recording::open(&run.read_dir)?;
        if self.event.is_empty() {
            self.event = rec.meta.sampling.used.clone();
        }
        let (t, sym) = analyzer::stages::stage_table_reusing(&rec, &Rules::builtin(), self.sym.take())?;
        self.sym = Some(sym);
        let runq_share = recording_runq_share(&rec)?;
        let window = match run.last_step {
            Some(at) => Some(measure_window(&rec, at + (self.o.duration * 0.5e9) as u64)?),
            None => None,
        };
        let (stages, clocks) = match &window {
            Some(w) => (w.stages.clone(), w.clocks.clone()),
            None => whole_run_costs(&t),
        };
        Ok(RunResult {
            setting: s.label.clone(),
            params: s.params.clone(),
            repeat: 0,
            mpps: match &window {
                Some(w) => w.mpps,
                None => recording_mpps(&rec)?,
            },
            cache_entries: match &window {
                Some(w) => w.entries,
                None => recording_median_entries(&rec)?,
            },
            step_goal_miss: match run.last_step {
                Some(_) => step_goal_misses(&rec)?,
                None => None,
            },
            stages,
            clocks,
            runq_share,
            contention: collector::contention::flags(runq_share.unwrap_or(0.0), run.steal.unwrap_or(0.0)),
        })
    }
}

/// A run's stage costs and stage clocks per packet over the whole run, from its stage
/// table; clocks of a worker that mostly waited to run measured the machine: none given.
fn whole_run_costs(
    t: &analyzer::stages::StageTable,
) -> (std::collections::BTreeMap<String, f64>, std::collections::BTreeMap<String, f64>) {
    let stages = t.stages.iter().filter_map(|r| Some((r.stage.clone(), r.per_packet?))).collect();
    let clocks = t
        .clock_check
        .as_ref()
        .filter(|c| !c.clocks.unsure())
        .map(|c| c.clocks.ns_by_stage().into_iter().collect())
        .unwrap_or_default();
    (stages, clocks)
}

/// Publish run `s`'s staged recording to the dataset and link `dir` (runs/NNN) to it; the
/// recording's directory in the partition, where the run is read back (reads under the
/// sweep's directory never follow a link).
fn publish(st: analyzer::dataset::Staging, s: &Setting, dir: &Path) -> Result<PathBuf> {
    let (part, _) = st.publish(Some(&s.label), &Rules::builtin())?;
    let rec_dir = part.join(analyzer::dataset::RECORDING_DIR);
    let rec_dir = std::fs::canonicalize(&rec_dir).map_err(|e| Error::io(&rec_dir, e))?;
    std::os::unix::fs::symlink(&rec_dir, dir).map_err(|e| Error::io(dir, e))?;
    Ok(rec_dir)
}

/// Run the sweep; returns the table as printed (also in `table.txt`).
pub fn run(o: &SweepOptions) -> Result<String> {
    let t0 = Instant::now();
    if o.repeat == 0 || !o.duration.is_finite() || o.duration <= 0.0 {
        return Err(Error::Config("--repeat must be at least 1 and --duration positive".into()));
    }
    if o.settings.is_empty() {
        return Err(Error::Config("nothing to compare: no settings".into()));
    }
    // Claimed (and locked) only now, every option checked: a sweep refused for its
    // options leaves the previous results as they were.
    let _out =
        collector::outdir::OutputDir::claim(&o.output, collector::outdir::Claim { force: o.force, shared: o.share })?;
    let runs_dir = o.output.join("runs");
    // Held open: every run is recorded into and read back from this directory, whatever
    // the owner of a shared output puts at its name meanwhile.
    let _runs = collector::outdir::create_dir_held(&runs_dir, collector::outdir::dir_mode(o.share))?;
    let sets = &o.settings;
    let plan = order(sets.len(), o.repeat);
    let bar = indicatif::ProgressBar::new(plan.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {elapsed} elapsed, {eta} left  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results = Vec::new();
    let mut runner = Runner {
        o,
        sym: None,
        recording: Duration::ZERO,
        analysis: Duration::ZERO,
        kallsyms: None,
        event: String::new(),
    };
    let stopped = || o.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed));
    let mut incomplete: Option<String> = None;
    for (k, &(si, r)) in plan.iter().enumerate() {
        let s = &sets[si];
        if stopped() {
            incomplete = Some(format!("stopped by a signal before run {} of {}", k + 1, plan.len()));
            break;
        }
        bar.set_message(format!("{} (repeat {})", s.label, r + 1));
        let dir = runs_dir.join(format!("{:03}", k + 1));
        let res = runner.run_one(s, &dir, k + 1);
        if stopped() {
            // Cut short: not comparable with the runs that ran their whole duration.
            incomplete = Some(format!("stopped by a signal during run {} of {} (left out)", k + 1, plan.len()));
            break;
        }
        let mut res = match res {
            Ok(r) => r,
            Err(e) => {
                let e = Error::Run { run: k + 1, setting: s.label.clone(), source: Box::new(e) };
                // What finished is kept and reported, marked with why the sweep ended.
                bar.finish_and_clear();
                let why = format!("run {} of {} failed: {e}", k + 1, plan.len());
                let _ = finish(o, &results, &plan, t0, &runner, Some(&why));
                return Err(e);
            }
        };
        res.repeat = r;
        results.push(res);
        // Written after every run: a sweep killed outright keeps what it finished.
        write_results(&o.output, &results)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    finish(o, &results, &plan, t0, &runner, incomplete.as_deref())
}

/// `results.parquet` with `runs`, replaced whole (written beside it, then renamed).
fn write_results(dir: &Path, runs: &[RunResult]) -> Result<()> {
    write_parquet(&dir.join("results.parquet"), runs)
}

/// The file that marks a sweep directory incomplete, holding why.
pub const INCOMPLETE: &str = "incomplete.txt";

/// Write the results and `table.txt` of the runs that finished (and, when the sweep ended
/// early, [`INCOMPLETE`] with why); return the table as printed.
fn finish(
    o: &SweepOptions,
    results: &[RunResult],
    plan: &[(usize, usize)],
    t0: Instant,
    runner: &Runner,
    incomplete: Option<&str>,
) -> Result<String> {
    let sets = &o.settings;
    write_results(&o.output, results)?;
    let marker = o.output.join(INCOMPLETE);
    if let Some(why) = incomplete {
        collector::outdir::write_atomic(&marker, format!("{why}\n").as_bytes(), 0o644)?;
    }
    let plan = &plan[..results.len()];
    let sums = summarize_with(results, o.keep_contended);
    let wall = t0.elapsed();
    let stages = ["lookup", "gc", "slab", "driver", "ip"];
    let event = &runner.event;
    let mut text = String::new();
    if let Some(why) = incomplete {
        text.push_str(&format!(
            "INCOMPLETE: {why}; the table holds the {} finished run(s) (results.parquet, runs/)\n",
            results.len()
        ));
    }
    if let Some(e) = &o.experiment {
        text.push_str(&format!("experiment: {}\nsource: {}\n", e.title, e.source));
        if let Some(m) = &e.model {
            text.push_str(&format!("model: {m}\n"));
        }
    }
    text.push_str(&format!(
        "sweep: {} settings x {} repeats, {:.1} s each, interleaved; stages sampled with {event}\n",
        sets.len(),
        o.repeat,
        o.duration,
    ));
    text.push_str(&table_text(&sums, &stages, &collector::events::period_unit(event)));
    if let Some(e) = &o.experiment {
        text.push_str(&then_and_now(sets, &sums, &e.unit));
    }
    // A phased run forwards through every step before its own.
    let forwarding = Duration::from_secs_f64(
        plan.iter().map(|&(si, _)| o.duration * (sets[si].steps.len() + 1) as f64).sum::<f64>(),
    );
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
    let table = o.output.join("table.txt");
    collector::outdir::write_atomic(&table, text.as_bytes(), 0o644)?;
    Ok(text)
}
