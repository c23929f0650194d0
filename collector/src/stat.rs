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
use fwd_abi::{Ctr, Segment};
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
    /// The forwarder's stage clocks for this worker over the interval (ns per forwarded
    /// packet by stage, VPP's columns, device- or worker-bound), when clocks are on: cost
    /// per stage even where there is no PMU.
    pub stage_clocks: Option<fwd_abi::clocks::ClockReport>,
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
    counters: crate::counting::OpenCounting,
    last: BTreeMap<EventId, u64>,
    last_packets: u64,
    /// The worker's counters at the last row (stage clocks).
    last_counters: Vec<u64>,
}

fn open_unit(
    name: String,
    worker: Option<usize>,
    events: &[EventId],
    scopes: &[Scope],
    info: &mut Vec<CountingInfo>,
) -> Result<Unit> {
    let (counters, i) = crate::counting::open_counting(events, scopes)?;
    if info.is_empty() {
        *info = i;
    }
    Ok(Unit { name, worker, counters, last: BTreeMap::new(), last_packets: 0, last_counters: Vec::new() })
}

fn ratio(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0 => Some(a as f64 / b as f64),
        _ => None,
    }
}

/// The target as `stat` started or found it.
struct Counted {
    child: Option<GatedChild>,
    pid: Option<i32>,
    segment: Option<Segment>,
}

impl Counted {
    fn start(target: &Target) -> Result<Counted> {
        Ok(match target {
            Target::Forwarder { program, args } | Target::Command { program, args } => {
                // The child's own output would mix with ours: stat owns stdout.
                let null =
                    std::fs::OpenOptions::new().write(true).open("/dev/null").map_err(|e| Error::io("/dev/null", e))?;
                let mut c = GatedChild::spawn_with_output(program, args, Some(&null))?;
                c.release()?;
                let pid = c.pid;
                let segment = if matches!(target, Target::Forwarder { .. }) {
                    crate::launch::wait_running(&mut c, &Default::default())?
                } else {
                    None
                };
                Counted { child: Some(c), pid: Some(pid), segment }
            }
            Target::Pid(p) => {
                if !perf_abi::process_alive(*p) {
                    return Err(Error::NoSuchProcess(*p));
                }
                Counted { child: None, pid: Some(*p), segment: Segment::find_for(*p as u32) }
            }
            Target::All => Counted { child: None, pid: None, segment: None },
        })
    }

    /// Whether the target is gone.
    fn ended(&mut self) -> bool {
        match (self.child.as_mut(), self.pid) {
            (Some(c), _) => c.try_wait().is_some(),
            (None, Some(p)) => !perf_abi::process_alive(p),
            (None, None) => false,
        }
    }

