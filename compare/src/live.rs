//! A live comparison: one forwarder process; the settings its control block can change
//! (prefetch depth, cache mode, the calibration cost) alternate in short blocks in a
//! balanced, randomized order ([`crate::paired::schedule`]), so that the slow drift of a
//! shared machine falls on every setting alike.
//!
//! Each block: the controller writes the block's settings with one generation bump; every
//! worker applies them at a burst boundary and stamps when (`switch_mono_ns`, `switch_tsc`)
//! and which generation (`ctrl_generation`). The first `discard` of the block is warm-up.
//! The block's rate is the packets each worker forwarded between two of its own publishes,
//! over the time between their `publish_mono_ns` stamps: the workers' clock, not the
//! controller's. A block counts for a setting only when both publishes carry the block's
//! generation; otherwise (a switch applied late, another controller) it is flagged. The
//! [`collector::contention`] detector flags blocks in which a worker waited to run or the host
//! stole time. Snapshots every 10 ms within each block give how long the rate took to
//! settle after each kind of switch.
//!
//! With [`LiveOptions::programs`], the settings are forwarder programs instead (two builds
//! of the forwarder, to decide a code change): one process each, only the one measured
//! running ([`crate::live_procs`]); its blocks are measured the same way.
//!
//! With [`LiveOptions::record`], the collector samples the forwarder all along, and the
//! samples are split into the blocks by the same publish stamps ([`crate::stage_split`]):
//! the stages of each setting, from the same run.
//!
//! Outputs in the output directory: `blocks.parquet` (one row per block and worker),
//! `live.json` (settings, effects, verdicts, settle times, stages per setting), `table.txt`
//! (what is printed), `forwarder.log` (the forwarder's own output), `recording/` (the
//! samples, when recorded).

use crate::experiments::Experiment;
pub use crate::live_procs::wait_threads;
use crate::live_procs::{device_given, Launch, Procs, Program};
pub use crate::live_setting::{GcSetting, LiveChange, LiveSetting};
use crate::paired::{self, BlockRate, Effect, Verdict};
use crate::{Error, Result};
use analyzer::rules::Rules;
use collector::contention::{self, Contention, WorkerThread};
use collector::recording::Recording;
use collector::session::{record, RecordOptions, Target};
use fwd_abi::{CacheMode, Ctr, Segment, Snapshot};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default block length. Shorter blocks see nearer neighbours: on this project's 2-core VM
/// the A/A interval of a 30 s comparison was ±2.1% with 200 ms blocks, ±1.5% with 100 ms
/// and ±0.8% with 50 ms (inline device, 20% trimmed mean).
pub const BLOCK: Duration = Duration::from_millis(50);
/// Default warm-up discarded after each switch, from the settle figures `--settle` prints
/// (the mean rate of 10 ms slices after the switch against the block's second half, over
/// every block; same 2-core VM, real table, dir24): with the device inline, 0 ms after a
/// prefetch or calibration switch and 10 ms after a cache-mode switch (the route cache
/// refills). With the device on a thread of its own it adapts its pace to the worker's
/// within about 40 ms after any change of the worker's speed: use --discard-ms 50 and
/// blocks of 100 ms or more there.
pub const DISCARD: Duration = Duration::from_millis(10);
/// Interval of the snapshots that trace a block (for the settle figures).
const TRACE: Duration = Duration::from_millis(10);

/// Options of a live comparison.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// Output directory (blocks.parquet, live.json, table.txt, forwarder.log).
    pub output: PathBuf,
    /// Replace an existing output directory (default false).
    pub force: bool,
    /// Output readable by others (0755 directory) and, as root, allowed in another user's
    /// directory (default false: private, refused).
    pub share: bool,
    /// The settings; the first is the baseline every other is compared with.
    pub settings: Vec<LiveSetting>,
    /// Block length (default [`BLOCK`]).
    pub block: Duration,
    /// Warm-up discarded after each switch (default [`DISCARD`]).
    pub discard: Duration,
    /// Seconds of measured blocks in all (default 30).
    pub duration: f64,
    /// Forwarding before the first block, not measured (default 1 s).
    pub warmup: Duration,
    /// Seed of the block order (default: from the clock; printed, so a run can be repeated).
    pub seed: u64,
    /// The forwarder to start: program and the arguments before its flags.
    pub program: PathBuf,
    pub program_args: Vec<String>,
    /// Forwarder programs compared, the first the baseline (default none: one forwarder,
    /// `program`, whose settings switch). When given, setting `i` is program `i`: each runs
    /// as its own process with the shared flags, and only the one measured runs (see
    /// [`crate::live_procs`]); the settings then change nothing in the control block.
    pub programs: Vec<Program>,
    /// Forwarder flags for the whole run (default none).
    pub shared_flags: Vec<String>,
    /// The historic experiment the settings come from (its then-and-now lines).
    pub experiment: Option<Experiment>,
    /// Record samples alongside (default none): the stages of each setting come from
    /// them, split by the workers' publish stamps (see [`crate::stage_split`]).
    pub record: Option<RecordAlong>,
    /// Snapshot every 10 ms inside each block to measure how long the rate takes to settle
    /// after each kind of switch (default false: the controller then wakes twice per
    /// block, since its wake-ups take CPU from the forwarder's threads on a small machine).
    pub trace: bool,
    /// Set (by a signal handler) to end the comparison early (default none): the blocks
    /// measured so far are written and reported, marked incomplete.
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl LiveOptions {
    pub fn new(
        output: PathBuf,
        settings: Vec<LiveSetting>,
        program: PathBuf,
        program_args: Vec<String>,
    ) -> LiveOptions {
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64 | 1);
        LiveOptions {
            output,
            force: false,
            share: false,
            settings,
            block: BLOCK,
            discard: DISCARD,
            duration: 30.0,
            warmup: Duration::from_secs(1),
            seed,
            program,
            program_args,
            programs: Vec::new(),
            shared_flags: Vec::new(),
            experiment: None,
            record: None,
            trace: false,
            stop: None,
        }
    }
}

/// Sampling alongside a live comparison, into `OUTPUT/recording`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordAlong {
    /// Samples per second (the sweep's -F).
    pub freq: u64,
    /// Frame-pointer callchains (the sweep's -g).
    pub callchain: bool,
}

