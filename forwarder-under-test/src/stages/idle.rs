//! Waiting, which is not work: an rx poll that finds nothing (stage idle). The wait happens
//! inside [`fwd_idle_poll`], so a sampled instruction pointer in it says idle, as the stage
//! clock does: both instruments keep waiting apart from the driver's work.

use crate::nic::RxDriver;

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
