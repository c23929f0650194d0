//! The Linux 2.4/2.6 IPv4 route cache: per-flow dst entries in a hash of chained buckets,
//! keyed by (daddr, saddr, tos, iif) through jhash with a random seed. A hit moves the entry
//! to the front of its chain; a miss takes the slow path (martian checks, FIB lookup, a dst
//! from the slab, interning with chain-length eviction). Allocation past `gc_thresh` runs
//! the garbage collector ([`gc`], beside the cache it collects; its entry points are
//! `fwd_gc_*` symbols, stage gc), which may fail at `max_size`: the packet is then dropped
//! as a dst-cache overflow. rtstat counters are kept as Linux kept them.
//!
//! Each worker has its own cache (its own shard of the flows, since RSS steers a flow to
//! one worker); tunables apply per worker.

pub mod gc;

use crate::burst::MAX_BURST;
pub use crate::burst::NIL;
use crate::config::{RtParams, RtVersion};
use crate::cpu::rdtsc;
use crate::fib::{Fib, NO_ROUTE};
use crate::slab::{fwd_slab_alloc, fwd_slab_alloc_bulk, fwd_slab_free_bulk, Depot, SlabCache};
use fwd_abi::Ctr;

/// A route-cache entry (struct rtable), one cache line.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default)]
pub struct DstEntry {
    pub next: u32,
    pub daddr: u32,
    pub saddr: u32,
    pub iif: u16,
    pub tos: u8,
    pub nh: u32,
    pub refcnt: u32,
    /// Jiffies of last use.
    pub lastuse: u64,
    /// Absolute expiry in jiffies, 0 for none.
    pub expires: u64,
    pub uses: u64,
}

impl DstEntry {
    /// A fresh entry for the flow `k` routed to next hop `nh`, used once, unchained.
    pub fn for_flow(k: &RtKey, nh: u32, refcnt: u32, lastuse: u64) -> DstEntry {
        DstEntry {
            next: NIL,
            daddr: k.daddr,
            saddr: k.saddr,
            iif: k.iif,
            tos: k.tos,
            nh,
            refcnt,
            lastuse,
            expires: 0,
            uses: 1,
        }
    }
}

/// rtstat counters (per CPU in Linux, per worker here).
#[derive(Debug, Default, Clone, Copy)]
pub struct RtStat {
    pub in_hit: u64,
    pub in_slow_tot: u64,
    pub in_slow_mc: u64,
    pub in_no_route: u64,
    pub in_brd: u64,
    pub in_martian_dst: u64,
    pub in_martian_src: u64,
    pub gc_total: u64,
    pub gc_ignored: u64,
    pub gc_goal_miss: u64,
    pub gc_dst_overflow: u64,
    pub in_hlist_search: u64,
    pub flushes: u64,
    pub expired: u64,
}

/// Linux's jhash_3words (the 2.6 version, golden-ratio initial values).
#[inline(always)]
pub fn jhash_3words(a: u32, b: u32, c: u32, initval: u32) -> u32 {
    let mut a = a.wrapping_add(0x9e37_79b9);
    let mut b = b.wrapping_add(0x9e37_79b9);
    let mut c = c.wrapping_add(initval);
    macro_rules! mix {
        () => {
            a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 13);
            b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 8);
            c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 13);
            a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 12);
            b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 16);
            c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 5);
            a = a.wrapping_sub(b).wrapping_sub(c) ^ (c >> 3);
            b = b.wrapping_sub(c).wrapping_sub(a) ^ (a << 10);
            c = c.wrapping_sub(a).wrapping_sub(b) ^ (b >> 15);
        };
    }
    mix!();
    c
}

/// A flow key as the cache sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtKey {
    pub daddr: u32,
    pub saddr: u32,
    pub tos: u8,
    pub iif: u16,
}

/// Capacity of the dst-object stash: two bursts.
const STASH: usize = 2 * MAX_BURST;

