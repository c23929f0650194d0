//! Stage driver rx: take completed descriptors from the rx ring into a burst and refill the
//! ring with fresh buffers from the packet-buffer slab.

use crate::nic::RxDriver;
use crate::slab::{fwd_slab_alloc_bulk, SlabCache};
use crate::stats::Ctr;
use crate::worker::{Burst, StageClock, MAX_BURST};

/// Receive up to `max` packets into `burst`, then refill (stage: driver).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_rx_burst(
    rx: &mut RxDriver,
    bufs: &mut SlabCache,
    burst: &mut Burst,
    max: usize,
    ctr: &mut [u64],
    clk: &mut StageClock,
) -> usize {
    let mut n = 0;
    let mut bytes = 0u64;
    while n < max {
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

/// Post fresh buffers into every cleaned rx slot (stage: driver).
#[no_mangle]
#[inline(never)]
pub fn fwd_driver_rx_refill(
    rx: &mut RxDriver,
    bufs: &mut SlabCache,
    ctr: &mut [u64],
    clk: &mut StageClock,
) {
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
