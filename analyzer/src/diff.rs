//! `fwdscope diff A B [C ...]`: stage tables side by side, like `perf diff`: the first
//! input is the baseline; every other input gets its value, the delta from the baseline
//! and the ratio to it, per stage and per symbol.
//!
//! The compared figure is the cost per forwarded packet when every input has packet counts
//! in the same unit (ns or events per packet: what a prefetch or cache-mode change is
//! about); otherwise each stage's and symbol's share of samples in percent. Inputs with the
//! forwarder's stage clocks also compare those (ns per forwarded packet per stage), so
//! both instruments' view of a change is side by side.

use crate::stages::StageTable;
use serde::Serialize;

/// One compared line: a stage or a symbol, and its figure in each input (None: absent).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DiffRow {
    pub key: String,
    /// The symbol's stage (for symbol rows), as the baseline or first input having it says.
    pub stage: Option<String>,
    pub values: Vec<Option<f64>>,
}

impl DiffRow {
    /// `values[i] - values[0]` (absent counts as 0).
    pub fn delta(&self, i: usize) -> f64 {
        self.values[i].unwrap_or(0.0) - self.values[0].unwrap_or(0.0)
    }

    /// `values[i] / values[0]`, when the baseline is non-zero.
    pub fn ratio(&self, i: usize) -> Option<f64> {
        let b = self.values[0].unwrap_or(0.0);
        (b != 0.0).then(|| self.values[i].unwrap_or(0.0) / b)
    }
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// Input names, baseline first.
    pub names: Vec<String>,
    /// Events used by each input.
    pub events: Vec<String>,
    /// What each input is short of, said beside its name: an excerpt (part of a profile,
    /// the rest its `unlisted` row), a flat table (shared machinery it cannot charge).
    pub notes: Vec<Vec<String>>,
    /// What each input recorded (a forwarder recording's settings, length and rate).
    pub recorded: Vec<Option<String>>,
    /// For each input after the baseline, the forwarder settings that differ from the
    /// baseline's (`prefetch 0 -> 2`); empty when the same or unknown.
    pub differs: Vec<Vec<String>>,
    /// `ns/packet`, `<event>/packet` or `%`.
    pub metric: String,
    pub stages: Vec<DiffRow>,
    /// Stage clocks, ns per forwarded packet (inputs without clocks have none).
    pub clocks: Vec<DiffRow>,
    pub symbols: Vec<DiffRow>,
}

/// Compare `tables` (baseline first); symbols limited to the `top` with the largest figure
/// in any input.
pub fn diff(names: Vec<String>, tables: &[StageTable], top: usize) -> Diff {
    let per_packet = !tables.is_empty()
        && tables.iter().all(|t| t.packets.is_some_and(|p| p > 0))
        && tables.iter().all(|t| t.unit == tables[0].unit);
    let metric = if per_packet { format!("{}/packet", tables[0].unit) } else { "%".to_string() };
    let Rows { mut stages, mut clocks, mut symbols } = compared_rows(tables, per_packet);
    let rank = crate::rules::stage_rank;
    stages.sort_by(|a, b| rank(&a.key).cmp(&rank(&b.key)).then(a.key.cmp(&b.key)));
    clocks.sort_by(|a, b| rank(&a.key).cmp(&rank(&b.key)).then(a.key.cmp(&b.key)));
    let peak = |r: &DiffRow| r.values.iter().map(|v| v.unwrap_or(0.0)).fold(0.0, f64::max);
    symbols.sort_by(|a, b| peak(b).total_cmp(&peak(a)).then(a.key.cmp(&b.key)));
    symbols.truncate(top);
    let notes = tables.iter().map(|t| input_notes(t, per_packet)).collect();
    let recorded: Vec<Option<String>> = tables.iter().map(|t| t.recorded.clone()).collect();
    let differs = setting_changes(&recorded);
    Diff {
        names,
        events: tables.iter().map(|t| t.event.clone()).collect(),
        notes,
        recorded,
        differs,
        metric,
        stages,
        clocks,
        symbols,
    }
}

/// The compared lines before sorting: stages, stage clocks and symbols.
struct Rows {
    stages: Vec<DiffRow>,
    clocks: Vec<DiffRow>,
    symbols: Vec<DiffRow>,
}

