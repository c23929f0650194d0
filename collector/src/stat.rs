//! `stat`: interval counting like `perf stat -I`. Per interval and per forwarder worker:
//! Mpps, cycles (or task-clock ns where there is no PMU) per packet, IPC, cache misses and
//! branch misses per packet, with the events actually counted named.
//!
//! Per-worker PMU counts come from per-thread counters on the forwarder's `fwd-worker-N`
//! threads; packet counts from its stats segment. A target that is not a forwarder is
//! counted as a whole (no per-packet figures); `-a` counts per CPU.

use crate::child::GatedChild;
use crate::events::EventId;
use crate::perf_abi::{self, Scope};
use crate::recording::CountingInfo;
use crate::session::Target;
use crate::{Error, Result};
use forwarder::stats::{Ctr, Segment, State};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of `stat`.
#[derive(Debug, Clone)]
pub struct StatOptions {
    pub target: Target,
    /// Events to count (default: the stat set: cycles, instructions, cache references and
    /// misses, branch misses, LLC and dTLB load misses, task-clock).
    pub events: Vec<EventId>,
    /// Interval between rows (default 1 s).
    pub interval: Duration,
    /// Stop after this long (default: when the target exits or on interrupt).
    pub duration: Option<Duration>,
}

/// One row: an interval of one unit (a worker, a CPU, or the whole target).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatRow {
    /// Seconds since counting started, at the end of the interval.
    pub t: f64,
    /// `worker N`, `cpu N`, or `all`.
    pub unit: String,
    /// Forwarded packets in the interval (forwarder targets).
    pub packets: Option<u64>,
    pub mpps: Option<f64>,
    /// Event deltas in the interval (events that could not be counted are absent).
    pub counts: BTreeMap<String, u64>,
    pub cycles_per_packet: Option<f64>,
    pub task_clock_ns_per_packet: Option<f64>,
    pub ipc: Option<f64>,
    pub cache_misses_per_packet: Option<f64>,
    pub branch_misses_per_packet: Option<f64>,
}

/// The events counted and those that could not be.
#[derive(Debug, Clone, Serialize)]
pub struct StatHeader {
    pub target: String,
    pub units: Vec<String>,
    pub events: Vec<CountingInfo>,
}

struct Unit {
    name: String,
    worker: Option<usize>,
    /// One counting group per scope, summed.
    counters: crate::session::OpenCounting,
    last: BTreeMap<EventId, u64>,
    last_packets: u64,
}

fn wait_for_segment(pid: i32, child: &mut Option<GatedChild>, timeout: Duration) -> Result<Option<Segment>> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if let Ok(s) = Segment::open(&forwarder::stats::default_path(pid as u32)) {
            // A segment left by an earlier, killed process with the same PID is not ours.
            if s.pid() == pid as u32 && s.state() == State::Running {
                return Ok(Some(s));
            }
        }
        if let Some(c) = child.as_mut() {
            if let Some(code) = c.try_wait() {
                return Err(Error::Config(format!(
                    "the forwarder exited with status {code} before it started forwarding"
                )));
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(None)
}

fn open_unit(
    name: String,
    worker: Option<usize>,
    events: &[EventId],
    scopes: &[Scope],
    info: &mut Vec<CountingInfo>,
) -> Result<Unit> {
    let (counters, i) = crate::session::open_counting(events, scopes)?;
    if info.is_empty() {
        *info = i;
    }
    Ok(Unit { name, worker, counters, last: BTreeMap::new(), last_packets: 0 })
}

fn ratio(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => Some(a as f64 / b as f64),
        _ => None,
    }
}

