//! Forwarder configuration: cache mode, route-cache tunables, tables, traffic and runtime
//! options, each with its default documented.

use crate::fib::FibKind;
use crate::nic::synthetic::{DmaModel, GenMode};
use crate::traffic::TrafficProfile;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;

/// How the lookup stage finds a route (its codes are part of the published ABI).
pub use fwd_abi::CacheMode;

/// Most route-cache hash buckets (2^24; Linux sized the table from memory, a few 100k at most).
pub const MAX_HASH_BUCKETS: usize = 1 << 24;
/// Most route-cache entries (2^26; `fwd_abi::setting::gc_limits`, shared with live settings).
pub const MAX_CACHE_ENTRIES: usize = fwd_abi::setting::gc_limits::MAX_ENTRIES as usize;
/// Largest --gc-elasticity.
pub const MAX_GC_ELASTICITY: usize = fwd_abi::setting::gc_limits::MAX_ELASTICITY as usize;
/// Largest --gc-min-interval-ms (one hour).
pub const MAX_GC_INTERVAL_MS: u64 = fwd_abi::setting::gc_limits::MAX_MIN_INTERVAL_MS as u64;
/// Largest --gc-timeout (one day).
pub const MAX_GC_TIMEOUT_S: u64 = fwd_abi::setting::gc_limits::MAX_TIMEOUT_S as u64;
/// Most routes in a generated table (2^24, sixteen times today's full IPv4 table).
pub const MAX_ROUTES: usize = 1 << 24;
/// Most next hops.
pub const MAX_NEXTHOPS: usize = 65_536;
/// Most concurrent flows of the synthetic traffic (2^24).
pub use crate::traffic::MAX_FLOWS;
/// Largest planted calibration cost per packet, ns (100 us).
pub use fwd_abi::segment::MAX_SPIN_NS;

/// Route-cache tunables, named and defaulted as Linux 2.6 had them in
/// /proc/sys/net/ipv4/route (for a 4096-bucket hash).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RtParams {
    /// Hash buckets, a power of two (default 4096; Linux sized it from memory).
    pub hash_buckets: usize,
    /// GC starts when entries exceed this (default: hash_buckets, as Linux set it).
    pub gc_thresh: usize,
    /// Hard limit on entries; allocation fails beyond it (default 65536 = 16 x buckets).
    pub max_size: usize,
    /// Average chain length GC aims for, and the chain length beyond which an insert
    /// evicts the lowest-scoring entry (default 8).
    pub gc_elasticity: usize,
    /// Minimum time between two GC runs while below max_size, ms (default 500, HZ/2).
    pub gc_min_interval_ms: u64,
    /// Age at which an unused entry expires, seconds (default 300).
    pub gc_timeout_s: u64,
    /// Period of the expiry timer (rt_check_expire), seconds (default 60).
    pub gc_interval_s: u64,
    /// Jiffies per second of the cache's clock (default 1000).
    pub hz: u64,
    /// Which kernel's route cache (default 2.6).
    #[serde(default)]
    pub version: RtVersion,
}

/// The route cache of which kernel: 2.6 evicts the lowest-scoring entry of a chain longer
/// than gc_elasticity at insert (rt_intern_hash), so chains stay short and the cache rarely
/// reaches max_size; 2.4.21 does not, so under a flood of new destinations the cache fills
/// to max_size, chains grow to max_size / buckets, and GC (rt_garbage_collect, the same
/// algorithm in both) then runs on nearly every allocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
pub enum RtVersion {
    #[value(name = "2.4")]
    #[serde(rename = "2.4")]
    V2_4,
    #[default]
    #[value(name = "2.6")]
    #[serde(rename = "2.6")]
    V2_6,
}

impl Default for RtParams {
    fn default() -> Self {
        RtParams {
            hash_buckets: 4096,
            gc_thresh: 4096,
            max_size: 65536,
            gc_elasticity: 8,
            gc_min_interval_ms: 500,
            gc_timeout_s: 300,
            gc_interval_s: 60,
            hz: 1000,
            version: RtVersion::V2_6,
        }
    }
}

