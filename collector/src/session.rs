//! A recording session: start or attach to the target, open the sampling and counting
//! events, drain ring buffers into a [`RecordingWriter`] (and the live stream), sample the
//! forwarder's stats segment, and end cleanly.

use crate::child::GatedChild;
use crate::events::EventId;
use crate::perf_abi::{self, CountingEvent, CountingGroup, SampleSpec, SamplingEvent, Scope};
use crate::recording::{CounterRow, CountingInfo, Machine, Meta, RecordingWriter, SamplingInfo, FORMAT_VERSION};
use crate::records::Record;
use crate::stream::{Batch, StreamSender};
use crate::{Error, Result};
use forwarder::stats::{Segment, State, COUNTER_NAMES};
use std::collections::HashSet;
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
    /// Overwrite an existing recording (default false).
    pub force: bool,
    pub target: Target,
    /// Sampling event; `None` (default) samples cycles and falls back to cpu-clock where the
    /// machine has no PMU.
    pub event: Option<EventId>,
    /// Samples per second (default 4000, perf's default) unless `period` is set.
    pub freq: Option<u64>,
    pub period: Option<u64>,
    /// Frame-pointer callchains (default false).
    pub callchain: bool,
    /// Ring buffer pages per CPU (default 128).
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
            callchain: false,
            ring_pages: 128,
            counting: EventId::DEFAULT_COUNTING.to_vec(),
            counter_interval: Duration::from_millis(100),
            chunk_interval: Duration::from_secs(1),
            duration: None,
            poll_interval: Duration::from_millis(5),
            command: Vec::new(),
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
    let mut info = SamplingInfo {
        requested: requested.name().into(),
        used: requested.name().into(),
        fallback: None,
        freq: if opts.period.is_some() { None } else { opts.freq },
        period: opts.period,
        callchain: opts.callchain,
        kernel: scopes.iter().any(|s| s.kernel),
        ring_pages: opts.ring_pages,
    };
    let open_all = |event: EventId| -> Result<Vec<SamplingEvent>> {
        scopes
            .iter()
            .map(|s| {
                let spec = SampleSpec {
                    event,
                    freq: opts.freq,
                    period: opts.period,
                    callchain: opts.callchain,
                    ring_pages: opts.ring_pages,
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

/// Counting groups opened, one per scope.
pub type OpenCounting = Vec<CountingGroup>;

/// Probe each counting event alone (events the machine cannot count are reported, not
/// fatal), then open the countable ones as one group per scope.
pub fn open_counting(events: &[EventId], scopes: &[Scope]) -> Result<(OpenCounting, Vec<CountingInfo>)> {
    let mut info = Vec::new();
    let mut ok = Vec::new();
    let probe = scopes.first().copied().ok_or_else(|| Error::Config("nothing to count on".into()))?;
    for &ev in events {
        match CountingEvent::open(ev, &probe) {
            Ok(_) => {
                info.push(CountingInfo { event: ev.name().into(), status: "counted".into() });
                ok.push(ev);
            }
            Err(Error::Unsupported { .. }) => {
                info.push(CountingInfo { event: ev.name().into(), status: "not supported".into() })
            }
            Err(e) => return Err(e),
        }
    }
    if ok.is_empty() {
        return Ok((Vec::new(), info));
    }
    let groups = scopes.iter().map(|s| CountingGroup::open(&ok, s)).collect::<Result<Vec<_>>>()?;
    Ok((groups, info))
}

/// Each counted event summed over the groups (scopes).
pub fn read_counting(open: &mut [CountingGroup]) -> Result<Vec<(EventId, u64)>> {
    let mut sums: Vec<(EventId, u64)> = Vec::new();
    for g in open.iter_mut() {
        for (ev, v) in g.read_scaled()? {
            match sums.iter_mut().find(|(e, _)| *e == ev) {
                Some(slot) => slot.1 += v,
                None => sums.push((ev, v)),
            }
        }
    }
    Ok(sums)
}

/// Find the stats segment of a forwarder process once it is running.
fn try_segment(pid: i32) -> Option<Segment> {
    let p = forwarder::stats::default_path(pid as u32);
    let s = Segment::open(&p).ok()?;
    // A segment left by an earlier, killed process with the same PID is not this one's.
    (s.pid() == pid as u32 && s.state() != State::Initializing).then_some(s)
}

/// Every process in /proc.
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok())).collect())
        .unwrap_or_default()
}

