//! Running a whole forwarder: load or generate the table, build the FIB, create the stats
//! segment, start the workers (and the device thread), and stop them again.

use crate::config::{Config, DriverKind, TableSource};
use crate::cpu::pin_to_cpu;
use crate::fib::Fib;
use crate::nic::afpacket::{AfpQueue, AfpRx, AfpTx};
use crate::nic::afxdp::{XskQueue, XskReport};
use crate::nic::synthetic::{run_device_thread, DmaModel, GenMode, GenQueue};
use crate::nic::RxDevice;
use crate::nic::{BufferArena, RxRing};
use crate::packet::{mac_for, port_mac};
use crate::slab::{Depot, SlabCache};
use crate::stages::driver_tx::NhOut;
use crate::table::{LoadOptions, RouteTable};
use crate::traffic::{DstChooser, FlowGen};
use crate::worker::Worker;
use crate::{Error, Result};
use fwd_abi::{default_path, Segment, State};
use serde::Serialize;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What was set up, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub table_source: String,
    pub routes: usize,
    pub nexthops: usize,
    pub duplicates: usize,
    /// Duplicates whose next hop differed from the kept route's.
    #[serde(default)]
    pub conflicts: usize,
    pub aggregates_added: usize,
    pub fib: String,
    pub fib_build_ms: f64,
    pub fib_memory_bytes: usize,
    pub gen_mode: GenMode,
    pub tsc_hz: u64,
    /// Where the TSC rate came from (the kernel's log, or calibration).
    pub tsc_source: String,
    pub stats_path: String,
    pub cores: usize,
    /// What plays the device: the synthetic one (`thread` or `inline`), or the kernel's
    /// sockets on real interfaces (`AF_XDP on IN -> OUT`).
    pub device: String,
    /// afxdp: the XDP attach mode and copy mode the kernel gave, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp: Option<XskReport>,
}

/// Load or generate the table a config names (with aggregates if asked).
pub fn load_table(cfg: &Config) -> Result<RouteTable> {
    match &cfg.table {
        TableSource::Generated { routes, seed } => Ok(RouteTable::generate(*routes, cfg.nexthops, *seed)),
        TableSource::File { path, aggregates } => {
            let mut t = RouteTable::load(path, &LoadOptions { nexthops: cfg.nexthops, ports: 2 })?;
            if *aggregates {
                t.add_aggregates();
            }
            Ok(t)
        }
    }
}

/// Output side of every next hop.
pub fn resolve_nexthops(t: &RouteTable) -> Arc<[NhOut]> {
    t.nexthops
        .iter()
        .map(|n| NhOut {
            dst_mac: (n.gateway != Ipv4Addr::UNSPECIFIED).then(|| mac_for(u32::from(n.gateway))),
            src_mac: port_mac(n.port),
            port: n.port,
        })
        .collect()
}

/// Output side of every next hop on a real interface (afpacket): the interface's own MAC as
/// source, each gateway's MAC from the kernel's neighbour table on that interface.
pub fn resolve_nexthops_on(t: &RouteTable, out_if: &str) -> Result<Arc<[NhOut]>> {
    let src_mac = crate::nic::afpacket::if_mac(out_if)?;
    let arp = crate::nic::afpacket::arp_table()?;
    t.nexthops
        .iter()
        .map(|n| {
            if n.gateway == Ipv4Addr::UNSPECIFIED {
                return Err(Error::Config(format!(
                    "afpacket: a route without a gateway (connected) on {out_if}: give every route `via GATEWAY`"
                )));
            }
            let mac = crate::nic::afpacket::neighbour_mac(&arp, n.gateway, out_if).ok_or_else(|| {
                Error::Config(format!(
                    "afpacket: no neighbour entry for gateway {} on {out_if} (add one: ip neigh replace {} lladdr MAC dev {out_if} nud permanent)",
                    n.gateway, n.gateway
                ))
            })?;
            Ok(NhOut { dst_mac: Some(mac), src_mac, port: 0 })
        })
        .collect::<Result<Vec<_>>>()
        .map(Arc::from)
}

/// A running forwarder.
pub struct Forwarder {
    seg: Arc<Segment>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    device: Option<JoinHandle<()>>,
    pub info: RunInfo,
    pub started: Instant,
    pub config: Config,
}

/// What every worker thread shares.
struct Shared {
    cfg: Config,
    fib: Arc<Fib>,
    nh_out: Arc<[NhOut]>,
    arena: Arc<BufferArena>,
    depot: Arc<crate::slab::Depot>,
    seg: Arc<Segment>,
    stop: Arc<AtomicBool>,
}

