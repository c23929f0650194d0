//! Which stats-segment counters become which Prometheus metric families, with their help
//! text and units, and the encoding of one snapshot as OpenMetrics text through
//! prometheus-client.
//!
//! Naming follows Prometheus' conventions: every name starts `fwdscope_`, counters end in
//! `_total` (added by the encoder), times are in seconds and sizes in bytes, one family per
//! quantity with labels for the dimension (`worker`, `reason`, `cache`, `stage`, `mode`).
//! Every counter of the segment is either exported ([`exported_counters`]) or listed in
//! [`NOT_EXPORTED`] with the reason; a test holds the two lists against the segment's.

use fwd_abi::{CacheMode, Ctr, Snapshot, STAGE_CLOCKS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// Counters of the segment deliberately not exported, and why.
pub const NOT_EXPORTED: &[(&str, &str)] = &[
    ("publish_mono_ns", "when the worker last published: Prometheus stamps its scrapes itself"),
    ("switch_mono_ns", "live-comparison bookkeeping (when the last setting switch was applied)"),
    ("switch_tsc", "live-comparison bookkeeping (the TSC of the last setting switch)"),
    ("switch_gc_goal_miss", "live-comparison bookkeeping (rt_gc_goal_miss when the last switch was applied)"),
    ("ctrl_generation", "the control protocol's sequence number, not a measurement"),
];

/// What the forwarder said about itself in its segment, read once when the exporter
/// attaches: labels of the info metric and the stage-clock sampling ratio.
#[derive(Debug, Clone, Default)]
pub struct ForwarderMeta {
    pub pid: u32,
    /// TSC cycles per second (0 when the forwarder could not tell).
    pub tsc_hz: u64,
    pub start_unix_ns: u64,
    /// Stage clocks run in one poll in this many, chosen at random (1: every poll).
    pub clock_one_in: u32,
    pub driver: String,
    pub fib: String,
    pub rtcache_version: String,
}

impl ForwarderMeta {
    /// From the segment header and the configuration JSON it carries
    /// (`{"config": {...}, "info": {...}}`). Fields absent from another forwarder's JSON
    /// are left empty; `clock_one_in` then is 1 (every poll clocked, nothing scaled).
    pub fn from_segment(seg: &fwd_abi::Segment) -> ForwarderMeta {
        let p = fwd_abi::Published::from_json(&seg.config_json()).unwrap_or_default();
        let cfg = &p.config;
        ForwarderMeta {
            pid: seg.pid(),
            tsc_hz: seg.tsc_hz(),
            start_unix_ns: seg.start_unix_ns(),
            clock_one_in: cfg.clock_one_in.map_or(1, |n| n.clamp(1, 1 << 20)),
            driver: cfg.driver.clone().unwrap_or_default(),
            fib: cfg.fib.clone().unwrap_or_default(),
            rtcache_version: cfg.rt.as_ref().and_then(|r| r.version.clone()).unwrap_or_default(),
        }
    }
}

/// How a counter's raw value becomes the exported one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scale {
    /// As it is (packets, bytes, events).
    One,
    /// Nanoseconds to seconds.
    Nanos,
}

/// One family fed by one counter per label value (`label` empty: a single series per
/// worker).
struct Simple {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    gauge: bool,
    scale: Scale,
    label: &'static str,
    series: &'static [(&'static str, Ctr)],
}

const fn counter(name: &'static str, help: &'static str, c: &'static [(&'static str, Ctr)]) -> Simple {
    Simple { name, help, unit: None, gauge: false, scale: Scale::One, label: "", series: c }
}

