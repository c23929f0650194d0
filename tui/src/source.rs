//! Where `top`'s batches come from, each on its own thread, all delivered as collector
//! [`Batch`]es plus a few [`Notice`]s:
//!
//! - **live**: a recording session (`collector::session::record`) on the bundled forwarder,
//!   a PID or every CPU, streaming to us while it writes its recording;
//! - **counters only**: when perf refuses (no permission), the forwarder is started anyway
//!   and its stats segment polled, so its counters still show;
//! - **replay**: a recording directory played back at the pace it was recorded.

use collector::child::GatedChild;
use collector::session::{record, RecordOptions, Target};
use collector::stream::{channel, Batch, StreamSender};
use fwd_abi::{segment_rows, Segment};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Batches in flight between a source and the screen.
const STREAM_CAPACITY: usize = 256;

/// What a source tells the screen besides data.
// `ForwarderConfig` is large and sent once per forwarder: boxing it would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Notice {
    /// Sampling could not start (why); the forwarder's counters are shown instead.
    SamplingUnavailable(String),
    /// The forwarder's PID, once known (its stats segment is opened through it).
    ForwarderPid(i32),
    /// The forwarder's configuration, when it comes from a recording.
    ForwarderConfig(fwd_abi::Published),
    /// The source failed after starting.
    Failed(String),
    /// What a replayed recording lacks (an unfinished writer, missing maps, skipped parts).
    Warning(String),
}

/// A running source.
pub struct Source {
    pub batches: Receiver<Batch>,
    pub notices: Receiver<Notice>,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    thread: Option<JoinHandle<Duration>>,
}

impl Source {
    /// Ask the source to end (a forwarder we started is stopped through its control block).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Pause or resume a replay's clock (live sources keep collecting).
    pub fn set_paused(&self, p: bool) {
        self.paused.store(p, Ordering::Relaxed);
    }

    /// Stop and wait; returns the CPU time the source's thread used.
    pub fn finish(mut self) -> Duration {
        self.stop();
        // Keep draining so a source blocked on a full channel can see the stop.
        let t = self.thread.take();
        let mut cpu = Duration::ZERO;
        if let Some(t) = t {
            while !t.is_finished() {
                while self.batches.try_recv().is_ok() {}
                std::thread::sleep(Duration::from_millis(5));
            }
            cpu = t.join().unwrap_or_default();
        }
        cpu
    }
}

/// CPU time of the calling thread.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Start a live session. `opts.output` receives the recording. For a forwarder target
/// whose sampling perf refuses, the forwarder runs anyway and its counters are polled.
pub fn live(opts: RecordOptions) -> Source {
    let (tx, rx) = channel(STREAM_CAPACITY);
    let (ntx, nrx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, paused) = (stop.clone(), Arc::new(AtomicBool::new(false)));
    let thread = std::thread::Builder::new()
        .name("top-collector".into())
        .spawn(move || {
            // What record() logs (fallbacks, losses) reaches the screen through the
            // Started batch and the recording's meta.json.
            let mut log = |_: &str| {};
            match record(&opts, &s2, Some(&tx), &mut log) {
                Ok(_) => {}
                Err(e) => {
                    let msg = e.to_string();
                    match &opts.target {
                        Target::Forwarder { program, args } if !s2.load(Ordering::Relaxed) => {
                            let _ = ntx.send(Notice::SamplingUnavailable(msg));
                            poll_forwarder(program, args, &opts.output, &s2, &tx, &ntx);
                        }
                        _ => {
                            let _ = ntx.send(Notice::Failed(msg.clone()));
                            tx.send_reliably(Batch::Ended(format!("collection failed: {msg}")));
                        }
                    }
                }
            }
            thread_cpu()
        })
        .ok();
    Source { batches: rx, notices: nrx, stop, paused, thread }
}

/// The forwarder's counters alone (what `live` falls back to when perf refuses): start it
/// and poll its stats segment every 100 ms. Its output goes to `dir/target.log`.
pub fn counters_only(program: PathBuf, args: Vec<String>, dir: PathBuf) -> Source {
    let (tx, rx) = channel(STREAM_CAPACITY);
    let (ntx, nrx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, paused) = (stop.clone(), Arc::new(AtomicBool::new(false)));
    let thread = std::thread::Builder::new()
        .name("top-counters".into())
        .spawn(move || {
            poll_forwarder(&program, &args, &dir, &s2, &tx, &ntx);
            thread_cpu()
        })
        .ok();
    Source { batches: rx, notices: nrx, stop, paused, thread }
}