/// One worker in one block.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WorkerBlock {
    pub worker: usize,
    /// When it applied the block's settings (CLOCK_MONOTONIC ns; 0: not seen).
    pub switch_mono_ns: u64,
    /// The same moment by its TSC (0: not seen): with `switch_mono_ns`, what the worker's
    /// two clocks say of the same intervals.
    pub switch_tsc: u64,
    /// The measured interval: its two publishes.
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    pub packets: u64,
    /// Whether both publishes ran the block's settings.
    pub assigned: bool,
}

/// One block.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Block {
    pub index: usize,
    pub unit: usize,
    pub setting: usize,
    pub generation: u64,
    pub workers: Vec<WorkerBlock>,
    /// Forwarded Mpps, every worker (each over its own interval); `None` when unmeasured.
    pub mpps: Option<f64>,
    /// Forwarded packets per µs of the workers' CPU time (schedstat run time, read by the
    /// controller next to each snapshot): the rate with preemption taken out.
    pub cpu_mpps: Option<f64>,
    pub contention: Contention,
    /// Why the block is left out (contention, assignment); empty when it counts.
    pub flags: Vec<String>,
    /// The kind of switch that began it.
    pub switch: &'static str,
    /// Rates of the 10 ms slices of its first half from the switch on, relative to its
    /// second half (for the settle figures).
    pub settle_profile: Option<Vec<f64>>,
}

/// One setting's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SettingResult {
    pub setting: LiveSetting,
    /// Median block Mpps.
    pub median_mpps: f64,
    pub blocks: usize,
    /// Against the baseline (none for the baseline itself).
    pub effect: Option<Effect>,
    /// The effect as worker time per packet, ns, against the baseline's (positive:
    /// costlier), with its 95% interval: not diluted by costs every setting shares.
    pub delta_ns: Option<(f64, f64, f64)>,
    pub verdict: Option<Verdict>,
}

/// Settle time after one kind of switch.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settle {
    pub switch: String,
    pub blocks: usize,
    /// Until the mean relative rate stays within 1% (see [`settle_ms`]).
    pub ms: f64,
}

/// What a live comparison found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LiveResult {
    pub pid: u32,
    /// Every forwarder process (one per program compared; else only `pid`).
    pub pids: Vec<u32>,
    /// The programs compared, in the settings' order (none: one forwarder's settings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    pub seed: u64,
    pub block_ms: f64,
    pub discard_ms: f64,
    pub blocks: Vec<Block>,
    pub results: Vec<SettingResult>,
    pub settle: Vec<Settle>,
    /// Why the comparison ended early, if it did (what was measured is kept).
    pub incomplete: Option<String>,
    /// Stages per setting, when samples were recorded alongside.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<crate::stage_split::StageSplit>,
    /// Why the stages per setting are missing although samples were asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages_error: Option<String>,
}

/// The collector sampling the forwarder on a thread of its own, until told to stop.
struct Recorder {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<PathBuf>>,
}

impl Recorder {
    fn start(o: &LiveOptions, r: RecordAlong, pid: u32) -> Recorder {
        let dir = o.output.join("recording");
        let mut ro = RecordOptions::new(dir.clone(), Target::Pid(pid as i32));
        ro.force = true;
        ro.freq = Some(r.freq);
        ro.call_graph = if r.callchain {
            collector::perf_abi::CallGraph::FramePointer
        } else {
            collector::perf_abi::CallGraph::None
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            record(&ro, &flag, None, &mut |_| {})?;
            Ok(dir)
        });
        Recorder { stop, thread }
    }

    /// Stop sampling; the recording's directory.
    fn stop(self) -> Result<PathBuf> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().map_err(|_| Error::Config("the recorder thread panicked".into()))?
    }
}

/// The baseline setting's live values as start flags: the forwarder starts in it.
fn first_flags(o: &LiveOptions) -> Vec<String> {
    let base = &o.settings[0].change;
    let mut args = Vec::new();
    if let Some(p) = base.prefetch {
        args.extend(["--prefetch".to_string(), p.to_string()]);
    }
    if let Some(c) = base.cache {
        args.extend(["--cache".to_string(), c.name().to_string()]);
    }
    if let Some(ns) = base.spin_ns {
        args.extend(["--spin-ns".to_string(), ns.to_string()]);
    }
    args
}

/// (worker publish stamp, every worker's tx_packets): one trace point.
fn trace_point(s: &Snapshot) -> (u64, u64) {
    (s.get(0, Ctr::PublishMonoNs), s.total(Ctr::TxPackets))
}

/// The rate of each 10 ms slice of the block's first half, from the switch on, relative to
/// the median slice rate of its second half (`None` when the trace is too short).
fn settle_profile(switch_ns: u64, trace: &[(u64, u64)]) -> Option<Vec<f64>> {
    let slices: Vec<f64> = trace
        .windows(2)
        .filter(|w| w[1].0 > w[0].0 && w[0].0 >= switch_ns)
        .map(|w| (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0) as f64)
        .collect();
    if slices.len() < 6 {
        return None;
    }
    let half = slices.len() / 2;
    let reference = analyzer::stats::median(&slices[half..]);
    if reference.is_nan() || reference <= 0.0 {
        return None;
    }
    Some(slices[..half].iter().map(|r| r / reference).collect())
}

