//! A recording session (`record`, and `top`'s live source): capture, kept apart from what
//! becomes of the records. Here: the target (started behind a gate, a PID, or every CPU),
//! the sampling and counting events on it, the drain loop, the forwarder's stats segment
//! read every counter interval, and a clean end. Every record and counter row goes to the
//! [`sink::Sink`], which feeds the recording writer and the live stream alike.

pub mod sink;

use crate::child::GatedChild;
use crate::counting::{enable, open_counting, read_counting, OpenCounting};
use crate::events::EventId;
use crate::perf_abi::{self, SampleSpec, SamplingEvent, Scope};
use crate::recording::{CounterRow, Machine, Meta, RecordingWriter, SamplingInfo, FORMAT_VERSION};
use crate::stream::{Batch, StreamSender};
use crate::{Error, Result};
use fwd_abi::{segment_rows, Segment, SOURCE_PMU};
use sink::Sink;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to observe.
#[derive(Debug, Clone)]
pub enum Target {
    /// The bundled forwarder, started as a child with these flags (its stats segment is
    /// read too).
    Forwarder { program: PathBuf, args: Vec<String> },
    /// Any program, started as a child.
    Command { program: PathBuf, args: Vec<String> },
    /// Every thread of a running process (and threads it starts later).
    Pid(i32),
    /// Every CPU, kernel included.
    All,
}

impl Target {
    pub fn describe(&self) -> String {
        match self {
            Target::Forwarder { program, args } => format!("forwarder {} {}", program.display(), args.join(" ")),
            Target::Command { program, args } => format!("command {} {}", program.display(), args.join(" ")),
            Target::Pid(p) => format!("pid {p}"),
            Target::All => "system-wide".into(),
        }
    }
}

/// Options of `record`.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Output directory.
    pub output: PathBuf,
    /// Replace a recording fwdscope made before (default false; see
    /// [`crate::outdir::OutputDir::claim`]).
    pub force: bool,
    pub target: Target,
    /// Sampling event; `None` (default) samples cycles and falls back to cpu-clock where the
    /// machine has no PMU.
    pub event: Option<EventId>,
    /// Samples per second (default 4000, perf's default) unless `period` is set.
    pub freq: Option<u64>,
    pub period: Option<u64>,
    /// Callchains (default none): frame pointers, or DWARF unwinding of user stack copies
    /// as they arrive ([`perf_abi::CallGraph`]).
    pub call_graph: perf_abi::CallGraph,
    /// Ring buffer pages per CPU (default 128); with DWARF callchains 8 times as many (see
    /// [`ring_pages`]).
    pub ring_pages: usize,
    /// Counting events read every `counter_interval` (default: the stat set).
    pub counting: Vec<EventId>,
    /// Period of counter rows (default 100 ms).
    pub counter_interval: Duration,
    /// Period of Parquet parts (default 1 s).
    pub chunk_interval: Duration,
    /// Stop after this long (default: when the target exits or on interrupt).
    pub duration: Option<Duration>,
    /// How often the ring buffers are drained when idle (default 5 ms).
    pub poll_interval: Duration,
    /// The command line to store in meta.json.
    pub command: Vec<String>,
    /// Told the target's PID once it runs (default none): a controller that steers a
    /// forwarder being recorded finds its stats segment through it.
    pub notify_pid: Option<std::sync::mpsc::Sender<i32>>,
    /// The number of the signal that set the stop flag, if a signal did (default none): the
    /// recording then says it ended by that signal rather than "interrupted".
    pub stop_signal: Option<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    /// Make the recording readable by other users (default false: directories 0700,
    /// files 0600; the kallsyms snapshot stays private when it holds real addresses).
    pub shared: bool,
    /// The kallsyms snapshot of an earlier recording of this boot to share (a hard link)
    /// instead of copying /proc/kallsyms again (default none: copy). A sweep's runs share
    /// their first run's; where no link can be made (another file system) it is copied.
    pub kallsyms_from: Option<PathBuf>,
}

