//! What `forward` prints: rtstat-style interval lines (the columns of `rtstat -i 1`, as per
//! second rates) with Mpps and drops, and the end-of-run summary; both also as JSON.

use crate::config::Config;
use crate::run::RunInfo;
use crate::stats::{drop_counters, Ctr, Snapshot, STAGE_CLOCKS};
use serde::Serialize;
use std::collections::BTreeMap;

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
    drop_counters().filter(|(_, n)| *n != "rx_missed").map(|(i, _)| s.workers.iter().map(|w| w[i]).sum::<u64>()).sum()
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
            rx_mpps: (cur.total(Ctr::RxPackets) - prev.total(Ctr::RxPackets)) as f64 / dt / 1e6,
            tx_mpps: (cur.total(Ctr::TxPackets) - prev.total(Ctr::TxPackets)) as f64 / dt / 1e6,
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

/// Per-worker figures of a run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerSummary {
    pub worker: usize,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub mpps: f64,
}

/// The end-of-run summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub elapsed_s: f64,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub dropped: u64,
    /// Frames the device dropped for lack of a posted buffer (only with --rate).
    pub rx_missed: u64,
    pub drops: BTreeMap<String, u64>,
    pub workers: Vec<WorkerSummary>,
    pub total_mpps: f64,
    /// ns per forwarded packet per stage, when stage clocks were on.
    pub stage_ns_per_packet: Option<BTreeMap<String, f64>>,
    pub rtstat: BTreeMap<String, u64>,
    pub slab: BTreeMap<String, u64>,
    pub cache: String,
    pub fib: String,
    pub prefetch: u64,
    pub info: RunInfo,
}

impl Summary {
    /// Summarize a run from its first and last snapshots.
    pub fn new(first: &Snapshot, last: &Snapshot, cfg: &Config, info: &RunInfo) -> Summary {
        let dt = last.at.duration_since(first.at).as_secs_f64().max(1e-9);
        let d = |c: Ctr| last.total(c) - first.total(c);
        let mut drops = BTreeMap::new();
        for (i, name) in drop_counters() {
            let v: u64 =
                last.workers.iter().map(|w| w[i]).sum::<u64>() - first.workers.iter().map(|w| w[i]).sum::<u64>();
            if v > 0 && name != "rx_missed" {
                drops.insert(name.trim_start_matches("drop_").to_string(), v);
            }
        }
        let workers = (0..last.workers.len())
            .map(|w| {
                let tx = last.get(w, Ctr::TxPackets) - first.get(w, Ctr::TxPackets);
                WorkerSummary {
                    worker: w,
                    rx_packets: last.get(w, Ctr::RxPackets) - first.get(w, Ctr::RxPackets),
                    tx_packets: tx,
                    mpps: tx as f64 / dt / 1e6,
                }
            })
            .collect();
        let tx = d(Ctr::TxPackets);
        let clocks: u64 = STAGE_CLOCKS.iter().map(|(c, _)| d(*c)).sum();
        let stage_ns_per_packet = (clocks > 0 && tx > 0).then(|| {
            let ns_per_tick = 1e9 / info.tsc_hz.max(1) as f64;
            STAGE_CLOCKS.iter().map(|(c, name)| (name.to_string(), d(*c) as f64 * ns_per_tick / tx as f64)).collect()
        });
        let named = |list: &[(Ctr, &str)]| {
            list.iter()
                .map(|(c, n)| (n.to_string(), if *c == Ctr::RtEntries { last.total(*c) } else { d(*c) }))
                .collect()
        };
        Summary {
            elapsed_s: dt,
            rx_packets: d(Ctr::RxPackets),
            tx_packets: tx,
            dropped: drops.values().sum(),
            rx_missed: d(Ctr::RxMissed),
            drops,
            workers,
            total_mpps: tx as f64 / dt / 1e6,
            stage_ns_per_packet,
            rtstat: named(&[
                (Ctr::RtEntries, "entries"),
                (Ctr::RtInHit, "in_hit"),
                (Ctr::RtInSlowTot, "in_slow_tot"),
                (Ctr::RtInSlowMc, "in_slow_mc"),
                (Ctr::RtInNoRoute, "in_no_route"),
                (Ctr::RtInBrd, "in_brd"),
                (Ctr::RtInMartianDst, "in_martian_dst"),
                (Ctr::RtInMartianSrc, "in_martian_src"),
                (Ctr::RtGcTotal, "gc_total"),
                (Ctr::RtGcIgnored, "gc_ignored"),
                (Ctr::RtGcGoalMiss, "gc_goal_miss"),
                (Ctr::RtGcDstOverflow, "gc_dst_overflow"),
                (Ctr::RtInHlistSearch, "in_hlist_search"),
                (Ctr::RtFlushes, "flushes"),
                (Ctr::RtExpired, "expired"),
            ]),
            slab: named(&[
                (Ctr::SlabBufAlloc, "pktbuf_alloc"),
                (Ctr::SlabBufFree, "pktbuf_free"),
                (Ctr::SlabBufAllocFail, "pktbuf_alloc_fail"),
                (Ctr::SlabDstAlloc, "dst_alloc"),
                (Ctr::SlabDstFree, "dst_free"),
                (Ctr::SlabDstAllocFail, "dst_alloc_fail"),
                (Ctr::SlabDepotGet, "depot_get"),
                (Ctr::SlabDepotPut, "depot_put"),
            ]),
            cache: crate::config::CacheMode::from_code(last.get(0, Ctr::CacheMode) as u32)
                .unwrap_or(cfg.cache)
                .to_string(),
            fib: cfg.fib.to_string(),
            prefetch: last.get(0, Ctr::PrefetchDepth),
            info: info.clone(),
        }
    }