/// One worker's queue before its thread starts: its rx ring and its device (the
/// synthetic device inline, or the kernel's AF_PACKET rings), and the device's counters.
struct Queue {
    id: usize,
    ring: Arc<RxRing>,
    inline: Option<GenQueue>,
    dev_stats: Arc<crate::nic::synthetic::DeviceStats>,
    port: Option<PortQueue>,
}

/// A worker's real-interface port.
enum PortQueue {
    Afp(AfpQueue),
    Xdp(XskQueue),
}

/// afxdp: the UMEM over the whole arena and each worker's sockets (worker `w` on its
/// share of the input queues and queue `w` of the output interface), opened before any
/// thread starts. In auto mode a native attach the interface refuses is retried in
/// generic mode from scratch (a new UMEM), and the report says why. Returns the queues and
/// the report of what the kernel gave (the first queue's, with the socket count).
fn open_xsk_ports(cfg: &Config, arena: &Arc<BufferArena>) -> Result<(Vec<XskQueue>, XskReport)> {
    use crate::nic::afxdp::XdpMode;
    if cfg.xdp.mode == XdpMode::Generic {
        return open_xsk_ports_as(cfg, arena, &cfg.xdp);
    }
    // Native or auto: attach libxdp's program natively with no socket, and detach it: that
    // tells whether the interface takes native XDP without leaving a refused socket behind
    // (the kernel keeps such a queue unusable for a few seconds).
    let lib = crate::nic::xdp_sys::libxdp()?;
    let in_if = cfg.in_if.as_deref().unwrap_or_default();
    let idx = crate::nic::afpacket::ifindex(in_if)?;
    let native = crate::nic::afxdp::XskOptions { mode: XdpMode::Native, ..cfg.xdp };
    match lib.probe_native(idx) {
        Ok(()) => open_xsk_ports_as(cfg, arena, &native),
        // Not a refusal of native mode: the attach through a socket says what it is.
        Err(e) if [libc::EPERM, libc::EBUSY, libc::ENOENT].contains(&e) => open_xsk_ports_as(cfg, arena, &native),
        Err(e) if cfg.xdp.mode == XdpMode::Native => Err(Error::Config(format!(
            "afxdp: native XDP on {in_if} (--xdp-mode native): {}{}",
            lib.error_text(-e),
            crate::nic::afxdp::native_refusal_hint(e)
        ))),
        Err(e) => {
            let generic = crate::nic::afxdp::XskOptions { mode: XdpMode::Generic, ..cfg.xdp };
            let (qs, mut rep) = open_xsk_ports_as(cfg, arena, &generic)?;
            rep.xdp_why = format!("native attach refused ({}); fell back to generic", lib.error_text(-e));
            Ok((qs, rep))
        }
    }
}

fn open_xsk_ports_as(
    cfg: &Config,
    arena: &Arc<BufferArena>,
    opts: &crate::nic::afxdp::XskOptions,
) -> Result<(Vec<XskQueue>, XskReport)> {
    let (Some(i), Some(o)) = (&cfg.in_if, &cfg.out_if) else {
        return Err(Error::Config("--driver afxdp needs --in IF and --out IF".into()));
    };
    use crate::nic::afxdp as xdp;
    let in_queues = xdp::queue_counts(i).0;
    let plans = xdp::plan_queues(i, in_queues, xdp::queue_counts(o).1, cfg.workers)?;
    // A pool's fill and completion rings serve every worker bound to its queue: sized for
    // all of them (a ring entry is 8 bytes).
    let w = cfg.workers as u32;
    let umem = xdp::register_umem(arena, cfg.rx_ring as u32 * w, cfg.tx_ring as u32 * w)?;
    let spread = if xdp::spreads(in_queues, cfg.workers) { Some(attach_spread(i, opts)?) } else { None };
    let mut setup = xdp::XskSetup::new(umem, spread);
    let mut qs = Vec::new();
    let mut first: Option<XskReport> = None;
    let mut socks = 0;
    for plan in &plans {
        let (x, r) = XskQueue::open(&mut setup, arena, (i, o), plan, (cfg.rx_ring as u32, cfg.tx_ring as u32), opts)?;
        socks += x.rx_queue_ids().len();
        qs.push(x);
        first.get_or_insert(r);
    }
    setup.spread_over(&qs)?;
    let mut rep = first.ok_or_else(|| Error::Config("afxdp: no worker".into()))?;
    rep.queues = socks;
    if xdp::spreads(in_queues, cfg.workers) {
        rep.queues = 1;
        rep.spread = format!(
            "{i} has one rx queue: {} sockets on it, flows spread over them by fwdscope's XDP program",
            cfg.workers
        );
    }
    Ok((qs, rep))
}