/// The families fed one-to-one by counters (drops, stage clocks, the cache mode and the
/// calibration cost are built apart, in [`SnapshotCollector`]).
// One piece: a table, one entry per family in the order they are exported; split up it
// would read no better and the exported order would be spread over several functions.
fn simple_families() -> Vec<Simple> {
    use Ctr::*;
    let labelled = |name, help, label, series| Simple { label, ..counter(name, help, series) };
    vec![
        counter("fwdscope_rx_packets", "Packets the worker took from its rx ring.", &[("", RxPackets)]),
        Simple {
            unit: Some(Unit::Bytes),
            ..counter("fwdscope_rx", "Bytes of the packets taken from the rx ring.", &[("", RxBytes)])
        },
        counter("fwdscope_tx_packets", "Packets the worker placed on a tx ring (forwarded).", &[("", TxPackets)]),
        Simple {
            unit: Some(Unit::Bytes),
            ..counter("fwdscope_tx", "Bytes of the packets placed on a tx ring.", &[("", TxBytes)])
        },
        counter("fwdscope_bursts", "Rx polls that returned packets.", &[("", Bursts)]),
        counter("fwdscope_idle_polls", "Rx polls that found no packet.", &[("", IdlePolls)]),
        counter("fwdscope_polls", "Rx polls in all (stage clocks run in a random share of them).", &[("", Polls)]),
        counter("fwdscope_clocked_polls", "Polls whose stages were clocked.", &[("", ClockedPolls)]),
        counter(
            "fwdscope_rx_no_buffer",
            "Rx slots left without a posted buffer when the slab had none (the device then misses packets: fwdscope_dropped_packets_total{reason=\"rx_missed\"}).",
            &[("", RxNoBuffer)],
        ),
        counter(
            "fwdscope_xdp_fill_ring_empty",
            "afxdp: times the kernel found the fill ring empty when a frame arrived (fill-ring starvation; the frame is then dropped: fwdscope_dropped_packets_total{reason=\"xdp_rx_dropped\"}).",
            &[("", XdpFillRingEmpty)],
        ),
        counter(
            "fwdscope_xdp_fill_invalid",
            "afxdp: fill-ring addresses the kernel refused as invalid (rx_invalid_descs).",
            &[("", XdpFillInvalid)],
        ),
        counter(
            "fwdscope_device_packets",
            "Packets the device produced or received for this worker's queue, whether or not the ring had room.",
            &[("", DevPackets)],
        ),
        Simple {
            gauge: true,
            ..counter("fwdscope_rtcache_entries", "Route-cache entries now (rtstat's `entries`).", &[("", RtEntries)])
        },
        labelled(
            "fwdscope_rtcache_lookups",
            "Route-cache lookups by rtstat column: in_hit, in_slow_tot (missed, went to the FIB), in_slow_mc, in_no_route, in_brd, in_martian_dst, in_martian_src, out_hit, out_slow_tot, out_slow_mc.",
            "result",
            &[
                ("in_hit", RtInHit),
                ("in_slow_tot", RtInSlowTot),
                ("in_slow_mc", RtInSlowMc),
                ("in_no_route", RtInNoRoute),
                ("in_brd", RtInBrd),
                ("in_martian_dst", RtInMartianDst),
                ("in_martian_src", RtInMartianSrc),
                ("out_hit", RtOutHit),
                ("out_slow_tot", RtOutSlowTot),
                ("out_slow_mc", RtOutSlowMc),
            ],
        ),
        labelled(
            "fwdscope_rtcache_gc",
            "Route-cache garbage-collector events by rtstat column: total (runs asked for), ignored (skipped by gc_min_interval), goal_miss, dst_overflow.",
            "event",
            &[("total", RtGcTotal), ("ignored", RtGcIgnored), ("goal_miss", RtGcGoalMiss), ("dst_overflow", RtGcDstOverflow)],
        ),
        labelled(
            "fwdscope_rtcache_hlist_searches",
            "Hash-chain entries walked in route-cache lookups (rtstat's in_hlist_search, out_hlist_search).",
            "direction",
            &[("in", RtInHlistSearch), ("out", RtOutHlistSearch)],
        ),
        counter("fwdscope_rtcache_flushes", "Route-cache flushes.", &[("", RtFlushes)]),
        counter("fwdscope_rtcache_expired", "Route-cache entries freed by expiry or garbage collection.", &[("", RtExpired)]),
        labelled(
            "fwdscope_slab_allocs",
            "Objects taken from the slab caches (buf: packet buffers; dst: route-cache entries).",
            "cache",
            &[("buf", SlabBufAlloc), ("dst", SlabDstAlloc)],
        ),
        labelled("fwdscope_slab_frees", "Objects returned to the slab caches.", "cache", &[("buf", SlabBufFree), ("dst", SlabDstFree)]),
        labelled(
            "fwdscope_slab_alloc_failures",
            "Slab allocations that found the cache empty.",
            "cache",
            &[("buf", SlabBufAllocFail), ("dst", SlabDstAllocFail)],
        ),
        labelled(
            "fwdscope_slab_depot_transfers",
            "Magazines moved between a worker's slab cache and the shared depot (get: from it; put: to it).",
            "direction",
            &[("get", SlabDepotGet), ("put", SlabDepotPut)],
        ),
        Simple {
            unit: Some(Unit::Seconds),
            scale: Scale::Nanos,
            ..counter(
                "fwdscope_worker_cpu",
                "CPU time the worker thread ran (its /proc schedstat).",
                &[("", SchedRunNs)],
            )
        },
        Simple {
            unit: Some(Unit::Seconds),
            scale: Scale::Nanos,
            ..counter(
                "fwdscope_worker_runqueue_wait",
                "Time the worker thread waited, runnable, for a CPU another thread had (its /proc schedstat).",
                &[("", SchedWaitNs)],
            )
        },
        Simple {
            gauge: true,
            ..counter("fwdscope_prefetch_depth", "Packets ahead the lookup stage prefetches (0 to 8).", &[("", PrefetchDepth)])
        },
        Simple {
            gauge: true,
            ..counter("fwdscope_stage_clock_enabled", "1 while the stage clocks run, 0 when turned off.", &[("", StageClockOn)])
        },
        Simple {
            gauge: true,
            ..counter(
                "fwdscope_setting",
                "The tag of the setting in force, set by a live comparison (0 outside one).",
                &[("", Setting)],
            )
        },
    ]
}