/// The route cache of one worker.
pub struct RtCache {
    pub(crate) buckets: Vec<u32>,
    pub(crate) hash_mask: usize,
    pub(crate) hash_log: u32,
    pub(crate) seed: u32,
    pub(crate) dst: Vec<DstEntry>,
    pub(crate) slab: SlabCache,
    /// Entries in the cache (ipv4_dst_ops.entries).
    pub entries: usize,
    pub params: RtParams,
    /// gc_min_interval and gc_timeout in jiffies.
    pub(crate) gc_min_interval: u64,
    pub(crate) gc_timeout: u64,
    // rt_garbage_collect's static state.
    pub(crate) expire: u64,
    pub(crate) last_gc: u64,
    pub(crate) rover: usize,
    pub(crate) equilibrium: usize,
    // rt_check_expire's state.
    pub(crate) expire_rover: usize,
    pub(crate) next_check: u64,
    pub stat: RtStat,
    /// When set, each garbage-collector run is timed (TSC cycles added to `gc_tsc`).
    pub clock: bool,
    pub gc_tsc: u64,
    /// dst objects taken from the slab ahead of the lookups that need them (a per-CPU
    /// array cache in front of the slab): the lookup stage pops one per new entry, and
    /// the slab stage tops it up once per burst. A fixed array and its length, so
    /// topping up writes straight into it (no scratch copy, no memset/memcpy calls: those
    /// libc leaves keep no frame pointer, and a sample in them would lose the slab stage).
    stash: [u32; STASH],
    stash_len: usize,
    /// Freed entries waiting to go back to the slab: Linux frees a dst after an RCU grace
    /// period (call_rcu_bh); here the slab stage returns them once per burst.
    pending_free: Vec<u32>,
    /// dst objects the cache took and released (the slab_dst_alloc and _free counters).
    pub dst_taken: u64,
    pub dst_released: u64,
}

/// Outcome of route input: a next hop, or the counter of the reason to drop.
pub type RouteOut = Result<u32, Ctr>;

impl RtCache {
    /// A cache with `params`; `extra_dst` more dst objects are made for the nocache and
    /// nhcache paths that share this slab; `seed` seeds the hash (rt_hash_rnd).
    pub fn new(params: &RtParams, extra_dst: usize, seed: u32) -> RtCache {
        let objects = params.max_size + extra_dst + 1;
        let depot = Depot::new("ip_dst_cache", objects as u32, 64, 1);
        let hz = params.hz;
        RtCache {
            buckets: vec![NIL; params.hash_buckets],
            hash_mask: params.hash_buckets - 1,
            hash_log: params.hash_buckets.trailing_zeros(),
            seed,
            dst: vec![DstEntry::default(); objects],
            slab: SlabCache::new(depot),
            entries: 0,
            gc_min_interval: params.gc_min_interval_ms * hz / 1000,
            gc_timeout: params.gc_timeout_s * hz,
            expire: params.gc_timeout_s * hz,
            last_gc: 0,
            rover: 0,
            equilibrium: 0,
            expire_rover: 0,
            next_check: params.gc_interval_s * hz,
            params: params.clone(),
            stat: RtStat::default(),
            clock: false,
            gc_tsc: 0,
            stash: [0; STASH],
            stash_len: 0,
            pending_free: Vec::with_capacity(objects),
            dst_taken: 0,
            dst_released: 0,
        }
    }

    #[inline(always)]
    /// Apply GC tunables changed while running (a live comparison's setting), already
    /// within their bounds ([`fwd_abi::GcTunables::clamped`]).
    pub fn set_gc(&mut self, g: fwd_abi::GcTunables) {
        let hz = self.params.hz;
        self.params.gc_thresh = g.thresh as usize;
        self.params.gc_elasticity = g.elasticity as usize;
        self.params.gc_min_interval_ms = g.min_interval_ms as u64;
        self.params.gc_timeout_s = g.timeout_s as u64;
        self.gc_min_interval = g.min_interval_ms as u64 * hz / 1000;
        self.gc_timeout = g.timeout_s as u64 * hz;
    }