fn poll_forwarder(
    program: &std::path::Path,
    args: &[String],
    dir: &std::path::Path,
    stop: &AtomicBool,
    tx: &StreamSender,
    notices: &Sender<Notice>,
) {
    let _ = std::fs::create_dir_all(dir);
    // Replaced, never written through (a symlink planted at the name is removed).
    let log_path = dir.join("target.log");
    let _ = std::fs::remove_file(&log_path);
    let log = collector::outdir::create_new(&log_path, 0o600).ok();
    let mut child = match GatedChild::spawn_with_output(program, args, log.as_ref()) {
        Ok(c) => c,
        Err(e) => {
            let _ = notices.send(Notice::Failed(e.to_string()));
            return;
        }
    };
    if let Err(e) = child.release() {
        let _ = notices.send(Notice::Failed(e.to_string()));
        return;
    }
    let _ = notices.send(Notice::ForwarderPid(child.pid));
    let mut seg: Option<Segment> = None;
    let ended = loop {
        if stop.load(Ordering::Relaxed) {
            break "stopped".to_string();
        }
        if let Some(code) = child.try_wait() {
            break format!("forwarder exited with status {code}");
        }
        if seg.is_none() {
            seg = Segment::find_for(child.pid as u32);
        }
        if let Some(s) = &seg {
            tx.send(Batch::Counters {
                time: collector::perf_abi::mono_ns(),
                rows: segment_rows(s, collector::perf_abi::mono_ns()),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    child.stop(seg.as_ref(), Duration::from_secs(5));
    tx.send_reliably(Batch::Ended(ended));
}

/// Play a recording back at its own pace (`speed` 1.0 = as recorded).
pub fn replay(dir: PathBuf, speed: f64) -> crate::Result<Source> {
    let rec = analyzer::input::open(&dir)?.into_recording(&dir)?;
    let mut samples = rec.samples()?;
    samples.sort_by_key(|s| s.time);
    let mut counters = rec.counters()?;
    counters.sort_by_key(|r| r.time);
    let maps = rec.maps()?;
    let tasks = rec.tasks()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(STREAM_CAPACITY);
    let (ntx, nrx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let paused = Arc::new(AtomicBool::new(false));
    let (s2, p2) = (stop.clone(), paused.clone());
    if let Some(cfg) = rec.meta.forwarder.as_ref() {
        let _ = ntx.send(Notice::ForwarderConfig(fwd_abi::Published::from_value(cfg)));
    }
    let problems = rec.problems();
    if !problems.is_empty() {
        let _ = ntx.send(Notice::Warning(format!("WARNING: {}", problems.join("; "))));
    }
    let speed = if speed > 0.0 { speed } else { 1.0 };
    let playback = Playback { samples, counters, maps, tasks, meta: rec.meta.clone(), speed };
    let thread = std::thread::Builder::new().name("top-replay".into()).spawn(move || playback.play(&tx, &s2, &p2)).ok();
    Ok(Source { batches: rx, notices: nrx, stop, paused, thread })
}

/// A recording's contents to play back: samples and counter rows sorted by time.
struct Playback {
    samples: Vec<collector::records::Sample>,
    counters: Vec<collector::recording::CounterRow>,
    maps: Vec<collector::records::Mapping>,
    tasks: Vec<collector::records::TaskEvent>,
    meta: collector::recording::Meta,
    /// Recorded seconds per second played (1.0: as recorded).
    speed: f64,
}

impl Playback {
    /// The replay thread: maps, thread events and the start first, then samples and
    /// counter snapshots as their recorded time comes (a pause holds the clock), until the
    /// end, `stop` or the screen going away; returns the thread's CPU time.
    fn play(self, tx: &SyncSender<Batch>, stop: &AtomicBool, paused: &AtomicBool) -> Duration {
        let Playback { samples, counters, maps, tasks, meta, speed } = self;
        let send = |b: Batch| tx.send(b).is_ok();
        send(Batch::Maps(maps));
        // Thread events up front: the start-up split needs the workers' FORKs.
        send(Batch::Tasks(tasks));
        send(Batch::Started {
            sampling: meta.sampling.clone(),
            counting: meta.counting.clone(),
            target_pid: meta.target_pid,
        });
        let t0 = samples.first().map(|s| s.time).into_iter().chain(counters.first().map(|c| c.time)).min();
        let Some(t0) = t0 else {
            send(Batch::Ended("replay: the recording is empty".into()));
            return thread_cpu();
        };
        let mut start = Instant::now();
        let (mut si, mut ci) = (0usize, 0usize);
        let step = Duration::from_millis(50);
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if paused.load(Ordering::Relaxed) {
                std::thread::sleep(step);
                start += step;
                continue;
            }
            let now = t0 + (start.elapsed().as_secs_f64() * speed * 1e9) as u64;
            let from = si;
            while si < samples.len() && samples[si].time <= now {
                si += 1;
            }
            if si > from && !send(Batch::Samples(samples[from..si].to_vec())) {
                break;
            }
            send_counters_until(&counters, &mut ci, now, &send);
            if si == samples.len() && ci == counters.len() {
                let secs = now.saturating_sub(t0) as f64 / 1e9;
                send(Batch::Ended(format!("replay finished ({secs:.1} s recorded)")));
                break;
            }
            std::thread::sleep(step);
        }
        thread_cpu()
    }
}

/// Send the counter snapshots of `counters` from `*ci` up to time `now`, one batch per
/// snapshot time, moving `*ci` past them; stops at the first batch `send` fails to deliver.
fn send_counters_until(
    counters: &[collector::recording::CounterRow],
    ci: &mut usize,
    now: u64,
    send: &dyn Fn(Batch) -> bool,
) {
    while *ci < counters.len() && counters[*ci].time <= now {
        let t = counters[*ci].time;
        let mut rows = Vec::new();
        while *ci < counters.len() && counters[*ci].time == t {
            rows.push(counters[*ci].clone());
            *ci += 1;
        }
        if !send(Batch::Counters { time: t, rows }) {
            break;
        }
    }
}