/// Every counter name an exporter reads (the rest are in [`NOT_EXPORTED`]).
pub fn exported_counters() -> Vec<&'static str> {
    let mut v: Vec<&str> = simple_families().iter().flat_map(|f| f.series.iter().map(|(_, c)| name_of(*c))).collect();
    v.extend(fwd_abi::drop_counters().map(|(_, n)| n));
    for s in STAGE_CLOCKS {
        v.extend([name_of(s.calls), name_of(s.packets), name_of(s.clocks)]);
    }
    v.extend([name_of(Ctr::CacheMode), name_of(Ctr::SpinNs)]);
    v
}

fn name_of(c: Ctr) -> &'static str {
    fwd_abi::COUNTER_NAMES.get(c as usize).copied().unwrap_or("")
}

/// The drop reason a drop counter stands for (`drop_no_route` → `no_route`).
pub fn drop_reason(counter: &str) -> &str {
    counter.strip_prefix("drop_").unwrap_or(counter)
}

/// One snapshot of every worker as a prometheus-client collector: registered in a fresh
/// registry per scrape, so every answer is the segment as it was at that scrape.
#[derive(Debug)]
pub struct SnapshotCollector {
    pub meta: ForwarderMeta,
    /// Per worker, the counters by the segment's own index order.
    pub snapshot: Snapshot,
    /// For each of this build's counters ([`Ctr`] order), its index in the segment (None
    /// when the segment does not publish it).
    pub index: Vec<Option<usize>>,
}

impl SnapshotCollector {
    fn get(&self, w: usize, c: Ctr) -> Option<u64> {
        let i = (*self.index.get(c as usize)?)?;
        self.snapshot.workers.get(w)?.get(i).copied()
    }