impl RecordOptions {
    pub fn new(output: PathBuf, target: Target) -> RecordOptions {
        RecordOptions {
            output,
            force: false,
            target,
            event: None,
            freq: Some(4000),
            period: None,
            call_graph: perf_abi::CallGraph::None,
            ring_pages: 128,
            counting: EventId::DEFAULT_COUNTING.to_vec(),
            counter_interval: Duration::from_millis(100),
            chunk_interval: Duration::from_secs(1),
            duration: None,
            poll_interval: Duration::from_millis(5),
            command: Vec::new(),
            notify_pid: None,
            stop_signal: None,
            shared: false,
            kallsyms_from: None,
        }
    }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Whether kernel-mode samples may be taken.
fn kernel_allowed() -> bool {
    // SAFETY: geteuid has no preconditions.
    (unsafe { libc::geteuid() } == 0) || perf_abi::paranoid().parse::<i32>().is_ok_and(|p| p <= 1)
}

/// The scopes (task x CPU) to open events on for a target.
fn scopes(target_pid: Option<i32>, all: bool, gated: bool) -> Result<Vec<Scope>> {
    let cpus = perf_abi::online_cpus();
    let kernel = kernel_allowed();
    if all {
        return Ok(cpus
            .iter()
            .map(|&c| Scope { pid: None, cpu: Some(c), inherit: false, enable_on_exec: false, kernel: true })
            .collect());
    }
    let pid = target_pid.ok_or_else(|| Error::Config("no target".into()))?;
    if gated {
        return Ok(cpus
            .iter()
            .map(|&c| Scope { pid: Some(pid), cpu: Some(c), inherit: true, enable_on_exec: true, kernel })
            .collect());
    }
    // A running process: each existing thread on each CPU, inheriting into new threads
    // (the kernel refuses to map inherited per-thread events opened on any CPU).
    let tids = perf_abi::threads_of(pid)?;
    Ok(tids
        .iter()
        .flat_map(|&t| {
            cpus.iter().map(move |&c| Scope {
                pid: Some(t),
                cpu: Some(c),
                inherit: true,
                enable_on_exec: false,
                kernel,
            })
        })
        .collect())
}

/// Open the sampling event on every scope, falling back from cycles to cpu-clock when the
/// machine has no PMU (and `explicit` is false). Returns the events and the sampling info.
fn open_sampling(
    opts: &RecordOptions,
    scopes: &[Scope],
    log: &mut dyn FnMut(&str),
) -> Result<(Vec<SamplingEvent>, SamplingInfo)> {
    let requested = opts.event.unwrap_or(EventId::Cycles);
    if matches!(opts.call_graph, perf_abi::CallGraph::Dwarf { .. }) && !cfg!(target_arch = "x86_64") {
        return Err(Error::Config(format!(
            "--call-graph {}: DWARF unwinding is built for x86-64 registers only; use --call-graph fp here",
            opts.call_graph.name()
        )));
    }
    let mut info = SamplingInfo {
        requested: requested.name().into(),
        used: requested.name().into(),
        fallback: None,
        freq: if opts.period.is_some() { None } else { opts.freq },
        period: opts.period,
        callchain: opts.call_graph.any(),
        call_graph: opts.call_graph.any().then(|| opts.call_graph.name()),
        unwinding: None,
        kernel: scopes.iter().any(|s| s.kernel),
        ring_pages: ring_pages(opts),
    };
    let open_all = |event: EventId| -> Result<Vec<SamplingEvent>> {
        scopes
            .iter()
            .map(|s| {
                let spec = SampleSpec {
                    event,
                    freq: opts.freq,
                    period: opts.period,
                    call_graph: opts.call_graph,
                    ring_pages: ring_pages(opts),
                    tracking: true,
                };
                SamplingEvent::open(&spec, s)
            })
            .collect()
    };
    match open_all(requested) {
        Ok(v) => Ok((v, info)),
        Err(Error::Unsupported { source, .. }) if opts.event.is_none() => {
            let errno = match source.raw_os_error() {
                Some(libc::ENOENT) => "ENOENT".to_string(),
                Some(libc::EOPNOTSUPP) => "EOPNOTSUPP".to_string(),
                Some(libc::ENODEV) => "ENODEV".to_string(),
                _ => source.to_string(),
            };
            let why = format!(
                "{requested} is not supported on this machine (perf_event_open: {errno}; no hardware PMU): sampling cpu-clock instead"
            );
            log(&why);
            info.used = EventId::CpuClock.name().into();
            info.fallback = Some(why);
            Ok((open_all(EventId::CpuClock)?, info))
        }
        Err(e) => Err(e),
    }
}

/// The ring pages per CPU opened: as asked, or with DWARF callchains 8 times as many (at
/// most 65536), since each sample then carries its stack copy (8 KiB by default, against a
/// few hundred bytes for a frame-pointer chain): `top --call-graph dwarf` lost 0.3% of its
/// records at 128 pages while the unwinder read its first binaries.
fn ring_pages(opts: &RecordOptions) -> usize {
    match opts.call_graph {
        perf_abi::CallGraph::Dwarf { .. } => opts.ring_pages.saturating_mul(8).min(65536),
        _ => opts.ring_pages,
    }
}

/// Every process in /proc.
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect())
        .unwrap_or_default()
}