/// Count until the duration passes, the target exits, or `stop` is set. `on_header` is
/// called once, `on_row` for every unit of every interval.
pub fn stat(
    opts: &StatOptions,
    stop: &AtomicBool,
    on_header: &mut dyn FnMut(&StatHeader),
    on_row: &mut dyn FnMut(&StatRow),
) -> Result<()> {
    let mut child = None;
    let (pid, segment) = match &opts.target {
        Target::Forwarder { program, args } | Target::Command { program, args } => {
            // The child's own output would mix with ours: stat owns stdout.
            let null =
                std::fs::OpenOptions::new().write(true).open("/dev/null").map_err(|e| Error::io("/dev/null", e))?;
            let mut c = GatedChild::spawn_with_output(program, args, Some(&null))?;
            c.release()?;
            let pid = c.pid;
            child = Some(c);
            let seg = if matches!(opts.target, Target::Forwarder { .. }) {
                wait_for_segment(pid, &mut child, Duration::from_secs(60))?
            } else {
                None
            };
            (Some(pid), seg)
        }
        Target::Pid(p) => {
            if !perf_abi::process_alive(*p) {
                return Err(Error::NoSuchProcess(*p));
            }
            (Some(*p), Segment::open(&forwarder::stats::default_path(*p as u32)).ok())
        }
        Target::All => (None, None),
    };
    let kernel = unsafe { libc::geteuid() } == 0;
    let mut info = Vec::new();
    let mut units = Vec::new();
    match (pid, &segment) {
        (Some(p), Some(_)) => {
            // Per worker thread, by name.
            let mut workers: Vec<(usize, i32)> = perf_abi::threads_of(p)?
                .into_iter()
                .filter_map(|t| {
                    let n = perf_abi::thread_name(p, t)?;
                    n.strip_prefix("fwd-worker-").and_then(|w| w.parse().ok()).map(|w| (w, t))
                })
                .collect();
            workers.sort_unstable();
            for (w, tid) in workers {
                let scope = Scope { pid: Some(tid), cpu: None, inherit: false, enable_on_exec: false, kernel };
                units.push(open_unit(format!("worker {w}"), Some(w), &opts.events, &[scope], &mut info)?);
            }
        }
        (Some(p), None) => {
            let scopes: Vec<Scope> = perf_abi::threads_of(p)?
                .into_iter()
                .map(|t| Scope { pid: Some(t), cpu: None, inherit: true, enable_on_exec: false, kernel })
                .collect();
            units.push(open_unit("all".into(), None, &opts.events, &scopes, &mut info)?);
        }
        (None, _) => {
            for c in perf_abi::online_cpus() {
                let scope = Scope { pid: None, cpu: Some(c), inherit: false, enable_on_exec: false, kernel: true };
                units.push(open_unit(format!("cpu {c}"), None, &opts.events, &[scope], &mut info)?);
            }
        }
    }
    if units.is_empty() {
        return Err(Error::Config("no threads to count (the forwarder has no fwd-worker threads?)".into()));
    }
    on_header(&StatHeader {
        target: opts.target.describe(),
        units: units.iter().map(|u| u.name.clone()).collect(),
        events: info,
    });
    for u in units.iter_mut() {
        for g in u.counters.iter_mut() {
            g.enable()?;
        }
    }
    let start = Instant::now();
    let mut tick = 1u32;
    let mut packets0: Vec<u64> = Vec::new();
    if let Some(seg) = &segment {
        let snap = seg.snapshot();
        packets0 = (0..seg.n_workers()).map(|w| snap.get(w, Ctr::TxPackets)).collect();
    }
    for u in units.iter_mut() {
        if let Some(w) = u.worker {
            u.last_packets = packets0.get(w).copied().unwrap_or(0);
        }
    }
    loop {
        let due = opts.interval * tick;
        let end = opts.duration.map_or(due, |d| due.min(d));
        let mut ended = false;
        while start.elapsed() < end {
            if stop.load(Ordering::Relaxed) {
                ended = true;
                break;
            }
            if let Some(c) = child.as_mut() {
                if c.try_wait().is_some() {
                    ended = true;
                    break;
                }
            } else if let Some(p) = pid {
                if !perf_abi::process_alive(p) {
                    ended = true;
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(5).min(end.saturating_sub(start.elapsed())));
        }
        let t = start.elapsed().as_secs_f64();
        let dt = opts.interval.as_secs_f64().min(t - opts.interval.as_secs_f64() * (tick - 1) as f64).max(1e-9);
        let snap = segment.as_ref().map(|s| s.snapshot());
        for u in units.iter_mut() {
            let mut counts = BTreeMap::new();
            for (ev, v) in crate::session::read_counting(&mut u.counters)? {
                let prev = u.last.insert(ev, v).unwrap_or(0);
                counts.insert(ev, v.saturating_sub(prev));
            }
            let packets = match (u.worker, &snap) {
                (Some(w), Some(s)) => {
                    let now = s.get(w, Ctr::TxPackets);
                    let d = now.saturating_sub(u.last_packets);
                    u.last_packets = now;
                    Some(d)
                }
                _ => None,
            };
            let get = |e: EventId| counts.get(&e).copied();
            let row = StatRow {
                t,
                unit: u.name.clone(),
                packets,
                mpps: packets.map(|p| p as f64 / dt / 1e6),
                cycles_per_packet: ratio(get(EventId::Cycles), packets),
                task_clock_ns_per_packet: ratio(get(EventId::TaskClock), packets),
                ipc: ratio(get(EventId::Instructions), get(EventId::Cycles)),
                cache_misses_per_packet: ratio(get(EventId::CacheMisses), packets),
                branch_misses_per_packet: ratio(get(EventId::BranchMisses), packets),
                counts: counts.iter().map(|(k, v)| (k.name().to_string(), *v)).collect(),
            };
            on_row(&row);
        }
        if ended || opts.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        tick += 1;
    }
    if let Some(c) = child.as_mut() {
        c.stop(segment.as_ref(), Duration::from_secs(5));
    }
    Ok(())
}

/// perf stat -I style text for a row: time, unit, then the per-packet figures.
pub fn row_text(r: &StatRow) -> String {
    let f = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
    let counts: Vec<String> = r.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "{:>9.3} {:<10} {:>8} {:>10} {:>10} {:>6} {:>10} {:>10}  {}",
        r.t,
        r.unit,
        f(r.mpps, 3),
        f(r.cycles_per_packet, 1),
        f(r.task_clock_ns_per_packet, 1),
        f(r.ipc, 2),
        f(r.cache_misses_per_packet, 3),
        f(r.branch_misses_per_packet, 3),
        counts.join(" ")
    )
}

/// The column header of [`row_text`].
pub fn header_text() -> String {
    format!(
        "{:>9} {:<10} {:>8} {:>10} {:>10} {:>6} {:>10} {:>10}  {}",
        "time", "unit", "Mpps", "cyc/pkt", "ns/pkt", "IPC", "cmiss/pkt", "bmiss/pkt", "counts"
    )
}

/// A CSV line (`-x,`): time, unit, packets, then every event count in `events` order.
pub fn row_csv(r: &StatRow, events: &[String], sep: &str) -> String {
    let mut cols = vec![format!("{:.3}", r.t), r.unit.clone(), r.packets.map_or(String::new(), |p| p.to_string())];
    for e in events {
        cols.push(r.counts.get(e).map_or("<not counted>".to_string(), |v| v.to_string()));
    }
    cols.join(sep)
}