/// How long the rate took to settle after one kind of switch, from the profiles of every
/// block that began with it: the end of the last slice whose mean relative rate is off by
/// more than 1% (and by more than three standard errors: one slice of one block is noisy).
fn settle_ms(profiles: &[&Vec<f64>], slice_ms: f64) -> Option<f64> {
    let len = profiles.iter().map(|p| p.len()).min()?;
    if profiles.len() < 2 {
        return None;
    }
    let mut last = 0.0;
    for i in 0..len {
        let v: Vec<f64> = profiles.iter().map(|p| p[i]).collect();
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let se = (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
        if (m - 1.0).abs() > 0.01_f64.max(3.0 * se) {
            last = (i + 1) as f64 * slice_ms;
        }
    }
    Some(last)
}

fn validate(o: &LiveOptions) -> Result<()> {
    if o.settings.len() < 2 {
        return Err(Error::Config("a live comparison needs at least two settings (or --aa)".into()));
    }
    if o.block < Duration::from_millis(20) {
        return Err(Error::Config(format!("--block-ms {}: at least 20 ms", o.block.as_millis())));
    }
    if o.discard + TRACE * 3 > o.block {
        return Err(Error::Config(format!(
            "--block-ms {} is too short for --discard-ms {}: a block must leave at least {} ms to measure after \
             the warm-up it discards",
            o.block.as_millis(),
            o.discard.as_millis(),
            (TRACE * 3).as_millis()
        )));
    }
    if !o.programs.is_empty() && o.programs.len() != o.settings.len() {
        return Err(Error::Config(format!(
            "{} programs for {} settings: when programs are compared, each setting is one of them",
            o.programs.len(),
            o.settings.len()
        )));
    }
    if !o.programs.is_empty() && o.record.is_some() {
        return Err(Error::Config("--record samples one forwarder: not with --program".into()));
    }
    if !o.duration.is_finite() || o.duration <= 0.0 {
        return Err(Error::Config(format!("--duration {}: expected a positive number of seconds", o.duration)));
    }
    Ok(())
}

/// Run a live comparison; returns the result (also written to the output directory).
pub fn run(o: &LiveOptions) -> Result<LiveResult> {
    validate(o)?;
    // Claimed (and locked for the run) once every option is checked.
    let _out =
        collector::outdir::OutputDir::claim(&o.output, collector::outdir::Claim { force: o.force, shared: o.share })?;
    let k = o.settings.len();
    let units = ((o.duration / (2.0 * k as f64 * o.block.as_secs_f64())).round() as usize).max(1);
    let order = paired::schedule(k, units, o.seed);
    let one = [Program { path: o.program.clone(), args: o.program_args.clone() }];
    let first = first_flags(o);
    let launch = Launch {
        output: &o.output,
        programs: if o.programs.is_empty() { &one } else { &o.programs },
        shared_flags: &o.shared_flags,
        first: &first,
    };
    let mut procs = Procs::start(&launch)?;
    let pids = procs.pids();
    let recorder = o.record.map(|r| Recorder::start(o, r, pids[0]));
    // A setting that leaves a field unset runs with the forwarder's starting value of it
    // (switching back to it must undo what another setting changed).
    // A compared program keeps what it started with.
    let mut settings = o.settings.clone();
    if o.programs.is_empty() {
        fill_unset(&mut settings, &procs.segs[0]);
    } else {
        for (i, seg) in procs.segs.iter().enumerate() {
            fill_unset(&mut settings[i..=i], seg);
        }
    }
    let plan = BlockPlan { settings: &settings, block: o.block, discard: o.discard, trace: o.trace };
    // Every program warms up (its table, its flows) before the first block.
    for i in (0..pids.len()).rev() {
        procs.run_only(i)?;
        std::thread::sleep(o.warmup);
    }
    let (blocks, incomplete) = run_blocks(o, &plan, &mut procs, &order);
    let recorded = recorder.map(Recorder::stop);
    procs.stop();
    let mut result = summarize(o, pids[0], blocks, incomplete);
    result.pids = pids;
    result.programs = o.programs.iter().map(|p| p.path.display().to_string()).collect();
    if let Some(rec) = recorded {
        match rec.and_then(|dir| stages_per_setting(o, &dir, &procs.segs[0], &procs.threads[0], &result.blocks)) {
            Ok(s) => result.stages = Some(s),
            Err(e) => result.stages_error = Some(e.to_string()),
        }
    }
    write_outputs(o, &result)?;
    Ok(result)
}

/// Measure the blocks of `order` one after the other, with a progress bar; the blocks
/// measured, and why the comparison ended early if it did (a signal, the forwarder ended).
fn run_blocks(
    o: &LiveOptions,
    plan: &BlockPlan<'_>,
    procs: &mut Procs,
    order: &[(usize, usize)],
) -> (Vec<Block>, Option<String>) {
    let bar = indicatif::ProgressBar::new(order.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} blocks  {elapsed} elapsed, {eta} left  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut blocks = Vec::with_capacity(order.len());
    let mut incomplete = None;
    let mut prev = 0usize;
    for (i, &(unit, s)) in order.iter().enumerate() {
        if o.stop.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed)) {
            incomplete = Some(format!("stopped by a signal after {i} of {} blocks", order.len()));
            break;
        }
        if let Some(why) = procs.ended() {
            incomplete = Some(format!("ended after {i} of {} blocks: {why}", order.len()));
            break;
        }
        // Compared programs: setting s is program s, alone on the CPUs for its block.
        let p = if o.programs.is_empty() { 0 } else { s };
        if let Err(e) = procs.run_only(p) {
            incomplete = Some(format!("ended after {i} of {} blocks: {e}", order.len()));
            break;
        }
        bar.set_message(o.settings[s].label.clone());
        let mut b = measure_block(plan, &procs.segs[p], &procs.threads[p], i, unit, s, prev);
        if !o.programs.is_empty() && i > 0 && s != prev {
            b.switch = "program";
        }
        blocks.push(b);
        prev = s;
        bar.inc(1);
    }
    bar.finish_and_clear();
    (blocks, incomplete)
}

/// The stages of each setting from the recording in `dir`, its samples split into the
/// counted blocks by the workers' publish stamps.
fn stages_per_setting(
    o: &LiveOptions,
    dir: &Path,
    seg: &Segment,
    threads: &[WorkerThread],
    blocks: &[Block],
) -> Result<crate::stage_split::StageSplit> {
    let mut tids = vec![0u32; seg.n_workers()];
    for t in threads {
        if let Some(slot) = tids.get_mut(t.worker) {
            *slot = t.tid;
        }
    }
    let labels: Vec<String> = o.settings.iter().map(|s| s.label.clone()).collect();
    let rec = Recording::open(dir)?;
    crate::stage_split::split(&rec, &Rules::builtin(), &counted_blocks(blocks), &tids, &labels)
}

/// The counted blocks (no flags, measured), each with the workers that ran the block's
/// settings through their interval.
fn counted_blocks(blocks: &[Block]) -> Vec<crate::stage_split::CountedBlock> {
    blocks
        .iter()
        .filter(|b| b.flags.is_empty() && b.mpps.is_some())
        .map(|b| crate::stage_split::CountedBlock {
            setting: b.setting,
            unit: b.unit,
            workers: b
                .workers
                .iter()
                .filter(|w| w.assigned)
                .map(|w| crate::stage_split::WorkerInterval {
                    worker: w.worker,
                    start_ns: w.start_mono_ns,
                    end_ns: w.end_mono_ns,
                    packets: w.packets,
                })
                .collect(),
        })
        .collect()
}

