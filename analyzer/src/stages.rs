//! The stage table of a recording: samples per stage (lookup, gc, slab, driver, ip, nic,
//! other, idle), their share, and the cost per forwarded packet (ns for clock events,
//! events such as cycles otherwise) from the recording's packet counts; plus the top
//! symbols no rule matched, so the rules can be fixed.

use crate::rules::{stage_rank, Rules, APART, BINARY_UNKNOWN, KERNEL_UNKNOWN, OTHER, SHARED, STARTUP, UNLISTED};
use crate::symbolize::{Symbol, Symbolizer};
use crate::Result;
use collector::events::period_unit;
use collector::recording::Recording;
use serde::Serialize;
use std::collections::HashMap;

/// One stage's line.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageRow {
    pub stage: String,
    pub samples: u64,
    pub percent: f64,
    /// Sum of sample periods (ns for cpu-clock / task-clock, else events).
    pub period: u64,
    /// `period` per forwarded packet, when the recording has packet counts.
    pub per_packet: Option<f64>,
}

/// A symbol's line (perf report / opreport columns).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SymbolRow {
    pub samples: u64,
    pub percent: f64,
    pub period: u64,
    pub symbol: String,
    pub stage: String,
    pub dso: String,
}

/// The whole table.
#[derive(Debug, Clone, Serialize)]
pub struct StageTable {
    /// The event sampled (as meta.json says it was used) and what was asked for.
    pub event: String,
    pub requested: String,
    pub fallback: Option<String>,
    /// `ns` for clock events, else the event's name.
    pub unit: String,
    pub samples: u64,
    /// Samples whose own symbol matched no rule, charged through their callchain to the
    /// nearest caller with a stage (`attribution.callchain`).
    pub charged: u64,
    /// Samples by how they found their stage: own symbol, inlined function, callchain,
    /// none.
    pub attribution: Attribution,
    /// Forwarded packets during the recording (forwarder targets).
    pub packets: Option<u64>,
    pub stages: Vec<StageRow>,
    /// One row per (symbol, DSO, charged stage).
    pub symbols: Vec<SymbolRow>,
    /// Symbols that matched no rule, most samples first.
    pub unmatched: Vec<(String, u64)>,
    /// Per-thread stage tables (recordings and perf.data), most samples first.
    pub workers: Vec<WorkerTable>,
    /// The sampled workers against the forwarder's stage clocks, when the recording has
    /// them.
    pub clock_check: Option<crate::crosscheck::ClockCheck>,
    /// Why a forwarder recording has no stage-clock figures (clocks off, no TSC rate, no
    /// packets to divide by), when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clocks_absent: Option<String>,
    /// What the `startup` row holds (samples, CPU time, which process), when the
    /// recording saw the forwarder start: that work is kept out of per-packet figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<String>,
    /// What was recorded, for a forwarder recording: its settings, how long, how many
    /// packets and the rate (`cache=nocache fib=dir24 prefetch=2, 1 worker(s), ...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<String>,
    /// Whether the samples carry callchains (a recording made with -g, a perf.data file
    /// with them): what `shared` means depends on it.
    #[serde(skip)]
    pub callchains: bool,
    /// How the user callchains were made when they were unwound from DWARF CFI (a perf.data
    /// file recorded with `--call-graph dwarf`): for how many samples, how many reached the
    /// outermost frame, how many were cut short and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unwinding: Option<String>,
    /// What the input lacks and what that costs these figures (an incomplete recording,
    /// missing maps, parts skipped); printed first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The stage-rule files tried, in order, with the rules each contributed.
    pub rule_sources: Vec<(String, usize)>,
    /// Where the names came from: the kernel's symbols (and how they were checked against
    /// the recorded kernel), then each binary read. Empty for text profiles.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symbol_sources: Vec<String>,
    /// Every user-space binary looked up: its recorded build-id and where its symbols came
    /// from, or why none (`report --buildid-list`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub binaries: Vec<crate::symbolize::BinaryReport>,
}

impl StageTable {
    /// Take what the symbolizer says of its sources: one line per source, the binaries'
    /// list, and a warning for each binary that stayed unnamed (which, why, how to supply
    /// it).
    pub fn take_symbol_sources(&mut self, sym: &Symbolizer) {
        self.symbol_sources = sym.sources();
        self.binaries = sym.binaries();
        self.warnings.extend(sym.unnamed_binaries());
    }

    /// The binaries' list as `report --buildid-list` prints it: one line each, build-id
    /// as recorded, then the path and where its symbols came from or why none.
    pub fn buildid_list(&self) -> String {
        let mut s = String::new();
        // The kernel first, as its source line says it (recorded build-id, where found).
        if let Some(k) = self.symbol_sources.first().filter(|k| k.starts_with("kernel:")) {
            s.push_str(&format!("[kernel.kallsyms]\n    {k}\n"));
        }
        for b in &self.binaries {
            let id = b.recorded.as_deref().unwrap_or("(none recorded)");
            let how = match (&b.source, &b.unnamed) {
                (Some(src), _) => src.clone(),
                (None, Some(why)) => format!("UNNAMED: {why}"),
                (None, None) => String::new(),
            };
            s.push_str(&format!("{id} {}\n    {how}\n", b.path));
        }
        s
    }

    /// Samples whose address could not be named, by binary (`[kernel.kallsyms]` for the
    /// kernel), most first.
    pub fn unnamed(&self) -> Vec<(String, u64)> {
        let mut by: Vec<(String, u64)> = Vec::new();
        for r in &self.symbols {
            let unnamed = crate::symbolize::is_unnamed_kernel(&r.symbol)
                || r.symbol.starts_with("[unknown]+")
                || (!r.dso.is_empty() && r.symbol.starts_with(&format!("{}+0x", r.dso)));
            if !unnamed {
                continue;
            }
            match by.iter_mut().find(|(d, _)| *d == r.dso) {
                Some(e) => e.1 = e.1.saturating_add(r.samples),
                None => by.push((r.dso.clone(), r.samples)),
            }
        }
        by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        by
    }
}

/// One thread's stage table; per-packet figures for forwarder workers (`fwd-worker-N`).
#[derive(Debug, Clone, Serialize)]
pub struct WorkerTable {
    pub thread: String,
    pub samples: u64,
    pub packets: Option<u64>,
    pub stages: Vec<StageRow>,
}

/// Orders of the symbol table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Most samples first (the default).
    Samples,
    Symbol,
    Stage,
    Dso,
}

/// Forwarded packets per worker during the recording: last `tx_packets` minus first.
pub(crate) fn packets_per_worker(rec: &Recording) -> Result<HashMap<i32, u64>> {
    let tx = fwd_abi::COUNTER_NAMES[fwd_abi::Ctr::TxPackets as usize];
    Ok(crate::crosscheck::worker_deltas(rec)?
        .into_iter()
        .filter(|((_, n), _)| n == tx)
        .map(|((w, _), d)| (w, d))
        .collect())
}

