//! Stage driver rx: take completed descriptors from the rx ring into a burst, and post the
//! fresh buffers the slab stage allocated for the slots they leave.

use crate::burst::{Burst, MAX_BURST};
use crate::cpu::prefetch_ptr;
use crate::nic::afpacket::AfpQueue;
use crate::nic::afxdp::XskQueue;
use crate::nic::{BufferArena, RxDriver};
use crate::slab::{fwd_slab_alloc_bulk, SlabCache};
use fwd_abi::Ctr;

/// Receive up to `max` packets into `burst` (stage: driver). While taking descriptor i,
/// the header line of descriptor i+k's buffer is prefetched, as e1000's rx clean loop
/// prefetched packet data (the 2005 prefetch-depth experiment). The slots taken are
/// refilled by [`fwd_driver_rx_post`] with buffers the slab stage allocates.
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_rx_burst(
    arena: &BufferArena,
    prefetch: usize,
    rx: &mut RxDriver,
    burst: &mut Burst,
    max: usize,
    ctr: &mut [u64],
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

/// afxdp: hand the buffers posted on the worker's rx ring to the fill ring and complete
/// rx slots from the XSK rx ring (stage: driver; no copy: the kernel wrote the frames into
/// those buffers). Descriptors naming no buffer of ours are dropped as oversize. Returns
/// frames delivered.
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_xdp_rx(q: &mut XskQueue, arena: &BufferArena, max: usize, ctr: &mut [u64]) -> usize {
    let (n, bad) = q.fill(arena, max);
    ctr[Ctr::DropOversize as usize] += bad;
    n
}

/// Buffers wanted for the rx slots the driver cleaned, at most `out.len()`, allocated into
/// `out` (stage: slab, through [`fwd_slab_alloc_bulk`]). Returns (wanted, allocated).
#[inline]
pub fn rx_refill_alloc(rx: &RxDriver, bufs: &mut SlabCache, out: &mut [u32]) -> (usize, usize) {
    let want = rx.refill_needed().min(out.len());
    let got = if want > 0 { fwd_slab_alloc_bulk(bufs, &mut out[..want]) } else { 0 };
    (want, got)
}

/// Post fresh buffers into cleaned rx slots (stage: driver). `wanted` is how many slots
/// were empty: the shortfall is counted as `rx_no_buffer` (the device finds fewer posted
/// slots).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_rx_post(rx: &mut RxDriver, fresh: &[u32], wanted: usize, ctr: &mut [u64]) {
    for &b in fresh {
        rx.post(b);
    }
    ctr[Ctr::RxNoBuffer as usize] += wanted.saturating_sub(fresh.len()) as u64;
}

/// Post buffers into every empty rx slot (a queue's start: slab and driver at once, not
/// clocked). Returns buffers posted.
pub fn rx_refill_all(rx: &mut RxDriver, bufs: &mut SlabCache, ctr: &mut [u64]) -> usize {
    let mut tmp = [0u32; MAX_BURST];
    let mut posted = 0;
    loop {
        let (want, got) = rx_refill_alloc(rx, bufs, &mut tmp);
        fwd_driver_rx_post(rx, &tmp[..got], want, ctr);
        posted += got;
        if want == 0 || got < want {
            return posted;
        }
    }
}