/// Give every setting that leaves prefetch, cache mode, calibration or a GC tunable unset
/// the forwarder's current value (its control block).
pub fn fill_unset(settings: &mut [LiveSetting], seg: &Segment) {
    use std::sync::atomic::Ordering;
    let c = seg.control();
    let prefetch = fwd_abi::Prefetch::clamped(u64::from(c.prefetch.load(Ordering::Relaxed)));
    let cache = CacheMode::from_code(c.cache_mode.load(Ordering::Relaxed));
    let spin = c.spin_ns.load(Ordering::Relaxed);
    let gc = c.gc();
    for s in settings.iter_mut().map(|s| &mut s.change) {
        s.gc.thresh.get_or_insert(gc.thresh);
        s.gc.elasticity.get_or_insert(gc.elasticity);
        s.gc.min_interval_ms.get_or_insert(gc.min_interval_ms);
        s.gc.timeout_s.get_or_insert(gc.timeout_s);
        s.prefetch.get_or_insert(prefetch);
        if s.cache.is_none() {
            s.cache = cache;
        }
        s.spin_ns.get_or_insert(spin);
    }
}

/// A running A/B in a forwarder that something else started (`top`'s A/B key): what it
/// found so far.
#[derive(Debug, Clone, PartialEq)]
pub struct AbStatus {
    pub a: String,
    pub b: String,
    /// Blocks measured, and flagged (left out with their units).
    pub blocks: usize,
    pub flagged: usize,
    pub effect: Effect,
    pub verdict: Verdict,
}

impl AbStatus {
    /// One line: the running ratio with its interval and the verdict so far.
    pub fn text(&self) -> String {
        if self.effect.units == 0 {
            return format!(
                "A/B {} -> {}: no clean unit yet ({} of {} blocks flagged: a worker waited to run, steal, or a late switch)",
                self.a, self.b, self.flagged, self.blocks
            );
        }
        format!(
            "A/B {} -> {}: ratio {:.4} [{:.4}, {:.4}], p {:.1e} over {} units ({} of {} blocks flagged): {}",
            self.a,
            self.b,
            self.effect.ratio,
            self.effect.ci.0,
            self.effect.ci.1,
            self.effect.p,
            self.effect.units,
            self.flagged,
            self.blocks,
            self.verdict.text(&self.effect)
        )
    }
}

/// The blocks of an open-ended A/B ([`ab_loop`]).
#[derive(Debug, Clone, Copy)]
pub struct AbTiming {
    /// Length of one block.
    pub block: Duration,
    /// Warm-up left out at the start of each block.
    pub discard: Duration,
    /// Seed of the units' random order.
    pub seed: u64,
}

/// Alternate `a` and `b` (ABBA/BAAB units in a random order from `timing.seed`) in the
/// forwarder of `seg` until `stop` is set, calling `update` after every unit; at the end `b`
/// is left in force. Returns the blocks.
pub fn ab_loop(
    seg: &Segment,
    threads: &[WorkerThread],
    ab: [LiveSetting; 2],
    timing: AbTiming,
    stop: &std::sync::atomic::AtomicBool,
    mut update: impl FnMut(&AbStatus),
) -> Vec<Block> {
    use std::sync::atomic::Ordering;
    let AbTiming { block, discard, seed } = timing;
    let mut settings = ab.to_vec();
    fill_unset(&mut settings, seg);
    let plan = BlockPlan { settings: &settings, block, discard, trace: false };
    let mut blocks: Vec<Block> = Vec::new();
    let mut prev = 1;
    let mut unit = 0;
    while !stop.load(Ordering::Relaxed) {
        for (_, s) in paired::schedule(2, 1, seed ^ (unit as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) {
            let b = measure_block(&plan, seg, threads, blocks.len(), unit, s, prev);
            blocks.push(b);
            prev = s;
        }
        let rates: Vec<BlockRate> = blocks
            .iter()
            .map(|b| BlockRate { unit: b.unit, setting: b.setting, rate: b.mpps, flagged: !b.flags.is_empty() })
            .collect();
        let (d, out) = paired::unit_differences(&rates, 1, 0);
        let effect = paired::effect(&d, out);
        let verdict = paired::verdict(&effect);
        update(&AbStatus {
            a: settings[0].label.clone(),
            b: settings[1].label.clone(),
            blocks: blocks.len(),
            flagged: blocks.iter().filter(|b| !b.flags.is_empty()).count(),
            effect,
            verdict,
        });
        unit += 1;
    }
    seg.apply(&settings[1].request(0));
    blocks
}

/// What every block of a comparison shares.
#[derive(Debug, Clone, Copy)]
pub struct BlockPlan<'a> {
    pub settings: &'a [LiveSetting],
    pub block: Duration,
    pub discard: Duration,
    /// Snapshot every 10 ms (the settle figures).
    pub trace: bool,
}

/// Switch `seg`'s forwarder to `settings[setting]` and measure one block (see the module
/// docs); `prev` is the setting of the block before, for the kind of switch.
pub fn measure_block(
    o: &BlockPlan<'_>,
    seg: &Segment,
    threads: &[WorkerThread],
    index: usize,
    unit: usize,
    setting: usize,
    prev: usize,
) -> Block {
    let n = seg.n_workers();
    let t0 = Instant::now();
    let generation = seg.apply(&o.settings[setting].request(index as u64 + 1));
    let Watched { first, last, end_reading, trace, elapsed } = watch_block(o, seg, threads, t0);
    let (s1, r1) = first.unwrap_or_else(|| (last.clone(), end_reading.clone()));
    let measured_ns = (elapsed.saturating_sub(o.discard)).as_nanos() as u64;
    let cont = contention::between(&r1, &end_reading, measured_ns.max(1));
    let mut flags = cont.flags.clone();
    let (workers, mpps) = worker_blocks(&s1, &last, generation, n, &mut flags);
    let measured = flags.iter().all(|f| !f.starts_with("worker"));
    let cpu_mpps = cpu_mpps(threads, &r1, &end_reading, &workers);
    let switch_ns = workers.first().map_or(0, |w| w.switch_mono_ns);
    Block {
        index,
        unit,
        setting,
        generation,
        workers,
        mpps: measured.then_some(mpps),
        cpu_mpps: cpu_mpps.filter(|_| measured && !threads.is_empty()),
        contention: cont,
        flags,
        switch: if index == 0 { "start" } else { o.settings[setting].switch_kind(&o.settings[prev]) },
        settle_profile: if switch_ns > 0 { settle_profile(switch_ns, &trace) } else { None },
    }
}

