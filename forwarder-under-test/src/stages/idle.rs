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

/// afxdp: spin up to `spins` times until an rx ring has a descriptor or a posted buffer
/// waits for the fill ring (stage: idle). Returns whether there is work.
#[no_mangle]
#[inline(never)]
pub fn fwd_idle_poll_xdp(q: &mut XskQueue, spins: u32) -> bool {
    for _ in 0..spins {
        if q.rx_pending() {
            return true;
        }
        std::hint::spin_loop();
    }
    q.rx_pending()
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
