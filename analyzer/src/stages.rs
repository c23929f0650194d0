//! The stage table of a recording: samples per stage (lookup, gc, slab, driver, ip, nic,
//! other, idle), their share, and the cost per forwarded packet (ns for clock events,
//! events such as cycles otherwise) from the recording's packet counts; plus the top
//! symbols no rule matched, so the rules can be fixed.

use crate::rules::{Rules, OTHER, STAGE_ORDER};
use crate::symbolize::Symbolizer;
use crate::Result;
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
    /// Forwarded packets during the recording (forwarder targets).
    pub packets: Option<u64>,
    pub stages: Vec<StageRow>,
    pub symbols: Vec<SymbolRow>,
    /// Symbols that matched no rule, most samples first.
    pub unmatched: Vec<(String, u64)>,
}

fn packets(rec: &Recording) -> Result<Option<u64>> {
    // tx_packets per worker: last value minus first value, summed.
    let mut first: HashMap<i32, u64> = HashMap::new();
    let mut last: HashMap<i32, u64> = HashMap::new();
    for r in rec.counters()? {
        if r.source == "forwarder" && r.name == "tx_packets" {
            first.entry(r.worker).or_insert(r.value);
            last.insert(r.worker, r.value);
        }
    }
    if last.is_empty() {
        return Ok(None);
    }
    Ok(Some(last.iter().map(|(w, v)| v.saturating_sub(first.get(w).copied().unwrap_or(0))).sum()))
}

/// Build the stage table of a recording with `rules`.
pub fn stage_table(rec: &Recording, rules: &Rules) -> Result<StageTable> {
    let samples = rec.samples()?;
    let mut sym = Symbolizer::for_recording(rec)?;
    let mut by_symbol: HashMap<(String, String), (u64, u64)> = HashMap::new();
    for s in &samples {
        let r = sym.resolve(s);
        let e = by_symbol.entry((r.name, r.dso)).or_default();
        e.0 += 1;
        e.1 += s.period;
    }
    let m = &rec.meta.sampling;
    let unit = if m.used == "cpu-clock" || m.used == "task-clock" { "ns".to_string() } else { m.used.clone() };
    let packets = packets(rec)?.filter(|&p| p > 0);
    let head =
        Head { event: m.used.clone(), requested: m.requested.clone(), fallback: m.fallback.clone(), unit, packets };
    Ok(build(head, by_symbol.into_iter().map(|((s, d), (n, p))| (s, d, n, p)).collect(), rules))
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
    build(head, p.rows.iter().map(|r| (r.symbol.clone(), r.dso.clone(), r.samples, r.samples)).collect(), rules)
}

struct Head {
    event: String,
    requested: String,
    fallback: Option<String>,
    unit: String,
    packets: Option<u64>,
}

/// Aggregate (symbol, dso, samples, period) items into the table.
fn build(head: Head, items: Vec<(String, String, u64, u64)>, rules: &Rules) -> StageTable {
    let total: u64 = items.iter().map(|i| i.2).sum();
    let pct = |n: u64| if total == 0 { 0.0 } else { 100.0 * n as f64 / total as f64 };
    let mut by_stage: HashMap<String, (u64, u64)> = HashMap::new();
    let mut symbols = Vec::with_capacity(items.len());
    for (symbol, dso, n, period) in items {
        let stage = rules.stage_of(&symbol).to_string();
        let e = by_stage.entry(stage.clone()).or_default();
        e.0 += n;
        e.1 += period;
        symbols.push(SymbolRow { samples: n, percent: pct(n), stage, symbol, dso });
    }
    let mut stages: Vec<StageRow> = by_stage
        .into_iter()
        .map(|(stage, (n, period))| StageRow {
            percent: pct(n),
            per_packet: head.packets.map(|p| period as f64 / p as f64),
            stage,
            samples: n,
            period,
        })
        .collect();
    let rank = |s: &str| STAGE_ORDER.iter().position(|x| *x == s).unwrap_or(STAGE_ORDER.len());
    stages.sort_by(|a, b| rank(&a.stage).cmp(&rank(&b.stage)).then(a.stage.cmp(&b.stage)));
    symbols.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.symbol.cmp(&b.symbol)));
    let unmatched =
        symbols.iter().filter(|s| s.stage == OTHER).take(10).map(|s| (s.symbol.clone(), s.samples)).collect();
    StageTable {
        event: head.event,
        requested: head.requested,
        fallback: head.fallback,
        unit: head.unit,
        samples: total,
        packets: head.packets,
        stages,
        symbols,
        unmatched,
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
            let _ = writeln!(s, "\n# top symbols in `other` (add rules with --stages FILE): {}", list.join(", "));
        }
        s
    }
}

/// The stage table of a perf.data file; kernel addresses resolve through `kallsyms`.
pub fn perfdata_table(
    pd: &crate::perfdata::PerfData,
    kallsyms: Option<crate::symbolize::Kallsyms>,
    rules: &Rules,
) -> StageTable {
    let mut sym = Symbolizer::new(pd.maps.clone(), kallsyms);
    let mut by_symbol: HashMap<(String, String), (u64, u64)> = HashMap::new();
    for s in &pd.samples {
        let r = sym.resolve(s);
        let e = by_symbol.entry((r.name, r.dso)).or_default();
        e.0 += 1;
        e.1 += s.period;
    }
    let unit = if pd.event == "cpu-clock" || pd.event == "task-clock" { "ns".to_string() } else { pd.event.clone() };
    let head = Head { event: pd.event.clone(), requested: pd.event.clone(), fallback: None, unit, packets: None };
    build(head, by_symbol.into_iter().map(|((s, d), (n, p))| (s, d, n, p)).collect(), rules)
}