/// What the controller saw of one block ([`watch_block`]).
struct Watched {
    /// The snapshot and the threads' reading at the end of the warm-up.
    first: Option<(Snapshot, contention::Reading)>,
    /// The snapshot and the threads' reading at the end of the block.
    last: Snapshot,
    end_reading: contention::Reading,
    /// Trace points every 10 ms (with tracing only).
    trace: Vec<(u64, u64)>,
    /// Time from the switch to the end of the block.
    elapsed: Duration,
}

/// Wait out the block that began at `t0`, waking at the end of the warm-up and at the end
/// of the block; with tracing, every 10 ms from the switch on.
fn watch_block(o: &BlockPlan<'_>, seg: &Segment, threads: &[WorkerThread], t0: Instant) -> Watched {
    let until = |d: Duration| {
        let left = d.saturating_sub(t0.elapsed());
        if !left.is_zero() {
            std::thread::sleep(left);
        }
    };
    let mut trace = Vec::new();
    let mut first: Option<(Snapshot, contention::Reading)> = None;
    let mut last = seg.snapshot();
    let step = if o.trace { TRACE } else { o.discard.max(Duration::from_millis(1)) };
    let mut at = Duration::ZERO;
    while at < o.block {
        at = (at + step).min(o.block);
        if first.is_some() && !o.trace {
            at = o.block;
        }
        until(at);
        last = seg.snapshot();
        if o.trace {
            trace.push(trace_point(&last));
        }
        if first.is_none() && at >= o.discard {
            first = Some((last.clone(), contention::read(threads)));
        }
    }
    let elapsed = t0.elapsed();
    let end_reading = contention::read(threads);
    Watched { first, last, end_reading, trace, elapsed }
}

/// Each of the `n` workers' interval between snapshots `s1` and `last`, and the block's
/// Mpps summed over the workers that count; why a worker does not count is pushed onto
/// `flags`.
fn worker_blocks(
    s1: &Snapshot,
    last: &Snapshot,
    generation: u64,
    n: usize,
    flags: &mut Vec<String>,
) -> (Vec<WorkerBlock>, f64) {
    let mut workers = Vec::with_capacity(n);
    let mut mpps = 0.0;
    for w in 0..n {
        let g1 = s1.get(w, Ctr::CtrlGeneration);
        let g2 = last.get(w, Ctr::CtrlGeneration);
        let wb = WorkerBlock {
            worker: w,
            switch_mono_ns: if g2 == generation { last.get(w, Ctr::SwitchMonoNs) } else { 0 },
            switch_tsc: if g2 == generation { last.get(w, Ctr::SwitchTsc) } else { 0 },
            start_mono_ns: s1.get(w, Ctr::PublishMonoNs),
            end_mono_ns: last.get(w, Ctr::PublishMonoNs),
            packets: last.get(w, Ctr::TxPackets).saturating_sub(s1.get(w, Ctr::TxPackets)),
            assigned: g1 == generation && g2 == generation,
        };
        if !wb.assigned {
            flags.push(format!(
                "worker {w} did not run the block's settings through the measured interval (generation {g1}..{g2}, \
                 block {generation})"
            ));
        } else if wb.end_mono_ns > wb.start_mono_ns {
            mpps += wb.packets as f64 / ((wb.end_mono_ns - wb.start_mono_ns) as f64 / 1e9) / 1e6;
        } else {
            flags.push(format!("worker {w} published nothing during the measured interval"));
        }
        workers.push(wb);
    }
    (workers, mpps)
}

/// Forwarded packets per µs of the worker threads' CPU time between readings `r1` and
/// `r2`, summed over the threads; None when a thread's run time is unknown or zero.
fn cpu_mpps(
    threads: &[WorkerThread],
    r1: &contention::Reading,
    r2: &contention::Reading,
    workers: &[WorkerBlock],
) -> Option<f64> {
    let mut cpu_mpps = Some(0.0);
    for (i, t) in threads.iter().enumerate() {
        let run = match (r1.threads.get(i).copied().flatten(), r2.threads.get(i).copied().flatten()) {
            (Some(a), Some(b)) => b.run_ns.saturating_sub(a.run_ns),
            _ => 0,
        };
        let packets = workers.get(t.worker).map_or(0, |w| w.packets);
        cpu_mpps = match cpu_mpps {
            Some(acc) if run > 0 => Some(acc + packets as f64 / run as f64 * 1e3),
            _ => None,
        };
    }
    cpu_mpps
}

