//! Waiting, which is not work: an rx poll that finds nothing (stage idle). The wait happens
//! inside [`fwd_idle_poll`], or for the real-interface drivers in [`fwd_idle_wait_afp`] and
//! [`fwd_idle_wait_xdp`] (asleep in poll(2): the kernel's scheduling and wake-up samples
//! are charged to them by callchain), so a sampled instruction pointer in it says idle, as
//! the stage clock does: both instruments keep waiting apart from the driver's work.

use crate::nic::afpacket::AfpRx;
use crate::nic::afxdp::XskQueue;
use crate::nic::RxDriver;

/// afpacket: sleep until a frame may be ready or `ms` passes (stage: idle).
#[no_mangle]
#[inline(never)]
pub fn fwd_idle_wait_afp(rx: &AfpRx, ms: i32) {
    rx.wait(ms);
}

/// afxdp: wait for work (stage: idle): a posted buffer for the fill ring, `target` frames
/// on the rx rings, or fewer once `window` TSC ticks have passed since one was first seen
/// (rx coalescing). With nothing seen it gives up after `spins` checks. Returns whether
/// there is work.
#[no_mangle]
#[inline(never)]
pub fn fwd_idle_poll_xdp(q: &mut XskQueue, spins: u32, target: u32, window: u64) -> bool {
    let mut first = 0u64;
    let mut i = 0u32;
    loop {
        if q.fill_pending() {
            return true;
        }
        let n = q.rx_available();
        if n >= target.max(1) {
            return true;
        }
        if n > 0 {
            let now = crate::cpu::rdtsc();
            if first == 0 {
                first = now;
            } else if now.wrapping_sub(first) >= window {
                return true;
            }
        } else if i >= spins {
            return false;
        }
        i += 1;
        std::hint::spin_loop();
    }
}

/// afxdp: sleep until a frame may be ready on an rx socket or `ms` passes (stage: idle).
#[no_mangle]
#[inline(never)]
pub fn fwd_idle_wait_xdp(q: &XskQueue, ms: i32) {
    q.wait(ms);
}

/// Spin up to `spins` times for a completed rx descriptor (stage: idle). Returns whether
/// one arrived.
#[no_mangle]
#[inline(never)]
pub fn fwd_idle_poll(rx: &RxDriver, spins: u32) -> bool {
    for _ in 0..spins {
        if rx.peek_done(0).is_some() {
            return true;
        }
        std::hint::spin_loop();
    }
    rx.peek_done(0).is_some()
}
