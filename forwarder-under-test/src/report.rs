//! What `forward` prints: rtstat-style interval lines (the columns of `rtstat -i 1`, as per
//! second rates) with Mpps and drops, and the end-of-run summary; both also as JSON.

use crate::config::Config;
use crate::run::RunInfo;
use fwd_abi::clocks::ClockReport;
use fwd_abi::{drop_counters, Ctr, Snapshot};
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// ns per forwarded packet per clocked stage, when stage clocks were on.
    pub stage_ns_per_packet: Option<BTreeMap<String, f64>>,
    /// The stage clocks over the run (VPP's columns per stage, shares, device- or
    /// worker-bound), when on.
    pub clocks: Option<ClockReport>,
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
        let d = |c: Ctr| last.total(c).saturating_sub(first.total(c));
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
        let clocks = ClockReport::new(d, info.tsc_hz, tx);
        let stage_ns_per_packet = clocks
            .as_ref()
            .filter(|_| tx > 0)
            .map(|c| c.rows.iter().map(|r| (r.name.clone(), r.ns_per_forwarded.unwrap_or(0.0))).collect());
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
            clocks,
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
        self.write_packets(&mut s);
        self.write_drops_and_tables(&mut s);
        self.write_clocks(&mut s);
        s
    }

    /// The head line (run, table, device), then packets in total and per worker.
    fn write_packets(&self, s: &mut String) {
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
            self.info.device
        );
        if self.info.duplicates > 0 {
            let _ = writeln!(
                s,
                "  table: {} duplicate prefix line(s) dropped, the first of each kept; {} of them named another next hop",
                self.info.duplicates, self.info.conflicts
            );
        }
        let _ = writeln!(
            s,
            "  packets: rx {}  tx {}  dropped {}  rx_missed {}",
            self.rx_packets, self.tx_packets, self.dropped, self.rx_missed
        );
        for w in &self.workers {
            let _ = writeln!(s, "  worker {}: {:.3} Mpps ({} packets)", w.worker, w.mpps, w.tx_packets);
        }
        let _ = writeln!(s, "  total: {:.3} Mpps", self.total_mpps);
    }

    /// Drops by reason, the route cache's counters and the FIB's build.
    fn write_drops_and_tables(&self, s: &mut String) {
        use std::fmt::Write;
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
    }

    /// The stage clocks' table and what bounds the run, or that they were off.
    fn write_clocks(&self, s: &mut String) {
        use std::fmt::Write;
        match &self.clocks {
            Some(c) => {
                let _ = writeln!(
                    s,
                    "  stage clocks (TSC at {:.3} MHz, {}), per burst:",
                    c.tsc_hz as f64 / 1e6,
                    self.info.tsc_source
                );
                s.push_str(&c.table());
                let _ = writeln!(
                    s,
                    "  {}; {}; {}{}",
                    c.bound_text(),
                    c.scale_text(),
                    c.capacity_text(),
                    if c.device_share > 0.0 {
                        format!(
                            "; the synthetic device took {:.0}% of the workers' time (simulated hardware, apart)",
                            100.0 * c.device_share
                        )
                    } else {
                        String::new()
                    }
                );
            }
            None => {
                let _ = writeln!(s, "  stage clocks: off (--no-stage-clock)");
            }
        }
    }
}
