//! Two instruments side by side: the sampled stage table of a forwarder's worker threads
//! against the forwarder's own per-burst stage clocks (from the recording's counters).
//! Per stage: sampled and clocked cost per forwarded packet, each one's share of the
//! forwarding work, and the difference in points of share; a stage more than
//! [`MAX_POINTS_APART`] apart is flagged, so a user can tell which figures to trust. The
//! synthetic device and waiting are compared apart from the forwarding stages. Where the
//! recording's host and configuration are ones the instruments are known to part on
//! ([`crate::agreement`]), the check carries that note.

use crate::agreement::{Partings, Setting};
use crate::rules::{OTHER, SHARED};
use crate::Result;
use collector::recording::Recording;
use fwd_abi::clocks::ClockReport;
use fwd_abi::counters::is_forwarding_stage;
use fwd_abi::{Ctr, COUNTER_NAMES};
use serde::Serialize;
use std::collections::HashMap;

/// Points of share two instruments may differ by before a stage is flagged.
pub const MAX_POINTS_APART: f64 = 5.0;

/// One stage, both instruments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRow {
    pub stage: String,
    /// Sampled cost per forwarded packet (ns for clock events; none for other events).
    pub sampled_ns: Option<f64>,
    /// Clocked cost per forwarded packet, ns (none for `other`, which clocks cannot see).
    pub clock_ns: Option<f64>,
    /// Percent of the workers' forwarding samples (forwarding stages and `other`).
    pub sampled_share: f64,
    /// Percent of the forwarding clocks.
    pub clock_share: Option<f64>,
    /// sampled - clocked share, in points.
    pub points_apart: Option<f64>,
    /// More than [`MAX_POINTS_APART`] points apart.
    pub flagged: bool,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockCheck {
    /// The sampled event.
    pub event: String,
    pub tsc_hz: u64,
    /// Where the TSC rate came from.
    pub tsc_source: String,
    /// The clocks over the recording.
    pub clocks: ClockReport,
    /// Forwarding stages (and `other`), both instruments.
    pub rows: Vec<CheckRow>,
    /// Samples of the worker threads that fell in forwarding stages or `other`.
    pub worker_samples: u64,
    /// `other`'s share of the workers' samples, percent.
    pub other_share: f64,
    /// Where this host and configuration are known to part (from
    /// `rules/instrument-agreement.toml`), one note each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub known: Vec<String>,
}

impl ClockCheck {
    /// Whether every stage is within [`MAX_POINTS_APART`] (always, for clocks too unsure to
    /// judge by: [`ClockReport::unsure`]).
    pub fn agrees(&self) -> bool {
        !self.rows.iter().any(|r| r.flagged)
    }

    /// The comparison as text.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "# two instruments, worker threads only: samples of {} against the forwarder's per-burst stage clocks \
             (TSC {:.3} MHz, {})",
            self.event,
            self.tsc_hz as f64 / 1e6,
            self.tsc_source
        );
        let _ = writeln!(
            s,
            "{:<8} {:>14} {:>12} {:>10} {:>9} {:>8}",
            "stage", "sampled ns/pkt", "clock ns/pkt", "sampled %", "clock %", "points"
        );
        let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
        for r in &self.rows {
            let _ = writeln!(
                s,
                "{:<8} {:>14} {:>12} {:>9.1}% {:>9} {:>8}{}",
                r.stage,
                f(r.sampled_ns, 1),
                f(r.clock_ns, 1),
                r.sampled_share,
                r.clock_share.map_or("-".to_string(), |v| format!("{v:.1}%")),
                r.points_apart.map_or("-".to_string(), |v| format!("{v:+.1}")),
                if r.flagged { "  DISAGREE" } else { "" }
            );
        }
        let flagged: Vec<&str> = self.rows.iter().filter(|r| r.flagged).map(|r| r.stage.as_str()).collect();
        let _ = writeln!(
            s,
            "# {}; other {:.1}% of the workers' samples; {}; {}",
            if self.clocks.unsure() {
                format!(
                    "the stages are not judged: the worker waited to run {:.0}% of the clocked time, so the clocks \
                     are unsure",
                    100.0 * self.clocks.runq_share.unwrap_or(0.0)
                )
            } else if flagged.is_empty() {
                format!("the instruments agree: every stage within {MAX_POINTS_APART:.0} points")
            } else {
                format!(
                    "the instruments disagree on {} (more than {MAX_POINTS_APART:.0} points apart): trust neither \
                     figure for it",
                    flagged.join(", ")
                )
            },
            self.other_share,
            self.clocks.bound_text(),
            self.clocks.scale_text()
        );
        for k in &self.known {
            let _ = writeln!(s, "# {k}");
        }
        s
    }
}