/// Attach fwdscope's flow-spreading XDP program to `in_if` in the mode `opts` asks for
/// (auto mode was resolved to native or generic by the caller).
fn attach_spread(in_if: &str, opts: &crate::nic::afxdp::XskOptions) -> Result<crate::nic::xdp_sys::SpreadProg> {
    use crate::nic::xdp_sys as sys;
    let lib = sys::libxdp()?;
    let idx = crate::nic::afpacket::ifindex(in_if)?;
    let (mode, name) = match opts.mode {
        crate::nic::afxdp::XdpMode::Generic => (sys::XDP_MODE_SKB, "generic"),
        _ => (sys::XDP_MODE_NATIVE, "native"),
    };
    sys::SpreadProg::attach(lib, idx, mode).map_err(|(e, text)| {
        let hint = match e {
            0 => String::new(),
            libc::EBUSY | libc::EEXIST => format!(
                " ({in_if} already has an XDP program: another forwarder runs there, or one was killed without detaching; stop it, or if none runs, detach it with `ip link set dev {in_if} xdp off`)"
            ),
            libc::EPERM | libc::EACCES => " (needs CAP_NET_ADMIN and CAP_BPF, or root)".into(),
            _ => crate::nic::afxdp::native_refusal_hint(e).into(),
        };
        Error::Config(format!("afxdp: attaching the flow-spreading XDP program to {in_if} in {name} mode: {text}{hint}"))
    })
}

/// afpacket: each worker's sockets, opened before any thread starts so that a failure stops
/// the start. With several workers the rx sockets share a fanout group (flows spread by
/// hash across workers).
fn open_ports(cfg: &Config) -> Result<Vec<AfpQueue>> {
    let (Some(i), Some(o)) = (&cfg.in_if, &cfg.out_if) else { return Ok(Vec::new()) };
    let group = (std::process::id() & 0xffff) as u16;
    (0..cfg.workers)
        .map(|_| {
            Ok(AfpQueue {
                rx: AfpRx::open(i, (cfg.workers > 1).then_some(group))?,
                tx: AfpTx::open(o)?,
                dev: RxDevice { ring: Arc::new(RxRing::new(8)), filled: 0 },
            })
        })
        .collect()
}

/// Bytes a generated route costs while the table and its FIB are built (a 12-byte route,
/// up to ~40 bytes of trie or hash node, and the sort's copies), rounded up.
const BYTES_PER_ROUTE: u64 = 96;

/// What this configuration allocates before it forwards, by part, in bytes: an upper
/// estimate from the sizes of the structures (the route cache counted full, since it
/// may fill to max_size while running). A file table's size is known only once read and
/// is not counted here.
pub fn memory_estimate(cfg: &Config) -> Vec<(&'static str, u64)> {
    let w = cfg.workers as u64;
    let queue_bufs = (cfg.rx_ring + cfg.tx_ring + 4 * crate::burst::MAX_BURST + 256) as u64;
    // Per dst object: the entry, its pending-free slot and its slab pointer.
    let dst = (std::mem::size_of::<crate::rtcache::DstEntry>() + 4 + 8) as u64;
    let rtcache = w.saturating_mul(
        (cfg.rt.hash_buckets as u64).saturating_mul(4).saturating_add((cfg.rt.max_size as u64).saturating_mul(dst)),
    );
    // Per flow: a 64-byte header slot and its packets-left counter.
    let flows = (cfg.traffic.flows as u64).saturating_mul(68);
    // Per generated route: the route, its FIB node(s) and the copies made while sorting.
    let table = match cfg.table {
        crate::config::TableSource::Generated { routes, .. } => (routes as u64).saturating_mul(BYTES_PER_ROUTE),
        crate::config::TableSource::File { .. } => 0,
    };
    let fib = if cfg.fib == crate::fib::FibKind::Dir24 { (1u64 << 24) * 4 } else { 0 };
    vec![
        ("packet buffers", w.saturating_mul(queue_bufs).saturating_mul(crate::nic::BUF_STRIDE as u64)),
        ("route cache (full)", rtcache),
        ("flows", flows),
        ("generated table", table),
        ("FIB first level", fib),
    ]
}