    pub fn hash(&self, k: &RtKey) -> usize {
        (jhash_3words(k.daddr, k.saddr ^ (u32::from(k.iif) << 5), u32::from(k.tos), self.seed) as usize)
            & self.hash_mask
    }

    /// Prefetch the bucket head a lookup of `k` will read.
    #[inline(always)]
    pub fn prefetch(&self, k: &RtKey) {
        crate::cpu::prefetch_ptr(self.buckets.as_ptr().wrapping_add(self.hash(k)));
    }

    pub fn entry(&self, i: u32) -> &DstEntry {
        &self.dst[i as usize]
    }

    /// Take a dst object: from the stash the slab stage filled, or (more new entries in a
    /// burst than it held) from the slab itself. When every free object is still waiting
    /// for the slab stage (freed by GC in this burst), the wait ends now: Linux defers a
    /// dst's free by an RCU grace period too, but its slab grows meanwhile rather than fail
    /// an allocation, so a cache at max_size whose GC just freed entries must not drop the
    /// packet for want of an object.
    #[inline]
    pub(crate) fn dst_obj_alloc(&mut self) -> Option<u32> {
        let got = if self.stash_len > 0 {
            self.stash_len -= 1;
            Some(self.stash[self.stash_len])
        } else {
            match fwd_slab_alloc(&mut self.slab) {
                None if !self.pending_free.is_empty() => {
                    self.release_pending();
                    fwd_slab_alloc(&mut self.slab)
                }
                got => got,
            }
        };
        self.dst_taken += u64::from(got.is_some());
        got
    }

    /// Release a dst object: it goes back to the slab at the burst's slab stage.
    #[inline]
    pub(crate) fn dst_obj_free(&mut self, i: u32) {
        self.dst_released += 1;
        self.pending_free.push(i);
    }

    /// Slab stage, before lookup: top the stash up to `n` objects (at most two bursts).
    /// Returns objects taken from the slab.
    #[inline]
    pub fn fill_stash(&mut self, n: usize) -> usize {
        let have = self.stash_len;
        let want = n.min(STASH).saturating_sub(have);
        if want == 0 {
            return 0;
        }
        let got = fwd_slab_alloc_bulk(&mut self.slab, &mut self.stash[have..have + want]);
        self.stash_len += got;
        got
    }

    /// Slab stage: return every released object to the slab. Returns how many.
    #[inline]
    pub fn release_pending(&mut self) -> usize {
        let n = self.pending_free.len();
        if n > 0 {
            fwd_slab_free_bulk(&mut self.slab, &self.pending_free);
            self.pending_free.clear();
        }
        n
    }

    /// rt_free: unlink is the caller's job; this releases the entry.
    pub(crate) fn rt_free(&mut self, i: u32) {
        self.entries -= 1;
        self.dst_obj_free(i);
    }

    /// Whether a garbage-collector run asked for now is ignored (within gc_min_interval
    /// of the last and below max_size): counted as run and ignored, as rt_garbage_collect
    /// counts it, without calling it (so only runs that work are timed and sampled as gc).
    #[inline]
    fn gc_ignored(&mut self, now: u64) -> bool {
        if now.wrapping_sub(self.last_gc) < self.gc_min_interval && self.entries < self.params.max_size {
            self.stat.gc_total += 1;
            self.stat.gc_ignored += 1;
            return true;
        }
        false
    }

    /// dst_alloc for the cache: run GC past gc_thresh, fail on overflow.
    fn dst_alloc(&mut self, now: u64) -> Result<u32, Ctr> {
        if self.entries > self.params.gc_thresh && !self.gc_ignored(now) {
            let failed = if self.clock {
                let t = rdtsc();
                let r = gc::fwd_gc_rt_garbage_collect(self, now);
                self.gc_tsc += rdtsc().wrapping_sub(t);
                r
            } else {
                gc::fwd_gc_rt_garbage_collect(self, now)
            };
            if failed {
                return Err(Ctr::DropDstOverflow);
            }
        }
        let i = self.dst_obj_alloc().ok_or(Ctr::DropNoDst)?;
        self.entries += 1;
        Ok(i)
    }

