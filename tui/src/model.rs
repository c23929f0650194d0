//! What `top` shows, computed from the collector's stream and nothing else: every sample is
//! attributed to a stage and a symbol as it arrives; counter batches (the forwarder's stats
//! segment, as the collector samples it) become rates at each [`Model::tick`]. No terminal
//! here: the view renders a `Model`, and tests feed one fixed batches.

use analyzer::crosscheck::MAX_POINTS_APART;
use analyzer::rules::{APART, STAGE_ORDER};
use analyzer::stages::Attributor;
use collector::recording::{CounterRow, CountingInfo, SamplingInfo};
use collector::stream::Batch;
use fwd_abi::clocks::ClockReport;
use fwd_abi::rtstat::IntervalRow;
use fwd_abi::{CacheMode, Ctr, Snapshot, COUNTER_NAMES, N_COUNTERS};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Seconds of history in the rate sparkline.
pub const HISTORY: usize = 60;
/// rtstat interval rows kept.
pub const RTSTAT_ROWS: usize = 10;
/// Decaying symbol table: weights are multiplied by this at each tick (perf top's decay).
pub const DECAY: f64 = 7.0 / 8.0;

/// How the symbol table accumulates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolMode {
    /// Older samples fade by [`DECAY`] per tick (the default, as perf top).
    Decaying,
    /// Every sample since the last zeroing counts the same.
    Cumulative,
}

/// Orders of the symbol table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Samples,
    Symbol,
    Stage,
    Dso,
}

impl SortBy {
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Samples => SortBy::Symbol,
            SortBy::Symbol => SortBy::Stage,
            SortBy::Stage => SortBy::Dso,
            SortBy::Dso => SortBy::Samples,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SortBy::Samples => "samples",
            SortBy::Symbol => "symbol",
            SortBy::Stage => "stage",
            SortBy::Dso => "dso",
        }
    }
}

/// The forwarder's configuration as its stats segment publishes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForwarderInfo {
    pub driver: String,
    pub workers: usize,
    pub cache: String,
    pub fib: String,
    pub prefetch: fwd_abi::Prefetch,
    pub stage_clock: bool,
    /// TSC ticks per second (stage clocks are in TSC cycles).
    pub tsc_hz: u64,
}

impl ForwarderInfo {
    /// Its cache mode, when it is one of the bundled forwarder's (a peer publishes its own
    /// words, such as `none`).
    pub fn cache_mode(&self) -> Option<fwd_abi::CacheMode> {
        fwd_abi::CacheMode::from_name(&self.cache)
    }

    /// From what the forwarder published (its segment, or a recording's meta.json).
    pub fn from_published(p: &fwd_abi::Published) -> ForwarderInfo {
        let c = &p.config;
        let s = |x: &Option<String>| x.clone().unwrap_or_else(|| "?".into());
        ForwarderInfo {
            driver: s(&c.driver),
            workers: c.workers.unwrap_or(0),
            cache: s(&c.cache),
            fib: s(&c.fib),
            prefetch: c.prefetch.unwrap_or(fwd_abi::Prefetch::NONE),
            stage_clock: c.stage_clock.unwrap_or(false),
            tsc_hz: p.tsc_hz().unwrap_or(0),
        }
    }
}

/// One stage's line in the stage panel.
#[derive(Debug, Clone, PartialEq)]
pub struct StageLine {
    pub stage: String,
    /// Samples in the last interval.
    pub samples: u64,
    pub percent: f64,
    /// Sampled cost per forwarded packet (ns for clock events, else events), last interval.
    pub per_packet: Option<f64>,
    /// The forwarder's own stage clock, ns per forwarded packet, when enabled.
    pub clock_ns: Option<f64>,
    /// Percent of the forwarding samples (forwarding stages and other; none for the
    /// device and idle, which are apart).
    pub share: Option<f64>,
    /// Percent of the forwarding clocks (forwarding stages only).
    pub clock_share: Option<f64>,
    /// The two shares more than 5 points apart.
    pub disagrees: bool,
}

/// One symbol's line.
#[derive(Debug, Clone, PartialEq)]
pub struct SymbolLine {
    pub weight: f64,
    pub percent: f64,
    pub symbol: String,
    pub stage: String,
    pub dso: String,
}

/// Where the symbol panel looks (Enter goes in, Esc comes back out).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Drill {
    /// Every symbol.
    #[default]
    All,
    /// The symbols of one stage.
    Stage(String),
    /// Inside one function: its hottest source lines (the stage it was entered from, to
    /// go back to).
    Symbol { stage: String, symbol: String, dso: String },
}

/// One source line of the function drilled into.
#[derive(Debug, Clone, PartialEq)]
pub struct InsideLine {
    pub weight: f64,
    /// Share of the function's samples (decayed as the symbol table is).
    pub percent: f64,
    /// `FILE:LINE` of the innermost frame (file name only), `?` without DWARF.
    pub location: String,
    /// The innermost (inlined) function at that line.
    pub function: String,
}