fn summarize(o: &LiveOptions, pid: u32, blocks: Vec<Block>, incomplete: Option<String>) -> LiveResult {
    let rates: Vec<BlockRate> = blocks
        .iter()
        .map(|b| BlockRate { unit: b.unit, setting: b.setting, rate: b.mpps, flagged: !b.flags.is_empty() })
        .collect();
    let mut effects: Vec<Effect> = (1..o.settings.len())
        .map(|s| {
            let (d, out) = paired::unit_differences(&rates, s, 0);
            paired::effect(&d, out)
        })
        .collect();
    paired::holm(&mut effects);
    let mut results = Vec::new();
    for (s, set) in o.settings.iter().enumerate() {
        let mine: Vec<f64> =
            blocks.iter().filter(|b| b.setting == s && b.flags.is_empty()).filter_map(|b| b.mpps).collect();
        let effect = (s > 0).then(|| effects[s - 1].clone());
        let verdict = effect.as_ref().map(paired::verdict);
        results.push(SettingResult {
            setting: set.clone(),
            median_mpps: analyzer::stats::median(&mine),
            blocks: mine.len(),
            effect,
            delta_ns: None,
            verdict,
        });
    }
    // ns per packet of a worker at the baseline's median rate; the ratio's interval maps
    // onto a difference of per-packet times.
    let workers = blocks.first().map_or(1, |b| b.workers.len().max(1)) as f64;
    let base_ns = results.first().map_or(f64::NAN, |r| 1e3 * workers / r.median_mpps);
    for r in results.iter_mut() {
        r.delta_ns = r.effect.as_ref().map(|e| {
            let at = |ratio: f64| base_ns * (1.0 / ratio - 1.0);
            (at(e.ratio), at(e.ci.1), at(e.ci.0))
        });
    }
    let mut kinds: Vec<&str> = blocks.iter().map(|b| b.switch).filter(|k| *k != "start").collect();
    kinds.sort();
    kinds.dedup();
    let slice_ms = TRACE.as_secs_f64() * 1e3;
    let settle = kinds
        .into_iter()
        .filter_map(|k| {
            let v: Vec<&Vec<f64>> = blocks
                .iter()
                .filter(|b| b.switch == k && b.flags.is_empty())
                .filter_map(|b| b.settle_profile.as_ref())
                .collect();
            Some(Settle { switch: k.to_string(), blocks: v.len(), ms: settle_ms(&v, slice_ms)? })
        })
        .collect();
    LiveResult {
        pid,
        pids: vec![pid],
        programs: Vec::new(),
        seed: o.seed,
        block_ms: o.block.as_secs_f64() * 1e3,
        discard_ms: o.discard.as_secs_f64() * 1e3,
        blocks,
        results,
        settle,
        incomplete,
        stages: None,
        stages_error: None,
    }
}

/// The comparison as text.
pub fn text(o: &LiveOptions, r: &LiveResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if let Some(e) = &o.experiment {
        let _ = writeln!(s, "experiment: {}\nsource: {}", e.title, e.source);
        if let Some(m) = &e.model {
            let _ = writeln!(s, "model: {m}");
        }
    }
    s.push_str(&how_measured(o, r));
    for st in &r.settle {
        let warn = if st.ms > r.discard_ms { "  (over the discard: raise --discard-ms)" } else { "" };
        let _ = writeln!(
            s,
            "settle after a {} switch: {:.0} ms until the mean rate over {} blocks stays within 1% of their second halves{warn}",
            st.switch, st.ms, st.blocks
        );
    }
    if let Some(why) = &r.incomplete {
        let _ = writeln!(s, "INCOMPLETE: {why}");
    }
    s.push_str(&results_table(r));
    let _ = writeln!(
        s,
        "ratio: rate against the baseline's, 20% trimmed mean of paired log differences, Tukey-McLaughlin t interval; \
         p: paired test, Holm-corrected over the {} comparisons, significant below 0.01; ns/packet: a worker's time per packet against the \
         baseline's (not diluted by costs every setting shares)",
        o.settings.len() - 1
    );
    if !device_given(&o.shared_flags) {
        let _ = writeln!(
            s,
            "device: inline in each worker (live mode's default): its cost is in every setting alike, so ratios are \
             diluted by it and ns/packet differences are not"
        );
    }
    if let Some(st) = &r.stages {
        s.push_str(&st.text());
    }
    if let Some(e) = &r.stages_error {
        let _ = writeln!(s, "\nstages per setting: not available: {e}");
    }
    if let Some(e) = &o.experiment {
        s.push_str(&then_and_now(e, r));
    }
    s
}

/// The text's lines on how the comparison ran: the forwarder, the blocks and their order,
/// how rates are measured, and the blocks contention left out by cause.
fn how_measured(o: &LiveOptions, r: &LiveResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let k = o.settings.len();
    let order = if k == 2 { "ABBA/BAAB quads".to_string() } else { format!("rotated rounds of {k} and their mirrors") };
    let flagged = r.blocks.iter().filter(|b| !b.flags.is_empty()).count();
    // Which cause flagged how many blocks (a block may have several).
    let by_cause = |prefix: &str| r.blocks.iter().filter(|b| b.flags.iter().any(|f| f.starts_with(prefix))).count();
    let causes = if flagged == 0 {
        String::new()
    } else {
        format!(
            ": {} waiting to run, {} steal, {} switch or publish",
            by_cause("a worker waited"),
            by_cause("the hypervisor stole"),
            by_cause("worker ")
        )
    };
    let who = if o.programs.is_empty() {
        format!("one forwarder (pid {}), {k} settings", r.pid)
    } else {
        let each: Vec<String> = o
            .settings
            .iter()
            .zip(&o.programs)
            .zip(&r.pids)
            .map(|((s, p), pid)| format!("{} = {} (pid {pid})", s.label, p.path.display()))
            .collect();
        format!(
            "{k} forwarder programs, one running at a time (the others stopped with SIGSTOP, continued for their \
             own blocks): {}",
            each.join(", ")
        )
    };
    let _ = writeln!(
        s,
        "live comparison: {who}, {} blocks of {:.0} ms in {order} (seed {}), the first {:.0} ms after each switch discarded{}",
        r.blocks.len(),
        r.block_ms,
        r.seed,
        r.discard_ms,
        if o.trace { "; traced every 10 ms for the settle figures (the tracing itself costs the forwarder CPU)" } else { "" }
    );
    let _ = writeln!(
        s,
        "rates: packets each worker forwarded between two of its own publishes, over their CLOCK_MONOTONIC stamps; \
         a block counts for a setting only when both publishes ran it"
    );
    let _ = writeln!(
        s,
        "contention: {flagged} of {} blocks flagged and left out with their units{causes} (a worker waiting to run \
         over {:.0}% of a block, steal over {:.0}% for certain, or a late switch)",
        r.blocks.len(),
        contention::MAX_RUNQ_SHARE * 100.0,
        contention::MAX_STEAL_SHARE * 100.0
    );
    s
}

/// A figure with `prec` decimals; one that could not be computed (no counted block) is
/// `-`, never NaN.
fn figure(v: f64, prec: usize) -> String {
    if v.is_finite() {
        format!("{v:.prec$}")
    } else {
        "-".to_string()
    }
}

/// A difference with its sign and two decimals, `-` when it could not be computed.
fn signed(v: f64) -> String {
    if v.is_finite() {
        format!("{v:+.2}")
    } else {
        "-".to_string()
    }
}

