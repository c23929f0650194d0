//! `dir24` engine: DIR-24-8 as in DPDK's rte_lpm. A 2^24-entry first-level table indexed by
//! the top 24 bits; prefixes longer than /24 extend an entry into a 256-entry second-level
//! group. The first level (64 MiB) is mapped with transparent huge pages where the kernel
//! allows, so random lookups miss the TLB less.

use super::{mask, Route, NO_ROUTE};
use crate::cpu::prefetch_ptr;
use crate::{Error, Result};

const VALID: u32 = 1 << 31;
const EXT: u32 = 1 << 30;
const DEPTH_SHIFT: u32 = 24;
const VALUE_MASK: u32 = (1 << 24) - 1;
const TBL24_LEN: usize = 1 << 24;

/// Largest next-hop id the 24-bit entry field can hold.
pub const MAX_NH: u32 = VALUE_MASK;

/// An anonymous mapping of `u32`s, advised for huge pages.
struct HugeVec {
    ptr: *mut u32,
    len: usize,
}

// SAFETY: HugeVec owns its mapping exclusively; after build it is only read.
unsafe impl Send for HugeVec {}
unsafe impl Sync for HugeVec {}

impl HugeVec {
    fn zeroed(len: usize) -> Result<Self> {
        let bytes = len * 4;
        // SAFETY: anonymous private mapping, checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Io {
                path: "dir24 tbl24 (anonymous mmap)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: advice on our own mapping; failure only means no huge pages.
        unsafe { libc::madvise(p, bytes, libc::MADV_HUGEPAGE) };
        Ok(HugeVec { ptr: p as *mut u32, len })
    }
    #[inline(always)]
    fn as_slice(&self) -> &[u32] {
        // SAFETY: ptr/len describe a live mapping of initialized (zeroed) u32s.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn as_mut_slice(&mut self) -> &mut [u32] {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for HugeVec {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `zeroed`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len * 4) };
    }
}

/// DIR-24-8 table.
pub struct Dir24 {
    tbl24: HugeVec,
    tbl8: Vec<u32>,
}

#[inline(always)]
fn entry(nh: u32, depth: u8) -> u32 {
    VALID | (u32::from(depth) << DEPTH_SHIFT) | nh
}

impl Dir24 {
    /// Build from normalized routes. Next-hop ids must fit in 24 bits.
    pub fn build(routes: &[Route]) -> Result<Self> {
        let mut sorted: Vec<Route> = routes.to_vec();
        // Shorter first: a longer prefix then simply overwrites what it covers.
        sorted.sort_by_key(|r| (r.len, r.prefix));
        let mut t24 = HugeVec::zeroed(TBL24_LEN)?;
        let tbl24 = t24.as_mut_slice();
        let mut tbl8: Vec<u32> = Vec::new();
        for r in &sorted {
            if r.nh > MAX_NH {
                return Err(Error::Config(format!("dir24: next-hop id {} of {r} exceeds {MAX_NH}", r.nh)));
            }
            if r.len <= 24 {
                let start = (r.prefix >> 8) as usize;
                let n = 1usize << (24 - r.len);
                tbl24[start..start + n].fill(entry(r.nh, r.len));
            } else {
                let i24 = (r.prefix >> 8) as usize;
                let e = tbl24[i24];
                let group = if e & EXT != 0 {
                    (e & VALUE_MASK) as usize
                } else {
                    let g = tbl8.len() / 256;
                    if g as u32 > VALUE_MASK {
                        return Err(Error::Config("dir24: too many /25-/32 groups".into()));
                    }
                    // The group inherits what the /24 slot held (a shorter route or nothing).
                    tbl8.extend(std::iter::repeat_n(e, 256));
                    tbl24[i24] = VALID | EXT | g as u32;
                    g
                };
                let start = group * 256 + (r.prefix & 0xff) as usize;
                let n = 1usize << (32 - r.len);
                tbl8[start..start + n].fill(entry(r.nh, r.len));
            }
        }
        debug_assert!(sorted.iter().all(|r| r.prefix & !mask(r.len) == 0));
        Ok(Dir24 { tbl24: t24, tbl8 })
    }

    #[inline(always)]
    pub fn prefetch(&self, addr: u32) {
        prefetch_ptr(self.tbl24.as_slice().as_ptr().wrapping_add((addr >> 8) as usize));
    }

    #[inline(always)]
    fn resolve(&self, e: u32, addr: u32) -> u32 {
        let e = if e & EXT != 0 { self.tbl8[((e & VALUE_MASK) as usize) * 256 + (addr & 0xff) as usize] } else { e };
        if e & VALID != 0 {
            e & VALUE_MASK
        } else {
            NO_ROUTE
        }
    }

    pub fn memory_bytes(&self) -> usize {
        TBL24_LEN * 4 + self.tbl8.len() * 4
    }

    /// Number of 256-entry second-level groups in use.
    pub fn tbl8_groups(&self) -> usize {
        self.tbl8.len() / 256
    }
}

/// Lookup entry point of the `dir24` engine (stage: lookup).
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_dir24(fib: &Dir24, addr: u32) -> u32 {
    let e = fib.tbl24.as_slice()[(addr >> 8) as usize];
    fib.resolve(e, addr)
}

/// Batched lookups with `depth` tbl24 entries prefetched ahead (prime, steady, drain loops),
/// the way rte_lpm_lookup_bulk is used by l3fwd.
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_dir24_batch(fib: &Dir24, addrs: &[u32], out: &mut [u32], depth: usize) {
    let n = addrs.len().min(out.len());
    let t24 = fib.tbl24.as_slice();
    let k = depth.min(n);
    // prime
    for &a in &addrs[..k] {
        prefetch_ptr(t24.as_ptr().wrapping_add((a >> 8) as usize));
    }
    // steady
    let steady = n - k;
    for i in 0..steady {
        prefetch_ptr(t24.as_ptr().wrapping_add((addrs[i + k] >> 8) as usize));
        let a = addrs[i];
        out[i] = fib.resolve(t24[(a >> 8) as usize], a);
    }
    // drain
    for i in steady..n {
        let a = addrs[i];
        out[i] = fib.resolve(t24[(a >> 8) as usize], a);
    }
}