/// Start worker `q.id`'s thread: it builds its worker there (first touch on its own core)
/// and runs it until stopped.
fn spawn_worker(s: &Shared, q: Queue) -> Result<JoinHandle<()>> {
    let (cfg, fib, nh, arena, depot, seg, stop) = (
        s.cfg.clone(),
        s.fib.clone(),
        s.nh_out.clone(),
        s.arena.clone(),
        s.depot.clone(),
        s.seg.clone(),
        s.stop.clone(),
    );
    std::thread::Builder::new()
        .name(fwd_abi::threads::worker_thread_name(q.id))
        .spawn(move || {
            if cfg.pin {
                pin_to_cpu(q.id);
            }
            let mut w = Worker::new(
                q.id,
                &cfg,
                fib,
                nh,
                arena,
                SlabCache::new(depot),
                q.ring,
                q.inline,
                q.dev_stats,
                Some(seg),
            );
            match q.port {
                Some(PortQueue::Afp(p)) => w.attach(p),
                Some(PortQueue::Xdp(p)) => w.attach_xdp(p),
                None => {}
            }
            w.run(&stop);
        })
        .map_err(|e| Error::Sys { what: "spawning a worker thread".into(), source: e })
}

/// The synthetic device's mode for `cfg` on a machine of `cores` cores: auto runs the
/// device on a thread of its own when a core is left over for it, inline otherwise.
fn resolve_gen_mode(cfg: &Config, cores: usize) -> GenMode {
    match cfg.gen_mode {
        GenMode::Auto if cfg.workers < cores => GenMode::Thread,
        GenMode::Auto => GenMode::Inline,
        m => m,
    }
}

/// Where the stats segment goes: the configured path, or this process's default path
/// (after removing the segments of forwarders that were killed before they could).
fn stats_path_for(cfg: &Config) -> std::path::PathBuf {
    match &cfg.stats_path {
        Some(p) => p.clone(),
        None => {
            // Segments of forwarders that were killed before they could remove theirs.
            fwd_abi::segment::remove_stale(std::path::Path::new(fwd_abi::segment::SEGMENT_DIR));
            default_path(std::process::id())
        }
    }
}

/// What was set up, for reports (the afxdp report is added once the sockets are open).
fn run_info(
    cfg: &Config,
    table: &RouteTable,
    fib: &Fib,
    fib_build_ms: f64,
    gen_mode: GenMode,
    stats_path: &std::path::Path,
    cores: usize,
) -> RunInfo {
    let tsc = crate::cpu::tsc_rate();
    RunInfo {
        table_source: table.source.clone(),
        routes: table.routes.len(),
        nexthops: table.nexthops.len(),
        duplicates: table.duplicates,
        conflicts: table.conflicts,
        aggregates_added: table.aggregates_added,
        fib: cfg.fib.to_string(),
        fib_build_ms,
        fib_memory_bytes: fib.memory_bytes(),
        gen_mode,
        tsc_hz: tsc.hz,
        tsc_source: tsc.source.clone(),
        stats_path: stats_path.display().to_string(),
        cores,
        device: match (cfg.driver, &cfg.in_if, &cfg.out_if) {
            (DriverKind::Afpacket, Some(i), Some(o)) => format!("AF_PACKET on {i} -> {o}"),
            (DriverKind::Afxdp, Some(i), Some(o)) => format!("AF_XDP on {i} -> {o}"),
            _ => gen_mode.to_string(),
        },
        xdp: None,
    }
}

/// Create the stats segment at `path` for `cfg`'s workers, publishing `cfg` and `info`,
/// and set its controls (prefetch, cache mode, stage clock, spin, route-cache GC) from `cfg`.
fn create_segment(cfg: &Config, path: &std::path::Path, info: &RunInfo) -> Result<Arc<Segment>> {
    // Published typed (fwd_abi::Published): every observer reads it through that type.
    let cfg_json = fwd_abi::Published::of(cfg, info)?.to_json();
    let seg = Arc::new(Segment::create(path, cfg.workers, &cfg_json, info.tsc_hz)?);
    let c = seg.control();
    c.prefetch.store(u32::from(cfg.prefetch), Ordering::Relaxed);
    c.cache_mode.store(cfg.cache.code(), Ordering::Relaxed);
    c.stage_clock.store(u32::from(cfg.stage_clock), Ordering::Relaxed);
    c.spin_ns.store(cfg.spin_ns, Ordering::Relaxed);
    let rt = &cfg.rt;
    c.store_gc(fwd_abi::GcTunables {
        thresh: rt.gc_thresh.min(u32::MAX as usize) as u32,
        elasticity: rt.gc_elasticity.min(u32::MAX as usize) as u32,
        min_interval_ms: rt.gc_min_interval_ms.min(u32::MAX as u64) as u32,
        timeout_s: rt.gc_timeout_s.min(u32::MAX as u64) as u32,
    });
    Ok(seg)
}

