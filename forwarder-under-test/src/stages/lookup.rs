//! Stage lookup: find the next hop of every packet of a burst by the cache mode in force.
//!
//! - `rtcache`: the route cache ([`crate::rtcache`]), prefetching the hash bucket of packet
//!   `i+k` while packet `i` is looked up.
//! - `nocache`: route-input checks and a FIB lookup per packet, plus a dst allocated from the
//!   slab for the packet and freed after transmit (Linux 3.6+, DST_NOCACHE).
//! - `nhcache`: route-input checks and a FIB lookup; the dst is the one cached on the next hop.
//!
//! In the FIB modes the burst's destinations are looked up first, in one batch
//! ([`Fib::lookup_batch`]: the first FIB node or table entry of address `i+k` prefetched
//! while `i` is looked up; dir24 with `k` covering the burst looks up four at a time), as
//! l3fwd does; route input then runs per packet with its answer.

use crate::burst::Burst;
use crate::burst::NIL;
use crate::config::CacheMode;
use crate::fib::Fib;
use crate::rtcache::{fwd_lookup_rtcache_input, route_input_looked_up, DstEntry, RtCache, RtKey};
use fwd_abi::Ctr;

/// What the lookup stage works with.
pub struct LookupCtx<'a> {
    pub mode: CacheMode,
    pub fib: &'a Fib,
    pub rt: &'a mut RtCache,
    /// nhcache: dst object per next hop, or [`NIL`].
    pub nh_dst: &'a mut [u32],
    /// Input interface of the queue.
    pub iif: u16,
}

/// Look up a burst (stage: lookup). Survivors are compacted; dropped buffers go to `dropped`.
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_burst(
    cx: &mut LookupCtx<'_>,
    burst: &mut Burst,
    now: u64,
    prefetch: usize,
    ctr: &mut [u64],
    dropped: &mut Vec<u32>,
) {
    match cx.mode {
        CacheMode::Rtcache => lookup_loop(
            cx,
            burst,
            prefetch,
            ctr,
            dropped,
            |cx, b, i| cx.rt.prefetch(&key(b, i, cx.iif)),
            |cx, k| fwd_lookup_rtcache_input(cx.rt, cx.fib, k, now).map(|nh| (nh, NIL)),
        ),
        CacheMode::Nocache => fib_burst(cx, burst, prefetch, ctr, dropped, true),
        CacheMode::Nhcache => fib_burst(cx, burst, prefetch, ctr, dropped, false),
    }
}

/// The FIB modes: every destination of the burst looked up in one batch (into `burst.nh`),
/// then route input per packet with its answer ([`fwd_lookup_fib_route`]).
#[inline(always)]
fn fib_burst(
    cx: &mut LookupCtx<'_>,
    burst: &mut Burst,
    prefetch: usize,
    ctr: &mut [u64],
    dropped: &mut Vec<u32>,
    per_packet_dst: bool,
) {
    let n = burst.n;
    cx.fib.lookup_batch(&burst.daddr[..n], &mut burst.nh[..n], prefetch);
    fwd_lookup_fib_route(cx, burst, per_packet_dst, ctr, dropped);
}

#[inline(always)]
fn key(b: &Burst, i: usize, iif: u16) -> RtKey {
    RtKey { daddr: b.daddr[i], saddr: b.saddr[i], tos: b.tos[i], iif }
}

/// The route cache's prime, steady and drain loop.
#[inline(always)]
fn lookup_loop(
    cx: &mut LookupCtx<'_>,
    burst: &mut Burst,
    prefetch: usize,
    ctr: &mut [u64],
    dropped: &mut Vec<u32>,
    pf: impl Fn(&LookupCtx<'_>, &Burst, usize),
    route: impl Fn(&mut LookupCtx<'_>, &RtKey) -> Result<(u32, u32), Ctr>,
) {
    let n = burst.n;
    let k = prefetch.min(n);
    for i in 0..k {
        pf(cx, burst, i);
    }
    let mut out = 0;
    for i in 0..n {
        if i + k < n {
            pf(cx, burst, i + k);
        }
        let iif = cx.iif;
        match route(cx, &key(burst, i, iif)) {
            Ok((nh, dst)) => {
                burst.buf[out] = burst.buf[i];
                burst.len[out] = burst.len[i];
                burst.daddr[out] = burst.daddr[i];
                burst.nh[out] = nh;
                burst.dst[out] = dst;
                out += 1;
            }
            Err(reason) => {
                ctr[reason as usize] += 1;
                dropped.push(burst.buf[i]);
            }
        }
    }
    burst.n = out;
}

/// Route input without the cache for every packet of the burst, given the FIB's answers in
/// `burst.nh`: checks, then a per-packet dst (`nocache`) or the next hop's cached dst
/// (`nhcache`). Survivors are compacted; drops counted and their buffers pushed onto
/// `dropped`. One call per burst, under its own name for profiles.
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_route(
    cx: &mut LookupCtx<'_>,
    burst: &mut Burst,
    per_packet_dst: bool,
    ctr: &mut [u64],
    dropped: &mut Vec<u32>,
) {
    let mut out = 0;
    for i in 0..burst.n {
        // `out <= i`: the answer of packet i is read before its slot can be overwritten.
        let (fib_nh, iif) = (burst.nh[i], cx.iif);
        match route_one(cx, &key(burst, i, iif), fib_nh, per_packet_dst) {
            Ok((nh, dst)) => {
                burst.buf[out] = burst.buf[i];
                burst.len[out] = burst.len[i];
                burst.daddr[out] = burst.daddr[i];
                burst.nh[out] = nh;
                burst.dst[out] = dst;
                out += 1;
            }
            Err(reason) => {
                ctr[reason as usize] += 1;
                dropped.push(burst.buf[i]);
            }
        }
    }
    burst.n = out;
}

/// One packet's route input given the FIB's answer `fib_nh`. Returns (next hop, per-packet
/// dst or NIL).
#[inline(always)]
fn route_one(cx: &mut LookupCtx<'_>, k: &RtKey, fib_nh: u32, per_packet_dst: bool) -> Result<(u32, u32), Ctr> {
    let nh = route_input_looked_up(&mut cx.rt.stat, k, fib_nh)?;
    let entry = DstEntry::for_flow(k, nh, 1, 0);
    if per_packet_dst {
        let d = cx.rt.dst_obj_alloc().ok_or(Ctr::DropNoDst)?;
        cx.rt.dst[d as usize] = entry;
        return Ok((nh, d));
    }
    let slot = cx.nh_dst.get_mut(nh as usize).ok_or(Ctr::DropNoRoute)?;
    if *slot == NIL {
        let d = cx.rt.dst_obj_alloc().ok_or(Ctr::DropNoDst)?;
        cx.rt.dst[d as usize] = DstEntry { daddr: 0, saddr: 0, ..entry };
        *slot = d;
    }
    cx.rt.dst[*slot as usize].uses += 1;
    Ok((nh, NIL))
}