/// A p value in the table: `-` when unknown, `<1e-16` below what a double tells apart.
fn p_text(p: f64) -> String {
    if !p.is_finite() {
        "-".to_string()
    } else if p < 1e-16 {
        "<1e-16".to_string()
    } else {
        format!("{p:.2e}")
    }
}

/// The results table: a header, then a row per setting (the baseline's, then each other's
/// effect against it).
fn results_table(r: &LiveResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{:<24} {:>8} {:>7} {:>9} {:>19} {:>22} {:>9} {:>9}  verdict",
        "setting", "Mpps", "blocks", "ratio", "95% interval", "ns/packet vs baseline", "p", "p (Holm)"
    );
    for res in &r.results {
        let row = match (&res.effect, &res.verdict, res.delta_ns) {
            (Some(e), Some(v), Some(delta)) => effect_row(res, e, v, delta),
            _ => baseline_row(res),
        };
        let _ = writeln!(s, "{row}");
    }
    s
}

/// A setting's row in the results table: its effect against the baseline (`delta`: the
/// ns/packet difference and its interval) and the verdict.
fn effect_row(res: &SettingResult, e: &Effect, v: &Verdict, (d, lo, hi): (f64, f64, f64)) -> String {
    let interval = if e.ci.0.is_finite() {
        format!("{:>9}..{:<9}", figure(e.ci.0, 4), figure(e.ci.1, 4))
    } else {
        "-".to_string()
    };
    let delta = if d.is_finite() {
        format!("{:>6} [{:>6}, {:>6}]", signed(d), signed(lo), signed(hi))
    } else {
        "-".to_string()
    };
    format!(
        "{:<24} {:>8} {:>7} {:>9} {:>19} {:>22} {:>9} {:>9}  {}",
        res.setting.label,
        figure(res.median_mpps, 3),
        res.blocks,
        figure(e.ratio, 4),
        interval,
        delta,
        p_text(e.p),
        p_text(e.p_holm),
        v.text(e)
    )
}

/// The baseline's row in the results table (or a setting's without an effect).
fn baseline_row(res: &SettingResult) -> String {
    format!(
        "{:<24} {:>8} {:>7} {:>9} {:>19} {:>22} {:>9} {:>9}  baseline{}",
        res.setting.label,
        figure(res.median_mpps, 3),
        res.blocks,
        "1",
        "-",
        "-",
        "-",
        "-",
        if res.blocks == 0 { " (no counted block)" } else { "" }
    )
}

/// The historic experiment's figures beside this run's: each setting's ratio to the
/// baseline then (as reported) and now.
fn then_and_now(e: &Experiment, r: &LiveResult) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let base = r.results.first().and_then(|x| x.setting.reported);
    let _ = writeln!(s, "\nthen and now (ratio to {}):", r.results.first().map_or("", |x| x.setting.label.as_str()));
    for res in &r.results {
        let then = match (res.setting.reported, base) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.3} ({v} {})", v / b, e.unit),
            _ => "-".into(),
        };
        let now = match &res.effect {
            Some(e) => format!("{:.3} [{:.3}, {:.3}]", e.ratio, e.ci.0, e.ci.1),
            None => "1".into(),
        };
        let _ = writeln!(s, "  {:<24} then {:<22} now {now}", res.setting.label, then);
    }
    s
}

fn write_outputs(o: &LiveOptions, r: &LiveResult) -> Result<()> {
    let json = o.output.join("live.json");
    let body =
        serde_json::to_string_pretty(r).map_err(|e| Error::Results { path: json.clone(), msg: e.to_string() })?;
    collector::outdir::write_atomic(&json, body.as_bytes(), 0o644)?;
    write_blocks(&o.output.join("blocks.parquet"), o, r)?;
    let table = o.output.join("table.txt");
    Ok(collector::outdir::write_atomic(&table, text(o, r).as_bytes(), 0o644)?)
}

