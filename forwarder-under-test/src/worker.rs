//! The worker: per-queue state (cache-line aligned, touched by one thread) and the burst
//! loop that runs the stages in order, applies control-block requests, keeps the stage
//! clocks and publishes counters to the stats segment.
//!
//! One burst, its phases, and the stage each is clocked to (one TSC read per boundary):
//!
//! ```text
//! nic        the synthetic device, when it runs inline (simulated DMA)
//! driver rx  AF_PACKET: frames from the kernel's ring (AF_XDP: fill ring, XSK rx ring);
//!            then take completed descriptors
//! idle       an rx poll that found nothing (the burst ends there)
//! slab       buffers for the slots taken; dst objects for the lookups ahead
//! driver rx  post the fresh buffers
//! ip         header checks, TTL
//! lookup     route cache or FIB (a garbage-collector run inside it is clocked as gc)
//! driver tx  reclaim, MAC rewrite, tx ring, doorbell
//! slab       free what the burst released (buffers, dsts)
//! gc         the expiry timer, when due
//! calib      the calibration spin (--spin-ns), when set
//! ```

use crate::burst::{Burst, Stage, StageClock, MAX_BURST, NIL};
use crate::config::{CacheMode, Config};
use crate::cpu::{rdtsc, tsc_hz};
use crate::fib::Fib;
use crate::nic::afpacket::AfpQueue;
use crate::nic::afxdp::XskQueue;
use crate::nic::synthetic::{fwd_nic_generate, DeviceStats, GenQueue};
use crate::nic::{BufferArena, RxDriver, RxRing, TxRing};
use crate::rtcache::gc::{fwd_gc_rt_cache_flush, fwd_gc_rt_check_expire};
use crate::rtcache::RtCache;
use crate::slab::{fwd_slab_free_bulk, SlabCache};
use crate::stages::calib::fwd_calib_spin;
use crate::stages::driver_rx::{
    fwd_driver_afp_rx, fwd_driver_rx_burst, fwd_driver_rx_post, fwd_driver_xdp_rx, rx_refill_all, rx_refill_alloc,
};
use crate::stages::driver_tx::{
    count_tx, fwd_driver_afp_tx_flush, fwd_driver_tx_burst, fwd_driver_xdp_tx_complete, NhOut, Port,
};
use crate::stages::idle::{fwd_idle_poll, fwd_idle_poll_xdp, fwd_idle_wait_afp, fwd_idle_wait_xdp};
use crate::stages::ip::fwd_ip_input_burst;
use crate::stages::lookup::{fwd_lookup_burst, LookupCtx};
use fwd_abi::{Ctr, Segment, N_COUNTERS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Checks of the rx ring an empty poll spins through (inside `fwd_idle_poll`) before the
/// burst loop goes round again: a few hundred ns, shorter than a burst.
const IDLE_SPINS: u32 = 64;

/// Everything one worker owns.
#[repr(align(64))]
pub struct Worker {
    pub id: usize,
    rx: RxDriver,
    tx: TxRing,
    bufs: SlabCache,
    arena: Arc<BufferArena>,
    fib: Arc<Fib>,
    nh_out: Arc<[NhOut]>,
    pub rt: RtCache,
    nh_dst: Vec<u32>,
    pub mode: CacheMode,
    pub prefetch: usize,
    burst_size: usize,
    pub ctr: Vec<u64>,
    /// The per-burst stage clocks (and calls and packets per stage).
    pub clk: StageClock,
    /// The device, when it runs inline.
    pub gen: Option<GenQueue>,
    dev_stats: Arc<DeviceStats>,
    seg: Option<Arc<Segment>>,
    ctrl_gen: u64,
    flush_seen: u64,
    tsc0: u64,
    tsc_per_jiffy: u64,
    burst: Burst,
    /// Buffers a burst releases (dropped, reclaimed from tx), freed at its slab stage.
    to_free: Vec<u32>,
    /// Fresh rx buffers between the slab stage and the rx post (kept here: a zeroed array
    /// on the stack per burst costs a memset call).
    fresh: [u32; MAX_BURST],
    /// afpacket: the kernel's rings standing in for the device.
    afp: Option<AfpQueue>,
    /// afxdp: the XSK sockets standing in for the device, and when their kernel counters
    /// were last read (TSC).
    xdp: Option<XskQueue>,
    xdp_stats_last: u64,
    /// afxdp rx coalescing window in TSC ticks (0: off).
    xdp_coalesce: u64,
    /// The calibration cost per packet (ns) and the same in TSC ticks.
    spin_ns: u32,
    spin_ticks: u64,
    /// What a spin call costs beyond its ticks (asked for less by that much).
    spin_overhead: u64,
    /// This thread's schedstat, read by [`Worker::read_schedstat`], and when it last was.
    sched: Option<std::fs::File>,
    sched_last: u64,
    /// The setting the controller named for what is in force now.
    setting: u64,
}

impl Worker {
    /// A worker for queue `id`; posts its whole rx ring.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: usize,
        cfg: &Config,
        fib: Arc<Fib>,
        nh_out: Arc<[NhOut]>,
        arena: Arc<BufferArena>,
        bufs: SlabCache,
        rx_ring: Arc<RxRing>,
        gen: Option<GenQueue>,
        dev_stats: Arc<DeviceStats>,
        seg: Option<Arc<Segment>>,
    ) -> Worker {
        let seed = (rdtsc() as u32) ^ (id as u32).wrapping_mul(0x9E37_79B9);
        let n_nh = nh_out.len();
        let mut w = Worker {
            id,
            rx: RxDriver::new(rx_ring),
            tx: TxRing::new(cfg.tx_ring),
            bufs,
            arena,
            fib,
            nh_out,
            rt: RtCache::new(&cfg.rt, 2 * MAX_BURST + n_nh + 64, seed),
            nh_dst: vec![NIL; n_nh],
            mode: cfg.cache,
            prefetch: cfg.prefetch.depth(),
            burst_size: cfg.burst,
            ctr: vec![0; N_COUNTERS],
            clk: StageClock::new(cfg.stage_clock, cfg.clock_one_in, 0x9e37_79b9_7f4a_7c15 ^ (id as u64 + 1)),
            gen,
            dev_stats,
            seg,
            ctrl_gen: 0,
            flush_seen: 0,
            tsc0: rdtsc(),
            tsc_per_jiffy: (tsc_hz() / cfg.rt.hz.max(1)).max(1),
            burst: Burst::default(),
            to_free: Vec::with_capacity(cfg.tx_ring + 4 * MAX_BURST),
            fresh: [0; MAX_BURST],
            afp: None,
            xdp: None,
            xdp_stats_last: 0,
            xdp_coalesce: tsc_hz() / 1_000_000 * u64::from(cfg.xdp.coalesce_us),
            spin_ns: 0,
            spin_ticks: 0,
            spin_overhead: 0,
            sched: None,
            sched_last: 0,
            setting: 0,
        };
        w.set_stage_clock(cfg.stage_clock);
        w.set_spin(cfg.spin_ns);
        rx_refill_all(&mut w.rx, &mut w.bufs, &mut w.ctr);
        if let Some(seg) = &w.seg {
            w.flush_seen = seg.control().flush.load(Ordering::Relaxed);
        }
        w
    }

    /// Take packets from real interfaces (afpacket) instead of a synthetic device.
    pub fn attach(&mut self, q: AfpQueue) {
        self.afp = Some(q);
    }

    /// Take packets from real interfaces through AF_XDP sockets.
    pub fn attach_xdp(&mut self, q: XskQueue) {
        self.xdp = Some(q);
    }

    /// Jiffies since the worker started: the route cache's clock, read once per burst
    /// just before the lookups (the stage clocks charge it to lookup, and so does the
    /// stage map's rule for this function).
    #[inline(always)]
    fn now(&self) -> u64 {
        rdtsc().wrapping_sub(self.tsc0) / self.tsc_per_jiffy
    }

    /// One pass of the burst loop (the phases in the module docs). Returns packets
    /// received. Its phases are `#[inline(always)]` helpers: this is the forwarding hot
    /// path, and they compile into this one function as if written in it.
    #[inline]
    pub fn poll(&mut self) -> usize {
        self.clk.start();
        self.poll_devices();
        if self.rx.peek_done(0).is_none() && !self.wait_for_rx() {
            return 0;
        }
        let pf = self.prefetch;
        let n = self.receive_burst(pf);
        self.lookup_burst(pf);
        let out = self.transmit_burst();
        self.after_burst(out);
        n
    }

    /// Nic and driver rx: run an inline synthetic device, or move frames from the kernel's
    /// rings (AF_PACKET, AF_XDP) to the worker's rx ring.
    #[inline(always)]
    fn poll_devices(&mut self) {
        if let Some(g) = self.gen.as_mut() {
            let made = fwd_nic_generate(g, self.burst_size);
            self.clk.lap(Stage::Nic);
            self.clk.call(Stage::Nic, made);
        }
        if let Some(q) = self.afp.as_mut() {
            let moved = fwd_driver_afp_rx(q, &self.arena, self.burst_size, &mut self.ctr);
            self.dev_stats.packets.fetch_add(moved as u64, Ordering::Relaxed);
            self.clk.lap(if moved > 0 { Stage::DriverRx } else { Stage::Idle });
        }
        if let Some(q) = self.xdp.as_mut() {
            // Waiting for the kernel is idle by both instruments: the spin is in a stage-idle
            // function, and only a poll with work to do enters the driver.
            let moved = if self.rx.peek_done(0).is_some()
                || fwd_idle_poll_xdp(q, IDLE_SPINS, self.burst_size as u32, self.xdp_coalesce)
            {
                self.clk.lap(Stage::Idle);
                fwd_driver_xdp_rx(q, &self.arena, self.burst_size, &mut self.ctr)
            } else {
                0
            };
            self.dev_stats.packets.fetch_add(moved as u64, Ordering::Relaxed);
            self.clk.lap(if moved > 0 { Stage::DriverRx } else { Stage::Idle });
        }
    }

    /// Idle: the rx ring had nothing done. Spin briefly for a device thread; when still
    /// nothing arrived, flush what waits to be sent and take back finished sends. Returns
    /// whether frames arrived (false: the poll ends here).
    #[inline(always)]
    fn wait_for_rx(&mut self) -> bool {
        // Only a device thread fills the ring while we wait; an inline device and the
        // kernel's rings fill it when polled.
        let separate = self.gen.is_none() && self.afp.is_none() && self.xdp.is_none();
        let arrived = separate && fwd_idle_poll(&self.rx, IDLE_SPINS);
        self.clk.lap(Stage::Idle);
        if !arrived {
            self.clk.call(Stage::Idle, 0);
            self.ctr[Ctr::IdlePolls as usize] += 1;
            if let Some(q) = self.afp.as_mut() {
                // Nothing came in: what waits for a batch goes out now.
                fwd_driver_afp_tx_flush(&mut q.tx, &mut self.ctr);
                self.clk.lap(Stage::DriverTx);
            }
            if let Some(q) = self.xdp.as_mut() {
                // Nothing came in: take back what the kernel finished sending.
                fwd_driver_xdp_tx_complete(q, &mut self.ctr, &mut self.to_free);
                self.clk.lap(Stage::DriverTx);
                if !self.to_free.is_empty() {
                    fwd_slab_free_bulk(&mut self.bufs, &self.to_free);
                    self.to_free.clear();
                    self.clk.lap(Stage::Slab);
                }
            }
        }
        arrived
    }

    /// Driver rx, slab and ip: take a burst of completed descriptors, refill and post the
    /// rx slots, stash dst objects, check the headers. Returns packets received.
    #[inline(always)]
    fn receive_burst(&mut self, pf: usize) -> usize {
        let n = fwd_driver_rx_burst(&self.arena, pf, &mut self.rx, &mut self.burst, self.burst_size, &mut self.ctr);
        self.clk.lap(Stage::DriverRx);
        self.clk.call(Stage::DriverRx, n);
        self.ctr[Ctr::Bursts as usize] += 1;
        // Slab: buffers for the rx slots just taken, dst objects for the lookups ahead
        // (every packet may need one in rtcache and nocache modes).
        let (want, got) = rx_refill_alloc(&self.rx, &mut self.bufs, &mut self.fresh);
        if self.mode != CacheMode::Nhcache {
            self.rt.fill_stash(n);
        }
        self.clk.lap(Stage::Slab);
        self.clk.call(Stage::Slab, n);
        fwd_driver_rx_post(&mut self.rx, &self.fresh[..got], want, &mut self.ctr);
        self.clk.lap(Stage::DriverRx);
        fwd_ip_input_burst(&self.arena, &mut self.burst, pf, &mut self.ctr, &mut self.to_free);
        self.clk.lap(Stage::Ip);
        self.clk.call(Stage::Ip, n);
        n
    }

    /// Lookup: route cache or FIB for the burst; a garbage-collector run inside it is moved
    /// to the gc stage's clock.
    #[inline(always)]
    fn lookup_burst(&mut self, pf: usize) {
        let now = self.now();
        let (m, gc0, gc_runs0) = (self.burst.n, self.rt.gc_tsc, self.rt.stat.gc_total - self.rt.stat.gc_ignored);
        let mut cx = LookupCtx {
            mode: self.mode,
            fib: &self.fib,
            rt: &mut self.rt,
            nh_dst: &mut self.nh_dst,
            iif: self.id as u16,
        };
        fwd_lookup_burst(&mut cx, &mut self.burst, now, pf, &mut self.ctr, &mut self.to_free);
        self.clk.lap(Stage::Lookup);
        self.clk.call(Stage::Lookup, m);
        let gc_runs = (self.rt.stat.gc_total - self.rt.stat.gc_ignored) - gc_runs0;
        if gc_runs > 0 {
            // Garbage-collector runs inside lookup, each timed as it ran (in every poll:
            // they are rare and long, sampling one poll in 8 would miss them).
            self.clk.move_clocks(self.rt.gc_tsc - gc0, Stage::Lookup, Stage::Gc);
            self.clk.calls[Stage::Gc as usize] += gc_runs;
            self.clk.packets[Stage::Gc as usize] += m as u64;
        }
    }

    /// Driver tx and slab: send the burst on the worker's port, then free what it released
    /// (buffers, dsts). Returns packets that went to transmit.
    #[inline(always)]
    fn transmit_burst(&mut self) -> usize {
        let out = self.burst.n;
        let port = match (self.afp.as_mut(), self.xdp.as_mut()) {
            (Some(q), _) => Port::Afp(&mut q.tx),
            (None, Some(q)) => Port::Xdp(q),
            (None, None) => Port::Synthetic,
        };
        fwd_driver_tx_burst(
            &mut self.tx,
            &self.arena,
            &self.burst,
            &self.nh_out,
            &mut self.rt,
            &mut self.ctr,
            &mut self.to_free,
            port,
        );
        self.clk.lap(Stage::DriverTx);
        self.clk.call(Stage::DriverTx, out);
        if !self.to_free.is_empty() {
            fwd_slab_free_bulk(&mut self.bufs, &self.to_free);
            self.to_free.clear();
        }
        self.rt.release_pending();
        self.clk.lap(Stage::Slab);
        out
    }

    /// Gc and calib: the route cache's expiry timer when due (rtcache mode), and the
    /// calibration spin for the `out` packets sent (--spin-ns).
    #[inline(always)]
    fn after_burst(&mut self, out: usize) {
        if self.mode == CacheMode::Rtcache {
            let now = self.now();
            if now >= self.rt.next_check {
                let t0 = if self.clk.enabled { rdtsc() } else { 0 };
                fwd_gc_rt_check_expire(&mut self.rt, now);
                if self.clk.enabled {
                    self.clk.add_every_poll(Stage::Gc, rdtsc().wrapping_sub(t0));
                }
                self.clk.call(Stage::Gc, 0);
            }
        }
        if self.spin_ticks > 0 && out > 0 {
            fwd_calib_spin((self.spin_ticks * out as u64).saturating_sub(self.spin_overhead));
            self.clk.lap(Stage::Calib);
            self.clk.call(Stage::Calib, out);
        }
    }

    /// At most every 10 ms (by the TSC): this thread's time on CPU and waiting to run from
    /// /proc/thread-self/schedstat (opened by the worker thread itself in [`Worker::run`]),
    /// so the stage clocks can leave out time the worker was preempted.
    fn read_schedstat(&mut self) {
        let Some(f) = &self.sched else { return };
        let now = rdtsc();
        if now.wrapping_sub(self.sched_last) < tsc_hz() / 100 {
            return;
        }
        self.sched_last = now;
        let mut buf = [0u8; 96];
        use std::os::unix::fs::FileExt;
        let Ok(n) = f.read_at(&mut buf, 0) else { return };
        let text = String::from_utf8_lossy(&buf[..n]);
        let mut it = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
        if let (Some(run), Some(wait)) = (it.next(), it.next()) {
            self.ctr[Ctr::SchedRunNs as usize] = run;
            self.ctr[Ctr::SchedWaitNs as usize] = wait;
        }
    }

    /// Turn the per-burst stage clocks on or off (the route cache times its GC runs
    /// with them).
    pub fn set_stage_clock(&mut self, on: bool) {
        self.clk.enabled = on;
        // Garbage-collector runs are timed in every poll while clocks are on (see
        // StageClock::move_clocks).
        self.rt.clock = on;
    }

    /// The calibration cost per forwarded packet, in ns (0: off).
    pub fn set_spin(&mut self, ns: u32) {
        self.spin_ns = ns;
        self.spin_ticks = (f64::from(ns) * tsc_hz() as f64 / 1e9).round() as u64;
        self.spin_overhead = if ns > 0 { crate::stages::calib::spin_overhead_ticks() } else { 0 };
    }

    /// Copies of the frames the last non-empty burst transmitted on the synthetic device:
    /// they stay on the tx ring until the next burst reclaims their buffers. For checking
    /// what the forwarder sends (tests, debugging); an empty poll leaves them unchanged.
    pub fn last_sent(&self) -> Vec<Vec<u8>> {
        (self.tx.clean..self.tx.head)
            .map(|s| {
                let (b, len) = self.tx.slot(s);
                // SAFETY: the buffer is on our tx ring, owned by this queue until reclaimed.
                let f = unsafe { &self.arena.buf_mut(b)[..usize::from(len)] };
                f.to_vec()
            })
            .collect()
    }

    /// Copy the worker's counters into its snapshot vector.
    pub fn fill_counters(&mut self) {
        if let Some(q) = self.afp.as_mut() {
            // Frames the kernel dropped because our rx ring was full.
            self.dev_stats.missed.fetch_add(q.rx.take_drops(), Ordering::Relaxed);
        }
        let due = rdtsc().wrapping_sub(self.xdp_stats_last) >= tsc_hz() / 100;
        if let Some(q) = self.xdp.as_ref().filter(|_| due) {
            // The kernel's own counts for our sockets (cumulative; two system calls, so at
            // most every 10 ms).
            self.xdp_stats_last = rdtsc();
            let x = q.statistics();
            self.ctr[Ctr::DropXdpRxDropped as usize] = x.rx_dropped;
            self.ctr[Ctr::DropXdpRxRingFull as usize] = x.rx_ring_full;
            self.ctr[Ctr::DropXdpTxInvalid as usize] = x.tx_invalid_descs;
            self.ctr[Ctr::XdpFillRingEmpty as usize] = x.rx_fill_ring_empty_descs;
            self.ctr[Ctr::XdpFillInvalid as usize] = x.rx_invalid_descs;
        }
        let s = &self.rt.stat;
        let c = &mut self.ctr;
        c[Ctr::RtEntries as usize] = self.rt.entries as u64;
        c[Ctr::RtInHit as usize] = s.in_hit;
        c[Ctr::RtInSlowTot as usize] = s.in_slow_tot;
        c[Ctr::RtInSlowMc as usize] = s.in_slow_mc;
        c[Ctr::RtInNoRoute as usize] = s.in_no_route;
        c[Ctr::RtInBrd as usize] = s.in_brd;
        c[Ctr::RtInMartianDst as usize] = s.in_martian_dst;
        c[Ctr::RtInMartianSrc as usize] = s.in_martian_src;
        c[Ctr::RtGcTotal as usize] = s.gc_total;
        c[Ctr::RtGcIgnored as usize] = s.gc_ignored;
        c[Ctr::RtGcGoalMiss as usize] = s.gc_goal_miss;
        c[Ctr::RtGcDstOverflow as usize] = s.gc_dst_overflow;
        c[Ctr::RtInHlistSearch as usize] = s.in_hlist_search;
        c[Ctr::RtFlushes as usize] = s.flushes;
        c[Ctr::RtExpired as usize] = s.expired;
        let b = &self.bufs.stats;
        c[Ctr::SlabBufAlloc as usize] = b.alloc;
        c[Ctr::SlabBufFree as usize] = b.free;
        c[Ctr::SlabBufAllocFail as usize] = b.alloc_fail;
        let d = &self.rt.slab.stats;
        c[Ctr::SlabDstAlloc as usize] = self.rt.dst_taken;
        c[Ctr::SlabDstFree as usize] = self.rt.dst_released;
        c[Ctr::SlabDstAllocFail as usize] = d.alloc_fail;
        c[Ctr::SlabDepotGet as usize] = b.depot_get + d.depot_get;
        c[Ctr::SlabDepotPut as usize] = b.depot_put + d.depot_put;
        c[Ctr::DevPackets as usize] = self.dev_stats.packets.load(Ordering::Relaxed);
        c[Ctr::RxMissed as usize] = self.dev_stats.missed.load(Ordering::Relaxed);
        self.clk.fill(c);
        c[Ctr::StageClockOn as usize] = u64::from(self.clk.enabled);
        c[Ctr::PrefetchDepth as usize] = self.prefetch as u64;
        c[Ctr::CacheMode as usize] = u64::from(self.mode.code());
        c[Ctr::SpinNs as usize] = u64::from(self.spin_ns);
        c[Ctr::Setting as usize] = self.setting;
        c[Ctr::CtrlGeneration as usize] = self.ctrl_gen;
    }

    fn publish(&mut self) {
        self.read_schedstat();
        self.fill_counters();
        // When these counters were true (a live comparison measures rates between two
        // publishes by the worker's own stamps, not by when a reader happened to look).
        self.ctr[Ctr::PublishMonoNs as usize] = fwd_abi::rows::mono_ns();
        if let Some(seg) = &self.seg {
            seg.publish(self.id, &self.ctr);
        }
    }

    /// Apply control-block requests. Returns true when asked to stop.
    fn apply_control(&mut self) -> bool {
        let Some(seg) = self.seg.clone() else {
            return false;
        };
        let c = seg.control();
        let g = c.generation.load(Ordering::Acquire);
        if g == self.ctrl_gen {
            return false;
        }
        self.ctrl_gen = g;
        // The switch stamp: this worker runs the new settings from this burst boundary on
        // (a live comparison assigns every interval and sample by it).
        self.ctr[Ctr::SwitchMonoNs as usize] = fwd_abi::rows::mono_ns();
        self.ctr[Ctr::SwitchTsc as usize] = rdtsc();
        // GC's goal misses so far: a phased experiment counts the ones a step's switch
        // causes from here, not from the snapshot before it.
        self.ctr[Ctr::SwitchGcGoalMiss as usize] = self.rt.stat.gc_goal_miss;
        self.prefetch = fwd_abi::Prefetch::clamped(u64::from(c.prefetch.load(Ordering::Relaxed))).depth();
        if let Some(m) = CacheMode::from_code(c.cache_mode.load(Ordering::Relaxed)) {
            self.set_mode(m);
        }
        self.set_stage_clock(c.stage_clock.load(Ordering::Relaxed) != 0);
        let spin = c.spin_ns.load(Ordering::Relaxed).min(fwd_abi::segment::MAX_SPIN_NS);
        if spin != self.spin_ns {
            self.set_spin(spin);
        }
        self.setting = c.setting.load(Ordering::Relaxed);
        // GC tunables: the forwarder wrote its start values at start-up; a zero elasticity
        // (a block never written) leaves the cache's as they are.
        let gc = c.gc();
        if gc.elasticity != 0 {
            self.rt.set_gc(gc.clamped(self.rt.params.max_size.min(u32::MAX as usize) as u32));
        }
        let f = c.flush.load(Ordering::Relaxed);
        if f != self.flush_seen {
            self.flush_seen = f;
            fwd_gc_rt_cache_flush(&mut self.rt);
            self.rt.release_pending();
        }
        c.stop.load(Ordering::Relaxed) != 0
    }

    /// Switch cache mode; leaving rtcache flushes it, as disabling the cache would.
    pub fn set_mode(&mut self, m: CacheMode) {
        if m != self.mode && self.mode == CacheMode::Rtcache {
            fwd_gc_rt_cache_flush(&mut self.rt);
            self.rt.release_pending();
        }
        self.mode = m;
    }

    /// Run until `stop` is set or the control block asks to stop. Counters are published
    /// and control requests applied every 16 bursts (or 1024 empty polls).
    pub fn run(&mut self, stop: &AtomicBool) {
        // Absent (old kernel, no procfs): the clocks then say the wait was not measured.
        self.sched = std::fs::File::open("/proc/thread-self/schedstat").ok();
        let mut ticks = 0u32;
        let mut idle = 0u32;
        loop {
            let n = self.poll();
            ticks += if n == 0 { 1 } else { 64 };
            // afpacket: after a run of empty polls, sleep in poll(2) for up to 1 ms rather
            // than spin (the kernel shares these cores with the traffic).
            idle = if n == 0 { idle + 1 } else { 0 };
            if idle >= 64 {
                if let Some(q) = &self.afp {
                    self.clk.start();
                    fwd_idle_wait_afp(&q.rx, 1);
                    self.clk.lap(Stage::Idle);
                    ticks += 64;
                }
                if let Some(q) = &self.xdp {
                    if q.in_flight() == 0 {
                        self.clk.start();
                        fwd_idle_wait_xdp(q, 1);
                        self.clk.lap(Stage::Idle);
                        ticks += 64;
                    }
                }
            }
            if ticks >= 1024 {
                ticks = 0;
                self.publish();
                if stop.load(Ordering::Relaxed) || self.apply_control() {
                    break;
                }
            }
        }
        if let Some(q) = self.afp.as_mut() {
            // Frames still with the kernel: wait for them, so the counts are final.
            let done = q.tx.drain(200);
            count_tx(&mut self.ctr, 0, done);
        }
        if let Some(q) = self.xdp.as_mut() {
            let t0 = std::time::Instant::now();
            while q.in_flight() > 0 && t0.elapsed() < std::time::Duration::from_millis(200) {
                fwd_driver_xdp_tx_complete(q, &mut self.ctr, &mut self.to_free);
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            fwd_slab_free_bulk(&mut self.bufs, &self.to_free);
            self.to_free.clear();
            // The last publish reads the kernel's socket counters whenever they were read.
            self.xdp_stats_last = 0;
        }
        self.publish();
    }
}
