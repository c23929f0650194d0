//! A test target for the collector: spends 70% of its CPU time in `burn_seventy` and 30% in
//! `burn_thirty` (7 ms and 3 ms turns, by the clock), for the seconds given (default 2).

use std::hint::black_box;
use std::time::{Duration, Instant};

#[no_mangle]
#[inline(never)]
pub extern "C" fn burn_seventy(until: &Instant) -> u64 {
    spin(until, 0x9E37_79B9)
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn burn_thirty(until: &Instant) -> u64 {
    spin(until, 0x85EB_CA6B)
}

#[inline(always)]
fn spin(until: &Instant, mul: u64) -> u64 {
    let mut x = 1u64;
    loop {
        for _ in 0..4096 {
            x = black_box(x.wrapping_mul(mul).rotate_left(7) ^ 0x5bd1_e995);
        }
        if Instant::now() >= *until {
            return x;
        }
    }
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut acc = 0u64;
    while Instant::now() < end {
        acc ^= burn_seventy(&(Instant::now() + Duration::from_millis(7)));
        acc ^= burn_thirty(&(Instant::now() + Duration::from_millis(3)));
    }
    println!("{acc}");
}