/// Packets per worker matched to the samples read. When sample parts were skipped, the
/// samples cover only part of the run while the counters cover all of it: per-packet
/// figures would undercount. A finished recording knows its sample total (meta.json), so
/// the packets are scaled by the share of samples read (sampling at a fixed rate of a
/// steady forwarder spreads both evenly over the run); an unfinished one does not, and gets
/// no per-packet figures. Returns the note that says which.
pub(crate) fn scaled_to_parts_read(
    rec: &Recording,
    per_worker: HashMap<i32, u64>,
    read: u64,
) -> (HashMap<i32, u64>, Option<String>) {
    let skipped = rec.skipped().iter().any(|s| s.contains("samples.parquet"));
    if !skipped {
        return (per_worker, None);
    }
    let total = rec.meta.samples;
    if rec.meta.status == "complete" && total > 0 && read <= total {
        let share = read as f64 / total as f64;
        let scaled = per_worker.into_iter().map(|(w, p)| (w, (p as f64 * share).round() as u64)).collect();
        let note = format!(
            "per-packet figures use {:.1}% of the forwarded packets: the share of the recording's samples in the \
             parts read ({read} of {total}), as sampling at a fixed rate spreads both evenly over the run; the packet \
             count and rate printed are scaled the same way (estimated, not counted)",
            100.0 * share
        );
        (scaled, Some(note))
    } else {
        let note = "no per-packet figures: sample parts were skipped and the recording does not say how many samples                     it had (it is unfinished), so the packets the samples read cover are unknown"
            .to_string();
        (HashMap::new(), Some(note))
    }
}

/// `cache=.. fib=.. prefetch=..` from a forwarder's configuration (as meta.json keeps it:
/// `{"config": {...}, "info": {...}}`); `-` for targets that are no forwarder.
pub fn setting_of(forwarder: Option<&serde_json::Value>) -> String {
    forwarder.map_or_else(|| "-".into(), |v| fwd_abi::Published::from_value(v).setting())
}

/// What a forwarder recording recorded, in one line: the forwarder's settings (as
/// `export` labels them), workers, driver and device, then the recording's length, the
/// packets forwarded and their rate. None for other targets.
pub(crate) fn recorded_line(rec: &Recording, packets: Option<u64>) -> Option<String> {
    let fwd = fwd_abi::Published::from_value(rec.meta.forwarder.as_ref()?);
    let mut line = fwd.setting();
    if let Some(w) = fwd.config.workers {
        line.push_str(&format!(", {w} worker(s)"));
    }
    if let Some(v) = &fwd.config.driver {
        line.push_str(&format!(", driver {v}"));
    }
    // The device as the run resolved it (`auto` picks one at start).
    if let Some(v) = fwd.info.device.as_ref().or(fwd.config.gen_mode.as_ref()) {
        line.push_str(&format!(", device {v}"));
    }
    let m = &rec.meta;
    let secs = m.end_unix_ns.map(|e| e.saturating_sub(m.start_unix_ns) as f64 / 1e9).filter(|&s| s > 0.0);
    match (secs, packets) {
        (Some(s), Some(p)) => line.push_str(&format!("; {s:.2} s, {p} packets = {:.2} Mpps", p as f64 / s / 1e6)),
        (Some(s), None) => line.push_str(&format!("; {s:.2} s")),
        _ => {}
    }
    Some(line)
}

/// Thread names by tid from COMM records (the last name wins), printable: a program may
/// name its threads with a terminal's escape sequences, which are escaped.
pub fn thread_names(tasks: &[collector::records::TaskEvent]) -> HashMap<u32, String> {
    let mut names = HashMap::new();
    for t in tasks {
        if let collector::records::TaskEvent::Comm { tid, comm, .. } = t {
            names.insert(*tid, crate::printable(comm.clone()));
        }
    }
    names
}

/// Build the stage table of a recording with `rules`: samples are grouped in polars, each
/// distinct stack is symbolized once.
pub fn stage_table(rec: &Recording, rules: &Rules) -> Result<StageTable> {
    Ok(stage_table_reusing(rec, rules, None)?.0)
}

/// [`stage_table`] with binaries looked for under `paths.symfs` first (`--symfs`), and the
/// kernel named by `paths.kallsyms` (`--kallsyms`) in place of the recording's snapshot.
pub fn stage_table_with(rec: &Recording, rules: &Rules, paths: &crate::symbolize::SymbolPaths) -> Result<StageTable> {
    let sym = Symbolizer::for_recording_with(rec, paths)?;
    Ok(recording_table(rec, rules, sym)?.0)
}

/// [`stage_table`] with the symbolizer of an earlier recording of the same program (see
/// [`Symbolizer::reuse_for`]); returns it for the next one.
pub fn stage_table_reusing(
    rec: &Recording,
    rules: &Rules,
    prev: Option<Symbolizer>,
) -> Result<(StageTable, Symbolizer)> {
    let sym = match prev {
        Some(p) => p.reuse_for(rec)?,
        None => Symbolizer::for_recording(rec)?,
    };
    recording_table(rec, rules, sym)
}

/// The stage table of a recording with `sym`; returns the symbolizer for reuse.
fn recording_table(rec: &Recording, rules: &Rules, sym: Symbolizer) -> Result<(StageTable, Symbolizer)> {
    let df = rec.samples_df()?;
    let read = df.height() as u64;
    let tasks = rec.tasks()?;
    let starts = forwarding_starts(&tasks);
    let groups = crate::aggregate::group_by_window(mark_startup(df, &starts)?)?;
    let sym_warnings = sym.warnings().to_vec();
    let mut at = Attributor::new(sym, rules.clone());
    let names = thread_names(&tasks);
    let (per_worker, scale_note) = scaled_to_parts_read(rec, packets_per_worker(rec)?, read);
    let m = &rec.meta.sampling;
    let total: u64 = per_worker.values().sum();
    let head = Head {
        event: m.used.clone(),
        requested: m.requested.clone(),
        fallback: m.fallback.clone(),
        unit: period_unit(&m.used),
        packets: (!per_worker.is_empty() && total > 0).then_some(total),
    };
    let items = attribute(&groups, &mut at, &names);
    let mut t = build(head, items, rules);
    if let Some(r) = t.stages.iter().find(|r| r.stage == STARTUP) {
        t.startup = Some(startup_line(r, &t.unit, &starts));
    }
    for w in &mut t.workers {
        w.packets = fwd_abi::threads::worker_index(&w.thread)
            .and_then(|i| per_worker.get(&(i as i32)).copied())
            .filter(|&p| p > 0);
        for r in &mut w.stages {
            r.per_packet = w.packets.map(|p| r.period as f64 / p as f64);
        }
    }
    t.callchains = m.callchain;
    take_unwinding(&mut t, m.unwinding.as_ref(), " while recording");
    t.recorded = recorded_line(rec, t.packets);
    t.clock_check = crate::crosscheck::clock_check(rec, &t.event, &worker_totals(&t.workers))?;
    if t.clock_check.is_none() {
        t.clocks_absent = crate::crosscheck::clocks_absent(rec)?;
    }
    t.warnings.extend(sym_warnings);
    t.warnings.extend(rec.problems());
    t.warnings.extend(scale_note);
    let sym = at.into_symbolizer();
    t.take_symbol_sources(&sym);
    Ok((t, sym))
}