impl RtParams {
    /// Check each tunable's range, and the rules between them that keep the cache's
    /// behaviour what its flags say.
    pub fn validate(&self) -> Result<()> {
        if !self.hash_buckets.is_power_of_two() || self.hash_buckets > MAX_HASH_BUCKETS {
            return Err(Error::Config(format!(
                "--rt-hash-buckets {}: expected a power of two from 1 to {MAX_HASH_BUCKETS}",
                self.hash_buckets
            )));
        }
        if self.max_size == 0 || self.max_size > MAX_CACHE_ENTRIES {
            return Err(Error::Config(format!("--max-size {}: expected 1 to {MAX_CACHE_ENTRIES}", self.max_size)));
        }
        if self.gc_thresh >= self.max_size {
            return Err(Error::Config(format!(
                "--gc-thresh {} with --max-size {}: gc_thresh must be below max_size (GC starts only past \
                 gc_thresh entries and allocation fails at max_size, so the cache would overflow before GC \
                 ever ran); lower --gc-thresh or raise --max-size (default 16 x --rt-hash-buckets)",
                self.gc_thresh, self.max_size
            )));
        }
        if self.gc_elasticity == 0 || self.gc_elasticity > MAX_GC_ELASTICITY {
            return Err(Error::Config(format!(
                "--gc-elasticity {}: expected 1 to {MAX_GC_ELASTICITY} (entries per chain)",
                self.gc_elasticity
            )));
        }
        if self.gc_min_interval_ms > MAX_GC_INTERVAL_MS {
            return Err(Error::Config(format!(
                "--gc-min-interval-ms {}: expected 0 to {MAX_GC_INTERVAL_MS} (one hour)",
                self.gc_min_interval_ms
            )));
        }
        if self.gc_timeout_s > MAX_GC_TIMEOUT_S || self.gc_interval_s > MAX_GC_TIMEOUT_S {
            return Err(Error::Config(format!(
                "--gc-timeout {}: expected 0 to {MAX_GC_TIMEOUT_S} seconds (one day)",
                self.gc_timeout_s
            )));
        }
        if self.hz == 0 || self.hz > 100_000 {
            return Err(Error::Config(format!("hz {}: expected 1 to 100000", self.hz)));
        }
        Ok(())
    }
}

/// Where the routing table comes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum TableSource {
    /// A generated table of `routes` routes (see `RouteTable::generate`).
    Generated { routes: usize, seed: u64 },
    /// A file; `aggregates` adds a default route and covering aggregates.
    File { path: PathBuf, aggregates: bool },
}

/// Which packet I/O the forwarder uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DriverKind {
    /// The in-memory NIC fed by the traffic generator.
    Synthetic,
    /// Real interfaces through AF_PACKET rings (`--in IF --out IF`).
    Afpacket,
    /// Real interfaces through AF_XDP sockets sharing one UMEM (`--in IF --out IF`).
    Afxdp,
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DriverKind::Synthetic => "synthetic",
            DriverKind::Afpacket => "afpacket",
            DriverKind::Afxdp => "afxdp",
        })
    }
}

/// Everything a forwarder run needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    /// Packet I/O (default synthetic).
    pub driver: DriverKind,
    /// Worker threads, one rx/tx queue pair each (default 1).
    pub workers: usize,
    /// Lookup path (default rtcache).
    pub cache: CacheMode,
    /// FIB engine (default lctrie, as Linux fib_trie).
    pub fib: FibKind,
    /// Prefetch depth (default 2, the 2005 optimum).
    pub prefetch: fwd_abi::Prefetch,
    /// Routing table (default: generated, 123000 routes as in the 2005 test, seed 1).
    pub table: TableSource,
    /// Next hops that generated tables and ASN tables are spread over (default 16).
    pub nexthops: usize,
    /// Route-cache tunables (Linux defaults).
    pub rt: RtParams,
    /// Traffic profile of the synthetic NIC.
    pub traffic: TrafficProfile,
    /// Descriptors per rx ring (default 1024).
    pub rx_ring: usize,
    /// Descriptors per tx ring (default 1024).
    pub tx_ring: usize,
    /// Packets per burst, 1..=64 (default 32).
    pub burst: usize,
    /// Per-burst stage clocks (default on: one TSC read per stage boundary of a burst).
    pub stage_clock: bool,
    /// Clock one poll in this many, chosen at random, and scale up (default 8; 1 clocks
    /// every poll). A TSC read costs ~25 cycles in a VM: ten per burst of 32 would be 2-3%
    /// of the forwarding time; one burst in 8 keeps it under 1%.
    #[serde(default = "default_clock_one_in")]
    pub clock_one_in: u32,
    /// The calibration stage's extra cost per forwarded packet, ns (default 0: off).
    #[serde(default)]
    pub spin_ns: u32,
    /// Where the synthetic device runs (default auto).
    pub gen_mode: GenMode,
    /// How a device thread's frame writes reach memory (default ddio).
    pub dma: DmaModel,
    /// Pin workers (and the device thread) to cores (default true).
    pub pin: bool,
    /// Stats segment path (default /dev/shm/fwdscope-PID-RANDOM.stats, an unpredictable name).
    pub stats_path: Option<PathBuf>,
    /// afpacket: the interface packets arrive on, and the one they leave by (default none).
    #[serde(default)]
    pub in_if: Option<String>,
    #[serde(default)]
    pub out_if: Option<String>,
    /// afxdp: attach mode, zero-copy, busy polling (defaults in [`XskOptions`]).
    #[serde(default)]
    pub xdp: crate::nic::afxdp::XskOptions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            driver: DriverKind::Synthetic,
            workers: 1,
            cache: CacheMode::Rtcache,
            fib: FibKind::Lctrie,
            prefetch: fwd_abi::Prefetch::DEFAULT,
            table: TableSource::Generated { routes: 123_000, seed: 1 },
            nexthops: 16,
            rt: RtParams::default(),
            traffic: TrafficProfile::default(),
            rx_ring: 1024,
            tx_ring: 1024,
            burst: 32,
            stage_clock: true,
            clock_one_in: 8,
            spin_ns: 0,
            gen_mode: GenMode::Auto,
            dma: DmaModel::Ddio,
            pin: true,
            stats_path: None,
            in_if: None,
            out_if: None,
            xdp: Default::default(),
        }
    }
}