/// blocks.parquet: one row per block and worker.
pub fn write_blocks(path: &Path, o: &LiveOptions, r: &LiveResult) -> Result<()> {
    use polars::prelude::*;
    let err = |e: PolarsError| Error::Results { path: path.into(), msg: e.to_string() };
    let rows: Vec<(&Block, &WorkerBlock)> =
        r.blocks.iter().flat_map(|b| b.workers.iter().map(move |w| (b, w))).collect();
    let col_u64 = |name: &str, f: &dyn Fn(&Block, &WorkerBlock) -> u64| {
        Column::new(name.into(), rows.iter().map(|(b, w)| f(b, w)).collect::<Vec<u64>>())
    };
    let worker_mpps = |w: &WorkerBlock| {
        (w.assigned && w.end_mono_ns > w.start_mono_ns)
            .then(|| w.packets as f64 / ((w.end_mono_ns - w.start_mono_ns) as f64 / 1e9) / 1e6)
    };
    let cols = vec![
        col_u64("block", &|b, _| b.index as u64),
        col_u64("unit", &|b, _| b.unit as u64),
        Column::new(
            "setting".into(),
            rows.iter().map(|(b, _)| o.settings[b.setting].label.as_str()).collect::<Vec<_>>(),
        ),
        col_u64("worker", &|_, w| w.worker as u64),
        col_u64("generation", &|b, _| b.generation),
        col_u64("switch_mono_ns", &|_, w| w.switch_mono_ns),
        col_u64("switch_tsc", &|_, w| w.switch_tsc),
        col_u64("start_mono_ns", &|_, w| w.start_mono_ns),
        col_u64("end_mono_ns", &|_, w| w.end_mono_ns),
        col_u64("packets", &|_, w| w.packets),
        Column::new("mpps".into(), rows.iter().map(|(_, w)| worker_mpps(w)).collect::<Vec<_>>()),
        Column::new("block_mpps".into(), rows.iter().map(|(b, _)| b.mpps).collect::<Vec<_>>()),
        Column::new("block_cpu_mpps".into(), rows.iter().map(|(b, _)| b.cpu_mpps).collect::<Vec<_>>()),
        Column::new("runq_share".into(), rows.iter().map(|(b, _)| b.contention.runq_share).collect::<Vec<_>>()),
        col_u64("nonvoluntary_switches", &|b, _| b.contention.nonvoluntary),
        Column::new("steal_share".into(), rows.iter().map(|(b, _)| b.contention.steal_share).collect::<Vec<_>>()),
        Column::new("flagged".into(), rows.iter().map(|(b, _)| !b.flags.is_empty()).collect::<Vec<_>>()),
        Column::new("flags".into(), rows.iter().map(|(b, _)| b.flags.join("; ")).collect::<Vec<_>>()),
        Column::new("switch".into(), rows.iter().map(|(b, _)| b.switch).collect::<Vec<_>>()),
        Column::new(
            "settle_first_slice".into(),
            rows.iter().map(|(b, _)| b.settle_profile.as_ref().and_then(|p| p.first().copied())).collect::<Vec<_>>(),
        ),
    ];
    let mut df = DataFrame::new_infer_height(cols).map_err(err)?;
    collector::outdir::write_parquet(path, 0o644, &mut df)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_flags_accept_live_ones_and_refuse_the_rest() {
        let f = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let s = LiveChange::live_only("x", &f(&["--prefetch", "2", "--cache=nocache", "--spin-ns", "20"])).unwrap();
        assert_eq!((s.prefetch, s.cache, s.spin_ns), (fwd_abi::Prefetch::new(2), Some(CacheMode::Nocache), Some(20)));
        let e = LiveChange::live_only("y", &f(&["--fib", "dir24"])).unwrap_err().to_string();
        assert!(e.contains("--fib cannot change while the forwarder runs") && e.contains("without --live"), "{e}");
        let e = LiveChange::live_only("z", &f(&["--prefetch", "9"])).unwrap_err().to_string();
        assert!(e.contains("--prefetch 9: 9 is not in 0..=8"), "{e}");
        assert!(LiveChange::live_only("w", &f(&["--cache", "bogus"])).is_err());
        // The GC tunables switch live too; unset ones keep the forwarder's values.
        let s = LiveChange::live_only("g", &f(&["--gc-min-interval-ms", "0", "--gc-thresh=512"])).unwrap();
        assert_eq!(s.gc, GcSetting { thresh: Some(512), min_interval_ms: Some(0), ..Default::default() });
        let base = fwd_abi::GcTunables { thresh: 4096, elasticity: 8, min_interval_ms: 500, timeout_s: 300 };
        assert_eq!(s.gc.over(base), fwd_abi::GcTunables { thresh: 512, min_interval_ms: 0, ..base });
        let e = LiveChange::live_only("t", &f(&["--gc-timeout", "100000"])).unwrap_err().to_string();
        assert!(e.contains("--gc-timeout 100000: expected a whole number 0..=86400"), "{e}");
    }

    /// A setting of prefetch 0 labelled `l`.
    fn prefetch_0(l: &str) -> LiveSetting {
        LiveSetting::new(l, LiveChange { prefetch: Some(fwd_abi::Prefetch::NONE), ..Default::default() })
    }

    #[test]
    fn a_block_shorter_than_its_warm_up_is_refused() {
        let s = prefetch_0;
        let mut o = LiveOptions::new("/nonexistent".into(), vec![s("a"), s("b")], "/bin/false".into(), vec![]);
        o.block = Duration::from_millis(60);
        o.discard = Duration::from_millis(50);
        let e = run(&o).unwrap_err().to_string();
        assert!(e.contains("too short for --discard-ms 50"), "{e}");
    }

    /// Every block left out: the table says so and prints no NaN.
    #[test]
    fn a_comparison_without_counted_blocks_prints_no_nan() {
        let s = prefetch_0;
        let o = LiveOptions::new("/nonexistent".into(), vec![s("a"), s("b")], "/bin/false".into(), vec![]);
        let e = Effect { units: 0, left_out: 10, ratio: f64::NAN, ci: (f64::NAN, f64::NAN), p: 1.0, p_holm: 1.0 };
        let v =
            Verdict::Undecided { reason: "the machine was busy (10 of 10 units had a block with contention)".into() };
        let r = LiveResult {
            pid: 1,
            pids: vec![1],
            programs: Vec::new(),
            seed: 7,
            block_ms: 150.0,
            discard_ms: 30.0,
            blocks: Vec::new(),
            results: vec![
                SettingResult {
                    setting: s("a"),
                    median_mpps: f64::NAN,
                    blocks: 0,
                    effect: None,
                    delta_ns: None,
                    verdict: None,
                },
                SettingResult {
                    setting: s("b"),
                    median_mpps: f64::NAN,
                    blocks: 0,
                    effect: Some(e),
                    delta_ns: Some((f64::NAN, f64::NAN, f64::NAN)),
                    verdict: Some(v),
                },
            ],
            settle: Vec::new(),
            incomplete: None,
            stages: None,
            stages_error: None,
        };
        let t = text(&o, &r);
        assert!(!t.contains("NaN"), "{t}");
        assert!(t.contains("baseline (no counted block)") && t.contains("undecided: the machine was busy"), "{t}");
    }

    #[test]
    fn settle_is_the_end_of_the_last_slow_slice() {
        // 10 ms slices; half rate for the first 30 ms after the switch, then steady.
        let mut trace = vec![(0u64, 0u64)];
        let mut tx = 0;
        for i in 1..=20u64 {
            tx += if i <= 3 { 5_000 } else { 10_000 };
            trace.push((i * 10_000_000, tx));
        }
        let p = settle_profile(0, &trace).unwrap();
        assert_eq!(p.len(), 10);
        assert_eq!(&p[..4], &[0.5, 0.5, 0.5, 1.0]);
        // Three blocks alike, with a little noise in the steady part: settled at 30 ms.
        let a: Vec<f64> = p.iter().map(|x| x * 1.002).collect();
        let b: Vec<f64> = p.iter().map(|x| x * 0.998).collect();
        assert_eq!(settle_ms(&[&p, &a, &b], 10.0), Some(30.0));
        let flat: Vec<(u64, u64)> = (0..=20u64).map(|i| (i * 10_000_000, i * 10_000)).collect();
        let f = settle_profile(0, &flat).unwrap();
        assert_eq!(settle_ms(&[&f, &f], 10.0), Some(0.0));
        assert_eq!(settle_profile(0, &flat[..4]), None);
        assert_eq!(settle_ms(&[&f], 10.0), None, "one block is not enough");
    }
}