/// How the user callchains were unwound (`when`: ` while recording`, or nothing for a
/// perf.data file unwound as it is read), and a warning for
/// each binary they could not be unwound through. The figures and names may come from a
/// recording's meta.json: printed escaped.
fn take_unwinding(t: &mut StageTable, u: Option<&collector::unwind::UnwindStats>, when: &str) {
    let Some(u) = u else { return };
    t.unwinding = Some(collector::printable(u.summary_when(when)));
    for (bin, why) in &u.unreadable {
        t.warnings
            .push(collector::printable(format!("{bin}: not unwound through ({why}); user callchains stop in it")));
    }
}

/// When each forwarder process's first worker thread started, by process: the FORK record
/// of the first thread a COMM record names as a worker (`fwd-worker-N`; COMM records carry
/// no time of their own here). The forwarder spawns its workers once the route table is
/// loaded and the FIB built, so everything its process did before is start-up. A process
/// attached to while running has no FORK records of its workers, so it has no start-up.
pub fn forwarding_starts(tasks: &[collector::records::TaskEvent]) -> HashMap<u32, u64> {
    use collector::records::TaskEvent;
    let workers: std::collections::HashSet<(u32, u32)> = tasks
        .iter()
        .filter_map(|t| match t {
            TaskEvent::Comm { pid, tid, comm, .. } if fwd_abi::threads::worker_index(comm).is_some() => {
                Some((*pid, *tid))
            }
            _ => None,
        })
        .collect();
    let mut out: HashMap<u32, u64> = HashMap::new();
    for t in tasks {
        if let TaskEvent::Fork { time, pid, tid, .. } = t {
            if *time > 0 && workers.contains(&(*pid, *tid)) {
                let e = out.entry(*pid).or_insert(*time);
                *e = (*e).min(*time);
            }
        }
    }
    out
}

/// The samples frame with a `window` column: 1 for a sample of a forwarder process taken
/// before its first worker started ([`forwarding_starts`]), else 0.
pub(crate) fn mark_startup(
    df: polars::prelude::DataFrame,
    starts: &HashMap<u32, u64>,
) -> Result<polars::prelude::DataFrame> {
    use polars::prelude::*;
    let mut before = lit(false);
    for (&pid, &start) in starts {
        before = before.or(col("pid").eq(lit(pid)).and(col("time").lt(lit(start))));
    }
    df.lazy()
        .with_column(before.cast(DataType::UInt32).alias("window"))
        .collect()
        .map_err(|e| crate::Error::Aggregate(format!("marking start-up samples: {e}")))
}

/// What the `startup` row holds, for the text report.
fn startup_line(r: &StageRow, unit: &str, starts: &HashMap<u32, u64>) -> String {
    let cost =
        if unit == "ns" { format!("{:.1} ms of CPU", r.period as f64 / 1e6) } else { format!("{} {unit}", r.period) };
    let pids: Vec<String> = {
        let mut v: Vec<u32> = starts.keys().copied().collect();
        v.sort_unstable();
        v.iter().map(u32::to_string).collect()
    };
    format!(
        "{} samples ({cost}) of process {} before its first worker started (loading the route table, building \
         the FIB): one-off work, kept out of every per-packet figure",
        r.samples,
        pids.join(", ")
    )
}

/// Stage totals (samples, period) over the forwarder's worker threads.
fn worker_totals(workers: &[WorkerTable]) -> HashMap<String, (u64, u64)> {
    let mut out: HashMap<String, (u64, u64)> = HashMap::new();
    for w in workers.iter().filter(|w| fwd_abi::threads::worker_index(&w.thread).is_some()) {
        for r in &w.stages {
            let e = out.entry(r.stage.clone()).or_default();
            e.0 += r.samples;
            e.1 += r.period;
        }
    }
    out
}

/// x86-64 kernel addresses live in the upper half.
pub(crate) fn is_kernel_address(a: u64) -> bool {
    a >= 0xffff_8000_0000_0000
}

/// How a sample found its stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum By {
    /// Its function's own symbol matched a rule.
    Symbol,
    /// A function inlined at its address (DWARF's inline chain, innermost first) did.
    Inline,
    /// A caller in its callchain did.
    Callchain,
    /// None of those did, but its thread's name did (a rule's `process` patterns: a load
    /// generator's library code, whose callchain ends in a library without frame pointers).
    Process,
    /// Nothing did: it stays in `other`.
    None,
}

impl By {
    pub const ALL: [By; 5] = [By::Symbol, By::Inline, By::Callchain, By::Process, By::None];
    /// Its name in tables and datasets (`symbol`, `inline`, `callchain`, `process`, `none`).
    pub fn name(self) -> &'static str {
        match self {
            By::Symbol => "symbol",
            By::Inline => "inline",
            By::Callchain => "callchain",
            By::Process => "process",
            By::None => "none",
        }
    }
    /// The attribution of a name given by [`By::name`].
    pub fn from_name(s: &str) -> Option<By> {
        By::ALL.into_iter().find(|b| b.name() == s)
    }
}

/// One address attributed: its symbol and the stage it is charged to.
#[derive(Debug, Clone, PartialEq)]
pub struct Attributed {
    pub symbol: Symbol,
    /// The stage charged: the symbol's own, an inlined function's, or a caller's.
    pub stage: String,
    /// How.
    pub by: By,
}

/// Samples by how they were attributed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Attribution {
    pub symbol: u64,
    pub inline: u64,
    pub callchain: u64,
    #[serde(default)]
    pub process: u64,
    pub none: u64,
}

impl Attribution {
    fn add(&mut self, by: By, n: u64) {
        let slot = match by {
            By::Symbol => &mut self.symbol,
            By::Inline => &mut self.inline,
            By::Callchain => &mut self.callchain,
            By::Process => &mut self.process,
            By::None => &mut self.none,
        };
        *slot = slot.saturating_add(n);
    }
}

