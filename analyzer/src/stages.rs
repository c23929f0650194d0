//! The stage table of a recording: samples per stage (lookup, gc, slab, driver, ip, nic,
//! other, idle), their share, and the cost per forwarded packet (ns for clock events,
//! events such as cycles otherwise) from the recording's packet counts; plus the top
//! symbols no rule matched, so the rules can be fixed.

use crate::rules::{Rules, OTHER, STAGE_ORDER};
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
    /// nearest caller with a stage.
    pub charged: u64,
    /// Forwarded packets during the recording (forwarder targets).
    pub packets: Option<u64>,
    pub stages: Vec<StageRow>,
    /// One row per (symbol, DSO, charged stage).
    pub symbols: Vec<SymbolRow>,
    /// Symbols that matched no rule, most samples first.
    pub unmatched: Vec<(String, u64)>,
    /// Per-thread stage tables (recordings and perf.data), most samples first.
    pub workers: Vec<WorkerTable>,
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
fn packets_per_worker(rec: &Recording) -> Result<HashMap<i32, u64>> {
    let mut first: HashMap<i32, u64> = HashMap::new();
    let mut last: HashMap<i32, u64> = HashMap::new();
    for r in rec.forwarder_counter("tx_packets")? {
        first.entry(r.worker).or_insert(r.value);
        last.insert(r.worker, r.value);
    }
    Ok(last.iter().map(|(w, v)| (*w, v.saturating_sub(first.get(w).copied().unwrap_or(0)))).collect())
}

/// Thread names by tid from COMM records (the last name wins).
pub(crate) fn thread_names(tasks: &[collector::records::TaskEvent]) -> HashMap<u32, String> {
    let mut names = HashMap::new();
    for t in tasks {
        if let collector::records::TaskEvent::Comm { tid, comm, .. } = t {
            names.insert(*tid, comm.clone());
        }
    }
    names
}

/// Build the stage table of a recording with `rules`: samples are grouped in polars, each
/// distinct stack is symbolized once.
pub fn stage_table(rec: &Recording, rules: &Rules) -> Result<StageTable> {
    Ok(stage_table_reusing(rec, rules, None)?.0)
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
    let groups = crate::aggregate::group(rec.samples_df()?)?;
    let mut at = Attributor::new(sym, rules.clone());
    let names = thread_names(&rec.tasks()?);
    let per_worker = packets_per_worker(rec)?;
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
    for w in &mut t.workers {
        w.packets = fwd_abi::threads::worker_index(&w.thread)
            .and_then(|i| per_worker.get(&(i as i32)).copied())
            .filter(|&p| p > 0);
        for r in &mut w.stages {
            r.per_packet = w.packets.map(|p| r.period as f64 / p as f64);
        }
    }
    Ok((t, at.into_symbolizer()))
}

/// x86-64 kernel addresses live in the upper half.
pub(crate) fn is_kernel_address(a: u64) -> bool {
    a >= 0xffff_8000_0000_0000
}

/// One address attributed: its symbol and the stage it is charged to.
#[derive(Debug, Clone, PartialEq)]
pub struct Attributed {
    pub symbol: Symbol,
    /// The symbol's own stage, or its nearest staged caller's.
    pub stage: String,
    /// Whether `stage` came from a caller.
    pub charged: bool,
}

/// Symbolizes addresses and applies stage rules, each (pid, address) once. A sample whose
/// own symbol matches no rule is charged, when it has a callchain, to the nearest caller
/// that does (a shared helper such as memcpy or a lock counts toward the stage that called
/// it). Shared by the offline tables and the live view (`fwdscope top`).
pub struct Attributor {
    sym: Symbolizer,
    rules: Rules,
    cache: HashMap<(u32, u64, bool), (Symbol, String)>,
}

impl Attributor {
    pub fn new(sym: Symbolizer, rules: Rules) -> Attributor {
        Attributor { sym, rules, cache: HashMap::new() }
    }

