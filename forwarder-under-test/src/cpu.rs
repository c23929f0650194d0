//! CPU-level helpers every layer of the forwarder uses, with no dependency on any of them:
//! the time-stamp counter and its rate, prefetch and cache-line hints, the non-temporal
//! writes and fence the synthetic device uses to imitate DMA, and thread pinning.

use std::sync::OnceLock;

/// Read the time-stamp counter (a monotonic nanosecond clock off x86_64).
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: rdtsc has no preconditions.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static T0: OnceLock<std::time::Instant> = OnceLock::new();
        T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

/// The TSC's rate and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct TscRate {
    /// Ticks per second.
    pub hz: u64,
    /// In words: the kernel's log line, or how it was calibrated.
    pub source: String,
}

/// The TSC rate, found once: the kernel's own (its log line `tsc: Refined TSC clocksource
/// calibration: X MHz`, else `tsc: Detected X MHz processor`, read from /dev/kmsg), else
/// calibrated against CLOCK_MONOTONIC over 100 ms.
pub fn tsc_rate() -> &'static TscRate {
    static RATE: OnceLock<TscRate> = OnceLock::new();
    RATE.get_or_init(|| kernel_tsc_rate().unwrap_or_else(calibrate_tsc))
}

/// TSC ticks per second (see [`tsc_rate`]).
pub fn tsc_hz() -> u64 {
    tsc_rate().hz
}

/// The kernel log's TSC rate (needs the right to read /dev/kmsg: root or CAP_SYSLOG).
fn kernel_tsc_rate() -> Option<TscRate> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg").ok()?;
    let mut buf = vec![0u8; 8192];
    let (mut refined, mut detected) = (None, None);
    // One record per read; EAGAIN at the end of the buffer.
    for _ in 0..100_000 {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue, // overwritten record
            Err(_) => break,
        };
        let rec = String::from_utf8_lossy(&buf[..n]);
        let Some(msg) = rec.split_once(';').map(|(_, m)| m.trim_end()) else { continue };
        if let Some(mhz) = mhz_after(msg, "tsc: Refined TSC clocksource calibration: ") {
            refined = Some((mhz, msg.to_string()));
        } else if let Some(mhz) = mhz_after(msg, "tsc: Detected ") {
            detected = Some((mhz, msg.to_string()));
        }
    }
    let (mhz, line) = refined.or(detected)?;
    Some(TscRate { hz: (mhz * 1e6).round() as u64, source: format!("kernel: {line}") })
}

/// `X` of `prefix X MHz...` in `msg`.
fn mhz_after(msg: &str, prefix: &str) -> Option<f64> {
    let rest = msg.strip_prefix(prefix)?;
    let v: f64 = rest.split_whitespace().next()?.parse().ok()?;
    (v > 0.0 && rest.contains("MHz")).then_some(v)
}

fn calibrate_tsc() -> TscRate {
    let t0 = std::time::Instant::now();
    let c0 = rdtsc();
    std::thread::sleep(std::time::Duration::from_millis(100));
    let c1 = rdtsc();
    let dt = t0.elapsed().as_secs_f64();
    let hz = ((c1.wrapping_sub(c0)) as f64 / dt) as u64;
    TscRate { hz, source: format!("calibrated against CLOCK_MONOTONIC over {:.0} ms", dt * 1e3) }
}

/// Prefetch the cache line holding `p` into all levels (a no-op off x86_64).
#[inline(always)]
pub fn prefetch_ptr<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Write one 64-byte line with non-temporal stores, as DMA writes memory without leaving
/// the line in any core's private cache. The caller issues [`dma_fence`] before handing
/// the buffer over.
///
/// # Safety
/// `dst` must be 64-byte aligned and point at 64 writable bytes the caller owns.
#[inline(always)]
pub unsafe fn dma_write_line(dst: *mut u8, src: &[u8; 64]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: per the contract above; SSE2 is baseline on x86_64.
    unsafe {
        use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        for i in 0..4 {
            let v = _mm_loadu_si128(src.as_ptr().add(i * 16) as *const __m128i);
            _mm_stream_si128(dst.add(i * 16) as *mut __m128i, v);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 64)
    }
}

/// Push the cache line holding `p` out of this core's private caches into the shared
/// last-level cache (cldemote), where a DMA write with DDIO would have put it. Encoded as a
/// NOP hint on CPUs without cldemote.
#[inline(always)]
pub fn demote_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: cldemote is a hint; it never faults and changes no architectural state.
    unsafe {
        core::arch::asm!("cldemote [{0}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Prefetch the line at `p` with intent to write (prefetchw), so a store to it does not stall
/// on the read-for-ownership. A hint: never faults.
#[inline(always)]
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetchw is a hint; it never faults and changes no architectural state.
    unsafe {
        core::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Order earlier non-temporal stores before later stores (sfence).
#[inline(always)]
pub fn dma_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions.
    unsafe {
        core::arch::x86_64::_mm_sfence()
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
}

/// Pin the calling thread to `cpu` (best effort: returns false if the kernel refused).
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_log_lines_give_the_rate() {
        assert_eq!(mhz_after("tsc: Detected 2596.150 MHz processor", "tsc: Detected "), Some(2596.15));
        let refined = "tsc: Refined TSC clocksource calibration: 2294.608 MHz";
        assert_eq!(mhz_after(refined, "tsc: Refined TSC clocksource calibration: "), Some(2294.608));
        assert_eq!(mhz_after("tsc: Detected a lot", "tsc: Detected "), None);
        // Whatever the source, the rate is within 2% of a fresh calibration.
        let r = tsc_rate();
        let c = calibrate_tsc();
        let ratio = r.hz as f64 / c.hz as f64;
        assert!((0.98..1.02).contains(&ratio), "{} ({}) against {}", r.hz, r.source, c.hz);
    }
}
