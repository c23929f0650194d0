//! rtstat's columns between two snapshots of a segment: what `forward` prints each
//! interval and `top` shows in its rtstat panel (per-second rates of the route-cache
//! counters, the cache size, forwarded Mpps and drops).

use crate::counters::{drop_counters, Ctr};
use crate::segment::Snapshot;
use serde::Serialize;

/// One interval: rtstat columns as per-second rates (size is absolute), plus rates.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IntervalRow {
    /// Seconds since start at the end of the interval.
    pub t: f64,
    pub size: u64,
    pub in_hit: u64,
    pub in_tot: u64,
    pub in_mc: u64,
    pub in_no_rt: u64,
    pub in_bcast: u64,
    pub in_madst: u64,
    pub in_masrc: u64,
    pub out_hit: u64,
    pub out_tot: u64,
    pub out_mc: u64,
    pub gc_tot: u64,
    pub gc_ignored: u64,
    pub gc_goal_miss: u64,
    pub gc_ovrf: u64,
    pub rx_mpps: f64,
    pub tx_mpps: f64,
    /// Drops per second, all reasons.
    pub drops: u64,
}

fn total_drops(s: &Snapshot) -> u64 {
    drop_counters()
        .filter(|(_, n)| *n != "rx_missed")
        .map(|(i, _)| s.workers.iter().map(|w| w.get(i).copied().unwrap_or(0)).sum::<u64>())
        .sum()
}

impl IntervalRow {
    /// The row between two snapshots; `t` is seconds since start at `cur`.
    pub fn between(prev: &Snapshot, cur: &Snapshot, t: f64) -> IntervalRow {
        let dt = cur.at.duration_since(prev.at).as_secs_f64().max(1e-9);
        let rate = |c: Ctr| ((cur.total(c).saturating_sub(prev.total(c))) as f64 / dt).round() as u64;
        IntervalRow {
            t,
            size: cur.total(Ctr::RtEntries),
            in_hit: rate(Ctr::RtInHit),
            in_tot: rate(Ctr::RtInSlowTot),
            in_mc: rate(Ctr::RtInSlowMc),
            in_no_rt: rate(Ctr::RtInNoRoute),
            in_bcast: rate(Ctr::RtInBrd),
            in_madst: rate(Ctr::RtInMartianDst),
            in_masrc: rate(Ctr::RtInMartianSrc),
            out_hit: rate(Ctr::RtOutHit),
            out_tot: rate(Ctr::RtOutSlowTot),
            out_mc: rate(Ctr::RtOutSlowMc),
            gc_tot: rate(Ctr::RtGcTotal),
            gc_ignored: rate(Ctr::RtGcIgnored),
            gc_goal_miss: rate(Ctr::RtGcGoalMiss),
            gc_ovrf: rate(Ctr::RtGcDstOverflow),
            rx_mpps: cur.total(Ctr::RxPackets).saturating_sub(prev.total(Ctr::RxPackets)) as f64 / dt / 1e6,
            tx_mpps: cur.total(Ctr::TxPackets).saturating_sub(prev.total(Ctr::TxPackets)) as f64 / dt / 1e6,
            drops: ((total_drops(cur).saturating_sub(total_drops(prev))) as f64 / dt).round() as u64,
        }
    }

    /// The column header, as rtstat prints it, plus Mpps and drops.
    pub fn header() -> String {
        format!(
            "{:>6} {:>8} {:>8} {:>3} {:>5} {:>5} {:>5} {:>5} {:>8} {:>5} {:>3} {:>8} {:>8} {:>9} {:>6} {:>7} {:>9}",
            "size",
            "IN: hit",
            "tot",
            "mc",
            "no_rt",
            "bcast",
            "madst",
            "masrc",
            "OUT: hit",
            "tot",
            "mc",
            "GC: tot",
            "ignored",
            "goal_miss",
            "ovrf",
            "Mpps",
            "drops/s"
        )
    }

    pub fn line(&self) -> String {
        format!(
            "{:>6} {:>8} {:>8} {:>3} {:>5} {:>5} {:>5} {:>5} {:>8} {:>5} {:>3} {:>8} {:>8} {:>9} {:>6} {:>7.3} {:>9}",
            self.size,
            self.in_hit,
            self.in_tot,
            self.in_mc,
            self.in_no_rt,
            self.in_bcast,
            self.in_madst,
            self.in_masrc,
            self.out_hit,
            self.out_tot,
            self.out_mc,
            self.gc_tot,
            self.gc_ignored,
            self.gc_goal_miss,
            self.gc_ovrf,
            self.tx_mpps,
            self.drops
        )
    }
}