/// Counter deltas (last row minus first) of a recording's forwarder rows, per (worker,
/// counter name).
pub(crate) fn worker_deltas(rec: &Recording) -> Result<HashMap<(i32, String), u64>> {
    worker_deltas_since(rec, 0)
}

/// [`worker_deltas`] over the rows stamped at `from_ns` (CLOCK_MONOTONIC) or later: a part
/// of a run (a phased experiment's last step).
pub fn worker_deltas_since(rec: &Recording, from_ns: u64) -> Result<HashMap<(i32, String), u64>> {
    let mut first: HashMap<(i32, String), u64> = HashMap::new();
    let mut last: HashMap<(i32, String), u64> = HashMap::new();
    for r in rec.counters()?.into_iter().filter(|r| r.is_forwarder() && r.time >= from_ns) {
        first.entry((r.worker, r.name.clone())).or_insert(r.value);
        last.insert((r.worker, r.name), r.value);
    }
    Ok(last
        .into_iter()
        .map(|(k, v)| {
            let d = v.saturating_sub(first.get(&k).copied().unwrap_or(0));
            (k, d)
        })
        .collect())
}

/// [`worker_deltas_since`] summed over workers, by counter name.
fn counter_deltas_since(rec: &Recording, from_ns: u64) -> Result<HashMap<String, u64>> {
    let mut out: HashMap<String, u64> = HashMap::new();
    for ((_, name), d) in worker_deltas_since(rec, from_ns)? {
        *out.entry(name).or_default() += d;
    }
    Ok(out)
}

/// The forwarder's stage clocks over a recording's counter rows from `from_ns` on (0: the
/// whole recording), converted with the TSC rate its run recorded; None when the clocks
/// were off, the rate is unknown or nothing was forwarded.
pub fn clock_report_since(rec: &Recording, from_ns: u64) -> Result<Option<ClockReport>> {
    let deltas = counter_deltas_since(rec, from_ns)?;
    let d = |c: Ctr| deltas.get(COUNTER_NAMES[c as usize]).copied().unwrap_or(0);
    let forwarded = d(Ctr::TxPackets);
    let tsc_hz = tsc_hz_of(rec);
    Ok(ClockReport::new(d, tsc_hz, forwarded).filter(|_| forwarded > 0 && tsc_hz > 0))
}

/// Why a recording has no stage-clock figures, when it has none; None for a recording
/// that has them, or that is not of the forwarder (its table says the kernel and imported
/// profiles are sampled only).
pub fn clocks_absent(rec: &Recording) -> Result<Option<String>> {
    if rec.meta.forwarder.is_none() {
        return Ok(None);
    }
    let deltas = counter_deltas_since(rec, 0)?;
    let d = |c: Ctr| deltas.get(COUNTER_NAMES[c as usize]).copied().unwrap_or(0);
    let (forwarded, tsc_hz) = (d(Ctr::TxPackets), tsc_hz_of(rec));
    let clocked: u64 = fwd_abi::counters::STAGE_CLOCKS.iter().map(|c| d(c.clocks)).sum();
    Ok(if clocked == 0 {
        Some("none in this recording (the forwarder ran with its stage clocks off: --no-stage-clock)".into())
    } else if tsc_hz == 0 {
        let raw = published(rec).tsc_hz_text();
        Some(format!(
            "the clocks ran, but the run recorded no TSC rate (tsc_hz {raw} in meta.json, expected 100 MHz to 100 \
             GHz in Hz), so their cycles cannot be turned into time"
        ))
    } else if forwarded == 0 {
        Some(
            "the clocks ran, but the counters read give no forwarded packets (tx_packets did not grow between the \
             first and last rows read: counters missing, or going backwards), so there is nothing to divide by"
                .into(),
        )
    } else {
        None
    })
}

/// The TSC rate a forwarder recording's run info gives (0: not recorded).
/// A rate outside 100 MHz to 100 GHz is no TSC rate (a damaged meta.json): 0.
fn tsc_hz_of(rec: &Recording) -> u64 {
    published(rec).tsc_hz().unwrap_or(0)
}

/// What the recorded forwarder published about itself (empty for other targets).
fn published(rec: &Recording) -> fwd_abi::Published {
    rec.meta.forwarder.as_ref().map(fwd_abi::Published::from_value).unwrap_or_default()
}

/// The comparison for a recording of the forwarder, given the sampled `event` and the
/// worker threads' stage totals (stage -> samples, period); None when the recording has no
/// stage clocks (clocks off, a kernel or other target) or no packets.
pub fn clock_check(rec: &Recording, event: &str, totals: &HashMap<String, (u64, u64)>) -> Result<Option<ClockCheck>> {
    let Some(clocks) = clock_report_since(rec, 0)? else {
        return Ok(None);
    };
    let published = published(rec);
    let tsc_source = published.info.tsc_source.clone().unwrap_or_else(|| "not recorded".into());
    let setting = Setting::of(&rec.meta.machine.cpu_model, clocks.tsc_hz, &published);
    let mut check = compare(clocks, event, tsc_source, totals);
    check.known = Partings::embedded().matching(&setting).into_iter().map(|p| p.note()).collect();
    Ok(Some(check))
}