    fn workers(&self) -> impl Iterator<Item = (usize, String)> + '_ {
        (0..self.snapshot.workers.len()).map(|w| (w, w.to_string()))
    }

    /// A family with one series per worker and label value.
    fn encode_series(
        &self,
        enc: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<&Unit>,
        gauge: bool,
        rows: &[(Vec<(&'static str, String)>, f64)],
    ) -> Result<(), std::fmt::Error> {
        if rows.is_empty() {
            return Ok(());
        }
        let kind = if gauge { ConstGauge::new(0.0).metric_type() } else { ConstCounter::new(0.0).metric_type() };
        let mut fam = enc.encode_descriptor(name, help, unit, kind)?;
        if let [(labels, v)] = rows {
            if labels.is_empty() {
                // A single series without labels: no `{}` after the name.
                return if gauge { ConstGauge::new(*v).encode(fam) } else { ConstCounter::new(*v).encode(fam) };
            }
        }
        for (labels, v) in rows {
            let m = fam.encode_family(labels)?;
            if gauge {
                ConstGauge::new(*v).encode(m)?;
            } else {
                ConstCounter::new(*v).encode(m)?;
            }
        }
        Ok(())
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.encode_forwarder(&mut enc)?;
        self.encode_simple(&mut enc)?;
        self.encode_drops(&mut enc)?;
        self.encode_cache_mode(&mut enc)?;
        self.encode_stage_clocks(&mut enc)
    }
}

impl SnapshotCollector {
    /// The forwarder itself: its info gauge, start time and worker count.
    fn encode_forwarder(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.meta;
        // Who is being exported.
        let info = [
            ("pid", m.pid.to_string()),
            ("driver", m.driver.clone()),
            ("fib", m.fib.clone()),
            ("rtcache_version", m.rtcache_version.clone()),
        ];
        // An info-style gauge (always 1), as node_uname_info: OpenMetrics' own `info` type
        // is not understood by the Prometheus text parser promtool and older servers use.
        self.encode_series(
            enc,
            "fwdscope_forwarder_info",
            "The forwarder this exporter reads (always 1): its PID, driver, FIB engine and route-cache version.",
            None,
            true,
            &[(info.to_vec(), 1.0)],
        )?;
        let none: Vec<(&'static str, String)> = Vec::new();
        self.encode_series(
            enc,
            "fwdscope_forwarder_start_time",
            "When the forwarder started, in seconds since the Unix epoch.",
            Some(&Unit::Seconds),
            true,
            &[(none.clone(), m.start_unix_ns as f64 / 1e9)],
        )?;
        self.encode_series(
            enc,
            "fwdscope_forwarder_workers",
            "Worker threads of the forwarder.",
            None,
            true,
            &[(none, self.snapshot.workers.len() as f64)],
        )
    }

    /// The families fed one-to-one by counters ([`simple_families`]), one series per
    /// worker and label value.
    fn encode_simple(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in simple_families() {
            let mut rows = Vec::new();
            for (w, wl) in self.workers() {
                for (lv, c) in f.series {
                    let Some(v) = self.get(w, *c) else { continue };
                    let v = match f.scale {
                        Scale::One => v as f64,
                        Scale::Nanos => v as f64 / 1e9,
                    };
                    let mut labels = vec![("worker", wl.clone())];
                    if !f.label.is_empty() {
                        labels.push((f.label, (*lv).to_string()));
                    }
                    rows.push((labels, v));
                }
            }
            self.encode_series(enc, f.name, f.help, f.unit.as_ref(), f.gauge, &rows)?;
        }
        Ok(())
    }

    /// Drops: one family, the reason as a label.
    fn encode_drops(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Drops: one family, the reason as a label; every reason the forwarder counts.
        let mut rows = Vec::new();
        for (w, wl) in self.workers() {
            for (i, name) in fwd_abi::drop_counters() {
                let c = self.index.get(i).copied().flatten();
                let Some(v) = c.and_then(|c| self.snapshot.workers.get(w)?.get(c).copied()) else { continue };
                rows.push((vec![("worker", wl.clone()), ("reason", drop_reason(name).to_string())], v as f64));
            }
        }
        self.encode_series(
            enc,
            "fwdscope_dropped_packets",
            "Packets dropped, by reason: the forwarder's own checks (runt, not_ipv4, bad_checksum, ttl_exceeded, no_route, ...), dst_overflow (route cache full), tx_ring_full, and rx_missed (the device found no free rx slot).",
            None,
            false,
            &rows,
        )
    }

    /// The cache mode in force and the calibration cost planted per packet.
    fn encode_cache_mode(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Cache mode: one series per mode, 1 for the mode in force.
        let mut rows = Vec::new();
        for (w, wl) in self.workers() {
            let Some(code) = self.get(w, Ctr::CacheMode) else { continue };
            for mode in CacheMode::ALL {
                let on = u64::from(mode.code()) == code;
                rows.push((vec![("worker", wl.clone()), ("mode", mode.name().to_string())], f64::from(u8::from(on))));
            }
        }
        self.encode_series(
            enc,
            "fwdscope_cache_mode",
            "The lookup's cache mode: 1 for the mode in force (rtcache, nocache, nhcache), 0 for the others.",
            None,
            true,
            &rows,
        )?;
        let rows: Vec<_> = self
            .workers()
            .filter_map(|(w, wl)| Some((vec![("worker", wl)], self.get(w, Ctr::SpinNs)? as f64 / 1e9)))
            .collect();
        self.encode_series(
            enc,
            "fwdscope_calib_cost",
            "The calibration cost planted per packet (stage calib; 0: off), in seconds.",
            Some(&Unit::Seconds),
            true,
            &rows,
        )
    }

    /// Stage clocks: calls, packets and time per worker and stage, the sampling ratio and
    /// the TSC rate.
    fn encode_stage_clocks(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.meta;
        let none: Vec<(&'static str, String)> = Vec::new();
        // Stage clocks: calls and packets in every poll; clocks in a random share of the
        // polls, so the time is estimated by scaling with the sampling ratio (the garbage
        // collector is clocked in every poll and not scaled).
        let one_in = f64::from(m.clock_one_in.max(1));
        let (mut calls, mut packets, mut secs, mut cycles) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (w, wl) in self.workers() {
            for s in STAGE_CLOCKS {
                let labels = vec![("worker", wl.clone()), ("stage", s.name.to_string())];
                if let Some(v) = self.get(w, s.calls) {
                    calls.push((labels.clone(), v as f64));
                }
                if let Some(v) = self.get(w, s.packets) {
                    packets.push((labels.clone(), v as f64));
                }
                if let Some(v) = self.get(w, s.clocks) {
                    let scaled = if s.clocks == Ctr::ClkGc { v as f64 } else { v as f64 * one_in };
                    if m.tsc_hz > 0 {
                        secs.push((labels, scaled / m.tsc_hz as f64));
                    } else {
                        cycles.push((labels, scaled));
                    }
                }
            }
        }
        self.encode_series(
            enc,
            "fwdscope_stage_calls",
            "Bursts in which the stage ran (idle: empty polls), as VPP's per-node calls.",
            None,
            false,
            &calls,
        )?;
        self.encode_series(enc, "fwdscope_stage_packets", "Packets the stage handled.", None, false, &packets)?;
        self.encode_series(
            enc,
            "fwdscope_stage",
            "Time in the stage, from the TSC: clocked in one poll in fwdscope_stage_clock_sample_ratio (chosen at random) and scaled by it, so an estimate; gc is clocked in every poll. rate() of it over rate(fwdscope_stage_packets_total) is seconds per packet.",
            Some(&Unit::Seconds),
            false,
            &secs,
        )?;
        self.encode_series(
            enc,
            "fwdscope_stage_tsc_cycles",
            "TSC cycles in the stage (exported instead of seconds: the forwarder could not tell its TSC rate); clocked and scaled as fwdscope_stage_seconds_total.",
            None,
            false,
            &cycles,
        )?;
        self.encode_series(
            enc,
            "fwdscope_stage_clock_sample_ratio",
            "Stage clocks run in one poll in this many (--clock-one-in).",
            None,
            true,
            &[(none.clone(), one_in)],
        )?;
        if m.tsc_hz > 0 {
            self.encode_series(
                enc,
                "fwdscope_tsc_frequency",
                "The TSC rate the stage clocks were converted with.",
                Some(&Unit::Other("hertz".into())),
                true,
                &[(none, m.tsc_hz as f64)],
            )?;
        }
        Ok(())
    }
}

/// One snapshot as OpenMetrics text (ends with `# EOF`).
pub fn encode(collector: SnapshotCollector) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(collector));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter the segment publishes is exported or listed as not, never both.
    #[test]
    fn every_counter_is_exported_or_listed_with_a_reason() {
        let exported = exported_counters();
        for name in fwd_abi::COUNTER_NAMES {
            let out = exported.contains(name);
            let skipped = NOT_EXPORTED.iter().any(|(n, _)| n == name);
            assert!(out ^ skipped, "{name}: exported {out}, listed as not exported {skipped}");
        }
        assert!(!exported.contains(&""), "a family names a counter this build does not have");
    }
}