    /// The units counted: each forwarder worker thread (by name), the whole process, or
    /// each CPU (system-wide); and the events' status.
    fn open_units(&self, events: &[EventId]) -> Result<(Vec<Unit>, Vec<CountingInfo>)> {
        // SAFETY: geteuid has no preconditions.
        let kernel = unsafe { libc::geteuid() } == 0;
        let mut info = Vec::new();
        let mut units = Vec::new();
        match (self.pid, &self.segment) {
            (Some(_), Some(seg)) if workers_are_cpus(seg) => {
                // An in-kernel forwarder: block N is what CPU N forwarded, in its softirq,
                // whichever task it interrupted; CPU N is counted whole, kernel included.
                for c in perf_abi::online_cpus().into_iter().filter(|&c| c < seg.n_workers()) {
                    let scope = Scope { pid: None, cpu: Some(c), inherit: false, enable_on_exec: false, kernel: true };
                    units.push(open_unit(format!("cpu {c}"), Some(c), events, &[scope], &mut info)?);
                }
            }
            (Some(p), Some(seg)) => {
                // The segment is up before the workers are started: wait (up to 5 s) until
                // every worker thread it announces exists.
                let deadline = std::time::Instant::now() + Duration::from_secs(5);
                let mut workers: Vec<(usize, i32)> = loop {
                    let found: Vec<(usize, i32)> = perf_abi::threads_of(p)?
                        .into_iter()
                        .filter_map(|t| fwd_abi::threads::worker_index(&perf_abi::thread_name(p, t)?).map(|w| (w, t)))
                        .collect();
                    if found.len() >= seg.n_workers() || std::time::Instant::now() >= deadline {
                        break found;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                };
                workers.sort_unstable();
                for (w, tid) in workers {
                    let scope = Scope { pid: Some(tid), cpu: None, inherit: false, enable_on_exec: false, kernel };
                    units.push(open_unit(format!("worker {w}"), Some(w), events, &[scope], &mut info)?);
                }
            }
            (Some(p), None) => {
                let scopes: Vec<Scope> = perf_abi::threads_of(p)?
                    .into_iter()
                    .map(|t| Scope { pid: Some(t), cpu: None, inherit: true, enable_on_exec: false, kernel })
                    .collect();
                units.push(open_unit("all".into(), None, events, &scopes, &mut info)?);
            }
            (None, _) => {
                for c in perf_abi::online_cpus() {
                    let scope = Scope { pid: None, cpu: Some(c), inherit: false, enable_on_exec: false, kernel: true };
                    units.push(open_unit(format!("cpu {c}"), None, events, &[scope], &mut info)?);
                }
            }
        }
        if units.is_empty() {
            return Err(Error::Config("no threads to count (the forwarder has no fwd-worker threads?)".into()));
        }
        Ok((units, info))
    }
}

/// Whether a forwarder's worker blocks are CPUs: an in-kernel forwarder (the lab's XDP
/// program) runs in each CPU's softirq, not in threads of its own, and the process that
/// holds it publishes one block per CPU with `"workers_are_cpus": true` in its
/// configuration JSON.
pub fn workers_are_cpus(seg: &Segment) -> bool {
    fwd_abi::Published::from_json(&seg.config_json()).is_some_and(|p| p.config.workers_are_cpus == Some(true))
}

impl Unit {
    /// This unit's row for the interval ending now (`t` s since the start, `dt` long).
    fn row(&mut self, t: f64, dt: f64, snap: Option<&fwd_abi::Snapshot>, tsc_hz: u64) -> Result<StatRow> {
        let mut counts = BTreeMap::new();
        for (ev, v) in crate::counting::read_counting(&mut self.counters)? {
            let prev = self.last.insert(ev, v).unwrap_or(0);
            counts.insert(ev, v.saturating_sub(prev));
        }
        let packets = match (self.worker, snap) {
            (Some(w), Some(s)) => {
                let now = s.get(w, Ctr::TxPackets);
                let d = now.saturating_sub(self.last_packets);
                self.last_packets = now;
                Some(d)
            }
            _ => None,
        };
        let stage_clocks = match (self.worker, snap) {
            (Some(w), Some(s)) => {
                let now = s.workers.get(w).cloned().unwrap_or_default();
                let prev = std::mem::replace(&mut self.last_counters, now);
                let cur = &self.last_counters;
                let d = |c: Ctr| {
                    let i = c as usize;
                    cur.get(i).copied().unwrap_or(0).saturating_sub(prev.get(i).copied().unwrap_or(0))
                };
                fwd_abi::clocks::ClockReport::new(d, tsc_hz, packets.unwrap_or(0)).filter(|_| !prev.is_empty())
            }
            _ => None,
        };
        let get = |e: EventId| counts.get(&e).copied();
        Ok(StatRow {
            stage_clocks,
            t,
            unit: self.name.clone(),
            packets,
            mpps: packets.map(|p| p as f64 / dt / 1e6),
            cycles_per_packet: ratio(get(EventId::Cycles), packets),
            task_clock_ns_per_packet: ratio(get(EventId::TaskClock), packets),
            ipc: ratio(get(EventId::Instructions), get(EventId::Cycles)),
            cache_misses_per_packet: ratio(get(EventId::CacheMisses), packets),
            branch_misses_per_packet: ratio(get(EventId::BranchMisses), packets),
            counts: counts.iter().map(|(k, v)| (k.name().to_string(), *v)).collect(),
        })
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
    let mut target = Counted::start(&opts.target)?;
    let (mut units, events) = target.open_units(&opts.events)?;
    on_header(&StatHeader {
        target: opts.target.describe(),
        units: units.iter().map(|u| u.name.clone()).collect(),
        events,
    });
    for u in units.iter_mut() {
        crate::counting::enable(&mut u.counters)?;
    }
    let start = Instant::now();
    if let Some(snap) = target.segment.as_ref().map(Segment::snapshot) {
        for u in units.iter_mut() {
            u.last_packets = u.worker.map_or(0, |w| snap.get(w, Ctr::TxPackets));
            u.last_counters = u.worker.and_then(|w| snap.workers.get(w).cloned()).unwrap_or_default();
        }
    }
    let tsc_hz = target.segment.as_ref().map_or(0, Segment::tsc_hz);
    for tick in 1u32.. {
        let due = opts.interval * tick;
        let end = opts.duration.map_or(due, |d| due.min(d));
        let mut ended = false;
        while start.elapsed() < end {
            if stop.load(Ordering::Relaxed) || target.ended() {
                ended = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5).min(end.saturating_sub(start.elapsed())));
        }
        let t = start.elapsed().as_secs_f64();
        let dt = opts.interval.as_secs_f64().min(t - opts.interval.as_secs_f64() * (tick - 1) as f64).max(1e-9);
        let snap = target.segment.as_ref().map(Segment::snapshot);
        for u in units.iter_mut() {
            on_row(&u.row(t, dt, snap.as_ref(), tsc_hz)?);
        }
        if ended || opts.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
    }
    if let Some(c) = target.child.as_mut() {
        c.stop(target.segment.as_ref(), Duration::from_secs(5));
    }
    Ok(())
}

/// How `stat` prints: perf stat -I style text, JSON lines, or CSV with a separator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatFormat {
    Text,
    Json,
    Csv(String),
}