/// The two instruments side by side, stage by stage: the clocks against the workers'
/// sampled totals (stage -> samples, period) of `event`.
pub fn compare(
    clocks: ClockReport,
    event: &str,
    tsc_source: String,
    totals: &HashMap<String, (u64, u64)>,
) -> ClockCheck {
    let (forwarded, tsc_hz) = (clocks.forwarded, clocks.tsc_hz);
    // Samples no stage took count in the workers' total: `other` and shared machinery.
    let in_scope = |st: &str| is_forwarding_stage(st) || st == OTHER || st == SHARED;
    let worker_samples: u64 = totals.iter().filter(|(s, _)| in_scope(s)).map(|(_, v)| v.0).sum();
    let ns_events = collector::events::is_clock(event);
    let clock_ns: HashMap<String, f64> = clocks.ns_by_stage().into_iter().collect();
    let clock_share: HashMap<String, f64> = clocks.share_by_stage().into_iter().collect();
    let mut stages: Vec<String> = totals.keys().filter(|s| in_scope(s)).cloned().collect();
    for s in clock_ns.keys() {
        if !stages.contains(s) {
            stages.push(s.clone());
        }
    }
    let rank = |s: &str| crate::rules::STAGE_ORDER.iter().position(|x| *x == s).unwrap_or(usize::MAX);
    stages.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
    let rows = stages
        .into_iter()
        .map(|stage| {
            let (n, period) = totals.get(&stage).copied().unwrap_or((0, 0));
            let sampled_share = if worker_samples == 0 { 0.0 } else { 100.0 * n as f64 / worker_samples as f64 };
            let cs = clock_share.get(&stage).copied();
            let apart = cs.map(|c| sampled_share - c);
            CheckRow {
                sampled_ns: ns_events.then(|| period as f64 / forwarded as f64),
                clock_ns: clock_ns.get(&stage).copied(),
                sampled_share,
                clock_share: cs,
                points_apart: apart,
                // Clocks the machine made unsure judge no stage.
                flagged: !clocks.unsure() && apart.is_some_and(|a| a.abs() > MAX_POINTS_APART),
                stage,
            }
        })
        .collect();
    let other = totals.get(OTHER).map_or(0, |v| v.0);
    ClockCheck {
        event: event.to_string(),
        tsc_hz,
        tsc_source,
        clocks,
        rows,
        worker_samples,
        other_share: if worker_samples == 0 { 0.0 } else { 100.0 * other as f64 / worker_samples as f64 },
        known: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clocks: lookup 3000 and ip 1000 of 4000 forwarding clocks (75% / 25%) at 1 GHz over
    /// 100 packets, with the given run-queue wait (ns) of 10000 clocked ns.
    fn clocks(wait: u64) -> ClockReport {
        let d = |c: Ctr| match c {
            Ctr::ClkLookup => 3_000,
            Ctr::ClkIp => 1_000,
            Ctr::ClkIdle => 6_000,
            Ctr::SchedRunNs => 10_000 - wait,
            Ctr::SchedWaitNs => wait,
            _ => 0,
        };
        ClockReport::new(d, 1_000_000_000, 100).unwrap()
    }

    /// Samples 50/50 against clocks 75/25: 25 points apart, flagged; on a machine where the
    /// worker waited to run 60% of the clocked time, judged not at all, and said so.
    #[test]
    fn unsure_clocks_judge_no_stage() {
        let totals = HashMap::from([("lookup".to_string(), (500, 500_000)), ("ip".to_string(), (500, 500_000))]);
        let sure = compare(clocks(1_000), "cpu-clock", "test".into(), &totals);
        let lookup = sure.rows.iter().find(|r| r.stage == "lookup").unwrap();
        assert_eq!((lookup.points_apart, lookup.flagged), (Some(-25.0), true));
        assert!(!sure.agrees() && sure.text().contains("disagree on lookup, ip"), "{}", sure.text());
        let unsure = compare(clocks(6_000), "cpu-clock", "test".into(), &totals);
        assert!(unsure.clocks.unsure());
        assert!(unsure.rows.iter().all(|r| !r.flagged) && unsure.agrees());
        assert!(unsure.text().contains("the stages are not judged: the worker waited to run 60%"), "{}", unsure.text());
        assert!(!unsure.text().contains("DISAGREE"));
    }
}