/// The target as started or found: a child behind its gate, its PID, or system-wide.
struct Started {
    child: Option<GatedChild>,
    pid: Option<i32>,
    all: bool,
}

fn start_target(opts: &RecordOptions) -> Result<Started> {
    Ok(match &opts.target {
        Target::Forwarder { program, args } | Target::Command { program, args } => {
            let log_path = opts.output.join("target.log");
            let log_file = crate::recording::create_file(&log_path, crate::recording::file_mode(opts.shared))?;
            let c = GatedChild::spawn_with_output(program, args, Some(&log_file))?;
            let pid = c.pid;
            Started { child: Some(c), pid: Some(pid), all: false }
        }
        Target::Pid(p) => {
            check_pid_target(*p)?;
            Started { child: None, pid: Some(*p), all: false }
        }
        Target::All => Started { child: None, pid: None, all: true },
    })
}

/// Processes already running have no MMAP2/COMM records of their past: synthesize them
/// from /proc as perf does (system-wide: every process).
fn synthesize_existing(target: &Target, sink: &mut Sink, time: u64) {
    let existing: Vec<u32> = match target {
        Target::Pid(p) => vec![*p as u32],
        Target::All => all_pids(),
        _ => Vec::new(),
    };
    for pid in existing {
        let (maps, tasks) = crate::records::synthesize_process(pid, time);
        for m in maps {
            sink.mapping(m);
        }
        for t in tasks {
            sink.task(t);
        }
    }
}

/// One counter interval: the PMU totals and, once the forwarder's segment is up, every
/// counter of every worker.
fn counter_rows(counting: &mut OpenCounting, segment: Option<&Segment>, time: u64) -> Result<Vec<CounterRow>> {
    let mut rows: Vec<CounterRow> = read_counting(counting)?
        .into_iter()
        .map(|(ev, v)| CounterRow { time, source: SOURCE_PMU.into(), worker: -1, name: ev.name().into(), value: v })
        .collect();
    if let Some(seg) = segment {
        rows.extend(segment_rows(seg, time));
    }
    Ok(rows)
}

/// Record until the duration passes, the target exits, or `stop` is set. Returns meta.json's
/// final content. `log` receives notes for the user (fallbacks, how it ended).
pub fn record(
    opts: &RecordOptions,
    stop: &AtomicBool,
    stream: Option<&StreamSender>,
    log: &mut dyn FnMut(&str),
) -> Result<Meta> {
    // A process to attach to is checked before anything is written: a PID that does not
    // exist, or another user's, leaves no directory behind (nor replaces one with --force).
    if let Target::Pid(p) = &opts.target {
        check_pid_target(*p)?;
    }
    let writer = RecordingWriter::create_with(&opts.output, opts.force, opts.shared)?;
    match start_recording(opts, writer, stop, stream, log) {
        Err(Ended::NotBegun(e)) => {
            // Nothing was recorded (the program could not be started, perf refused): the
            // directory just made would be "a directory without meta.json"; remove it.
            let _ = std::fs::remove_dir_all(&opts.output);
            Err(e)
        }
        Err(Ended::Failed(e)) => Err(e),
        Ok(meta) => Ok(meta),
    }
}