    pub fn rules(&self) -> &Rules {
        &self.rules
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

    fn resolve(&mut self, pid: u32, ip: u64, kernel: bool) -> (Symbol, String) {
        let (sym, rules) = (&mut self.sym, &self.rules);
        self.cache
            .entry((pid, ip, kernel))
            .or_insert_with(|| {
                let s = sym.resolve_ip(pid, ip, kernel);
                let st = rules.stage_of(&s.name).to_string();
                (s, st)
            })
            .clone()
    }

    /// Attribute one sample (its IP and callchain, innermost first; perf's first callchain
    /// entry may repeat the IP).
    pub fn attribute(&mut self, pid: u32, ip: u64, kernel: bool, callchain: &[u64]) -> Attributed {
        let (symbol, own) = self.resolve(pid, ip, kernel);
        let mut stage = own;
        let mut charged = false;
        if stage == OTHER {
            let callers = callchain.iter().skip(usize::from(callchain.first() == Some(&ip)));
            for &ret in callers {
                // A return address points after the call: look up the call itself.
                let (_, st) = self.resolve(pid, ret.saturating_sub(1), is_kernel_address(ret));
                if st != OTHER {
                    stage = st;
                    charged = true;
                    break;
                }
            }
        }
        Attributed { symbol, stage, charged }
    }
}

/// Symbolize and attribute grouped samples.
fn attribute(groups: &[crate::aggregate::Group], at: &mut Attributor, names: &HashMap<u32, String>) -> Vec<Item> {
    let mut items = Vec::with_capacity(groups.len());
    for g in groups {
        let a = at.attribute(g.pid, g.ip, g.kernel, &g.callchain);
        let thread = names.get(&g.tid).cloned().unwrap_or_else(|| format!("tid {}", g.tid));
        items.push(Item {
            symbol: a.symbol.name,
            dso: a.symbol.dso,
            stage: a.stage,
            charged: a.charged,
            thread: Some(thread),
            samples: g.samples,
            period: g.period,
        });
    }
    items
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
    let items = p
        .rows
        .iter()
        .map(|r| Item {
            stage: rules.stage_of(&r.symbol).to_string(),
            symbol: r.symbol.clone(),
            dso: r.dso.clone(),
            charged: false,
            thread: None,
            samples: r.samples,
            period: r.samples,
        })
        .collect();
    build(head, items, rules)
}

struct Head {
    event: String,
    requested: String,
    fallback: Option<String>,
    unit: String,
    packets: Option<u64>,
}

/// Attributed samples of one symbol in one thread.
struct Item {
    symbol: String,
    dso: String,
    /// The stage charged (the symbol's own, or its nearest staged caller's).
    stage: String,
    /// Whether `stage` came from a caller.
    charged: bool,
    thread: Option<String>,
    samples: u64,
    period: u64,
}

fn stage_rows(by_stage: HashMap<String, (u64, u64)>, total: u64, packets: Option<u64>) -> Vec<StageRow> {
    let pct = |n: u64| if total == 0 { 0.0 } else { 100.0 * n as f64 / total as f64 };
    let mut stages: Vec<StageRow> = by_stage
        .into_iter()
        .map(|(stage, (n, period))| StageRow {
            percent: pct(n),
            per_packet: packets.map(|p| period as f64 / p as f64),
            stage,
            samples: n,
            period,
        })
        .collect();
    let rank = |s: &str| STAGE_ORDER.iter().position(|x| *x == s).unwrap_or(STAGE_ORDER.len());
    stages.sort_by(|a, b| rank(&a.stage).cmp(&rank(&b.stage)).then(a.stage.cmp(&b.stage)));
    stages
}

/// Aggregate attributed items into the table.
fn build(head: Head, items: Vec<Item>, rules: &Rules) -> StageTable {
    // Saturating sums: a text profile may claim any counts.
    let total: u64 = items.iter().fold(0u64, |a, i| a.saturating_add(i.samples));
    let pct = |n: u64| if total == 0 { 0.0 } else { 100.0 * n as f64 / total as f64 };
    let mut by_stage: HashMap<String, (u64, u64)> = HashMap::new();
    let mut by_symbol: HashMap<(String, String, String), (u64, u64)> = HashMap::new();
    let mut by_thread: HashMap<String, HashMap<String, (u64, u64)>> = HashMap::new();
    let mut charged: u64 = 0;
    for it in items {
        let add = |e: &mut (u64, u64)| {
            e.0 = e.0.saturating_add(it.samples);
            e.1 = e.1.saturating_add(it.period);
        };
        add(by_stage.entry(it.stage.clone()).or_default());
        if it.charged {
            charged = charged.saturating_add(it.samples);
        }
        if let Some(t) = &it.thread {
            add(by_thread.entry(t.clone()).or_default().entry(it.stage.clone()).or_default());
        }
        add(by_symbol.entry((it.symbol.clone(), it.dso.clone(), it.stage.clone())).or_default());
    }
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
    // Unmatched: symbols whose own name no rule matches, charged or not.
    let mut unmatched: Vec<(String, u64)> = Vec::new();
    for s in symbols.iter().filter(|s| rules.stage_of(&s.symbol) == OTHER) {
        match unmatched.iter_mut().find(|u| u.0 == s.symbol) {
            Some(u) => u.1 = u.1.saturating_add(s.samples),
            None => unmatched.push((s.symbol.clone(), s.samples)),
        }
    }
    unmatched.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    unmatched.truncate(10);
    let mut workers: Vec<WorkerTable> = by_thread
        .into_iter()
        .map(|(thread, st)| {
            let samples = st.values().fold(0u64, |a, v| a.saturating_add(v.0));
            WorkerTable { thread, samples, packets: None, stages: stage_rows(st, samples, None) }
        })
        .collect();
    workers.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.thread.cmp(&b.thread)));
    StageTable {
        event: head.event,
        requested: head.requested,
        fallback: head.fallback,
        unit: head.unit,
        samples: total,
        charged,
        packets: head.packets,
        stages: stage_rows(by_stage, total, head.packets),
        symbols,
        unmatched,
        workers,
    }
}

