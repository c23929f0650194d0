//! The forwarder's stage clocks read back: per clocked stage, VPP's `show runtime` columns
//! (calls, packets, clocks, clocks per packet, packets per call) and the cost per forwarded
//! packet in ns, with the share each forwarding stage takes of the forwarding work. The
//! synthetic device (`nic`) and waiting (`idle`) are reported apart, never in the
//! forwarding totals, and decide whether a figure is the forwarder's or the device's: a
//! worker that waits more than [`DEVICE_BOUND_IDLE`] of its time was limited by what
//! arrived, not by its own work.

use crate::counters::{is_forwarding_stage, Ctr, STAGE_CLOCKS};
use serde::Serialize;

/// Idle share of a worker's time above which its rate is the device's, not its own.
pub const DEVICE_BOUND_IDLE: f64 = 0.10;

/// Share of the clocked time spent waiting to run (the run queue) above which the
/// clocks say too little of the forwarder's own work: no capacity figure is given, the
/// per-stage figures are marked unsure, and the cross-check does not judge stages by them.
pub const UNSURE_RUNQ_SHARE: f64 = 0.5;

/// One clocked stage over an interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageClockRow {
    /// The clock (`driver_rx`, `ip`, ...).
    pub name: String,
    /// The analyzer's stage for it (`driver` for both driver clocks).
    pub stage: String,
    pub calls: u64,
    pub packets: u64,
    /// TSC cycles.
    pub clocks: u64,
    /// Clocks per packet the stage handled (VPP's clocks/vector); none without packets.
    pub clocks_per_packet: Option<f64>,
    /// Packets per call (VPP's vectors/call).
    pub packets_per_call: Option<f64>,
    /// ns per forwarded packet (clocks over the TSC rate, over tx packets).
    pub ns_per_forwarded: Option<f64>,
    /// Percent of the forwarding stages' clocks (none for nic and idle).
    pub share: Option<f64>,
}

/// Stage clocks over an interval, and what they say about the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockReport {
    /// TSC ticks per second used to turn clocks into ns.
    pub tsc_hz: u64,
    /// Forwarded packets in the interval.
    pub forwarded: u64,
    pub rows: Vec<StageClockRow>,
    /// ns per forwarded packet of the forwarding stages together.
    pub forwarding_ns_per_packet: Option<f64>,
    /// The rate the forwarding stages alone would allow (1 / forwarding ns per packet).
    pub capacity_mpps: Option<f64>,
    /// Idle clocks over all clocks.
    pub idle_share: f64,
    /// Device clocks (inline synthetic NIC) over all clocks.
    pub device_share: f64,
    /// The worker waited more than [`DEVICE_BOUND_IDLE`] of its time.
    pub device_bound: bool,
    /// Share of the clocked time the worker was runnable but not running (the kernel's
    /// run-queue wait from /proc/PID/task/TID/schedstat): the TSC runs on while another
    /// thread has the CPU. The per-packet ns figures are scaled by 1 - this share (the
    /// wait falls on stages in proportion to their time); clocks and shares are raw.
    /// None when the worker did not read its schedstat.
    pub runq_share: Option<f64>,
    /// Share of the polls that were clocked (chosen at random, one in `--clock-one-in`);
    /// clocks are scaled up from them. None when every poll was (or the counters predate
    /// sampling).
    pub clocked_share: Option<f64>,
}