    /// Every entry in chain order per bucket (for tests and the flush).
    pub fn chains(&self) -> Vec<Vec<u32>> {
        self.buckets
            .iter()
            .map(|&h| {
                let mut v = Vec::new();
                let mut i = h;
                while i != NIL {
                    v.push(i);
                    i = self.dst[i as usize].next;
                }
                v
            })
            .collect()
    }
}

/// The martian and broadcast checks of ip_route_input_slow, in Linux's order. Counts the
/// rtstat column and returns the drop reason.
#[inline]
pub fn route_input_checks(saddr: u32, daddr: u32, stat: &mut RtStat) -> Result<(), Ctr> {
    let multicast = |a: u32| a >> 28 == 0xe;
    let badclass = |a: u32| a >> 28 == 0xf;
    let loopback = |a: u32| a >> 24 == 127;
    let zeronet = |a: u32| a >> 24 == 0;
    if multicast(saddr) || badclass(saddr) || loopback(saddr) {
        stat.in_martian_src += 1;
        return Err(Ctr::DropMartianSrc);
    }
    if daddr == u32::MAX || (saddr == 0 && daddr == 0) {
        stat.in_brd += 1;
        return Err(Ctr::DropBroadcast);
    }
    if zeronet(saddr) {
        stat.in_martian_src += 1;
        return Err(Ctr::DropMartianSrc);
    }
    if badclass(daddr) || zeronet(daddr) || loopback(daddr) {
        stat.in_martian_dst += 1;
        return Err(Ctr::DropMartianDst);
    }
    Ok(())
}

/// The uncached part of route input, shared by the cache's slow path and the FIB modes:
/// multicast (ip_route_input_mc: not forwarded here), martian and broadcast checks, then
/// the FIB lookup; counts rtstat's in_slow_mc, in_slow_tot and in_no_route.
#[inline]
pub fn route_input_fib(stat: &mut RtStat, fib: &Fib, k: &RtKey) -> Result<u32, Ctr> {
    route_input_checked(stat, k)?;
    route_input_answer(stat, fib.lookup(k.daddr))
}

/// [`route_input_fib`] with the FIB's answer `nh` for `k.daddr` looked up already (a
/// burst's lookups batched ahead of route input): the same checks, counts and result.
#[inline]
pub fn route_input_looked_up(stat: &mut RtStat, k: &RtKey, nh: u32) -> Result<u32, Ctr> {
    route_input_checked(stat, k)?;
    route_input_answer(stat, nh)
}

/// Route input's checks before the FIB: multicast, then martians and broadcast.
#[inline(always)]
fn route_input_checked(stat: &mut RtStat, k: &RtKey) -> Result<(), Ctr> {
    if k.daddr >> 28 == 0xe {
        stat.in_slow_mc += 1;
        return Err(Ctr::DropMulticast);
    }
    route_input_checks(k.saddr, k.daddr, stat)?;
    stat.in_slow_tot += 1;
    Ok(())
}

/// The FIB's answer: a next hop, or no route (counted).
#[inline(always)]
fn route_input_answer(stat: &mut RtStat, nh: u32) -> Result<u32, Ctr> {
    if nh == NO_ROUTE {
        stat.in_no_route += 1;
        return Err(Ctr::DropNoRoute);
    }
    Ok(nh)
}