impl StageTable {
    /// The table as text: a header naming the event used, the stage table, then the top
    /// `top` symbols in perf report's columns.
    pub fn text(&self, top: usize) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# event: {} ({} samples){}",
            self.event,
            self.samples,
            self.fallback.as_ref().map_or(String::new(), |f| format!("; {f}"))
        );
        if let Some(p) = self.packets {
            let _ = writeln!(s, "# packets forwarded: {p}");
        }
        if self.charged > 0 {
            let _ = writeln!(
                s,
                "# {} samples in unmatched helpers charged to the nearest stage frame of their callchain",
                self.charged
            );
        }
        let per = format!("{}/packet", self.unit);
        let with_packets = self.packets.is_some();
        let _ = writeln!(
            s,
            "{:<8} {:>10} {:>8} {:>12}",
            "stage",
            "samples",
            "%",
            if with_packets { per.as_str() } else { "" }
        );
        for r in &self.stages {
            let pp = r.per_packet.filter(|_| with_packets).map_or(String::new(), |v| format!("{v:.1}"));
            let _ = writeln!(s, "{:<8} {:>10} {:>7.2}% {:>12}", r.stage, r.samples, r.percent, pp);
        }
        let _ = writeln!(s, "\n{:>10} {:>8}  {:<40} {:<8} dso", "samples", "%", "symbol", "stage");
        for r in self.symbols.iter().take(top) {
            let _ = writeln!(s, "{:>10} {:>7.2}%  {:<40} {:<8} {}", r.samples, r.percent, r.symbol, r.stage, r.dso);
        }
        if !self.unmatched.is_empty() {
            let list: Vec<String> = self.unmatched.iter().take(5).map(|(n, c)| format!("{n} ({c})")).collect();
            let _ = writeln!(s, "\n# top symbols in no rule (add rules with --stages FILE): {}", list.join(", "));
        }
        s
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
        let rank = |s: &str| STAGE_ORDER.iter().position(|x| *x == s).unwrap_or(STAGE_ORDER.len());
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

/// The stage table of a perf.data file; kernel addresses resolve through `kallsyms`.
pub fn perfdata_table(
    pd: &crate::perfdata::PerfData,
    kallsyms: Option<crate::symbolize::Kallsyms>,
    rules: &Rules,
) -> Result<StageTable> {
    let df = collector::recording::samples_frame(&pd.samples)
        .map_err(|e| crate::Error::Aggregate(format!("samples frame: {e}")))?;
    let groups = crate::aggregate::group(df)?;
    let mut at = Attributor::new(Symbolizer::new(pd.maps.clone(), kallsyms), rules.clone());
    let names = thread_names(&pd.tasks);
    let head = Head {
        event: pd.event.clone(),
        requested: pd.event.clone(),
        fallback: None,
        unit: period_unit(&pd.event),
        packets: None,
    };
    Ok(build(head, attribute(&groups, &mut at, &names), rules))
}