/// Turns `stat`'s header and rows into lines in one [`StatFormat`], remembering which
/// events were counted (the CSV columns).
pub struct StatPrinter {
    format: StatFormat,
    counted: Vec<String>,
}

impl StatPrinter {
    pub fn new(format: StatFormat) -> StatPrinter {
        StatPrinter { format, counted: Vec::new() }
    }

    /// The lines that open the output: the target and the events used and not.
    pub fn header(&mut self, h: &StatHeader) -> String {
        use crate::counting::COUNTED;
        self.counted = h.events.iter().filter(|e| e.status == COUNTED).map(|e| e.event.clone()).collect();
        let list: Vec<String> = h
            .events
            .iter()
            .map(|e| if e.status == COUNTED { e.event.clone() } else { format!("{} <{}>", e.event, e.status) })
            .collect();
        match &self.format {
            StatFormat::Json => {
                let mut v = serde_json::to_value(h).unwrap_or_default();
                v["type"] = "header".into();
                v.to_string()
            }
            StatFormat::Csv(s) => {
                format!("# {}: {}\ntime{s}unit{s}packets{s}{}", h.target, list.join(", "), self.counted.join(s))
            }
            StatFormat::Text => format!("# {}: events {}\n{}", h.target, list.join(", "), header_text()),
        }
    }

    /// One row's line.
    pub fn row(&self, r: &StatRow) -> String {
        match &self.format {
            StatFormat::Json => {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["type"] = "interval".into();
                v.to_string()
            }
            StatFormat::Csv(s) => row_csv(r, &self.counted, s),
            StatFormat::Text => row_text(r),
        }
    }
}

/// perf stat -I style text for a row: time, unit, the per-packet figures, then the
/// stage clocks in ns per forwarded packet (when the forwarder keeps them), then counts.
pub fn row_text(r: &StatRow) -> String {
    let f = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
    let counts: Vec<String> = r.counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let clocks = r.stage_clocks.as_ref().map_or(String::new(), |c| {
        let stages: Vec<String> = c.ns_by_stage().iter().map(|(s, v)| format!("{s} {v:.1}")).collect();
        let unsure = if c.unsure() {
            format!("; UNSURE: waited to run {:.0}% of the clocked time", 100.0 * c.runq_share.unwrap_or(0.0))
        } else {
            String::new()
        };
        format!("  clock ns/pkt: {}; idle {:.0}%{unsure}", stages.join(" "), 100.0 * c.idle_share)
    });
    format!(
        "{:>9.3} {:<10} {:>8} {:>10} {:>10} {:>6} {:>10} {:>10}  {}{}",
        r.t,
        r.unit,
        f(r.mpps, 3),
        f(r.cycles_per_packet, 1),
        f(r.task_clock_ns_per_packet, 1),
        f(r.ipc, 2),
        f(r.cache_misses_per_packet, 3),
        f(r.branch_misses_per_packet, 3),
        counts.join(" "),
        clocks
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