/// Symbolizes addresses and applies stage rules, each (pid, address) once. A sample whose
/// own symbol matches no rule is charged to the innermost function inlined at its address
/// that has a stage (stage code inlined into the worker loop), from DWARF; failing that,
/// when it has a callchain, to the nearest caller that does (a shared helper such as
/// memcpy or a lock counts toward the stage that called it). Shared by the offline tables
/// and the live view (`fwdscope top`).
pub struct Attributor {
    sym: Symbolizer,
    rules: Rules,
    /// Per (pid, address, kernel): the symbol, its stage, and how the stage was found.
    /// Kernel addresses are one space whatever the process: they are kept under pid 0.
    cache: HashMap<(u32, u64, bool), (Symbol, String, Found), foldhash::fast::RandomState>,
    /// Per symbol name: whether no rule names it by name alone, and whether it is shared
    /// machinery ([`Rules::is_shared`]); asked once per sample group, answered once per name.
    by_name: HashMap<String, (bool, bool)>,
    /// Per binary, then symbol name: the stage a rule gives it (many addresses of one
    /// function ask the rules the same question).
    rule_memo: HashMap<String, HashMap<String, Option<String>>>,
}

/// How an address's stage was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// A rule matched the function's own symbol (its stage may be `other`: final).
    Rule,
    /// A rule matched an inlined function at the address.
    Inline,
    /// No rule matched.
    NoRule,
}

impl Attributor {
    pub fn new(sym: Symbolizer, rules: Rules) -> Attributor {
        Attributor { sym, rules, cache: HashMap::default(), by_name: HashMap::new(), rule_memo: HashMap::new() }
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// An address's frames, innermost first (inlined functions, then the function itself).
    pub fn frames(&mut self, pid: u32, ip: u64, kernel: bool) -> Vec<crate::symbolize::Frame> {
        self.sym.frames_ip(pid, ip, kernel)
    }

    /// The symbolizer, to read more of what it found (the binaries themselves).
    pub fn symbolizer(&mut self) -> &mut Symbolizer {
        &mut self.sym
    }

    /// The symbolizer back (to reuse for another recording).
    pub fn into_symbolizer(self) -> Symbolizer {
        self.sym
    }

    /// Mappings seen after the start (a live target): resolved names may change, so what
    /// was remembered is forgotten.
    pub fn add_maps(&mut self, maps: impl IntoIterator<Item = collector::records::Mapping>) {
        self.sym.add_maps(maps);
        self.cache.clear();
    }

    /// An address's symbol and stage: its function's own, else the innermost inlined
    /// function's at that address that has one (DWARF, read only for addresses whose own
    /// function has no stage).
    fn resolve(&mut self, pid: u32, ip: u64, kernel: bool) -> (Symbol, String, Found) {
        self.resolved(pid, ip, kernel).clone()
    }

    /// [`Attributor::resolve`] without a copy: the cached entry.
    fn resolved(&mut self, pid: u32, ip: u64, kernel: bool) -> &(Symbol, String, Found) {
        let (sym, rules, memo) = (&mut self.sym, &self.rules, &mut self.rule_memo);
        // The kernel's addresses name the same functions in every process.
        let pid = if kernel { 0 } else { pid };
        self.cache.entry((pid, ip, kernel)).or_insert_with(|| {
            let s = sym.resolve_ip(pid, ip, kernel);
            if kernel && crate::symbolize::is_unnamed_kernel(&s.name) {
                // No kernel symbols of this kernel's build: never guessed into a stage.
                return (s, KERNEL_UNKNOWN.to_string(), Found::Rule);
            }
            if s.binary_unknown {
                // No file of the recorded build of its binary: likewise.
                return (s, BINARY_UNKNOWN.to_string(), Found::Rule);
            }
            let own = match memo.get(&s.dso).and_then(|m| m.get(&s.name)) {
                Some(own) => own.clone(),
                None => {
                    let own = rules.rule_stage_in(&s.name, Some(&s.dso)).map(str::to_string);
                    memo.entry(s.dso.clone()).or_default().insert(s.name.clone(), own.clone());
                    own
                }
            };
            if let Some(own) = own {
                // A rule names it (possibly `other`, as start-up work): final.
                return (s, own, Found::Rule);
            }
            if kernel {
                return (s, OTHER.to_string(), Found::NoRule);
            }
            let frames = sym.frames_ip(pid, ip, kernel);
            // Innermost first; the last frame is the function itself.
            let inlined = frames.iter().take(frames.len().saturating_sub(1));
            match inlined.map(|f| rules.stage_of(&f.function)).find(|st| *st != OTHER) {
                Some(st) => (s, st.to_string(), Found::Inline),
                None => (s, OTHER.to_string(), Found::NoRule),
            }
        })
    }

    /// Whether no rule names `name` by name alone, and whether it is shared machinery.
    fn name_info(&mut self, name: &str) -> (bool, bool) {
        if let Some(&v) = self.by_name.get(name) {
            return v;
        }
        let v = (self.rules.rule_stage(name).is_none(), self.rules.is_shared(name));
        self.by_name.insert(name.to_string(), v);
        v
    }

    /// Attribute one sample (its IP and callchain, innermost first; perf's first callchain
    /// entry may repeat the IP). Shared machinery (the rules' `[shared]` table: locks,
    /// copies, the page allocator, system-call entry) is charged to its nearest staged
    /// caller; a kernel function of it with none in the callchain (no callchain recorded,
    /// or callers in no stage) is [`SHARED`], as in a flat table, and `other` stays for
    /// names no rule knows.
    pub fn attribute(&mut self, pid: u32, ip: u64, kernel: bool, callchain: &[u64]) -> Attributed {
        let (symbol, stage, found) = self.resolve(pid, ip, kernel);
        if stage == BINARY_UNKNOWN {
            // Not named, so not attributed by its symbol: its thread's name may still say
            // what runs there (user-space code is its own process's).
            return Attributed { symbol, stage, by: By::None };
        }
        if stage != OTHER {
            let by = if found == Found::Inline { By::Inline } else { By::Symbol };
            return Attributed { symbol, stage, by };
        }
        if found == Found::Rule {
            // Explicitly `other` by a rule: not charged to a caller.
            return Attributed { symbol, stage, by: By::None };
        }
        let callers = callchain.iter().skip(usize::from(callchain.first() == Some(&ip)));
        for &ret in callers {
            // A return address points after the call: look up the call itself.
            let (_, st, found) = self.resolved(pid, ret.saturating_sub(1), is_kernel_address(ret));
            if st != OTHER {
                return Attributed { symbol, stage: st.clone(), by: By::Callchain };
            }
            if *found == Found::Rule {
                // A caller a rule calls `other` (start-up work): its helpers stay other.
                break;
            }
        }
        // Kernel functions only: they are named from the recording's own kallsyms snapshot.
        // A user-space one (libc's memcpy) is named only where this machine has the same
        // library and its debug file, and a stage must not depend on that: it stays other.
        let stage = if kernel && self.name_info(&symbol.name).1 { SHARED.to_string() } else { stage };
        Attributed { symbol, stage, by: By::None }
    }
}

impl Attributor {
    /// One group of samples attributed as every table and export counts it: its address
    /// and callchain ([`Attributor::attribute`]), then, for a sample nothing named, its
    /// thread's name (a rule's `process` patterns). Returns it with the thread's name.
    pub fn attribute_group(
        &mut self,
        g: &crate::aggregate::Group,
        names: &HashMap<u32, String>,
    ) -> (Attributed, String) {
        let mut a = self.attribute(g.pid, g.ip, g.kernel, &g.callchain);
        let thread = names.get(&g.tid).cloned().unwrap_or_else(|| format!("tid {}", g.tid));
        self.by_thread_name(&mut a, names.get(&g.tid).map(String::as_str));
        (a, thread)
    }