/// One worker's rates over the last interval.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerLine {
    pub worker: usize,
    pub rx_mpps: f64,
    pub tx_mpps: f64,
    pub drops_per_s: f64,
    pub rt_size: u64,
    pub in_hit: f64,
    pub in_tot: f64,
    pub gc_tot: f64,
    pub prefetch: u64,
    pub cache: String,
}

/// Rates of the whole target at one tick.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rates {
    pub rx_mpps: f64,
    pub tx_mpps: f64,
    pub drop_mpps: f64,
}

/// Everything `top` knows.
pub struct Model {
    /// What is observed, in words (`forwarder pid 123`, `pid 77`, `system-wide`, `replay DIR`).
    pub target: String,
    pub forwarder: Option<ForwarderInfo>,
    pub sampling: Option<SamplingInfo>,
    pub counting: Vec<CountingInfo>,
    /// Why there is no sampling, when there is none.
    pub sampling_error: Option<String>,
    /// How the collection ended (the target exited, ...); the last data stays on screen.
    pub ended: Option<String>,
    pub lost: u64,
    pub samples_total: u64,
    pub mode: SymbolMode,
    pub sort: SortBy,
    // Derived at each tick.
    pub rates: Rates,
    pub history: VecDeque<Rates>,
    pub stages: Vec<StageLine>,
    /// The forwarder's stage clocks over the last interval (when on).
    pub clocks: Option<ClockReport>,
    pub symbols: Vec<SymbolLine>,
    pub rtstat: VecDeque<IntervalRow>,
    pub workers: Vec<WorkerLine>,
    /// Samples in the last interval.
    pub interval_samples: u64,
    /// Forwarded packets in the last interval.
    pub interval_packets: Option<u64>,
    /// Ticks so far.
    pub ticks: u64,
    /// What the symbol panel shows: every symbol, a stage's, or inside one function.
    pub drill: Drill,
    /// Inside the function drilled into: its hottest source lines, at each tick.
    pub inside: Vec<InsideLine>,
    // Accumulating between ticks.
    attributor: Attributor,
    /// Interned (symbol, dso) and stage names: the per-sample path hashes integers only.
    names: Vec<(String, String)>,
    name_ids: HashMap<(String, String), u32>,
    stage_names: Vec<String>,
    /// (pid, ip, kernel) -> (symbol id, own stage id, whether the own stage is `other`).
    /// Start-up as the stage table decides it (`analyzer::stages::forwarding_starts`):
    /// the thread events seen, each process's first worker FORK, the processes seen to
    /// exec (started by this `top`) and those with a worker named.
    tasks: Vec<collector::records::TaskEvent>,
    starts: HashMap<u32, u64>,
    launched: std::collections::HashSet<u32>,
    /// Each thread's name (COMM records), for the process rules of report's last resort.
    thread_names: HashMap<u32, String>,
    named_workers: std::collections::HashSet<u32>,
    by_ip: HashMap<(u32, u64, bool), (u32, u16, bool)>,
    /// Samples and period per stage id since the last tick.
    pending: Vec<(u64, u64)>,
    weights: HashMap<(u32, u16), f64>,
    latest: Option<Snapshot>,
    at_tick: Option<Snapshot>,
    /// Counter times are CLOCK_MONOTONIC ns; snapshots need Instants.
    epoch: Option<(Instant, u64)>,
    first_time: Option<u64>,
    /// Samples or counters arrived since the last tick.
    fresh: bool,
    /// The drilled-into function's interned id.
    focus_id: Option<u32>,
    /// Samples per address (decayed as the symbol table is), so a function entered shows
    /// its lines at once, a finished replay's too.
    addr_weights: HashMap<(u32, u64, bool), f64>,
    /// An address's source line and innermost function (DWARF, read once per address).
    line_of: HashMap<(u32, u64, bool), (String, String)>,
}

impl Model {
    pub fn new(target: impl Into<String>, attributor: Attributor) -> Model {
        Model {
            target: target.into(),
            forwarder: None,
            sampling: None,
            counting: Vec::new(),
            sampling_error: None,
            ended: None,
            lost: 0,
            samples_total: 0,
            mode: SymbolMode::Decaying,
            sort: SortBy::Samples,
            rates: Rates::default(),
            history: VecDeque::with_capacity(HISTORY),
            stages: Vec::new(),
            clocks: None,
            symbols: Vec::new(),
            rtstat: VecDeque::with_capacity(RTSTAT_ROWS),
            workers: Vec::new(),
            interval_samples: 0,
            interval_packets: None,
            ticks: 0,
            attributor,
            names: Vec::new(),
            name_ids: HashMap::new(),
            stage_names: Vec::new(),
            by_ip: HashMap::new(),
            tasks: Vec::new(),
            starts: HashMap::new(),
            launched: Default::default(),
            thread_names: HashMap::new(),
            named_workers: Default::default(),
            pending: Vec::new(),
            weights: HashMap::new(),
            latest: None,
            at_tick: None,
            epoch: None,
            first_time: None,
            fresh: false,
            drill: Drill::All,
            inside: Vec::new(),
            focus_id: None,
            addr_weights: HashMap::new(),
            line_of: HashMap::new(),
        }
    }

