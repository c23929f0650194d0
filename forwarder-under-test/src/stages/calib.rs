//! The calibration stage: a known extra cost per packet (`--spin-ns N`, switchable while
//! running), so a user can plant a difference of known size and see whether a comparison,
//! the stage clocks and the sampled profile all find it. Its work is a TSC-timed spin
//! inside [`fwd_calib_spin`] (stage calib in both instruments).

use crate::cpu::rdtsc;

/// Spin for `ticks` TSC cycles (stage: calib). No pause instruction in the loop: its
/// latency (up to ~140 cycles on recent cores) would overshoot the target; reading the TSC
/// back to back overshoots by one read.
#[no_mangle]
#[inline(never)]
pub fn fwd_calib_spin(ticks: u64) {
    let start = rdtsc();
    while rdtsc().wrapping_sub(start) < ticks {}
}

/// TSC ticks one call of [`fwd_calib_spin`] costs beyond the ticks it is asked for (the
/// call, the last TSC read, the stage clock's read after it), measured once: the median of
/// 201 short calls. The worker asks for that much less, so the stage costs what was
/// planted.
pub fn spin_overhead_ticks() -> u64 {
    static OVERHEAD: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *OVERHEAD.get_or_init(|| {
        let mut v: Vec<u64> = (0..201)
            .map(|_| {
                let t0 = rdtsc();
                fwd_calib_spin(std::hint::black_box(1));
                rdtsc().wrapping_sub(t0)
            })
            .collect();
        v.sort_unstable();
        v[v.len() / 2].saturating_sub(1)
    })
}