    /// The last resort, for report, top and replay alike: a sample neither its symbol, an
    /// inlined function nor its callchain gave a stage, in a function no rule names, goes by
    /// the process rule of its thread's name (`thread`: DPDK's `dpdk-l3fwd`, a stripped
    /// program's own loop). Returns whether it did.
    pub fn by_thread_name(&mut self, a: &mut Attributed, thread: Option<&str>) -> bool {
        let unstaged = a.stage == OTHER || a.stage == SHARED || a.stage == BINARY_UNKNOWN;
        if a.by != By::None || !unstaged || !self.name_info(&a.symbol.name).0 {
            return false;
        }
        match thread.and_then(|n| self.rules().process_stage(n)) {
            Some(st) => {
                a.stage = st.to_string();
                a.by = By::Process;
                true
            }
            None => false,
        }
    }
}

/// Symbolize and attribute grouped samples.
/// Groups in window 1 were sampled during the forwarder's start-up ([`mark_startup`]):
/// their symbols are named as any other, and charged to [`STARTUP`].
fn attribute(
    groups: &[(u32, crate::aggregate::Group)],
    at: &mut Attributor,
    names: &HashMap<u32, String>,
) -> Vec<Item> {
    let mut items = Vec::with_capacity(groups.len());
    for (window, g) in groups {
        let (a, thread) = at.attribute_group(g, names);
        items.push(Item {
            symbol: a.symbol.name,
            dso: a.symbol.dso,
            stage: if *window == 1 { STARTUP.to_string() } else { a.stage },
            by: a.by,
            thread: Some(thread),
            samples: g.samples,
            period: g.period,
        });
    }
    items
}

/// A program's own file as a flat profile names it (`dpdk-l3fwd`, `/usr/bin/x`): its file
/// name, or None for the kernel, a module (`[...]`) or a shared object (`lib*.so*`).
fn program_file(dso: &str) -> Option<&str> {
    let name = dso.rsplit('/').next()?;
    (!name.is_empty() && !name.starts_with('[') && !name.contains(".so")).then_some(name)
}

/// The stage table of a text profile (opreport, perf report): samples and shares, no
/// per-packet figures.
pub fn profile_table(p: &crate::import::TextProfile, rules: &Rules) -> StageTable {
    let head = Head {
        event: p.event.clone(),
        requested: p.event.clone(),
        fallback: None,
        unit: "samples".into(),
        packets: None,
    };
    let mut items: Vec<Item> = p
        .rows
        .iter()
        .map(|r| {
            // A flat table has no callchain to charge shared machinery to its callers,
            // and no thread names: a row of a program's own file that no rule names goes
            // by the process rule of that file's name (l3fwd's loop, its inlined code
            // shown as the loop).
            let stage = match rules.stage_in(&r.symbol, &r.dso) {
                OTHER if rules.is_shared(&r.symbol) => SHARED,
                OTHER => program_file(&r.dso).and_then(|f| rules.process_stage(f)).unwrap_or(OTHER),
                st => st,
            };
            Item {
                stage: stage.to_string(),
                symbol: r.symbol.clone(),
                dso: r.dso.clone(),
                by: if stage == OTHER || stage == SHARED { By::None } else { By::Symbol },
                thread: None,
                samples: r.samples,
                period: r.samples,
            }
        })
        .collect();
    if let Some(n) = p.unlisted.filter(|&n| n > 0) {
        items.push(Item {
            stage: UNLISTED.to_string(),
            symbol: "(not in the excerpt)".to_string(),
            dso: String::new(),
            by: By::None,
            thread: None,
            samples: n,
            period: n,
        });
    }
    let mut t = build(head, items, rules);
    if p.is_excerpt() {
        let listed: u64 = p.rows.iter().fold(0u64, |a, r| a.saturating_add(r.samples));
        let whole = listed.saturating_add(p.unlisted.unwrap_or(0));
        let share = if whole == 0 { 0.0 } else { 100.0 * listed as f64 / whole as f64 };
        t.warnings.insert(
            0,
            format!(
                "an excerpt ({}): its {} rows list {share:.2}% of the profile; shares are of the whole profile and \
                 the rest is the `{UNLISTED}` row (the event and the sample count were not in the excerpt)",
                p.format,
                p.rows.len()
            ),
        );
    }
    if p.is_excerpt() && p.format.starts_with("perf") {
        t.warnings.insert(
            1,
            "a perf report excerpt has percentages only: its samples column counts hundredths of a percent of the \
             profile (10,000 in all)"
                .to_string(),
        );
    }
    t.warnings.extend(p.notes.iter().cloned());
    t
}

pub(crate) struct Head {
    pub(crate) event: String,
    pub(crate) requested: String,
    pub(crate) fallback: Option<String>,
    pub(crate) unit: String,
    pub(crate) packets: Option<u64>,
}

/// Attributed samples of one symbol in one thread.
pub(crate) struct Item {
    pub(crate) symbol: String,
    pub(crate) dso: String,
    /// The stage charged (the symbol's own, an inlined function's, or a caller's).
    pub(crate) stage: String,
    /// How.
    pub(crate) by: By,
    pub(crate) thread: Option<String>,
    pub(crate) samples: u64,
    pub(crate) period: u64,
}

fn stage_rows(by_stage: HashMap<String, (u64, u64)>, total: u64, packets: Option<u64>) -> Vec<StageRow> {
    let pct = |n: u64| if total == 0 { 0.0 } else { 100.0 * n as f64 / total as f64 };
    let mut stages: Vec<StageRow> = by_stage
        .into_iter()
        .map(|(stage, (n, period))| StageRow {
            percent: pct(n),
            per_packet: packets.filter(|_| stage != STARTUP).map(|p| period as f64 / p as f64),
            stage,
            samples: n,
            period,
        })
        .collect();
    stages.sort_by(|a, b| stage_rank(&a.stage).cmp(&stage_rank(&b.stage)).then(a.stage.cmp(&b.stage)));
    stages
}

/// Aggregate attributed items into the table.
pub(crate) fn build(head: Head, items: Vec<Item>, rules: &Rules) -> StageTable {
    // Saturating sums: a text profile may claim any counts.
    let total: u64 = items.iter().fold(0u64, |a, i| a.saturating_add(i.samples));
    let sums = Sums::of(items);
    let symbols = symbol_rows(sums.by_symbol, total);
    let unmatched = unmatched_symbols(&symbols, rules);
    let mut workers: Vec<WorkerTable> = sums
        .by_thread
        .into_iter()
        .map(|(thread, st)| {
            let samples = st.values().fold(0u64, |a, v| a.saturating_add(v.0));
            WorkerTable { thread, samples, packets: None, stages: stage_rows(st, samples, None) }
        })
        .collect();
    workers.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.thread.cmp(&b.thread)));
    let attribution = sums.attribution;
    StageTable {
        event: head.event,
        requested: head.requested,
        fallback: head.fallback,
        unit: head.unit,
        samples: total,
        charged: attribution.callchain,
        attribution,
        packets: head.packets,
        stages: stage_rows(sums.by_stage, total, head.packets),
        symbols,
        unmatched,
        workers,
        clock_check: None,
        clocks_absent: None,
        startup: None,
        recorded: None,
        callchains: false,
        unwinding: None,
        warnings: rules.warnings.clone(),
        rule_sources: rules.sources.clone(),
        symbol_sources: Vec::new(),
        binaries: Vec::new(),
    }
}