    /// Look at every symbol, one stage's, or inside one function (its lines at once, from the
    /// samples kept per address; the symbol table is filtered at once).
    pub fn set_drill(&mut self, d: Drill) {
        self.focus_id = match &d {
            Drill::Symbol { symbol, dso, .. } => self.name_ids.get(&(symbol.clone(), dso.clone())).copied(),
            _ => None,
        };
        self.drill = d;
        self.symbols = self.symbol_lines();
        self.inside = if self.focus_id.is_some() { self.inside_lines() } else { Vec::new() };
    }

    /// The sampled event's unit: `ns` for clock events, else the event's name.
    pub fn unit(&self) -> String {
        match self.sampling.as_ref().map(|s| s.used.as_str()) {
            Some(e) => collector::events::period_unit(e),
            None => "-".into(),
        }
    }

    /// The events line of the header: what was used, and why, in plain words.
    pub fn events_line(&self) -> String {
        self.events_line_in(false)
    }

    /// The events line in fewer words, for a narrow terminal.
    pub fn events_line_short(&self) -> String {
        self.events_line_in(true)
    }

    /// The events line, in full or in fewer words (`short`).
    fn events_line_in(&self, short: bool) -> String {
        let words = |long: String, brief: String| if short { brief } else { long };
        match (&self.sampling, &self.sampling_error) {
            (_, Some(e)) => {
                words(format!("no sampling, forwarder counters only: {e}"), format!("no sampling (counters only): {e}"))
            }
            (Some(s), None) => {
                let rate = match (s.freq, s.period) {
                    (_, Some(p)) => words(format!("every {p} events"), format!("every {p}")),
                    (Some(f), None) => format!("{f} Hz"),
                    _ => String::new(),
                };
                let mut line = words(format!("sampling {} {rate}", s.used), format!("{} {rate}", s.used));
                if s.fallback.is_some() {
                    line.push_str(&words(
                        format!(" ({} not supported here: no hardware PMU)", s.requested),
                        format!(" (no PMU for {})", s.requested),
                    ));
                }
                if s.callchain {
                    let dwarf = s.call_graph.as_deref().is_some_and(|c| c.starts_with("dwarf"));
                    line.push_str(&if dwarf {
                        words(", callchains unwound from DWARF".into(), ", dwarf".into())
                    } else {
                        ", callchains".into()
                    });
                }
                line
            }
            (None, None) => "sampling: starting".into(),
        }
    }

    /// Whether any packet counters arrived: a peer watched by PID (DPDK's l3fwd) or the
    /// whole machine publishes none, and then the header says so instead of printing zero
    /// rates.
    pub fn has_counters(&self) -> bool {
        self.latest.is_some()
    }

    /// Take one batch from the stream.
    pub fn apply(&mut self, b: Batch) {
        match b {
            Batch::Started { sampling, counting, target_pid: _ } => {
                self.sampling = Some(sampling);
                self.counting = counting;
            }
            Batch::Maps(m) => {
                self.attributor.add_maps(m);
                self.by_ip.clear();
                self.line_of.clear();
            }
            Batch::Tasks(t) => {
                for e in &t {
                    if let collector::records::TaskEvent::Comm { pid, tid, comm, exec, .. } = e {
                        self.thread_names.insert(*tid, comm.clone());
                        if *exec {
                            self.launched.insert(*pid);
                        }
                        if fwd_abi::threads::worker_index(comm).is_some() {
                            self.named_workers.insert(*pid);
                        }
                    }
                }
                self.tasks.extend(t);
                self.starts = analyzer::stages::forwarding_starts(&self.tasks);
            }
            Batch::Samples(v) => {
                self.fresh = true;
                for s in v {
                    self.sample(&s);
                }
            }
            Batch::Counters { time, rows } => {
                self.fresh = true;
                self.counters(time, &rows)
            }
            Batch::Lost(n) => self.lost += n,
            Batch::Ended(why) => self.ended = Some(if why.is_empty() { "collection ended".into() } else { why }),
        }
    }

    fn stage_id(&mut self, stage: &str) -> u16 {
        match self.stage_names.iter().position(|s| s == stage) {
            Some(i) => i as u16,
            None => {
                self.stage_names.push(stage.to_string());
                self.pending.push((0, 0));
                (self.stage_names.len() - 1) as u16
            }
        }
    }