/// Why a recording ended in error: before its meta.json was written (nothing to keep), or
/// after (the recording says why it stopped).
enum Ended {
    NotBegun(Error),
    Failed(Error),
}

fn check_pid_target(p: i32) -> Result<()> {
    if !perf_abi::process_alive(p) {
        return Err(Error::NoSuchProcess(p));
    }
    if let Some((owner, me)) = perf_abi::foreign_owner(p) {
        return Err(Error::ForeignProcess { pid: p, owner, me });
    }
    Ok(())
}

fn start_recording(
    opts: &RecordOptions,
    writer: RecordingWriter,
    stop: &AtomicBool,
    stream: Option<&StreamSender>,
    log: &mut dyn FnMut(&str),
) -> std::result::Result<Meta, Ended> {
    let mut notes = Vec::new();
    let mut kernel_text = None;
    let shared_snapshot = opts.kallsyms_from.as_deref().and_then(|p| writer.link_kallsyms(p).ok());
    match shared_snapshot.map_or_else(|| writer.snapshot_kallsyms(), Ok) {
        Ok((true, text)) => kernel_text = text,
        Ok((false, _)) => {
            notes.push("kallsyms addresses are hidden (kptr_restrict): kernel symbols cannot be resolved".to_string())
        }
        Err(e) => {
            // Said now too (a full disk shows here first), not only in the recording's notes.
            let msg = format!("no kallsyms snapshot: {e}; kernel symbols will come from perf's build-id cache or kallsyms as they are at report time");
            log(&msg);
            notes.push(format!("no kallsyms snapshot: {e}"));
        }
    }
    let mut target = start_target(opts).map_err(Ended::NotBegun)?;
    let scopes = scopes(target.pid, target.all, target.child.is_some()).map_err(Ended::NotBegun)?;
    let (mut samplers, sampling) = open_sampling(opts, &scopes, log).map_err(Ended::NotBegun)?;
    let (mut counting, counting_info) = open_counting(&opts.counting, &scopes).map_err(Ended::NotBegun)?;
    let meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        command: opts.command.clone(),
        target: opts.target.describe(),
        target_pid: target.pid,
        forwarder: None,
        machine: Machine { kernel_text: kernel_text.map(|a| format!("{a:#x}")), ..Machine::current() },
        sampling,
        counting: counting_info,
        start_unix_ns: unix_ns(),
        start_mono_ns: perf_abi::mono_ns(),
        status: "recording".into(),
        notes,
        ..Meta::default()
    };
    writer.write_meta(&meta).map_err(Ended::NotBegun)?;
    let mut sink = Sink::new(writer, meta, stream);
    if matches!(opts.call_graph, perf_abi::CallGraph::Dwarf { .. }) {
        // Only x86-64 registers are asked for (REGS_MASK_X86_64): `open_sampling` refused
        // dwarf elsewhere.
        if let Some(u) = crate::unwind::UserUnwinder::live() {
            sink.unwind_with(u);
        }
    }
    match drive(opts, stop, log, &mut sink, &mut target, &mut samplers, &mut counting) {
        Ok(()) => Ok(sink.meta),
        // The program never ran (its exec failed): there is nothing to keep.
        Err(e @ Error::Exec { .. }) => Err(Ended::NotBegun(e)),
        Err(e) => {
            // The recording has started: say in it why it stopped (a disk that filled up
            // leaves room for a meta.json more often than not; the part that failed was
            // removed with its temporary file).
            let meta = &mut sink.meta;
            meta.status = "failed".into();
            meta.ended_by = Some(format!("error: {e}"));
            meta.end_unix_ns = Some(unix_ns());
            meta.end_mono_ns = Some(perf_abi::mono_ns());
            if let Err(m) = sink.writer.write_meta(&sink.meta) {
                log(&format!("could not mark the recording failed: {m}"));
            }
            Err(Ended::Failed(e))
        }
    }
}

