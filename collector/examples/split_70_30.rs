//! A test target for the collector: spends 70% of its CPU time in `burn_seventy` and 30% in
//! `burn_thirty`, for the seconds of CPU time given (default 2).
//!
//! The split is by work, not by the clock: each turn runs 7 units of the same loop in
//! `burn_seventy` and 3 in `burn_thirty`, so a loaded machine (where the program waits to
//! run, and a wall-clock turn would end while it waited) still gives 70/30 of its CPU time;
//! and it stops after its own CPU time (CLOCK_PROCESS_CPUTIME_ID), so a loaded machine
//! gives as many samples as an idle one, only later.

use std::hint::black_box;

/// Blocks of 4096 multiply-rotate steps per unit of work: about a millisecond here.
const BLOCKS_PER_UNIT: u64 = 150;

#[no_mangle]
#[inline(never)]
pub extern "C" fn burn_seventy(units: u64) -> u64 {
    spin(units * BLOCKS_PER_UNIT, 0x9E37_79B9)
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn burn_thirty(units: u64) -> u64 {
    spin(units * BLOCKS_PER_UNIT, 0x85EB_CA6B)
}

#[inline(always)]
fn spin(blocks: u64, mul: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..blocks {
        for _ in 0..4096 {
            x = black_box(x.wrapping_mul(mul).rotate_left(7) ^ 0x5bd1_e995);
        }
    }
    x
}

/// This process's CPU time, seconds.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } != 0 {
        eprintln!("split_70_30: clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
        std::process::exit(1);
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let mut acc = 0u64;
    while cpu_seconds() < secs {
        acc ^= burn_seventy(7);
        acc ^= burn_thirty(3);
    }
    println!("{acc}");
}