/// Real interfaces: each worker's queue, its port the next of `xsk` (afxdp) or of `ports`
/// (afpacket), the kernel's rx ring the device of its descriptor ring.
fn port_queues(
    cfg: &Config,
    afxdp: bool,
    mut xsk: impl Iterator<Item = XskQueue>,
    mut ports: impl Iterator<Item = AfpQueue>,
) -> Vec<Queue> {
    let mut queues = Vec::new();
    for id in 0..cfg.workers {
        let ring = Arc::new(RxRing::new(cfg.rx_ring));
        // The kernel's rx ring is the device of this worker's descriptor ring.
        let dev = RxDevice { ring: ring.clone(), filled: 0 };
        let port = if afxdp {
            xsk.next().map(|mut p| {
                p.dev = dev;
                PortQueue::Xdp(p)
            })
        } else {
            ports.next().map(|mut p| {
                p.dev = dev;
                PortQueue::Afp(p)
            })
        };
        queues.push(Queue { id, ring, inline: None, dev_stats: Arc::default(), port });
    }
    queues
}

/// Synthetic device: each worker's queue and its generator, run inline by the worker or
/// (thread mode) by the device thread. Returns the queues and the device thread's share.
fn generator_queues(
    cfg: &Config,
    table: &RouteTable,
    arena: &Arc<BufferArena>,
    gen_mode: GenMode,
) -> Result<(Vec<Queue>, Vec<GenQueue>)> {
    let mut queues = Vec::new();
    let mut dev_queues = Vec::new();
    let chooser = Arc::new(DstChooser::new(&table.routes, cfg.traffic.dst, cfg.traffic.seed)?);
    let per_queue_rate = cfg.traffic.rate.map(|r| r / cfg.workers as f64);
    for id in 0..cfg.workers {
        let ring = Arc::new(RxRing::new(cfg.rx_ring));
        let gen = FlowGen::new(&cfg.traffic, chooser.clone(), id, cfg.workers);
        let mut gq = GenQueue::new(ring.clone(), gen, arena.clone(), per_queue_rate);
        gq.dma = if gen_mode == GenMode::Thread { cfg.dma } else { DmaModel::Cached };
        let dev_stats = gq.stats.clone();
        let inline = if gen_mode == GenMode::Inline {
            Some(gq)
        } else {
            dev_queues.push(gq);
            None
        };
        queues.push(Queue { id, ring, inline, dev_stats, port: None });
    }
    Ok((queues, dev_queues))
}

/// Start the synthetic device's thread over `dev_queues` (pinned to `cpu` when `pin`);
/// none when no queue is left to it.
fn spawn_device_thread(
    dev_queues: Vec<GenQueue>,
    stop: Arc<AtomicBool>,
    pin: bool,
    cpu: usize,
) -> Result<Option<JoinHandle<()>>> {
    if dev_queues.is_empty() {
        return Ok(None);
    }
    let handle = std::thread::Builder::new()
        .name(fwd_abi::threads::DEVICE_THREAD.into())
        .spawn(move || {
            if pin {
                pin_to_cpu(cpu);
            }
            run_device_thread(dev_queues, stop)
        })
        .map_err(|e| Error::Sys { what: "spawning the device thread".into(), source: e })?;
    Ok(Some(handle))
}