    /// Attribute one sample: its address is symbolized once; only samples whose own
    /// symbol has no stage walk their callchain (to charge the nearest staged caller).
    fn sample(&mut self, s: &collector::records::Sample) {
        let key = (s.pid, s.ip, s.kernel);
        let (sym, mut stage, other) = match self.by_ip.get(&key) {
            Some(v) => *v,
            None => {
                let a = self.attributor.attribute(s.pid, s.ip, s.kernel, &[]);
                let k = (a.symbol.name, a.symbol.dso);
                let id = match self.name_ids.get(&k) {
                    Some(id) => *id,
                    None => {
                        self.names.push(k.clone());
                        self.name_ids.insert(k, (self.names.len() - 1) as u32);
                        (self.names.len() - 1) as u32
                    }
                };
                // Unstaged (other, or shared machinery): its callchain may name a staged caller.
                let unstaged = [analyzer::rules::OTHER, analyzer::rules::SHARED, analyzer::rules::BINARY_UNKNOWN]
                    .contains(&a.stage.as_str());
                let v = (id, self.stage_id(&a.stage), unstaged);
                self.by_ip.insert(key, v);
                v
            }
        };
        // (The thread's name is looked up only for a sample still unstaged.)
        let thread = if other { self.thread_names.get(&s.tid).map(String::as_str) } else { None };
        if other && (!s.callchain.is_empty() || thread.is_some()) {
            // The callchain's staged caller, else the process rule of the thread's name, as
            // report does (l3fwd's own stripped loop).
            let mut a = self.attributor.attribute(s.pid, s.ip, s.kernel, &s.callchain);
            self.attributor.by_thread_name(&mut a, thread);
            stage = self.stage_id(&a.stage);
        }
        if self.is_startup(s) {
            stage = self.stage_id(analyzer::rules::STARTUP);
        }
        let e = &mut self.pending[stage as usize];
        e.0 += 1;
        e.1 = e.1.saturating_add(s.period);
        *self.weights.entry((sym, stage)).or_default() += 1.0;
        *self.addr_weights.entry(key).or_default() += 1.0;
        self.samples_total += 1;
    }

    /// The drilled-into function's samples folded by source line, most first.
    fn inside_lines(&mut self) -> Vec<InsideLine> {
        let mut by_line: HashMap<(String, String), f64> = HashMap::new();
        let Some(id) = self.focus_id else { return Vec::new() };
        let mine: Vec<((u32, u64, bool), f64)> = self
            .addr_weights
            .iter()
            .filter(|(k, _)| self.by_ip.get(k).is_some_and(|v| v.0 == id))
            .map(|(k, w)| (*k, *w))
            .collect();
        for ((pid, ip, kernel), w) in mine {
            let at = match self.line_of.get(&(pid, ip, kernel)) {
                Some(v) => v.clone(),
                None => {
                    let frames = self.attributor.frames(pid, ip, kernel);
                    let v = frames.first().map_or(("?".to_string(), String::new()), |f| {
                        let file = f.file.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
                        let loc = match (file, f.line) {
                            (Some(file), Some(l)) => format!("{file}:{l}"),
                            (Some(file), None) => file,
                            _ => "?".to_string(),
                        };
                        (loc, f.function.clone())
                    });
                    self.line_of.insert((pid, ip, kernel), v.clone());
                    v
                }
            };
            *by_line.entry(at).or_default() += w;
        }
        let total: f64 = by_line.values().sum();
        let mut v: Vec<InsideLine> = by_line
            .into_iter()
            .map(|((location, function), weight)| InsideLine {
                weight,
                percent: if total > 0.0 { 100.0 * weight / total } else { 0.0 },
                location,
                function,
            })
            .collect();
        v.sort_by(|a, b| b.weight.total_cmp(&a.weight).then_with(|| a.location.cmp(&b.location)));
        v
    }

    /// Whether `s` is the forwarder's start-up: before its process's first worker FORK;
    /// or, live, a process this `top` started (seen to exec) whose workers have not been
    /// named yet. A process attached to (`-p`) has no start-up.
    fn is_startup(&self, s: &collector::records::Sample) -> bool {
        match self.starts.get(&s.pid) {
            Some(&t) => s.time < t,
            None => self.launched.contains(&s.pid) && !self.named_workers.contains(&s.pid),
        }
    }

    fn counters(&mut self, time: u64, rows: &[CounterRow]) {
        let (base_i, base_t) = *self.epoch.get_or_insert((Instant::now(), time));
        let at = base_i + Duration::from_nanos(time.saturating_sub(base_t));
        let mut workers: Vec<Vec<u64>> = Vec::new();
        // A recording is user input: a worker index beyond the forwarder's 64 is corrupt.
        for r in rows.iter().filter(|r| r.is_forwarder() && (0..64).contains(&r.worker)) {
            let Some(i) = COUNTER_NAMES.iter().position(|n| *n == r.name) else { continue };
            let w = r.worker as usize;
            if workers.len() <= w {
                workers.resize(w + 1, vec![0; N_COUNTERS]);
            }
            workers[w][i] = r.value;
        }
        if !workers.is_empty() {
            self.first_time.get_or_insert(time);
            self.latest = Some(Snapshot { at, names: None, workers });
        }
    }

    /// Zero the symbol table (and keep its mode).
    pub fn zero_symbols(&mut self) {
        self.weights.clear();
        self.symbols.clear();
        self.addr_weights.clear();
        self.inside.clear();
    }

    /// Re-order the symbol table now (after a sort change).
    pub fn symbols_resort(&mut self) {
        self.symbols = self.symbol_lines();
    }

    /// `z`: switch between decaying and cumulative; the table starts over.
    pub fn toggle_mode(&mut self) {
        self.mode = match self.mode {
            SymbolMode::Decaying => SymbolMode::Cumulative,
            SymbolMode::Cumulative => SymbolMode::Decaying,
        };
        self.zero_symbols();
    }