/// Attributed items summed (samples, period) by stage, by (symbol, DSO, stage) and by
/// thread and stage, and counted by how they found their stage.
struct Sums {
    by_stage: HashMap<String, (u64, u64)>,
    by_symbol: HashMap<(String, String, String), (u64, u64)>,
    by_thread: HashMap<String, HashMap<String, (u64, u64)>>,
    attribution: Attribution,
}

impl Sums {
    /// Sum `items` (saturating: a text profile may claim any counts).
    fn of(items: Vec<Item>) -> Sums {
        let mut by_stage: HashMap<String, (u64, u64)> = HashMap::new();
        let mut by_symbol: HashMap<(String, String, String), (u64, u64)> = HashMap::new();
        let mut by_thread: HashMap<String, HashMap<String, (u64, u64)>> = HashMap::new();
        let mut attribution = Attribution::default();
        for it in items {
            let add = |e: &mut (u64, u64)| {
                e.0 = e.0.saturating_add(it.samples);
                e.1 = e.1.saturating_add(it.period);
            };
            add(by_stage.entry(it.stage.clone()).or_default());
            if it.stage != UNLISTED {
                attribution.add(it.by, it.samples);
            }
            if let Some(t) = &it.thread {
                add(by_thread.entry(t.clone()).or_default().entry(it.stage.clone()).or_default());
            }
            add(by_symbol.entry((it.symbol.clone(), it.dso.clone(), it.stage.clone())).or_default());
        }
        Sums { by_stage, by_symbol, by_thread, attribution }
    }
}

/// The symbol rows, most samples first (then by name), with their share of `total`.
fn symbol_rows(by_symbol: HashMap<(String, String, String), (u64, u64)>, total: u64) -> Vec<SymbolRow> {
    let pct = |n: u64| if total == 0 { 0.0 } else { 100.0 * n as f64 / total as f64 };
    let mut symbols: Vec<SymbolRow> = by_symbol
        .into_iter()
        .map(|((symbol, dso, stage), (n, period))| SymbolRow {
            samples: n,
            percent: pct(n),
            period,
            symbol,
            stage,
            dso,
        })
        .collect();
    symbols.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.symbol.cmp(&b.symbol)));
    symbols
}

/// The ten symbols with most samples whose own name no rule matches, charged or not.
fn unmatched_symbols(symbols: &[SymbolRow], rules: &Rules) -> Vec<(String, u64)> {
    // Unmatched: symbols whose own name no rule matches, charged or not.
    let mut unmatched: Vec<(String, u64)> = Vec::new();
    for s in symbols.iter().filter(|s| {
        s.stage != KERNEL_UNKNOWN
            && s.stage != BINARY_UNKNOWN
            && s.stage != UNLISTED
            && s.stage != SHARED
            && s.stage != STARTUP
            && !rules.is_shared(&s.symbol)
            && rules.stage_in(&s.symbol, &s.dso) == OTHER
    }) {
        match unmatched.iter_mut().find(|u| u.0 == s.symbol) {
            Some(u) => u.1 = u.1.saturating_add(s.samples),
            None => unmatched.push((s.symbol.clone(), s.samples)),
        }
    }
    unmatched.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    unmatched.truncate(10);
    unmatched
}

impl StageTable {
    /// The table as text: a header naming the event used, the stage table, then the top
    /// `top` symbols in perf report's columns.
    pub fn text(&self, top: usize) -> String {
        let mut s = String::new();
        self.write_head(&mut s);
        // The stage column fits the longest name (`kernel-unknown`), at least 8 wide and at
        // most MAX_STAGE_NAME (stage names from a dataset's stack table are not checked as a
        // rules file's are; a width past 65,535 would panic the formatter).
        let w = self.stages.iter().map(|r| r.stage.len()).max().unwrap_or(0).clamp(8, crate::rules::MAX_STAGE_NAME);
        self.write_stages(&mut s, w);
        self.write_clocks_note(&mut s);
        self.write_symbols(&mut s, w, top);
        s
    }