impl Forwarder {
    /// Build everything and start the threads.
    pub fn start(cfg: &Config) -> Result<Forwarder> {
        cfg.validate()?;
        if let Some(avail) = crate::config::mem_available() {
            cfg.check_memory(memory_estimate(cfg), avail)?;
        }
        let table = load_table(cfg)?;
        let t0 = Instant::now();
        let fib = Arc::new(Fib::build(cfg.fib, &table.routes)?);
        let fib_build_ms = t0.elapsed().as_secs_f64() * 1e3;
        let afpacket = cfg.driver == DriverKind::Afpacket;
        let afxdp = cfg.driver == DriverKind::Afxdp;
        let nh_out = match (&cfg.out_if, afpacket || afxdp) {
            (Some(out), true) => resolve_nexthops_on(&table, out)?,
            _ => resolve_nexthops(&table),
        };
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let gen_mode = resolve_gen_mode(cfg, cores);
        let stats_path = stats_path_for(cfg);
        let mut info = run_info(cfg, &table, &fib, fib_build_ms, gen_mode, &stats_path, cores);
        let per_queue = cfg.rx_ring + cfg.tx_ring + 4 * crate::burst::MAX_BURST + 256;
        let count = (per_queue * cfg.workers) as u32;
        // afxdp: the arena is the UMEM; the kernel puts a frame 256 bytes into its buffer.
        let arena = Arc::new(if afxdp {
            BufferArena::with_headroom(count, crate::nic::afxdp::HEADROOM)?
        } else {
            BufferArena::new(count)?
        });
        let xsk = if afxdp {
            let (qs, rep) = open_xsk_ports(cfg, &arena)?;
            info.xdp = Some(rep);
            qs
        } else {
            Vec::new()
        };
        let seg = create_segment(cfg, &stats_path, &info)?;

        let depot = Depot::new("pktbuf", arena.count(), 64, cfg.workers);
        let ports = if afpacket { open_ports(cfg)? } else { Vec::new() };
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared { cfg: cfg.clone(), fib, nh_out, arena: arena.clone(), depot, seg: seg.clone(), stop };
        let (queues, dev_queues) = if afpacket || afxdp {
            (port_queues(cfg, afxdp, xsk.into_iter(), ports.into_iter()), Vec::new())
        } else {
            generator_queues(cfg, &table, &arena, gen_mode)?
        };
        let workers = queues.into_iter().map(|q| spawn_worker(&shared, q)).collect::<Result<Vec<_>>>()?;
        let device = spawn_device_thread(dev_queues, shared.stop.clone(), cfg.pin, cores - 1)?;
        seg.set_state(State::Running);
        Ok(Forwarder { seg, stop: shared.stop, workers, device, info, started: Instant::now(), config: cfg.clone() })
    }

    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }

    /// True once a controller asked for a stop or a worker exited.
    pub fn stop_requested(&self) -> bool {
        self.seg.control().stop.load(Ordering::Relaxed) != 0 || self.workers.iter().any(|h| h.is_finished())
    }

    /// Stop every thread and wait for them; marks the segment exited.
    pub fn stop(mut self) -> Result<Arc<Segment>> {
        self.stop.store(true, Ordering::Relaxed);
        let mut panicked = 0;
        for h in self.workers.drain(..) {
            if h.join().is_err() {
                panicked += 1;
            }
        }
        if let Some(d) = self.device.take() {
            if d.join().is_err() {
                panicked += 1;
            }
        }
        self.seg.set_state(State::Exited);
        if panicked > 0 {
            return Err(Error::Config(format!("{panicked} forwarder thread(s) panicked")));
        }
        Ok(self.seg.clone())
    }

    /// Sleep until `d` has passed since `since`, waking early on a stop request.
    pub fn wait_until(&self, since: Instant, d: Duration, interrupted: &AtomicBool) -> bool {
        while since.elapsed() < d {
            if interrupted.load(Ordering::Relaxed) || self.stop_requested() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10).min(d.saturating_sub(since.elapsed())));
        }
        true
    }
}

/// A single worker (queue 0) with its device inline and no stats segment, driven by calling
/// [`Worker::poll`] on the current thread: for tests and benchmarks.
pub fn standalone_worker(cfg: &Config, table: &RouteTable) -> Result<Worker> {
    cfg.validate()?;
    let fib = Arc::new(Fib::build(cfg.fib, &table.routes)?);
    let per_queue = cfg.rx_ring + cfg.tx_ring + 4 * crate::burst::MAX_BURST + 256;
    let arena = Arc::new(BufferArena::new(per_queue as u32)?);
    let depot = Depot::new("pktbuf", arena.count(), 64, 1);
    let chooser = Arc::new(DstChooser::new(&table.routes, cfg.traffic.dst, cfg.traffic.seed)?);
    let ring = Arc::new(RxRing::new(cfg.rx_ring));
    let mut gq =
        GenQueue::new(ring.clone(), FlowGen::new(&cfg.traffic, chooser, 0, 1), arena.clone(), cfg.traffic.rate);
    gq.dma = DmaModel::Cached;
    let dev_stats = gq.stats.clone();
    Ok(Worker::new(0, cfg, fib, resolve_nexthops(table), arena, SlabCache::new(depot), ring, Some(gq), dev_stats, None))
}