/// From the first record to meta.json marked complete; an error leaves `sink.meta` for
/// the caller to mark the recording failed.
fn drive(
    opts: &RecordOptions,
    stop: &AtomicBool,
    log: &mut dyn FnMut(&str),
    sink: &mut Sink,
    target: &mut Started,
    samplers: &mut [SamplingEvent],
    counting: &mut OpenCounting,
) -> Result<()> {
    begin(opts, sink, target, samplers, counting)?;
    let start = Instant::now();
    let mut watch = CounterWatch {
        is_forwarder: matches!(opts.target, Target::Forwarder { .. } | Target::Pid(_)),
        started_here: matches!(opts.target, Target::Forwarder { .. }),
        segment: None,
        last_counters: Instant::now() - opts.counter_interval,
    };
    let mut last_chunk = Instant::now();
    let mut records = Vec::with_capacity(8192);
    let ended_by = loop {
        let mut drained = 0;
        for s in samplers.iter_mut() {
            drained += s.drain(&mut records, 1 << 14, &mut sink.meta.unparsed);
        }
        in_time_order(&mut records);
        for r in records.drain(..) {
            sink.record(r);
        }
        sink.end_pass();
        watch.pass(opts, sink, target.pid, counting)?;
        if last_chunk.elapsed() >= opts.chunk_interval {
            last_chunk = Instant::now();
            sink.checkpoint()?;
        }
        if let Some(why) = ended(opts, stop, start, target) {
            break why;
        }
        if drained == 0 {
            std::thread::sleep(opts.poll_interval);
        }
    };
    wind_down(sink, target, samplers, &mut records, counting, watch.segment.as_ref());
    finish(sink, ended_by, log)
}

/// The first records (what exists already), the `Started` batch, and then the target let
/// run: a child we started released at its gate, else the events enabled.
fn begin(
    opts: &RecordOptions,
    sink: &mut Sink,
    target: &mut Started,
    samplers: &mut [SamplingEvent],
    counting: &mut OpenCounting,
) -> Result<()> {
    let t0 = sink.meta.start_mono_ns;
    synthesize_existing(&opts.target, sink, t0);
    sink.end_pass();
    sink.send_reliably(Batch::Started {
        sampling: sink.meta.sampling.clone(),
        counting: sink.meta.counting.clone(),
        target_pid: target.pid,
    });
    if let (Some(tell), Some(pid)) = (&opts.notify_pid, target.pid) {
        let _ = tell.send(pid);
    }
    if let Some(c) = target.child.as_mut() {
        c.release()?;
    } else {
        for s in samplers.iter_mut() {
            s.enable()?;
        }
        enable(counting)?;
    }
    Ok(())
}

/// The forwarder's stats segment, once found, and when the last counter row was taken.
struct CounterWatch {
    /// The target is a forwarder (started here, or a running process given by pid).
    is_forwarder: bool,
    started_here: bool,
    segment: Option<Segment>,
    last_counters: Instant,
}

impl CounterWatch {
    /// One pass of the loop: look for the forwarder's segment, and take a counter row when
    /// one is due or the segment was just found.
    fn pass(
        &mut self,
        opts: &RecordOptions,
        sink: &mut Sink,
        pid: Option<i32>,
        counting: &mut OpenCounting,
    ) -> Result<()> {
        // Look for the forwarder's segment on every pass until it is up, and take a row
        // as soon as it is: per-packet figures divide the samples by the packets between
        // the first and the last row, so the rows must span the forwarding.
        let mut found = false;
        let due = self.last_counters.elapsed() >= opts.counter_interval;
        // A forwarder we started creates its segment soon after: look on every pass. A
        // running process (-p) has its segment already, or none: look when a row is due.
        if self.is_forwarder && self.segment.is_none() && (self.started_here || due) {
            self.segment = pid.and_then(|p| Segment::find_for(p as u32));
            if let Some(s) = &self.segment {
                sink.meta.forwarder = serde_json::from_str(&s.config_json()).ok();
                found = true;
            }
        }
        if found || due {
            self.last_counters = Instant::now();
            let t = perf_abi::mono_ns();
            let rows = counter_rows(counting, self.segment.as_ref(), t)?;
            sink.counters(t, rows);
        }
        Ok(())
    }
}