impl ClockReport {
    /// From counter deltas over the interval (`delta(ctr)`), the TSC rate, and the packets
    /// forwarded. None when the clocks were off (no clocked time at all).
    pub fn new(delta: impl Fn(Ctr) -> u64, tsc_hz: u64, forwarded: u64) -> Option<ClockReport> {
        // Polls are clocked one in N at random: the clocks measured, scaled by polls over
        // polls clocked, estimate every poll's. Garbage collection (rare, long) is timed in
        // every poll and is not scaled.
        let (polls, clocked) = (delta(Ctr::Polls), delta(Ctr::ClockedPolls));
        let scale = if polls > 0 && clocked > 0 { polls as f64 / clocked as f64 } else { 1.0 };
        let measured = delta;
        let delta = |c: Ctr| match c {
            Ctr::ClkGc => measured(Ctr::ClkGc),
            c if STAGE_CLOCKS.iter().any(|s| s.clocks == c) => (measured(c) as f64 * scale).round() as u64,
            c => measured(c),
        };
        let all: u64 = STAGE_CLOCKS.iter().map(|c| delta(c.clocks)).sum();
        if all == 0 {
            return None;
        }
        let raw_ns = 1e9 / tsc_hz.max(1) as f64;
        let runq_share = (delta(Ctr::SchedRunNs) > 0)
            .then(|| (delta(Ctr::SchedWaitNs) as f64 / (all as f64 * raw_ns)).clamp(0.0, 0.99));
        let ns = raw_ns * (1.0 - runq_share.unwrap_or(0.0));
        let forwarding: u64 =
            STAGE_CLOCKS.iter().filter(|c| is_forwarding_stage(c.stage)).map(|c| delta(c.clocks)).sum();
        let per = |n: u64, d: u64| (d > 0).then(|| n as f64 / d as f64);
        let rows = STAGE_CLOCKS
            .iter()
            .map(|c| {
                let (calls, packets, clocks) = (delta(c.calls), delta(c.packets), delta(c.clocks));
                StageClockRow {
                    name: c.name.to_string(),
                    stage: c.stage.to_string(),
                    calls,
                    packets,
                    clocks,
                    clocks_per_packet: per(clocks, packets),
                    packets_per_call: per(packets, calls),
                    ns_per_forwarded: per(clocks, forwarded).map(|c| c * ns),
                    share: (is_forwarding_stage(c.stage) && forwarding > 0)
                        .then(|| 100.0 * clocks as f64 / forwarding as f64),
                }
            })
            .collect();
        let of = |stage: &str| {
            STAGE_CLOCKS.iter().filter(|c| c.stage == stage).map(|c| delta(c.clocks)).sum::<u64>() as f64 / all as f64
        };
        // No clocked poll forwarded anything (a very short run): no figure, not 0 ns.
        let forwarding_ns_per_packet = per(forwarding, forwarded).filter(|_| forwarding > 0).map(|c| c * ns);
        let idle_share = of("idle");
        Some(ClockReport {
            tsc_hz,
            forwarded,
            rows,
            capacity_mpps: forwarding_ns_per_packet
                .filter(|v| *v > 0.0 && runq_share.is_none_or(|r| r <= UNSURE_RUNQ_SHARE))
                .map(|v| 1e3 / v),
            forwarding_ns_per_packet,
            idle_share,
            device_share: of("nic"),
            device_bound: idle_share > DEVICE_BOUND_IDLE,
            runq_share,
            clocked_share: (polls > 0 && clocked > 0).then(|| clocked as f64 / polls as f64),
        })
    }

    /// ns per forwarded packet by analyzer stage (driver rx and tx together), forwarding
    /// stages only.
    pub fn ns_by_stage(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for r in self.rows.iter().filter(|r| is_forwarding_stage(&r.stage)) {
            let v = r.ns_per_forwarded.unwrap_or(0.0);
            match out.iter_mut().find(|(s, _)| *s == r.stage) {
                Some(e) => e.1 += v,
                None => out.push((r.stage.clone(), v)),
            }
        }
        out
    }

    /// Percent of forwarding clocks by analyzer stage.
    pub fn share_by_stage(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for r in &self.rows {
            let Some(v) = r.share else { continue };
            match out.iter_mut().find(|(s, _)| *s == r.stage) {
                Some(e) => e.1 += v,
                None => out.push((r.stage.clone(), v)),
            }
        }
        out
    }

    /// How the clocks turned into ns, in words: the TSC rate's conversion and the
    /// run-queue correction.
    pub fn scale_text(&self) -> String {
        let sampled = match self.clocked_share {
            Some(c) if c < 0.999 => {
                format!("clocks from {:.1}% of the polls, chosen at random, scaled up; ", 100.0 * c)
            }
            _ => String::new(),
        };
        sampled
            + &match self.runq_share {
                Some(r) if r >= 0.0005 => format!(
                    "ns/packet exclude the {:.1}% of the clocked time the worker waited to run (schedstat){}",
                    100.0 * r,
                    if r > 0.05 { ": the machine was busy, these figures are less sure" } else { "" }
                ),
                Some(_) => "the worker did not wait to run (schedstat)".to_string(),
                None => "run-queue wait not measured: ns/packet include any time the worker was preempted".to_string(),
            }
    }

    /// Whether the worker waited to run more than [`UNSURE_RUNQ_SHARE`] of the clocked
    /// time: the figures are then mostly the machine's, not the forwarder's.
    pub fn unsure(&self) -> bool {
        self.runq_share.is_some_and(|r| r > UNSURE_RUNQ_SHARE)
    }

    /// What the forwarding stages alone would allow, in words: `forwarding stages X
    /// ns/packet = Y Mpps on its own`, or, on a machine too busy to say, why no figure.
    pub fn capacity_text(&self) -> String {
        match (self.forwarding_ns_per_packet, self.capacity_mpps) {
            (Some(ns), Some(mpps)) => format!("forwarding stages {ns:.1} ns/packet = {mpps:.2} Mpps on its own"),
            _ if self.unsure() => format!(
                "no capacity figure: the worker waited to run {:.0}% of the clocked time (schedstat), more than \
                 {:.0}%, so the clocks measured the machine more than the forwarder; the per-stage figures are unsure",
                100.0 * self.runq_share.unwrap_or(0.0),
                100.0 * UNSURE_RUNQ_SHARE
            ),
            _ if self.forwarded == 0 => "no capacity figure: no packet was forwarded".to_string(),
            _ => format!(
                "no capacity figure: {} packets were forwarded, but no clocked poll timed forwarding work",
                self.forwarded
            ),
        }
    }