    /// The `#` lines before the table: event, recording, warnings, where rules and symbols
    /// came from, what could not be named, packets, and how samples were attributed.
    fn write_head(&self, s: &mut String) {
        use std::fmt::Write;
        let _ = writeln!(
            s,
            "# event: {} ({} samples){}",
            self.event,
            self.samples,
            self.fallback.as_ref().map_or(String::new(), |f| format!("; {f}"))
        );
        if let Some(r) = &self.recorded {
            let _ = writeln!(s, "# recorded: {r}");
        }
        for w in &self.warnings {
            let _ = writeln!(s, "# WARNING: {w}");
        }
        if !self.rule_sources.is_empty() {
            let list: Vec<String> = self.rule_sources.iter().map(|(f, n)| format!("{f} {n}")).collect();
            let _ = writeln!(s, "# stage rules (file, rules): {}", list.join(", "));
        }
        for src in &self.symbol_sources {
            let _ = writeln!(s, "# symbols: {}", crate::printable(src.clone()));
        }
        let unnamed = self.unnamed();
        if !unnamed.is_empty() {
            let list: Vec<String> = unnamed.iter().map(|(d, n)| format!("{n} in {d}")).collect();
            let _ = writeln!(
                s,
                "# could not name: {} samples ({})",
                unnamed.iter().map(|u| u.1).sum::<u64>(),
                list.join(", ")
            );
        }
        if let Some(p) = self.packets {
            let _ = writeln!(s, "# packets forwarded: {p}");
        }
        let a = &self.attribution;
        if a.inline + a.callchain + a.process + a.none > 0 {
            let by_process = if a.process > 0 { format!(", by thread name {}", a.process) } else { String::new() };
            let _ = writeln!(
                s,
                "# attributed by symbol {}, by inlined function {}, by callchain {} (helpers charged to the \
                 nearest staged caller){by_process}, not at all {}",
                a.symbol, a.inline, a.callchain, a.none
            );
        }
        if let Some(u) = &self.unwinding {
            let _ = writeln!(s, "# {u}");
        }
    }

    /// The stage table (`w`: the stage column's width), with the line on what is apart
    /// from forwarding work, the start-up line and what `shared` holds.
    fn write_stages(&self, s: &mut String, w: usize) {
        use std::fmt::Write;
        let per = format!("{}/packet", self.unit);
        let with_packets = self.packets.is_some();
        let _ = writeln!(
            s,
            "{:<w$} {:>10} {:>8} {:>12}",
            "stage",
            "samples",
            "%",
            if with_packets { per.as_str() } else { "" }
        );
        let mut apart_said = false;
        for r in &self.stages {
            if APART.contains(&r.stage.as_str()) && !apart_said {
                // Name only what this profile has: a kernel profile has no synthetic device.
                let what: Vec<&str> = self
                    .stages
                    .iter()
                    .filter_map(|x| match x.stage.as_str() {
                        "nic" => Some("the synthetic device (nic)"),
                        "local" => Some("the machine's own traffic and programs (local)"),
                        "idle" => Some("waiting (idle)"),
                        STARTUP => Some("the forwarder's start-up (startup)"),
                        _ => None,
                    })
                    .collect();
                let _ = writeln!(s, "# apart from forwarding work: {}", what.join(", "));
                apart_said = true;
            }
            let pp = r.per_packet.filter(|_| with_packets).map_or(String::new(), |v| format!("{v:.1}"));
            let _ = writeln!(s, "{:<w$} {:>10} {:>7.2}% {:>12}", r.stage, r.samples, r.percent, pp);
        }
        if let Some(st) = &self.startup {
            let _ = writeln!(s, "# startup: {st}");
        }
        if self.stages.iter().any(|r| r.stage == SHARED && r.samples > 0) {
            let _ = writeln!(
                s,
                "# shared: locks, copies, the page allocator, system-call entry, which every caller uses, where no \
                 staged caller could be charged: no callchain (a flat table, or a recording without them: record \
                 with perf record -g or fwdscope record -g), a callchain cut short (a caller without frame \
                 pointers), or callers in no stage"
            );
        }
    }

    /// The stage clocks' check against the samples, or why there is none.
    fn write_clocks_note(&self, s: &mut String) {
        use std::fmt::Write;
        match &self.clock_check {
            Some(c) => {
                let _ = write!(s, "\n{}", c.text());
            }
            None if self.clocks_absent.is_some() => {
                let why = self.clocks_absent.as_deref().unwrap_or_default();
                let _ = writeln!(s, "# stage clocks: {why}; figures from samples only");
            }
            None => {
                // The kernel's forwarding path (the lab's kernel mode) and imported profiles
                // have no stage clocks: say which instrument every figure came from.
                let _ = writeln!(
                    s,
                    "# every figure from samples of {} only: this profile has no stage clocks (the kernel's forwarding path and imported profiles are sampled only)",
                    self.event
                );
            }
        }
    }

    /// The top `top` symbols in perf report's columns (`w`: the stage column's width), then
    /// the top symbols no rule matches.
    fn write_symbols(&self, s: &mut String, w: usize, top: usize) {
        use std::fmt::Write;
        let _ = writeln!(s, "\n{:>10} {:>8}  {:<40} {:<w$} dso", "samples", "%", "symbol", "stage");
        for r in self.symbols.iter().take(top) {
            // Names come from the input (a binary's path in maps.json, a symbol of a text
            // profile): a terminal's escape sequences in them are shown escaped.
            let _ = writeln!(
                s,
                "{:>10} {:>7.2}%  {:<40} {:<w$} {}",
                r.samples,
                r.percent,
                crate::printable(r.symbol.clone()),
                r.stage,
                crate::printable(r.dso.clone())
            );
        }
        if !self.unmatched.is_empty() {
            let list: Vec<String> = self.unmatched.iter().take(5).map(|(n, c)| format!("{n} ({c})")).collect();
            let _ = writeln!(s, "\n# top symbols in no rule (add rules with --stages FILE): {}", list.join(", "));
        }
    }

    /// Per-thread stage tables as text.
    pub fn workers_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for w in &self.workers {
            let _ = writeln!(
                s,
                "\n# thread {} ({} samples{})",
                w.thread,
                w.samples,
                w.packets.map_or(String::new(), |p| format!(", {p} packets forwarded"))
            );
            for r in &w.stages {
                let pp = r.per_packet.map_or(String::new(), |v| format!("{v:.1} {}/packet", self.unit));
                let _ = writeln!(s, "{:<8} {:>10} {:>7.2}% {:>16}", r.stage, r.samples, r.percent, pp);
            }
        }
        s
    }

    /// Reorder the symbol table.
    pub fn sort_symbols(&mut self, key: SortKey) {
        let rank = stage_rank;
        self.symbols.sort_by(|a, b| {
            let by_samples = b.samples.cmp(&a.samples).then(a.symbol.cmp(&b.symbol));
            match key {
                SortKey::Samples => by_samples,
                SortKey::Symbol => a.symbol.cmp(&b.symbol).then(by_samples),
                SortKey::Stage => rank(&a.stage).cmp(&rank(&b.stage)).then(a.stage.cmp(&b.stage)).then(by_samples),
                SortKey::Dso => a.dso.cmp(&b.dso).then(by_samples),
            }
        });
    }

    /// The table as CSV, one row per stage (`section` = `stage`), per thread and stage
    /// (`thread`) and per symbol (`symbol`), all with the same columns.
    pub fn csv(&self, top: usize) -> String {
        use std::fmt::Write;
        let q = crate::csv_field;
        let mut s = String::from("section,thread,stage,symbol,dso,samples,percent,period,per_packet,event\n");
        let pp = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        let stage_row = |s: &mut String, section: &str, thread: &str, r: &StageRow| {
            let _ = writeln!(
                s,
                "{section},{},{},,,{},{:.4},{},{},{}",
                q(thread),
                q(&r.stage),
                r.samples,
                r.percent,
                r.period,
                pp(r.per_packet),
                q(&self.event)
            );
        };
        for r in &self.stages {
            stage_row(&mut s, "stage", "", r);
        }
        for w in &self.workers {
            for r in &w.stages {
                stage_row(&mut s, "thread", &w.thread, r);
            }
        }
        for r in self.symbols.iter().take(top) {
            let _ = writeln!(
                s,
                "symbol,,{},{},{},{},{:.4},{},,{}",
                q(&r.stage),
                q(&r.symbol),
                q(&r.dso),
                r.samples,
                r.percent,
                r.period,
                q(&self.event)
            );
        }
        s
    }
}