/// Record until the duration passes, the target exits, or `stop` is set. Returns meta.json's
/// final content. `log` receives notes for the user (fallbacks, how it ended).
pub fn record(
    opts: &RecordOptions,
    stop: &AtomicBool,
    stream: Option<&StreamSender>,
    log: &mut dyn FnMut(&str),
) -> Result<Meta> {
    let mut writer = RecordingWriter::create(&opts.output, opts.force)?;
    let mut notes = Vec::new();
    match writer.snapshot_kallsyms() {
        Ok(true) => {}
        Ok(false) => {
            notes.push("kallsyms addresses are hidden (kptr_restrict): kernel symbols cannot be resolved".to_string())
        }
        Err(e) => notes.push(format!("no kallsyms snapshot: {e}")),
    }
    let (mut child, target_pid, all) = match &opts.target {
        Target::Forwarder { program, args } | Target::Command { program, args } => {
            let log_path = opts.output.join("target.log");
            let log_file = std::fs::File::create(&log_path).map_err(|e| Error::io(&log_path, e))?;
            let c = GatedChild::spawn_with_output(program, args, Some(&log_file))?;
            let pid = c.pid;
            (Some(c), Some(pid), false)
        }
        Target::Pid(p) => {
            if !perf_abi::process_alive(*p) {
                return Err(Error::NoSuchProcess(*p));
            }
            (None, Some(*p), false)
        }
        Target::All => (None, None, true),
    };
    let scopes = scopes(target_pid, all, child.is_some())?;
    let (mut samplers, sampling) = open_sampling(opts, &scopes, log)?;
    let (mut counting, counting_info) = open_counting(&opts.counting, &scopes)?;
    let mut meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        command: opts.command.clone(),
        target: opts.target.describe(),
        target_pid,
        forwarder: None,
        machine: Machine::current(),
        sampling,
        counting: counting_info,
        start_unix_ns: unix_ns(),
        start_mono_ns: perf_abi::mono_ns(),
        status: "recording".into(),
        notes,
        ..Meta::default()
    };
    writer.write_meta(&meta)?;
    // Processes already running have no MMAP2/COMM records of their past: synthesize them
    // from /proc as perf does (system-wide: every process).
    let mut seen_maps: HashSet<(u32, u64, String)> = HashSet::new();
    let existing: Vec<u32> = match &opts.target {
        Target::Pid(p) => vec![*p as u32],
        Target::All => all_pids(),
        _ => Vec::new(),
    };
    let mut start_maps = Vec::new();
    for pid in existing {
        let (maps, tasks) = crate::records::synthesize_process(pid, meta.start_mono_ns);
        for m in maps {
            if seen_maps.insert((m.pid, m.start, m.path.clone())) {
                start_maps.push(m);
            }
        }
        writer.tasks.extend(tasks);
    }
    writer.maps.extend(start_maps.iter().cloned());
    if let Some(st) = stream {
        st.send_reliably(Batch::Maps(start_maps));
        st.send_reliably(Batch::Started {
            sampling: meta.sampling.clone(),
            counting: meta.counting.clone(),
            target_pid,
        });
    }
    if let Some(c) = child.as_mut() {
        c.release()?;
    } else {
        for s in samplers.iter_mut() {
            s.enable()?;
        }
        for g in counting.iter_mut() {
            g.enable()?;
        }
    }
    let is_forwarder = matches!(opts.target, Target::Forwarder { .. }) || matches!(opts.target, Target::Pid(_));
    let mut segment: Option<Segment> = None;
    let start = Instant::now();
    let mut last_counters = Instant::now() - opts.counter_interval;
    let mut last_chunk = Instant::now();
    let mut records = Vec::with_capacity(8192);
    let mut ended_by: Option<String> = None;
    loop {
        // Drain every ring.
        let mut drained = 0;
        for s in samplers.iter_mut() {
            drained += s.drain(&mut records, 1 << 14, &mut meta.unparsed);
        }
        let mut batch = Vec::new();
        let mut new_maps = Vec::new();
        for r in records.drain(..) {
            match r {
                Record::Sample(s) => {
                    meta.samples += 1;
                    if stream.is_some() {
                        batch.push(s.clone());
                    }
                    writer.push_sample(s);
                }
                Record::Mmap(m) => {
                    if seen_maps.insert((m.pid, m.start, m.path.clone())) {
                        if stream.is_some() {
                            new_maps.push(m.clone());
                        }
                        writer.maps.push(m);
                    }
                }
                Record::Task(t) => writer.tasks.push(t),
                Record::Lost(n) => {
                    meta.lost += n;
                    if let Some(st) = stream {
                        st.send(Batch::Lost(n));
                    }
                }
                Record::Throttle(true) => meta.throttled += 1,
                Record::Throttle(false) => meta.unthrottled += 1,
            }
        }
        if let Some(st) = stream {
            // Maps first: the samples after them may fall in the new mappings.
            if !new_maps.is_empty() {
                st.send_reliably(Batch::Maps(new_maps));
            }
            if !batch.is_empty() {
                st.send(Batch::Samples(batch));
            }
        }
        // Counters.
        if last_counters.elapsed() >= opts.counter_interval {
            last_counters = Instant::now();
            let t = perf_abi::mono_ns();
            let mut rows = Vec::new();
            for (ev, v) in read_counting(&mut counting)? {
                rows.push(CounterRow { time: t, source: "pmu".into(), worker: -1, name: ev.name().into(), value: v });
            }
            if is_forwarder && segment.is_none() {
                if let Some(pid) = target_pid {
                    segment = try_segment(pid);
                    if let Some(s) = &segment {
                        meta.forwarder = serde_json::from_str(&s.config_json()).ok();
                    }
                }
            }
            if let Some(seg) = &segment {
                let names = seg.counter_names();
                for (w, vals) in seg.snapshot().workers.iter().enumerate() {
                    for (i, v) in vals.iter().enumerate() {
                        let name =
                            names.get(i).cloned().unwrap_or_else(|| COUNTER_NAMES.get(i).unwrap_or(&"?").to_string());
                        rows.push(CounterRow {
                            time: t,
                            source: "forwarder".into(),
                            worker: w as i32,
                            name,
                            value: *v,
                        });
                    }
                }
            }
            if let Some(st) = stream {
                st.send(Batch::Counters { time: t, rows: rows.clone() });
            }
            for r in rows {
                writer.push_counter(r);
            }
        }
        if last_chunk.elapsed() >= opts.chunk_interval {
            last_chunk = Instant::now();
            writer.flush()?;
            meta.stream_dropped = stream.map_or(0, |s| s.dropped());
            writer.write_meta(&meta)?;
        }
        // How it ends.
        if stop.load(Ordering::Relaxed) {
            ended_by = Some("interrupted".into());
        } else if opts.duration.is_some_and(|d| start.elapsed() >= d) {
            ended_by = Some(format!("duration {:.1} s", start.elapsed().as_secs_f64()));
        } else if let Some(c) = child.as_mut() {
            if let Some(code) = c.try_wait() {
                ended_by = Some(format!("target exited with status {code}"));
            }
        } else if let Some(p) = target_pid {
            if !perf_abi::process_alive(p) {
                ended_by = Some(format!("process {p} exited"));
            }
        }
        if ended_by.is_some() {
            break;
        }
        if drained == 0 {
            std::thread::sleep(opts.poll_interval);
        }
    }
    // Stop a child we started: ask a forwarder through its control block, else SIGINT.
    if let Some(c) = child.as_mut() {
        c.stop(segment.as_ref(), Duration::from_secs(5));
    }
    for s in samplers.iter_mut() {
        let _ = s.disable();
        loop {
            let n = s.drain(&mut records, 1 << 14, &mut meta.unparsed);
            if n == 0 {
                break;
            }
        }
    }
    for r in records.drain(..) {
        match r {
            Record::Sample(s) => {
                meta.samples += 1;
                writer.push_sample(s);
            }
            Record::Mmap(m) => {
                if seen_maps.insert((m.pid, m.start, m.path.clone())) {
                    writer.maps.push(m);
                }
            }
            Record::Task(t) => writer.tasks.push(t),
            Record::Lost(n) => meta.lost += n,
            Record::Throttle(true) => meta.throttled += 1,
            Record::Throttle(false) => meta.unthrottled += 1,
        }
    }
    crate::buildid::fill_build_ids(&mut writer.maps);
    writer.flush()?;
    writer.write_maps_and_tasks()?;
    meta.end_unix_ns = Some(unix_ns());
    meta.end_mono_ns = Some(perf_abi::mono_ns());
    meta.ended_by = ended_by.clone();
    meta.stream_dropped = stream.map_or(0, |s| s.dropped());
    meta.status = "complete".into();
    if meta.lost > 0 {
        log(&format!("{} records lost (ring buffer full): raise the ring size or lower -F", meta.lost));
    }
    if meta.throttled > 0 {
        log(&format!("sampling was throttled {} times (kernel.perf_event_max_sample_rate)", meta.throttled));
    }
    writer.write_meta(&meta)?;
    if let Some(st) = stream {
        st.send_reliably(Batch::Ended(ended_by.unwrap_or_default()));
    }
    Ok(meta)
}
