//! The worker: per-queue state (cache-line aligned, touched by one thread) and the burst
//! loop that runs the stages in order, applies control-block requests, keeps stage clocks
//! and publishes counters to the stats segment.

use crate::burst::{Burst, StageClock, MAX_BURST, NIL};
use crate::config::{CacheMode, Config};
use crate::cpu::{rdtsc, tsc_hz};
use crate::fib::Fib;
use crate::nic::afpacket::AfpQueue;
use crate::nic::synthetic::{fwd_nic_generate, DeviceStats, GenQueue};
use crate::nic::{BufferArena, RxDriver, RxRing, TxRing};
use crate::rtcache::gc::{fwd_gc_rt_cache_flush, fwd_gc_rt_check_expire};
use crate::rtcache::RtCache;
use crate::slab::{fwd_slab_free_bulk, SlabCache};
use crate::stages::driver_rx::{fwd_driver_afp_rx, fwd_driver_rx_burst, fwd_driver_rx_refill};
use crate::stages::driver_tx::{count_tx, fwd_driver_afp_tx_flush, fwd_driver_tx_burst, NhOut};
use crate::stages::ip::fwd_ip_input_burst;
use crate::stages::lookup::{fwd_lookup_burst, LookupCtx};
use fwd_abi::{Ctr, Segment, N_COUNTERS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
    dropped: Vec<u32>,
    /// afpacket: the kernel's rings standing in for the device.
    afp: Option<AfpQueue>,
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
            prefetch: cfg.prefetch,
            burst_size: cfg.burst,
            ctr: vec![0; N_COUNTERS],
            clk: StageClock::new(cfg.stage_clock),
            gen,
            dev_stats,
            seg,
            ctrl_gen: 0,
            flush_seen: 0,
            tsc0: rdtsc(),
            tsc_per_jiffy: (tsc_hz() / cfg.rt.hz.max(1)).max(1),
            burst: Burst::default(),
            dropped: Vec::with_capacity(2 * MAX_BURST),
            afp: None,
        };
        w.rt.clock = cfg.stage_clock;
        let mut clk = StageClock::new(false);
        fwd_driver_rx_refill(&mut w.rx, &mut w.bufs, &mut w.ctr, &mut clk);
        if let Some(seg) = &w.seg {
            w.flush_seen = seg.control().flush.load(Ordering::Relaxed);
        }
        w
    }

    /// Take packets from real interfaces (afpacket) instead of a synthetic device.
    pub fn attach(&mut self, q: AfpQueue) {
        self.afp = Some(q);
    }

    /// Jiffies since the worker started.
    #[inline(always)]
    fn now(&self) -> u64 {
        rdtsc().wrapping_sub(self.tsc0) / self.tsc_per_jiffy
    }

    /// One pass of the burst loop. Returns packets received.
    #[inline]
    pub fn poll(&mut self) -> usize {
        if let Some(g) = self.gen.as_mut() {
            let burst = self.burst_size;
            self.clk.stage(Ctr::ClkNic, |_| fwd_nic_generate(g, burst));
        }
        let t_idle = if self.clk.enabled { rdtsc() } else { 0 };
        if let Some(q) = self.afp.as_mut() {
            let (arena, ctr, bsz) = (&self.arena, &mut self.ctr, self.burst_size);
            let moved = self.clk.stage(Ctr::ClkDriverRx, |_| fwd_driver_afp_rx(q, arena, bsz, ctr));
            self.dev_stats.packets.fetch_add(moved as u64, Ordering::Relaxed);
        }
        let n = {
            let (arena, pf, rx, bufs, burst, ctr, bsz) = (
                &self.arena,
                self.prefetch,
                &mut self.rx,
                &mut self.bufs,
                &mut self.burst,
                &mut self.ctr,
                self.burst_size,
            );
            self.clk.stage(Ctr::ClkDriverRx, |clk| fwd_driver_rx_burst(arena, pf, rx, bufs, burst, bsz, ctr, clk))
        };
        if n == 0 {
            self.ctr[Ctr::IdlePolls as usize] += 1;
            if self.clk.enabled {
                // An empty poll is idle time, not driver time.
                let d = rdtsc().wrapping_sub(t_idle);
                self.clk.acc[Ctr::ClkDriverRx as usize] = self.clk.acc[Ctr::ClkDriverRx as usize].saturating_sub(d);
                self.clk.acc[Ctr::ClkIdle as usize] += d;
            }
            if let Some(q) = self.afp.as_mut() {
                // Nothing came in: what waits for a batch goes out now.
                let ctr = &mut self.ctr;
                self.clk.stage(Ctr::ClkDriverTx, |_| fwd_driver_afp_tx_flush(&mut q.tx, ctr));
            }
            return 0;
        }
        self.ctr[Ctr::Bursts as usize] += 1;
        let pf = self.prefetch;
        {
            let (arena, burst, ctr, dropped) = (&self.arena, &mut self.burst, &mut self.ctr, &mut self.dropped);
            self.clk.stage(Ctr::ClkIp, |_| fwd_ip_input_burst(arena, burst, pf, ctr, dropped));
        }
        let now = self.now();
        {
            let gc0 = self.rt.gc_tsc;
            let sl0 = self.rt.slab_tsc;
            let mut cx = LookupCtx {
                mode: self.mode,
                fib: &self.fib,
                rt: &mut self.rt,
                nh_dst: &mut self.nh_dst,
                iif: self.id as u16,
            };
            let (burst, ctr, dropped) = (&mut self.burst, &mut self.ctr, &mut self.dropped);
            if self.clk.enabled {
                let t = rdtsc();
                fwd_lookup_burst(&mut cx, burst, now, pf, ctr, dropped);
                let d = rdtsc().wrapping_sub(t);
                let gc = self.rt.gc_tsc - gc0;
                let sl = self.rt.slab_tsc - sl0;
                self.clk.acc[Ctr::ClkLookup as usize] += d.saturating_sub(gc + sl);
                self.clk.acc[Ctr::ClkGc as usize] += gc;
                self.clk.acc[Ctr::ClkSlab as usize] += sl;
            } else {
                fwd_lookup_burst(&mut cx, burst, now, pf, ctr, dropped);
            }
        }
        {
            let (tx, arena, burst, nh_out, bufs, rt, ctr) =
                (&mut self.tx, &self.arena, &self.burst, &self.nh_out, &mut self.bufs, &mut self.rt, &mut self.ctr);
            let port = self.afp.as_mut().map(|q| &mut q.tx);
            let sl0 = rt.slab_tsc;
            self.clk
                .stage(Ctr::ClkDriverTx, |clk| fwd_driver_tx_burst(tx, arena, burst, nh_out, bufs, rt, ctr, clk, port));
            if self.clk.enabled {
                // Per-packet dst frees (nocache) were timed by the route cache.
                let sl = self.rt.slab_tsc - sl0;
                let a = &mut self.clk.acc;
                a[Ctr::ClkDriverTx as usize] = a[Ctr::ClkDriverTx as usize].saturating_sub(sl);
                a[Ctr::ClkSlab as usize] += sl;
            }
        }
        if !self.dropped.is_empty() {
            let (bufs, dropped) = (&mut self.bufs, &mut self.dropped);
            self.clk.nested(Ctr::ClkSlab, || fwd_slab_free_bulk(bufs, dropped));
            self.dropped.clear();
        }
        if self.mode == CacheMode::Rtcache {
            let now = self.now();
            if now >= self.rt.next_check {
                let t = if self.clk.enabled { rdtsc() } else { 0 };
                fwd_gc_rt_check_expire(&mut self.rt, now);
                if self.clk.enabled {
                    self.clk.acc[Ctr::ClkGc as usize] += rdtsc().wrapping_sub(t);
                }
            }
        }
        n
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
        c[Ctr::SlabDstAlloc as usize] = d.alloc;
        c[Ctr::SlabDstFree as usize] = d.free;
        c[Ctr::SlabDstAllocFail as usize] = d.alloc_fail;
        c[Ctr::SlabDepotGet as usize] = b.depot_get + d.depot_get;
        c[Ctr::SlabDepotPut as usize] = b.depot_put + d.depot_put;
        c[Ctr::DevPackets as usize] = self.dev_stats.packets.load(Ordering::Relaxed);
        c[Ctr::RxMissed as usize] = self.dev_stats.missed.load(Ordering::Relaxed);
        for (ctr, _) in fwd_abi::STAGE_CLOCKS {
            c[ctr as usize] = self.clk.acc[ctr as usize];
        }
        c[Ctr::PrefetchDepth as usize] = self.prefetch as u64;
        c[Ctr::CacheMode as usize] = u64::from(self.mode.code());
    }

    fn publish(&mut self) {
        self.fill_counters();
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
        self.prefetch = (c.prefetch.load(Ordering::Relaxed) as usize).min(8);
        if let Some(m) = CacheMode::from_code(c.cache_mode.load(Ordering::Relaxed)) {
            self.set_mode(m);
        }
        let on = c.stage_clock.load(Ordering::Relaxed) != 0;
        self.clk.enabled = on;
        self.rt.clock = on;
        let f = c.flush.load(Ordering::Relaxed);
        if f != self.flush_seen {
            self.flush_seen = f;
            fwd_gc_rt_cache_flush(&mut self.rt);
        }
        c.stop.load(Ordering::Relaxed) != 0
    }

    /// Switch cache mode; leaving rtcache flushes it, as disabling the cache would.
    pub fn set_mode(&mut self, m: CacheMode) {
        if m != self.mode && self.mode == CacheMode::Rtcache {
            fwd_gc_rt_cache_flush(&mut self.rt);
        }
        self.mode = m;
    }

    /// Run until `stop` is set or the control block asks to stop. Counters are published
    /// and control requests applied every 16 bursts (or 1024 empty polls).
    pub fn run(&mut self, stop: &AtomicBool) {
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
                    let t = if self.clk.enabled { rdtsc() } else { 0 };
                    q.rx.wait(1);
                    if self.clk.enabled {
                        self.clk.acc[Ctr::ClkIdle as usize] += rdtsc().wrapping_sub(t);
                    }
                    ticks += 64;
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
        self.publish();
    }
}