/// The stage table of a perf.data file; kernel addresses resolve through `kallsyms`
/// (given as is: no check against the recorded kernel; [`perfdata_table_with`] checks).
pub fn perfdata_table(
    pd: &crate::perfdata::PerfData,
    kallsyms: Option<crate::symbolize::Kallsyms>,
    rules: &Rules,
) -> Result<StageTable> {
    perfdata_table_with(pd, Symbolizer::new(pd.maps.clone(), kallsyms), rules)
}

/// The stage table of a perf.data file with a symbolizer whose kernel symbols were chosen
/// for the recorded kernel ([`Symbolizer::with_kernel`]): its warnings and sources come
/// into the table.
pub fn perfdata_table_with(pd: &crate::perfdata::PerfData, sym: Symbolizer, rules: &Rules) -> Result<StageTable> {
    let groups = pd.groups()?;
    // From the groups: a file read grouped (report's way) keeps no samples to look at.
    let callchains = groups.iter().any(|g| !g.callchain.is_empty());
    let sym_warnings = sym.warnings().to_vec();
    let mut at = Attributor::new(sym, rules.clone());
    let names = thread_names(&pd.tasks);
    let head = Head {
        event: pd.event.clone(),
        requested: pd.event.clone(),
        fallback: None,
        unit: period_unit(&pd.event),
        packets: None,
    };
    // perf.data samples are grouped without their times, so a perf.data file has no
    // start-up row: whatever its forwarder did before forwarding stays in its stages.
    let groups: Vec<(u32, crate::aggregate::Group)> = groups.into_iter().map(|g| (0, g)).collect();
    let mut t = build(head, attribute(&groups, &mut at, &names), rules);
    t.callchains = callchains;
    take_unwinding(&mut t, pd.unwinding.as_ref(), "");
    t.warnings.extend(pd.warnings.iter().cloned());
    t.warnings.extend(sym_warnings);
    t.take_symbol_sources(&at.into_symbolizer());
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use collector::records::{Sample, TaskEvent};

    /// A file with callchains says so in its stage table whether its samples were kept or
    /// grouped while reading (report reads them grouped and keeps none): what `shared`
    /// means, and diff's warning about it, depend on it.
    #[test]
    fn a_grouped_read_still_knows_it_has_callchains() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
        let kept = crate::perfdata::read_perf_data(&p).unwrap();
        assert!(kept.samples.iter().any(|s| !s.callchain.is_empty()), "the golden file has callchains");
        let grouped = crate::perfdata::read_perf_data_grouped(&p).unwrap();
        assert!(grouped.samples.is_empty());
        let rules = crate::rules::Rules::builtin();
        for pd in [&kept, &grouped] {
            let t = perfdata_table(pd, None, &rules).unwrap();
            assert!(t.callchains, "a table without callchains ({} samples kept)", pd.samples.len());
        }
    }

    /// The forwarder's start is the FORK of its first worker (COMM records here have no
    /// time), per process; threads of other names and workers without a FORK (a process
    /// attached to while running) give none.
    #[test]
    fn forwarding_starts_at_the_first_workers_fork() {
        let comm = |pid, tid, name: &str| TaskEvent::Comm { time: 0, pid, tid, comm: name.into(), exec: false };
        let fork = |time, pid, tid| TaskEvent::Fork { time, pid, tid, ppid: pid, ptid: pid };
        let tasks = vec![
            comm(10, 10, "fwdscope"),
            fork(500, 10, 12),
            comm(10, 12, "fwd-nic"),
            fork(300, 10, 11),
            comm(10, 11, "fwd-worker-0"),
            fork(400, 10, 13),
            comm(10, 13, "fwd-worker-1"),
            // Attached while running: named, never forked in the recording.
            comm(20, 21, "fwd-worker-0"),
            // Another program's thread.
            fork(100, 30, 31),
            comm(30, 31, "worker"),
        ];
        let got = forwarding_starts(&tasks);
        assert_eq!(got, HashMap::from([(10, 300)]));
    }

    /// A thread named with a terminal's escape sequence is printed escaped.
    #[test]
    fn thread_names_are_printable() {
        let tasks = vec![TaskEvent::Comm { time: 0, pid: 1, tid: 2, comm: "b\u{1b}]0;pwn\u{7}".into(), exec: false }];
        assert_eq!(thread_names(&tasks)[&2], "b\\u{1b}]0;pwn\\u{7}");
    }

    /// Samples of the forwarder's process before its start are marked, its later samples
    /// and other processes' samples are not.
    #[test]
    fn start_up_samples_are_the_forwarders_before_its_start() {
        let s =
            |time, pid| Sample { time, pid, tid: pid, cpu: 0, ip: 0x10, period: 1, kernel: false, callchain: vec![] };
        let df =
            collector::recording::samples_frame(&[s(299, 10), s(300, 10), s(301, 10), s(5, 20), s(299, 11)]).unwrap();
        let marked = mark_startup(df, &HashMap::from([(10, 300)])).unwrap();
        let w: Vec<Option<u32>> = marked.column("window").unwrap().u32().unwrap().iter().collect();
        assert_eq!(w, vec![Some(1), Some(0), Some(0), Some(0), Some(0)]);
    }

    /// The startup row has no per-packet figure; the others divide by the packets.
    #[test]
    fn the_startup_row_has_no_per_packet_cost() {
        let rows = stage_rows(
            HashMap::from([(STARTUP.to_string(), (4, 4000)), ("lookup".to_string(), (6, 6000))]),
            10,
            Some(100),
        );
        let got: Vec<(&str, Option<f64>, f64)> =
            rows.iter().map(|r| (r.stage.as_str(), r.per_packet, r.percent)).collect();
        assert_eq!(got, vec![("lookup", Some(60.0), 60.0), (STARTUP, None, 40.0)]);
    }
}