/// ip_route_input through the cache (stage: lookup). Returns the next hop or a drop reason.
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_rtcache_input(rt: &mut RtCache, fib: &Fib, k: &RtKey, now: u64) -> RouteOut {
    let h = rt.hash(k);
    let mut prev = NIL;
    let mut i = rt.buckets[h];
    while i != NIL {
        rt.stat.in_hlist_search += 1;
        let e = &rt.dst[i as usize];
        if e.daddr == k.daddr && e.saddr == k.saddr && e.tos == k.tos && e.iif == k.iif {
            let next = e.next;
            let nh = e.nh;
            let e = &mut rt.dst[i as usize];
            e.lastuse = now;
            e.uses += 1;
            if prev != NIL {
                // Move to front.
                rt.dst[prev as usize].next = next;
                rt.dst[i as usize].next = rt.buckets[h];
                rt.buckets[h] = i;
            }
            rt.stat.in_hit += 1;
            return Ok(nh);
        }
        prev = i;
        i = e.next;
    }
    fwd_lookup_rtcache_slow(rt, fib, k, h, now)
}

/// ip_route_input_slow + rt_intern_hash (stage: lookup).
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_rtcache_slow(rt: &mut RtCache, fib: &Fib, k: &RtKey, h: usize, now: u64) -> RouteOut {
    let nh = route_input_fib(&mut rt.stat, fib, k)?;
    let i = rt.dst_alloc(now)?;
    rt.dst[i as usize] = DstEntry::for_flow(k, nh, 0, now);
    rt_intern_hash(rt, h, i, now);
    Ok(nh)
}

/// rt_intern_hash: insert at the head of the chain; past gc_elasticity entries in the chain,
/// free the unreferenced entry with the lowest score (rt_score).
fn rt_intern_hash(rt: &mut RtCache, h: usize, new: u32, now: u64) {
    let mut cand = NIL;
    let mut cand_prev = NIL;
    let mut min_score = u32::MAX;
    let mut chain_length = 0usize;
    let mut prev = NIL;
    let mut i = rt.buckets[h];
    while i != NIL {
        let e = &rt.dst[i as usize];
        if e.refcnt == 0 {
            let score = rt_score(e, now);
            if score <= min_score {
                cand = i;
                cand_prev = prev;
                min_score = score;
            }
        }
        chain_length += 1;
        prev = i;
        i = e.next;
    }
    // 2.4.21's rt_intern_hash inserted without evicting: chains grow until GC frees them.
    if cand != NIL && chain_length > rt.params.gc_elasticity && rt.params.version == RtVersion::V2_6 {
        let next = rt.dst[cand as usize].next;
        if cand_prev == NIL {
            rt.buckets[h] = next;
        } else {
            rt.dst[cand_prev as usize].next = next;
        }
        rt.rt_free(cand);
    }
    rt.dst[new as usize].next = rt.buckets[h];
    rt.buckets[h] = new;
}

/// rt_score: older entries score lower; forwarded unicast entries get bit 30.
#[inline]
pub fn rt_score(e: &DstEntry, now: u64) -> u32 {
    let age = now.saturating_sub(e.lastuse) as u32;
    let mut score = !age & !(3u32 << 30);
    // rt_valuable() is false for plain forwarded entries; input routes that are not
    // broadcast/multicast/local get bit 30.
    score |= 1 << 30;
    score
}