    /// Close an interval: rates and rtstat from the counters since the last tick, the stage
    /// panel from the samples since the last tick, and the symbol table (then decayed).
    pub fn tick(&mut self) {
        self.ticks += 1;
        // The target is gone and nothing new came: keep the last figures on screen.
        if self.ended.is_some() && !self.fresh {
            return;
        }
        self.fresh = false;
        let packets = match (&self.at_tick, &self.latest) {
            (Some(prev), Some(cur)) if cur.at > prev.at => {
                let dt = cur.at.duration_since(prev.at).as_secs_f64();
                let row = IntervalRow::between(prev, cur, self.elapsed_s(cur));
                self.rates = Rates { rx_mpps: row.rx_mpps, tx_mpps: row.tx_mpps, drop_mpps: row.drops as f64 / 1e6 };
                if self.rtstat.len() == RTSTAT_ROWS {
                    self.rtstat.pop_front();
                }
                self.rtstat.push_back(row);
                self.workers = worker_lines(prev, cur, dt);
                Some(cur.total(Ctr::TxPackets).saturating_sub(prev.total(Ctr::TxPackets)))
            }
            _ => None,
        };
        if packets.is_some() {
            self.push_history();
        }
        self.interval_packets = packets;
        self.stages = self.stage_lines(packets);
        if let Some(cur) = &self.latest {
            if let Some(f) = &mut self.forwarder {
                // The live setting (changed through the control block) as the workers run it.
                f.prefetch = fwd_abi::Prefetch::clamped(cur.get(0, Ctr::PrefetchDepth));
                if let Some(m) = CacheMode::from_code(cur.get(0, Ctr::CacheMode) as u32) {
                    f.cache = m.name().to_string();
                }
            }
        }
        if self.latest.is_some() {
            self.at_tick = self.latest.clone();
        }
        self.symbols = self.symbol_lines();
        if let Drill::Symbol { symbol, dso, .. } = &self.drill {
            // A function entered before its first sample here gets its id once it has one.
            if self.focus_id.is_none() {
                self.focus_id = self.name_ids.get(&(symbol.clone(), dso.clone())).copied();
            }
            self.inside = self.inside_lines();
        }
        if self.mode == SymbolMode::Decaying {
            self.weights.retain(|_, w| {
                *w *= DECAY;
                *w >= 0.05
            });
            self.addr_weights.retain(|_, w| {
                *w *= DECAY;
                *w >= 0.05
            });
        }
    }