/// A pass's records in time order when they carry user stacks: each CPU's ring is in
/// order, but a process's new mapping may sit in another CPU's ring than its first samples,
/// and the unwinder must see the mapping first. (Without stacks the rings' order is kept.)
fn in_time_order(records: &mut [crate::records::Record]) {
    if records.iter().any(|r| matches!(r, crate::records::Record::StackSample(_))) {
        records.sort_by_key(crate::records::Record::time);
    }
}

/// After the loop: stop a child we started, drain what the events still hold, and take the
/// last counter row.
fn wind_down(
    sink: &mut Sink,
    target: &mut Started,
    samplers: &mut [SamplingEvent],
    records: &mut Vec<crate::records::Record>,
    counting: &mut OpenCounting,
    segment: Option<&Segment>,
) {
    // Stop a child we started: ask a forwarder through its control block, else SIGINT.
    if let Some(c) = target.child.as_mut() {
        c.stop(segment, Duration::from_secs(5));
    }
    for s in samplers.iter_mut() {
        let _ = s.disable();
        while s.drain(records, 1 << 14, &mut sink.meta.unparsed) > 0 {}
    }
    in_time_order(records);
    for r in records.drain(..) {
        sink.record(r);
    }
    sink.end_pass();
    // The last row after the target stopped (its segment stays mapped here), so the
    // packets cover every sample taken.
    if segment.is_some() {
        let t = perf_abi::mono_ns();
        if let Ok(rows) = counter_rows(counting, segment, t) {
            sink.counters(t, rows);
        }
    }
}

/// Whether the session is over, and why.
fn ended(opts: &RecordOptions, stop: &AtomicBool, start: Instant, target: &mut Started) -> Option<String> {
    if stop.load(Ordering::Relaxed) {
        let sig = opts.stop_signal.as_ref().map_or(0, |s| s.load(Ordering::Relaxed));
        return Some(match sig as i32 {
            libc::SIGINT => "interrupted (SIGINT)".into(),
            libc::SIGTERM => "interrupted (SIGTERM)".into(),
            libc::SIGHUP => "interrupted (SIGHUP)".into(),
            _ => "interrupted".into(),
        });
    }
    if opts.duration.is_some_and(|d| start.elapsed() >= d) {
        return Some(format!("duration {:.1} s", start.elapsed().as_secs_f64()));
    }
    if let Some(c) = target.child.as_mut() {
        return c.try_wait().map(|code| {
            // 126/127 are what a shell or `env` says when it could not run what it was
            // given (a `#!/usr/bin/env missing` script execs, then env fails).
            let why = match code {
                127 => " (127: a command it runs, such as the one its #! line names through env, was not found)",
                126 => " (126: a command it runs could not be executed)",
                _ => "",
            };
            format!("target exited with status {code}{why}")
        });
    }
    match target.pid {
        Some(p) if !perf_abi::process_alive(p) => Some(format!("process {p} exited")),
        _ => None,
    }
}

/// Build-ids, the last parts, maps and tasks, and meta.json marked complete.
fn finish(sink: &mut Sink, ended_by: String, log: &mut dyn FnMut(&str)) -> Result<()> {
    crate::buildid::fill_build_ids(&mut sink.writer.maps);
    sink.writer.flush()?;
    sink.writer.write_maps_and_tasks()?;
    let meta = &mut sink.meta;
    meta.end_unix_ns = Some(unix_ns());
    meta.end_mono_ns = Some(perf_abi::mono_ns());
    meta.ended_by = Some(ended_by.clone());
    meta.status = "complete".into();
    if meta.lost > 0 {
        log(&format!("{} records lost (ring buffer full): raise the ring size or lower -F", meta.lost));
    }
    if meta.throttled > 0 {
        log(&format!("sampling was throttled {} times (kernel.perf_event_max_sample_rate)", meta.throttled));
    }
    sink.checkpoint()?;
    if let Some(u) = &sink.meta.sampling.unwinding {
        log(&u.summary());
    }
    sink.send_reliably(Batch::Ended(ended_by));
    Ok(())
}