impl Config {
    pub fn validate(&self) -> Result<()> {
        if !(1..=1024).contains(&self.clock_one_in) {
            return Err(Error::Config(format!("--clock-one-in {}: expected 1 to 1024", self.clock_one_in)));
        }
        if self.workers == 0 || self.workers > 64 {
            return Err(Error::Config(format!("--workers {}: expected 1 to 64", self.workers)));
        }
        if self.burst == 0 || self.burst > crate::burst::MAX_BURST {
            return Err(Error::Config(format!("--burst {}: expected 1 to {}", self.burst, crate::burst::MAX_BURST)));
        }
        if self.rx_ring < 8 || self.tx_ring < 8 || self.rx_ring > 65536 || self.tx_ring > 65536 {
            return Err(Error::Config("ring sizes must be 8 to 65536 descriptors".into()));
        }
        match (self.driver, &self.in_if, &self.out_if) {
            (DriverKind::Afpacket | DriverKind::Afxdp, Some(_), Some(_)) | (DriverKind::Synthetic, None, None) => {}
            (d @ (DriverKind::Afpacket | DriverKind::Afxdp), _, _) => {
                return Err(Error::Config(format!("--driver {d} needs --in IF and --out IF")))
            }
            (DriverKind::Synthetic, _, _) => {
                return Err(Error::Config("--in and --out name interfaces for --driver afpacket or afxdp".into()))
            }
        }
        if self.nexthops == 0 || self.nexthops > MAX_NEXTHOPS {
            return Err(Error::Config(format!("--nexthops {}: expected 1 to {MAX_NEXTHOPS}", self.nexthops)));
        }
        if let TableSource::Generated { routes, .. } = self.table {
            if routes == 0 || routes > MAX_ROUTES {
                return Err(Error::Config(format!("--routes {routes}: expected 1 to {MAX_ROUTES}")));
            }
        }
        if self.spin_ns > MAX_SPIN_NS {
            return Err(Error::Config(format!(
                "--spin-ns {}: expected 0 to {MAX_SPIN_NS} ns per packet",
                self.spin_ns
            )));
        }
        self.rt.validate()?;
        self.traffic.validate()
    }

    /// Refuse, before anything is allocated, a configuration whose memory estimate
    /// (`parts`, by part, as the forwarder's start computes it) exceeds `available` bytes.
    pub fn check_memory(&self, parts: Vec<(&'static str, u64)>, available: u64) -> Result<()> {
        let total: u64 = parts.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b));
        if total <= available {
            return Ok(());
        }
        let mut by: Vec<_> = parts.into_iter().filter(|(_, b)| *b > 0).collect();
        by.sort_by_key(|p| std::cmp::Reverse(p.1));
        let list: Vec<String> = by.iter().map(|(n, b)| format!("{n} {}", mib(*b))).collect();
        Err(Error::Config(format!(
            "this configuration needs about {} but {} is available (MemAvailable): {}; lower the \
             largest (--max-size, --rt-hash-buckets, --flows, --routes, --rx-ring/--tx-ring, --workers)",
            mib(total),
            mib(available),
            list.join(", ")
        )))
    }
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// MemAvailable from /proc/meminfo, in bytes; None where it cannot be read.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

fn default_clock_one_in() -> u32 {
    8
}
