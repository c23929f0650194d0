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

/// TSC ticks per second, measured once against the monotonic clock (50 ms).
pub fn tsc_hz() -> u64 {
    static HZ: OnceLock<u64> = OnceLock::new();
    *HZ.get_or_init(|| {
        let t0 = std::time::Instant::now();
        let c0 = rdtsc();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let c1 = rdtsc();
        let dt = t0.elapsed().as_secs_f64();
        ((c1.wrapping_sub(c0)) as f64 / dt) as u64
    })
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