    fn elapsed_s(&self, cur: &Snapshot) -> f64 {
        match (self.epoch, self.first_time) {
            (Some((i, t0)), Some(first)) => {
                cur.at.duration_since(i).as_secs_f64() - Duration::from_nanos(first.saturating_sub(t0)).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    fn push_history(&mut self) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(self.rates);
    }

    fn stage_lines(&mut self, packets: Option<u64>) -> Vec<StageLine> {
        let pending: HashMap<String, (u64, u64)> =
            self.stage_names.iter().cloned().zip(self.pending.iter_mut().map(std::mem::take)).collect();
        let total: u64 = pending.values().map(|v| v.0).sum();
        self.interval_samples = total;
        self.clocks = self.clock_report(packets);
        let mut clock_ns: HashMap<String, f64> = HashMap::new();
        let mut clock_share: HashMap<String, f64> = HashMap::new();
        if let Some(c) = &self.clocks {
            clock_ns.extend(c.ns_by_stage());
            clock_share.extend(c.share_by_stage());
            // The device is clocked only when it runs inline in the worker (a device thread
            // of its own has no clocks: shown as none, not as 0).
            for r in c.rows.iter().filter(|r| APART.contains(&r.stage.as_str()) && r.calls > 0) {
                clock_ns.insert(r.stage.clone(), r.ns_per_forwarded.unwrap_or(0.0));
            }
        }
        let forwarding: u64 = pending.iter().filter(|(s, _)| !APART.contains(&s.as_str())).map(|(_, v)| v.0).sum();
        let mut names: Vec<String> = STAGE_ORDER.iter().map(|s| s.to_string()).collect();
        for k in &self.stage_names {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        names
            .into_iter()
            .map(|stage| {
                let (n, period) = pending.get(&stage).copied().unwrap_or((0, 0));
                let share =
                    (!APART.contains(&stage.as_str()) && forwarding > 0).then(|| 100.0 * n as f64 / forwarding as f64);
                let cs = clock_share.get(&stage).copied();
                StageLine {
                    percent: if total == 0 { 0.0 } else { 100.0 * n as f64 / total as f64 },
                    per_packet: packets
                        .filter(|&p| p > 0 && total > 0 && stage != analyzer::rules::STARTUP)
                        .map(|p| period as f64 / p as f64),
                    clock_ns: clock_ns.get(&stage).copied(),
                    disagrees: matches!((share, cs), (Some(a), Some(b)) if (a - b).abs() > MAX_POINTS_APART),
                    share,
                    clock_share: cs,
                    samples: n,
                    stage,
                }
            })
            .collect()
    }

    /// The forwarder's stage clocks over the last interval (none when off).
    fn clock_report(&self, packets: Option<u64>) -> Option<ClockReport> {
        let (prev, cur) = (self.at_tick.as_ref()?, self.latest.as_ref()?);
        let f = self.forwarder.as_ref()?;
        ClockReport::new(|c| cur.total(c).saturating_sub(prev.total(c)), f.tsc_hz, packets?)
    }

    fn symbol_lines(&self) -> Vec<SymbolLine> {
        let only = match &self.drill {
            Drill::All => None,
            Drill::Stage(st) | Drill::Symbol { stage: st, .. } => Some(st.as_str()),
        };
        let keep = |stage: u16| only.is_none_or(|st| self.stage_names[stage as usize] == st);
        let total: f64 = self.weights.iter().filter(|((_, st), _)| keep(*st)).map(|(_, w)| w).sum();
        let mut v: Vec<SymbolLine> = self
            .weights
            .iter()
            .filter(|((_, st), _)| keep(*st))
            .map(|((sym, stage), w)| SymbolLine {
                weight: *w,
                percent: if total > 0.0 { 100.0 * w / total } else { 0.0 },
                symbol: self.names[*sym as usize].0.clone(),
                stage: self.stage_names[*stage as usize].clone(),
                dso: self.names[*sym as usize].1.clone(),
            })
            .collect();
        let by_weight = |a: &SymbolLine, b: &SymbolLine| {
            b.weight
                .total_cmp(&a.weight)
                .then_with(|| (&a.symbol, &a.dso, &a.stage).cmp(&(&b.symbol, &b.dso, &b.stage)))
        };
        match self.sort {
            SortBy::Samples => v.sort_by(by_weight),
            SortBy::Symbol => v.sort_by(|a, b| a.symbol.cmp(&b.symbol).then(by_weight(a, b))),
            SortBy::Stage => {
                let rank = analyzer::rules::stage_rank;
                v.sort_by(|a, b| rank(&a.stage).cmp(&rank(&b.stage)).then(by_weight(a, b)))
            }
            SortBy::Dso => v.sort_by(|a, b| a.dso.cmp(&b.dso).then(by_weight(a, b))),
        }
        v
    }
}

fn worker_lines(prev: &Snapshot, cur: &Snapshot, dt: f64) -> Vec<WorkerLine> {
    let drops: Vec<usize> = fwd_abi::drop_counters().filter(|(_, n)| *n != "rx_missed").map(|(i, _)| i).collect();
    (0..cur.workers.len())
        .map(|w| {
            let rate = |c: Ctr| cur.get(w, c).saturating_sub(prev.get(w, c)) as f64 / dt;
            let dropped: u64 = drops
                .iter()
                .map(|&i| {
                    let at = |s: &Snapshot| s.workers.get(w).and_then(|v| v.get(i)).copied().unwrap_or(0);
                    at(cur).saturating_sub(at(prev))
                })
                .sum();
            WorkerLine {
                worker: w,
                rx_mpps: rate(Ctr::RxPackets) / 1e6,
                tx_mpps: rate(Ctr::TxPackets) / 1e6,
                drops_per_s: dropped as f64 / dt,
                rt_size: cur.get(w, Ctr::RtEntries),
                in_hit: rate(Ctr::RtInHit),
                in_tot: rate(Ctr::RtInSlowTot),
                gc_tot: rate(Ctr::RtGcTotal),
                prefetch: cur.get(w, Ctr::PrefetchDepth),
                cache: CacheMode::from_code(cur.get(w, Ctr::CacheMode) as u32).map_or("?", |m| m.name()).to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use analyzer::rules::Rules;
    use analyzer::symbolize::{Kallsyms, Symbolizer};
    use collector::records::Sample;

    /// Kernel addresses only: the symbols come from a small kallsyms, the stages from the
    /// Linux rules (fib_table_lookup lookup, kfree slab, ip_rcv ip, memcpy none).
    fn model() -> Model {
        let ks = Kallsyms::parse(
            "ffffffff81000000 T fib_table_lookup\nffffffff81000100 T kfree\nffffffff81000200 T ip_rcv\nffffffff81000300 T memcpy\nffffffff81000400 T _etext\n",
        );
        Model::new("test", Attributor::new(Symbolizer::new(Vec::new(), Some(ks)), Rules::builtin()))
    }

    fn sample(ip: u64, period: u64, callchain: &[u64]) -> Sample {
        Sample { time: 0, pid: 1, tid: 1, cpu: 0, ip, period, kernel: true, callchain: callchain.to_vec() }
    }

    fn counters(time_s: f64, per_worker: &[&[(&str, u64)]]) -> Batch {
        let time = (time_s * 1e9) as u64;
        let mut rows = Vec::new();
        for (w, vals) in per_worker.iter().enumerate() {
            for (name, value) in vals.iter() {
                rows.push(CounterRow {
                    time,
                    source: fwd_abi::SOURCE_FORWARDER.into(),
                    worker: w as i32,
                    name: name.to_string(),
                    value: *value,
                });
            }
        }
        Batch::Counters { time, rows }
    }

    fn line<'a>(m: &'a Model, stage: &str) -> &'a StageLine {
        m.stages.iter().find(|l| l.stage == stage).expect("stage line")
    }

    #[test]
    fn stages_and_rates_over_one_interval_by_hand() {
        let mut m = model();
        m.forwarder = Some(ForwarderInfo { tsc_hz: 1_000_000_000, ..ForwarderInfo::default() });
        m.apply(counters(
            10.0,
            &[&[("tx_packets", 1_000), ("rx_packets", 1_000), ("drop_no_route", 0)], &[("tx_packets", 0)]],
        ));
        m.tick();
        assert!(m.interval_packets.is_none(), "one snapshot: no interval yet");
        // 3 lookup samples of 1000 ns, 1 slab of 1000 ns; memcpy called from ip_rcv is
        // charged to ip (its return address + 1 byte lies in ip_rcv).
        for _ in 0..3 {
            m.apply(Batch::Samples(vec![sample(0xffffffff81000010, 1000, &[])]));
        }
        m.apply(Batch::Samples(vec![
            sample(0xffffffff81000110, 1000, &[]),
            sample(0xffffffff81000310, 1000, &[0xffffffff81000310, 0xffffffff81000211]),
        ]));
        // Half a second later: worker 0 forwarded 500 more, worker 1 1500; 20 dropped.
        m.apply(counters(
            10.5,
            &[
                &[("tx_packets", 1_500), ("rx_packets", 1_520), ("drop_no_route", 20), ("clk_lookup", 2_000_000)],
                &[("tx_packets", 1_500), ("rx_packets", 1_500)],
            ],
        ));
        m.tick();
        assert_eq!(m.interval_packets, Some(2_000));
        assert!((m.rates.tx_mpps - 2_000.0 / 0.5 / 1e6).abs() < 1e-9, "{:?}", m.rates);
        assert!((m.rates.rx_mpps - 2_020.0 / 0.5 / 1e6).abs() < 1e-9);
        assert!((m.rates.drop_mpps - 40.0 / 1e6).abs() < 1e-9);
        assert_eq!(m.interval_samples, 5);
        let l = line(&m, "lookup");
        assert_eq!((l.samples, l.percent), (3, 60.0));
        assert_eq!(l.per_packet, Some(3_000.0 / 2_000.0));
        // Stage clock: 2e6 TSC cycles at 1 GHz = 2 ms over 2000 packets = 1000 ns each.
        assert_eq!(l.clock_ns, Some(1_000.0));
        assert_eq!(line(&m, "slab").samples, 1);
        assert_eq!(line(&m, "ip").samples, 1, "memcpy charged to its caller");
        assert_eq!(line(&m, "gc").samples, 0);
        // Workers: 500 and 1500 packets in 0.5 s.
        assert_eq!(m.workers.len(), 2);
        assert!((m.workers[0].tx_mpps - 0.001).abs() < 1e-9 && (m.workers[1].tx_mpps - 0.003).abs() < 1e-9);
        assert_eq!(m.workers[0].drops_per_s, 40.0);
        assert_eq!(m.rtstat.len(), 1);
        assert_eq!(m.history.len(), 1);
        // The symbol table: fib_table_lookup first with 3 of 5.
        assert_eq!(m.symbols[0].symbol, "fib_table_lookup");
        assert!((m.symbols[0].percent - 60.0).abs() < 1e-9);
    }

    /// A sample that neither its symbol nor a callchain stages goes by its thread's name,
    /// as report charges it (DPDK's l3fwd loop, a stripped program's own file): here a
    /// user address in no mapping, of a thread named `dpdk-l3fwd`, is driver work, and the
    /// same address of another thread stays unattributed.
    #[test]
    fn an_unstaged_sample_goes_by_its_threads_name_as_in_report() {
        let mut m = model();
        let comm = |tid: u32, name: &str| collector::records::TaskEvent::Comm {
            time: 0,
            pid: 1,
            tid,
            comm: name.into(),
            exec: false,
        };
        m.apply(Batch::Tasks(vec![comm(1, "dpdk-l3fwd"), comm(2, "bash")]));
        let user = |tid: u32| Sample { tid, kernel: false, ..sample(0x5555_0000_1000, 1000, &[]) };
        m.apply(Batch::Samples(vec![user(1), user(1), user(2)]));
        m.tick();
        assert_eq!(line(&m, "driver").samples, 2, "by the thread name's process rule");
        assert_eq!(line(&m, "driver").samples + line(&m, "lookup").samples, 2);
        assert_eq!(m.interval_samples, 3);
    }

    #[test]
    fn decaying_and_cumulative_symbols() {
        let mut m = model();
        m.apply(Batch::Samples(vec![sample(0xffffffff81000010, 1, &[]); 8]));
        m.tick();
        assert_eq!(m.symbols[0].weight, 8.0);
        m.tick();
        assert_eq!(m.symbols[0].weight, 8.0 * DECAY, "one tick of decay");
        m.toggle_mode();
        assert_eq!(m.mode, SymbolMode::Cumulative);
        assert!(m.symbols.is_empty(), "z starts the table over");
        m.apply(Batch::Samples(vec![sample(0xffffffff81000010, 1, &[]); 4]));
        m.tick();
        m.tick();
        assert_eq!(m.symbols[0].weight, 4.0, "no decay when cumulative");
        // kfree (slab) gets more samples: first by samples, second by stage (lookup first).
        m.apply(Batch::Samples(vec![sample(0xffffffff81000110, 1, &[]); 6]));
        m.tick();
        let names = |m: &Model| m.symbols.iter().map(|s| s.symbol.clone()).collect::<Vec<_>>();
        assert_eq!(names(&m), ["kfree", "fib_table_lookup"]);
        m.sort = SortBy::Stage;
        m.symbols_resort();
        assert_eq!(names(&m), ["fib_table_lookup", "kfree"]);
        m.sort = m.sort.next();
        assert_eq!(m.sort, SortBy::Dso);
    }

    /// Kernel samples: fib_table_lookup (lookup) at two addresses, 6 and 2 samples, kfree
    /// (slab) 4. A stage drill keeps lookup's symbols; a symbol drill folds its addresses
    /// (kernel addresses have names only: one `?` line of 8, 100%); Esc's way back restores
    /// every symbol.
    #[test]
    fn drilling_into_a_stage_then_a_symbol() {
        let mut m = model();
        let mut v = vec![sample(0xffffffff81000010, 1, &[]); 6];
        v.extend(vec![sample(0xffffffff81000020, 1, &[]); 2]);
        v.extend(vec![sample(0xffffffff81000110, 1, &[]); 4]);
        m.apply(Batch::Samples(v));
        m.tick();
        assert_eq!(m.symbols.len(), 2);
        m.set_drill(Drill::Stage("slab".into()));
        let only: Vec<(&str, f64, f64)> = m.symbols.iter().map(|s| (s.symbol.as_str(), s.weight, s.percent)).collect();
        assert_eq!(only, [("kfree", 4.0 * DECAY, 100.0)]);
        m.set_drill(Drill::Symbol {
            stage: "lookup".into(),
            symbol: "fib_table_lookup".into(),
            dso: "[kernel.kallsyms]".into(),
        });
        assert_eq!(m.symbols.len(), 1, "the stage's symbols stay filtered beneath");
        let inside: Vec<(&str, &str, f64)> =
            m.inside.iter().map(|l| (l.location.as_str(), l.function.as_str(), l.weight)).collect();
        assert_eq!(inside, [("?", "fib_table_lookup", 8.0 * DECAY)]);
        // Live: more samples of it show at the next tick.
        m.apply(Batch::Samples(vec![sample(0xffffffff81000010, 1, &[]); 3]));
        m.tick();
        assert_eq!(m.inside[0].weight, 8.0 * DECAY + 3.0);
        m.set_drill(Drill::All);
        assert_eq!(m.symbols.len(), 2);
        assert!(m.inside.is_empty());
    }

    #[test]
    fn events_line_says_what_was_used() {
        let mut m = model();
        assert_eq!(m.events_line(), "sampling: starting");
        m.apply(Batch::Started {
            sampling: SamplingInfo {
                requested: "cycles".into(),
                used: "cpu-clock".into(),
                fallback: Some("cycles is not supported".into()),
                freq: Some(1000),
                period: None,
                callchain: true,
                call_graph: None,
                unwinding: None,
                kernel: true,
                ring_pages: 128,
            },
            counting: Vec::new(),
            target_pid: Some(7),
        });
        assert_eq!(
            m.events_line(),
            "sampling cpu-clock 1000 Hz (cycles not supported here: no hardware PMU), callchains"
        );
        assert_eq!(m.unit(), "ns");
        // Callchains unwound from DWARF say so, in full and short.
        if let Some(s) = m.sampling.as_mut() {
            s.call_graph = Some("dwarf,8192".into());
        }
        assert!(m.events_line().ends_with("no hardware PMU), callchains unwound from DWARF"), "{}", m.events_line());
        assert!(m.events_line_short().ends_with(", dwarf"), "{}", m.events_line_short());
        m.sampling_error = Some("perf_event_open: permission denied".into());
        assert!(m
            .events_line()
            .starts_with("no sampling, forwarder counters only: perf_event_open: permission denied"));
        m.apply(Batch::Ended(String::new()));
        assert_eq!(m.ended.as_deref(), Some("collection ended"));
    }

    #[test]
    fn a_corrupt_worker_index_is_ignored() {
        let mut m = model();
        m.apply(Batch::Counters {
            time: 1,
            rows: vec![CounterRow {
                time: 1,
                source: fwd_abi::SOURCE_FORWARDER.into(),
                worker: i32::MAX,
                name: "tx_packets".into(),
                value: 5,
            }],
        });
        m.tick();
        assert!(m.workers.is_empty() && m.interval_packets.is_none());
    }

    #[test]
    fn after_the_end_the_last_data_stays() {
        let mut m = model();
        m.apply(Batch::Samples(vec![sample(0xffffffff81000010, 1, &[]); 8]));
        m.apply(Batch::Ended("target exited with status 0".into()));
        m.tick();
        let (stages, symbols) = (m.stages.clone(), m.symbols.clone());
        assert_eq!(line(&m, "lookup").samples, 8);
        for _ in 0..50 {
            m.tick();
        }
        assert_eq!((m.stages.clone(), m.symbols.clone()), (stages, symbols), "no decay, no empty intervals");
        assert_eq!(m.ticks, 51);
    }
}