    /// Whether the worker was limited by the device or by its own work, in words.
    pub fn bound_text(&self) -> String {
        if self.device_bound {
            format!(
                "device-bound: the workers waited for packets {:.0}% of their time, so the rate is what the device \
                 delivered, not the forwarder's capacity",
                100.0 * self.idle_share
            )
        } else {
            format!("worker-bound: the workers waited {:.0}% of their time", 100.0 * self.idle_share)
        }
    }

    /// VPP-style table, one line per clocked stage, device and idle last and apart; on a
    /// machine too busy to trust it ([`ClockReport::unsure`]) a first line says so.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        if self.unsure() {
            let _ = writeln!(
                s,
                "  UNSURE: the worker waited to run {:.0}% of the clocked time: ns/fwd pkt below are mostly the \
                 machine's, not the forwarder's",
                100.0 * self.runq_share.unwrap_or(0.0)
            );
        }
        s += &format!(
            "  {:<10} {:>12} {:>12} {:>14} {:>10} {:>9} {:>11} {:>7}\n",
            "stage", "calls", "packets", "clocks", "clk/pkt", "pkt/call", "ns/fwd pkt", "share"
        );
        let opt = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 && !is_forwarding_stage(&r.stage) && is_forwarding_stage(&self.rows[i - 1].stage) {
                let _ = writeln!(
                    s,
                    "  {:<10} {:>12} {:>12} {:>14} {:>10} {:>9} {:>11} {:>7}",
                    "forwarding",
                    "",
                    "",
                    "",
                    "",
                    "",
                    opt(self.forwarding_ns_per_packet, 1),
                    if self.forwarding_ns_per_packet.is_some() { "100%" } else { "-" }
                );
            }
            let _ = writeln!(
                s,
                "  {:<10} {:>12} {:>12} {:>14} {:>10} {:>9} {:>11} {:>7}",
                r.name,
                r.calls,
                r.packets,
                r.clocks,
                opt(r.clocks_per_packet, 1),
                opt(r.packets_per_call, 1),
                opt(r.ns_per_forwarded, 1),
                r.share.map_or("apart".to_string(), |v| format!("{v:.1}%"))
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A hand-driven run: 10 bursts of 32 packets and 5 empty polls, clocks at 1 GHz (1
    /// tick = 1 ns), 300 packets forwarded (20 dropped in ip).
    #[test]
    fn clock_arithmetic_by_hand() {
        let d: HashMap<Ctr, u64> = HashMap::from([
            (Ctr::CallsDriverRx, 10),
            (Ctr::PktsDriverRx, 320),
            (Ctr::ClkDriverRx, 6_400), // 20 clocks per packet
            (Ctr::CallsIp, 10),
            (Ctr::PktsIp, 320),
            (Ctr::ClkIp, 3_200), // 10 per packet
            (Ctr::CallsLookup, 10),
            (Ctr::PktsLookup, 300),
            (Ctr::ClkLookup, 15_000), // 50 per packet
            (Ctr::CallsDriverTx, 10),
            (Ctr::PktsDriverTx, 300),
            (Ctr::ClkDriverTx, 5_400),
            (Ctr::CallsIdle, 5),
            (Ctr::ClkIdle, 3_000),
            (Ctr::CallsNic, 15),
            (Ctr::PktsNic, 320),
            (Ctr::ClkNic, 7_000),
        ]);
        let r = ClockReport::new(|c| d.get(&c).copied().unwrap_or(0), 1_000_000_000, 300).unwrap();
        let row = |n: &str| r.rows.iter().find(|x| x.name == n).unwrap();
        assert_eq!(row("ip").clocks_per_packet, Some(10.0));
        assert_eq!(row("ip").packets_per_call, Some(32.0));
        assert_eq!(row("lookup").clocks_per_packet, Some(50.0));
        assert_eq!(row("lookup").ns_per_forwarded, Some(50.0));
        assert_eq!(row("driver_rx").ns_per_forwarded, Some(6_400.0 / 300.0));
        // Forwarding: 6400 + 3200 + 15000 + 5400 = 30000 clocks = 100 ns per forwarded packet.
        assert_eq!(r.forwarding_ns_per_packet, Some(100.0));
        assert_eq!(r.capacity_mpps, Some(10.0));
        assert_eq!(row("lookup").share, Some(50.0));
        assert_eq!(row("idle").share, None, "idle is apart");
        assert_eq!(row("idle").packets_per_call, Some(0.0));
        // All clocks: 30000 + 3000 idle + 7000 nic = 40000.
        assert_eq!(r.idle_share, 3_000.0 / 40_000.0);
        assert_eq!(r.device_share, 7_000.0 / 40_000.0);
        assert!(!r.device_bound, "7.5% idle is under the threshold");
        let by = r.ns_by_stage();
        let driver = by.iter().find(|(s, _)| s == "driver").unwrap().1;
        assert!((driver - 11_800.0 / 300.0).abs() < 1e-9, "rx 21.33 + tx 18 ns: {driver}");
        assert!(r.table().contains("forwarding"));
        // Clocks off: nothing.
        assert!(ClockReport::new(|_| 0, 1_000_000_000, 300).is_none());
        // Waiting a third of the time: the device's rate.
        let waited =
            ClockReport::new(|c| if c == Ctr::ClkIdle { 50 } else { d.get(&c).copied().unwrap_or(0) / 300 }, 1, 1)
                .unwrap();
        assert!(waited.device_bound && waited.bound_text().starts_with("device-bound"));
        // The worker waited to run for 4000 of the 40000 clocked ns (10%): ns/packet are
        // scaled by 0.9, clocks and shares are not.
        let busy = ClockReport::new(
            |c| match c {
                Ctr::SchedRunNs => 36_000,
                Ctr::SchedWaitNs => 4_000,
                _ => d.get(&c).copied().unwrap_or(0),
            },
            1_000_000_000,
            300,
        )
        .unwrap();
        assert_eq!(busy.runq_share, Some(0.1));
        let lookup = busy.rows.iter().find(|x| x.name == "lookup").unwrap();
        assert!((lookup.ns_per_forwarded.unwrap() - 45.0).abs() < 1e-9);
        assert_eq!(lookup.share, Some(50.0));
        assert_eq!(lookup.clocks_per_packet, Some(50.0));
        assert!(busy.scale_text().contains("10.0% of the clocked time") && busy.scale_text().contains("busy"));
        assert!(!busy.unsure() && busy.capacity_text().contains("Mpps on its own"));
        assert_eq!(r.runq_share, None);
        // Waiting to run 24000 of the 40000 clocked ns (60%, over half): no capacity figure,
        // the reason instead, and the table marked.
        let swamped = ClockReport::new(
            |c| match c {
                Ctr::SchedRunNs => 16_000,
                Ctr::SchedWaitNs => 24_000,
                _ => d.get(&c).copied().unwrap_or(0),
            },
            1_000_000_000,
            300,
        )
        .unwrap();
        assert_eq!(swamped.runq_share, Some(0.6));
        assert!(swamped.unsure());
        assert_eq!(swamped.capacity_mpps, None);
        assert!(swamped.forwarding_ns_per_packet.is_some(), "the raw figure stays in the data");
        let text = swamped.capacity_text();
        assert!(text.starts_with("no capacity figure") && text.contains("60%") && !text.contains("Mpps"), "{text}");
        assert!(swamped.table().starts_with("  UNSURE: the worker waited to run 60%"), "{}", swamped.table());
        assert!(!busy.table().contains("UNSURE"));
        // A very short run: packets forwarded, but only idle polls were clocked. No
        // forwarding figure (not 0.0 ns/packet = 100%) and the reason, not "no packet".
        let idle_only = ClockReport::new(
            |c| match c {
                Ctr::CallsIdle => 1024,
                Ctr::ClkIdle => 4_082_870,
                _ => 0,
            },
            2_445_432_000,
            96,
        )
        .unwrap();
        assert_eq!(idle_only.forwarding_ns_per_packet, None);
        assert_eq!(idle_only.capacity_mpps, None);
        let text = idle_only.capacity_text();
        assert!(text.contains("96 packets were forwarded, but no clocked poll"), "{text}");
        let line = idle_only.table().lines().find(|l| l.trim_start().starts_with("forwarding")).map(str::to_string);
        let line = line.unwrap_or_default();
        assert!(line.split_whitespace().skip(1).all(|f| f == "-"), "{line}");
        // One poll in 8 clocked (80 polls, 10 clocked): every
        // clock is scaled by 8, so shares and per-packet figures of the clocked polls hold.
        let sampled = ClockReport::new(
            |c| match c {
                Ctr::Polls => 80,
                Ctr::ClockedPolls => 10,
                _ => d.get(&c).copied().unwrap_or(0),
            },
            1_000_000_000,
            300 * 8,
        )
        .unwrap();
        let lookup = sampled.rows.iter().find(|x| x.name == "lookup").unwrap();
        assert_eq!(lookup.clocks, 120_000);
        assert_eq!(lookup.share, Some(50.0));
        assert_eq!(sampled.clocked_share, Some(0.125));
        assert!(sampled.scale_text().starts_with("clocks from 12.5% of the polls"));
    }
}