    /// The human-readable summary.
    pub fn text(&self) -> String {
        let mut s = String::new();
        use std::fmt::Write;
        let _ = writeln!(
            s,
            "summary: {:.2} s, {} worker(s), cache {}, fib {}, prefetch {}, {} routes ({}), device {}",
            self.elapsed_s,
            self.workers.len(),
            self.cache,
            self.fib,
            self.prefetch,
            self.info.routes,
            self.info.table_source,
            self.info.gen_mode
        );
        let _ = writeln!(
            s,
            "  packets: rx {}  tx {}  dropped {}  rx_missed {}",
            self.rx_packets, self.tx_packets, self.dropped, self.rx_missed
        );
        for w in &self.workers {
            let _ = writeln!(s, "  worker {}: {:.3} Mpps ({} packets)", w.worker, w.mpps, w.tx_packets);
        }
        let _ = writeln!(s, "  total: {:.3} Mpps", self.total_mpps);
        if self.drops.is_empty() {
            let _ = writeln!(s, "  drops by reason: none");
        } else {
            let list: Vec<String> = self.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(s, "  drops by reason: {}", list.join(", "));
        }
        let _ = writeln!(
            s,
            "  route cache: entries {}  hit {}  slow {}  gc {} (ignored {}, goal_miss {}, overflow {})  hlist_search {}",
            self.rtstat["entries"],
            self.rtstat["in_hit"],
            self.rtstat["in_slow_tot"],
            self.rtstat["gc_total"],
            self.rtstat["gc_ignored"],
            self.rtstat["gc_goal_miss"],
            self.rtstat["gc_dst_overflow"],
            self.rtstat["in_hlist_search"]
        );
        let _ = writeln!(
            s,
            "  fib: {} built in {:.1} ms, {:.1} MiB",
            self.fib,
            self.info.fib_build_ms,
            self.info.fib_memory_bytes as f64 / 1048576.0
        );
        match &self.stage_ns_per_packet {
            Some(m) => {
                let order = ["driver_rx", "ip", "lookup", "gc", "slab", "driver_tx", "nic", "idle"];
                let list: Vec<String> = order.iter().filter_map(|k| m.get(*k).map(|v| format!("{k} {v:.1}"))).collect();
                let _ = writeln!(s, "  stage clocks, ns/packet (TSC): {}", list.join("  "));
            }
            None => {
                let _ = writeln!(s, "  stage clocks: off (--stage-clock turns them on)");
            }
        }
        s
    }
}