/// The row of `key` in `rows`, added (with `stage`, no values for any of `n` inputs) if
/// it is not there yet.
fn row<'a>(rows: &'a mut Vec<DiffRow>, key: &str, stage: Option<&str>, n: usize) -> &'a mut DiffRow {
    let i = match rows.iter().position(|r| r.key == key) {
        Some(i) => i,
        None => {
            rows.push(DiffRow { key: key.to_string(), stage: stage.map(str::to_string), values: vec![None; n] });
            rows.len() - 1
        }
    };
    &mut rows[i]
}

/// Each input's figure per stage, stage clock and symbol: per packet when `per_packet`,
/// else the share in percent (start-up left out per packet).
fn compared_rows(tables: &[StageTable], per_packet: bool) -> Rows {
    let mut stages: Vec<DiffRow> = Vec::new();
    let mut symbols: Vec<DiffRow> = Vec::new();
    let mut clocks: Vec<DiffRow> = Vec::new();
    let n = tables.len();
    for (i, t) in tables.iter().enumerate() {
        let packets = t.packets.unwrap_or(0) as f64;
        let value = |period: u64, percent: f64| if per_packet { period as f64 / packets } else { percent };
        // Start-up is one-off work, not a cost per packet: no per-packet row (the notes
        // say how much was left out).
        let skip = |stage: &str| per_packet && stage == crate::rules::STARTUP;
        for s in t.stages.iter().filter(|s| !skip(&s.stage)) {
            let r = row(&mut stages, &s.stage, None, n);
            r.values[i] = Some(r.values[i].unwrap_or(0.0) + value(s.period, s.percent));
        }
        if let Some(c) = &t.clock_check {
            for (stage, ns) in c.clocks.ns_by_stage() {
                row(&mut clocks, &stage, None, n).values[i] = Some(ns);
            }
        }
        for s in t.symbols.iter().filter(|s| !skip(&s.stage)) {
            // Symbols charged to several stages add up to one line per symbol.
            let r = row(&mut symbols, &s.symbol, Some(&s.stage), n);
            r.values[i] = Some(r.values[i].unwrap_or(0.0) + value(s.period, s.percent));
        }
    }
    Rows { stages, clocks, symbols }
}

/// What input `t` is short of, said beside its name (an excerpt, start-up left out, no
/// callchains).
fn input_notes(t: &StageTable, per_packet: bool) -> Vec<String> {
    let share = |st: &str| t.stages.iter().find(|r| r.stage == st && r.samples > 0).map(|r| r.percent);
    let mut v = Vec::new();
    if let Some(u) = share(crate::rules::UNLISTED) {
        v.push(format!("an excerpt: its rows list {:.2}% of the profile, the rest is `unlisted`", 100.0 - u));
    }
    if let Some(r) = t.stages.iter().find(|r| r.stage == crate::rules::STARTUP && r.samples > 0) {
        if per_packet {
            v.push(format!(
                "{} samples of start-up (before the first worker started) left out of the per-packet figures",
                r.samples
            ));
        }
    }
    if share(crate::rules::SHARED).is_some() && !t.callchains {
        v.push("no callchains: locks, copies and the page allocator are `shared`".to_string());
    }
    v
}

