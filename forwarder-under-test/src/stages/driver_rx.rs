//! Stage driver rx: take completed descriptors from the rx ring into a burst and refill the
//! ring with fresh buffers from the packet-buffer slab.

use crate::burst::{Burst, StageClock, MAX_BURST};
use crate::cpu::prefetch_ptr;
use crate::nic::afpacket::AfpQueue;
use crate::nic::{BufferArena, RxDriver};
use crate::slab::{fwd_slab_alloc_bulk, SlabCache};
use fwd_abi::Ctr;

/// Receive up to `max` packets into `burst`, then refill (stage: driver). While taking
/// descriptor i, the header line of descriptor i+k's buffer is prefetched, as e1000's rx
/// clean loop prefetched packet data (the 2005 prefetch-depth experiment).
#[no_mangle]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn fwd_driver_rx_burst(
    arena: &BufferArena,
    prefetch: usize,
    rx: &mut RxDriver,
    bufs: &mut SlabCache,
    burst: &mut Burst,
    max: usize,
    ctr: &mut [u64],
    clk: &mut StageClock,
) -> usize {
    let mut n = 0;
    let mut bytes = 0u64;
    let k = prefetch.min(max) as u64;
    for j in 0..k {
        match rx.peek_done(j) {
            Some(b) => prefetch_ptr(arena.ptr(b)),
            None => break,
        }
    }
    while n < max {
        if k > 0 && (n as u64 + k) < max as u64 {
            if let Some(b) = rx.peek_done(k) {
                prefetch_ptr(arena.ptr(b));
            }
        }
        match rx.take() {
            Some((b, len)) => {
                burst.buf[n] = b;
                burst.len[n] = len;
                bytes += u64::from(len);
                n += 1;
            }
            None => break,
        }
    }
    burst.n = n;
    ctr[Ctr::RxPackets as usize] += n as u64;
    ctr[Ctr::RxBytes as usize] += bytes;
    fwd_driver_rx_refill(rx, bufs, ctr, clk);
    n
}

/// afpacket: move up to `max` frames from the kernel's rx ring into the buffers posted on
/// the worker's rx ring, as a NIC's DMA would (stage: driver). Oversize frames are dropped
/// and counted. Returns frames moved.
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_afp_rx(q: &mut AfpQueue, arena: &BufferArena, max: usize, ctr: &mut [u64]) -> usize {
    let (n, oversize) = q.rx.fill(&mut q.dev, arena, max);
    ctr[Ctr::DropOversize as usize] += oversize;
    n
}

/// Post fresh buffers into every cleaned rx slot (stage: driver).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_rx_refill(rx: &mut RxDriver, bufs: &mut SlabCache, ctr: &mut [u64], clk: &mut StageClock) {
    let mut tmp = [0u32; MAX_BURST];
    loop {
        let want = rx.refill_needed().min(MAX_BURST);
        if want == 0 {
            return;
        }
        let got = clk.nested(Ctr::ClkSlab, || fwd_slab_alloc_bulk(bufs, &mut tmp[..want]));
        for &b in &tmp[..got] {
            rx.post(b);
        }
        if got < want {
            // The ring runs short of buffers; the device will find fewer posted slots.
            ctr[Ctr::RxNoBuffer as usize] += (want - got) as u64;
            return;
        }
    }
}