impl RtCache {
    /// Dst objects left in the depot behind this cache's magazines.
    pub fn slab_depot_available(&self) -> usize {
        self.slab.depot_available()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fib::{FibKind, Route};

    fn fib() -> Fib {
        Fib::build(FibKind::Hash, &[Route::new(0, 0, 3)]).unwrap()
    }

    #[test]
    fn jhash_known_values() {
        // Computed by compiling the kernel's jhash_3words (include/linux/jhash.h, 2.6.x) in C.
        assert_eq!(jhash_3words(0, 0, 0, 0), 0xbd49_d10d);
        assert_eq!(jhash_3words(1, 2, 3, 0), 0x17e8_bdc2);
        assert_eq!(jhash_3words(0xc612_0001, 0x0808_0808, 0, 0x1234_5678), 0x0796_eee2);
    }

    #[test]
    fn hit_after_miss_and_move_to_front() {
        let p = RtParams { hash_buckets: 1, ..Default::default() };
        let mut rt = RtCache::new(&p, 0, 1);
        let f = fib();
        let k1 = RtKey { daddr: 0x0101_0101, saddr: 0xC612_0001, tos: 0, iif: 0 };
        let k2 = RtKey { daddr: 0x0101_0102, ..k1 };
        assert_eq!(fwd_lookup_rtcache_input(&mut rt, &f, &k1, 1), Ok(3));
        assert_eq!(fwd_lookup_rtcache_input(&mut rt, &f, &k2, 1), Ok(3));
        assert_eq!((rt.stat.in_slow_tot, rt.stat.in_hit), (2, 0));
        // k2 is at the head; hitting k1 moves it to the front.
        assert_eq!(rt.dst[rt.chains()[0][0] as usize].daddr, k2.daddr);
        assert_eq!(fwd_lookup_rtcache_input(&mut rt, &f, &k1, 2), Ok(3));
        assert_eq!(rt.stat.in_hit, 1);
        assert_eq!(rt.dst[rt.chains()[0][0] as usize].daddr, k1.daddr);
        assert_eq!(rt.entries, 2);
    }

    #[test]
    fn chain_length_eviction_beyond_elasticity() {
        let p = RtParams { hash_buckets: 1, gc_elasticity: 4, gc_thresh: 1000, ..Default::default() };
        let mut rt = RtCache::new(&p, 0, 1);
        let f = fib();
        for d in 0..20u32 {
            let k = RtKey { daddr: 0x0101_0000 + d, saddr: 0xC612_0001, tos: 0, iif: 0 };
            fwd_lookup_rtcache_input(&mut rt, &f, &k, u64::from(d)).unwrap();
        }
        // An insert into a chain longer than 4 first evicts one: the chain stays at 4 + 1.
        assert_eq!(rt.chains()[0].len(), 5);
        assert_eq!(rt.entries, 5);
        // The survivors are the newest (oldest evicted first by score).
        let mut d: Vec<u32> = rt.chains()[0].iter().map(|&i| rt.dst[i as usize].daddr & 0xff).collect();
        d.sort_unstable();
        assert_eq!(d, vec![15, 16, 17, 18, 19]);
    }

    /// 2.4.21's rt_intern_hash does not evict: the chain holds every entry until GC (here
    /// below gc_thresh, so never) frees them.
    #[test]
    fn the_2_4_cache_inserts_without_evicting() {
        let p = RtParams {
            hash_buckets: 1,
            gc_elasticity: 4,
            gc_thresh: 1000,
            version: RtVersion::V2_4,
            ..Default::default()
        };
        let mut rt = RtCache::new(&p, 0, 1);
        let f = fib();
        for d in 0..20u32 {
            let k = RtKey { daddr: 0x0101_0000 + d, saddr: 0xC612_0001, tos: 0, iif: 0 };
            fwd_lookup_rtcache_input(&mut rt, &f, &k, u64::from(d)).unwrap();
        }
        assert_eq!((rt.chains()[0].len(), rt.entries), (20, 20));
    }

    #[test]
    fn martians_and_broadcast_are_counted() {
        let mut s = RtStat::default();
        assert_eq!(route_input_checks(0x7f00_0001, 0x0101_0101, &mut s), Err(Ctr::DropMartianSrc));
        assert_eq!(route_input_checks(0xC612_0001, u32::MAX, &mut s), Err(Ctr::DropBroadcast));
        assert_eq!(route_input_checks(0, 0x0101_0101, &mut s), Err(Ctr::DropMartianSrc));
        assert_eq!(route_input_checks(0xC612_0001, 0x0000_0001, &mut s), Err(Ctr::DropMartianDst));
        assert_eq!(route_input_checks(0xC612_0001, 0x7f00_0001, &mut s), Err(Ctr::DropMartianDst));
        assert_eq!(route_input_checks(0xC612_0001, 0x0101_0101, &mut s), Ok(()));
        assert_eq!((s.in_martian_src, s.in_brd, s.in_martian_dst), (2, 1, 2));
    }
}