/// `key=value` settings before the first `,` of a recorded line.
fn recorded_settings(r: &Option<String>) -> Vec<(String, String)> {
    r.as_deref()
        .and_then(|l| l.split([',', ';']).next())
        .map(|head| {
            head.split_whitespace()
                .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// For each input, the recorded settings that differ from the baseline's (`prefetch 0 -> 2`).
fn setting_changes(recorded: &[Option<String>]) -> Vec<Vec<String>> {
    let base = recorded.first().map(recorded_settings).unwrap_or_default();
    recorded
        .iter()
        .map(|r| {
            recorded_settings(r)
                .into_iter()
                .filter_map(|(k, v)| {
                    let b = base.iter().find(|(bk, _)| *bk == k)?;
                    (b.1 != v).then(|| format!("{k} {} -> {v}", b.1))
                })
                .collect()
        })
        .collect()
}

impl Diff {
    /// The comparison as text: per input `value`, then `delta` and `ratio` for non-baselines.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (i, (n, e)) in self.names.iter().zip(&self.events).enumerate() {
            let notes = self.notes.get(i).map_or(String::new(), |v| v.iter().map(|x| format!("; {x}")).collect());
            let _ = writeln!(s, "# [{i}] {n} (event: {e}{notes}){}", if i == 0 { " baseline" } else { "" });
            if let Some(Some(r)) = self.recorded.get(i) {
                let _ = writeln!(s, "#     recorded: {r}");
            }
            if let Some(d) = self.differs.get(i).filter(|d| !d.is_empty()) {
                let _ = writeln!(s, "#     differs from [0]: {}", d.join(", "));
            }
        }
        let _ = writeln!(s, "# figures: {}", self.metric);
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let section = |s: &mut String, title: &str, rows: &[DiffRow]| {
            let mut head = format!("\n{title:<40} {:>10}", "[0]");
            for i in 1..self.names.len() {
                head.push_str(&format!(" {:>10} {:>10} {:>7}", format!("[{i}]"), "delta", "ratio"));
            }
            let _ = writeln!(s, "{head}");
            for r in rows {
                let key = match &r.stage {
                    Some(st) => format!("{} ({st})", r.key),
                    None => r.key.clone(),
                };
                let key: String =
                    if key.chars().count() > 40 { key.chars().take(39).chain(['…']).collect() } else { key };
                let mut line = format!("{key:<40} {:>10}", fmt(r.values[0]));
                for i in 1..self.names.len() {
                    let ratio = r.ratio(i).map_or("-".to_string(), |x| format!("{x:.2}x"));
                    line.push_str(&format!(" {:>10} {:>+10.2} {:>7}", fmt(r.values[i]), r.delta(i), ratio));
                }
                let _ = writeln!(s, "{line}");
            }
        };
        section(&mut s, "stage", &self.stages);
        if !self.clocks.is_empty() {
            section(&mut s, "stage clock (TSC, ns/packet)", &self.clocks);
        }
        section(&mut s, "symbol (stage)", &self.symbols);
        s
    }

    /// One CSV row per (section, key, input): value, delta and ratio to the baseline.
    pub fn csv(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("section,key,stage,input,value,delta,ratio,metric\n");
        let q = crate::csv_field;
        for (section, rows) in [("stage", &self.stages), ("clock", &self.clocks), ("symbol", &self.symbols)] {
            for r in rows {
                for (i, name) in self.names.iter().enumerate() {
                    let _ = writeln!(
                        s,
                        "{section},{},{},{},{},{:.4},{},{}",
                        q(&r.key),
                        q(r.stage.as_deref().unwrap_or("")),
                        q(name),
                        r.values[i].map_or(String::new(), |v| format!("{v:.4}")),
                        r.delta(i),
                        r.ratio(i).map_or(String::new(), |v| format!("{v:.4}")),
                        q(if section == "clock" { "ns/packet (TSC)" } else { &self.metric })
                    );
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::{ProfileRow, TextProfile};
    use crate::rules::Rules;

    fn table(rows: &[(&str, u64)]) -> StageTable {
        let p = TextProfile {
            format: "opreport".into(),
            event: "CPU_CLK_UNHALTED".into(),
            rows: rows
                .iter()
                .map(|(s, n)| ProfileRow { symbol: s.to_string(), dso: "vmlinux".into(), samples: *n })
                .collect(),
            unlisted: None,
            notes: Vec::new(),
        };
        crate::stages::profile_table(&p, &Rules::builtin())
    }

    #[test]
    fn shared_means_no_callchains_only_when_there_were_none() {
        // memcpy is shared machinery: in no stage without a caller to charge.
        let flat = table(&[("fib_table_lookup", 60), ("memcpy", 40)]);
        let mut chained = flat.clone();
        chained.callchains = true;
        let d = diff(vec!["flat".into(), "chained".into()], &[flat, chained], 10);
        assert!(d.notes[0].iter().any(|n| n.starts_with("no callchains")), "{:?}", d.notes);
        assert!(d.notes[1].is_empty(), "a table with callchains was said to have none: {:?}", d.notes);
    }

    /// Per packet, start-up is left out (rows and symbols) and the notes say how much; in
    /// shares it stays a row as any other.
    #[test]
    fn start_up_is_no_per_packet_cost() {
        let mut a = table(&[("fib_table_lookup", 60)]);
        a.stages.push(crate::stages::StageRow {
            stage: crate::rules::STARTUP.into(),
            samples: 40,
            percent: 40.0,
            period: 40,
            per_packet: None,
        });
        a.symbols.push(crate::stages::SymbolRow {
            samples: 40,
            percent: 40.0,
            period: 40,
            symbol: "Builder::build".into(),
            stage: crate::rules::STARTUP.into(),
            dso: "fwdscope".into(),
        });
        let shares = diff(vec!["a".into(), "b".into()], &[a.clone(), a.clone()], 10);
        assert!(shares.stages.iter().any(|r| r.key == "startup" && r.values == vec![Some(40.0), Some(40.0)]));
        a.packets = Some(10);
        let d = diff(vec!["a".into(), "b".into()], &[a.clone(), a], 10);
        let keys: Vec<&str> = d.stages.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, vec!["lookup"]);
        assert!(d.symbols.iter().all(|r| r.key != "Builder::build"), "{:?}", d.symbols);
        assert!(d.notes[0].iter().any(|n| n.starts_with("40 samples of start-up")), "{:?}", d.notes);
    }

    #[test]
    fn the_header_says_what_each_input_recorded_and_what_differs() {
        let mut a = table(&[("fib_table_lookup", 60)]);
        a.recorded = Some("cache=nocache fib=dir24 prefetch=0, 1 worker(s); 2.00 s, 10 packets = 0.00 Mpps".into());
        let mut b = a.clone();
        b.recorded = Some("cache=nocache fib=dir24 prefetch=2, 1 worker(s); 2.00 s, 12 packets = 0.00 Mpps".into());
        let d = diff(vec!["a".into(), "b".into()], &[a, b], 10);
        assert_eq!(d.differs, vec![Vec::<String>::new(), vec!["prefetch 0 -> 2".to_string()]]);
        let text = d.text();
        assert!(text.contains("#     recorded: cache=nocache fib=dir24 prefetch=2"), "{text}");
        assert!(text.contains("#     differs from [0]: prefetch 0 -> 2"), "{text}");
    }

    #[test]
    fn shares_delta_and_ratio_by_hand() {
        // A: lookup 60 of 100, slab 40. B: lookup 30 of 100, slab 50, driver 20.
        let a = table(&[("fib_table_lookup", 60), ("kmem_cache_alloc", 40)]);
        let b = table(&[("fib_table_lookup", 30), ("kmem_cache_alloc", 50), ("e1000_clean_rx_irq", 20)]);
        let d = diff(vec!["a".into(), "b".into()], &[a, b], 10);
        assert_eq!(d.metric, "%");
        type Line<'a> = (&'a str, Vec<Option<f64>>, f64, Option<f64>);
        let got: Vec<Line> =
            d.stages.iter().map(|r| (r.key.as_str(), r.values.clone(), r.delta(1), r.ratio(1))).collect();
        assert_eq!(
            got,
            vec![
                ("lookup", vec![Some(60.0), Some(30.0)], -30.0, Some(0.5)),
                ("slab", vec![Some(40.0), Some(50.0)], 10.0, Some(1.25)),
                ("driver", vec![None, Some(20.0)], 20.0, None),
            ]
        );
        assert_eq!(d.symbols[0].key, "fib_table_lookup");
        assert_eq!(d.symbols[0].stage.as_deref(), Some("lookup"));
        let text = d.text();
        assert!(text.contains("# [0] a (event: CPU_CLK_UNHALTED) baseline"), "{text}");
        // An excerpt and a flat table say so beside their names.
        let p = TextProfile {
            format: "perf report excerpt".into(),
            event: "unknown".into(),
            rows: vec![
                ProfileRow { symbol: "fib_table_lookup".into(), dso: "[kernel]".into(), samples: 4000 },
                ProfileRow { symbol: "_raw_spin_lock".into(), dso: "[kernel]".into(), samples: 500 },
            ],
            unlisted: Some(5500),
            notes: Vec::new(),
        };
        let c = crate::stages::profile_table(&p, &Rules::builtin());
        let a = table(&[("fib_table_lookup", 60), ("kmem_cache_alloc", 40)]);
        let mixed = diff(vec!["a".into(), "c".into()], &[a, c], 10).text();
        assert!(
            mixed.contains("# [1] c (event: unknown; an excerpt: its rows list 45.00% of the profile, the rest is `unlisted`; no callchains: locks, copies and the page allocator are `shared`)"),
            "{mixed}"
        );
        assert!(
            text.lines().any(|l| l.starts_with("lookup ") && l.contains("-30.00") && l.contains("0.50x")),
            "{text}"
        );
    }
}
