//! `dir24` engine: DIR-24-8 as in DPDK's rte_lpm. A 2^24-entry first-level table indexed by
//! the top 24 bits; prefixes longer than /24 extend an entry into a 256-entry second-level
//! group. The first level (64 MiB) is mapped with transparent huge pages where the kernel
//! allows, so random lookups miss the TLB less.
//!
//! An entry holds its answer ready to return, plus one: `nh + 1` for a next hop, 0 for no
//! route (so the zeroed mapping means "no route" and `entry - 1` is [`NO_ROUTE`]), or
//! [`EXT`] | group for a /24 holding longer prefixes. A lookup that stays in tbl24 is then a
//! load, a sign test and a subtraction. The table is built once from the whole route list,
//! shortest prefixes first, so entries need no depth.

use super::{mask, Route, NO_ROUTE};
use crate::cpu::prefetch_ptr;
use crate::{Error, Result};

/// A tbl24 entry with this bit set points to tbl8 group `entry & VALUE_MASK`.
const EXT: u32 = 1 << 31;
const VALUE_MASK: u32 = (1 << 24) - 1;
const TBL24_LEN: usize = 1 << 24;

/// Largest next-hop id the 24-bit entry field can hold.
pub const MAX_NH: u32 = VALUE_MASK;

// "No route" is the zeroed entry minus one.
const _: () = assert!(0u32.wrapping_sub(1) == NO_ROUTE && (MAX_NH + 1) & EXT == 0);

/// The first-level table: exactly 2^24 entries, so `tbl24[(addr >> 8) as usize]` is in
/// bounds for every address and needs no check.
type Tbl24 = [u32; TBL24_LEN];

/// An anonymous mapping holding one [`Tbl24`], advised for huge pages.
struct HugeTbl24 {
    /// Never null (checked in `zeroed`). Raw, so that [`fwd_lookup_fib_dir24`] dereferences
    /// it with no function call to inline (see there).
    raw: *mut Tbl24,
}

// SAFETY: HugeTbl24 owns its mapping exclusively; after build it is only read.
unsafe impl Send for HugeTbl24 {}
unsafe impl Sync for HugeTbl24 {}

impl HugeTbl24 {
    const BYTES: usize = std::mem::size_of::<Tbl24>();

    fn zeroed() -> Result<Self> {
        // SAFETY: anonymous private mapping, checked for failure below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED || p.is_null() {
            return Err(Error::Io {
                path: "dir24 tbl24 (anonymous mmap)".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: advice on our own mapping; failure only means no huge pages.
        unsafe { libc::madvise(p, Self::BYTES, libc::MADV_HUGEPAGE) };
        Ok(HugeTbl24 { raw: p as *mut Tbl24 })
    }
    #[inline(always)]
    fn get(&self) -> &Tbl24 {
        // SAFETY: raw is a live, page-aligned mapping of BYTES zero-initialized bytes, which
        // is a valid Tbl24; shared access through &self.
        unsafe { &*self.raw }
    }
    fn get_mut(&mut self) -> &mut Tbl24 {
        // SAFETY: as above, and &mut self gives exclusive access.
        unsafe { &mut *self.raw }
    }
}

impl Drop for HugeTbl24 {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `zeroed`.
        unsafe { libc::munmap(self.raw as *mut libc::c_void, Self::BYTES) };
    }
}

/// DIR-24-8 table.
pub struct Dir24 {
    tbl24: HugeTbl24,
    tbl8: Vec<u32>,
}

#[inline(always)]
fn entry(nh: u32) -> u32 {
    nh + 1
}

impl Dir24 {
    /// Build from normalized routes. Next-hop ids must fit in 24 bits.
    pub fn build(routes: &[Route]) -> Result<Self> {
        let mut sorted: Vec<Route> = routes.to_vec();
        // Shorter first: a longer prefix then simply overwrites what it covers.
        sorted.sort_by_key(|r| (r.len, r.prefix));
        let mut t24 = HugeTbl24::zeroed()?;
        let tbl24 = t24.get_mut();
        let mut tbl8: Vec<u32> = Vec::new();
        for r in &sorted {
            if r.nh > MAX_NH {
                return Err(Error::Config(format!("dir24: next-hop id {} of {r} exceeds {MAX_NH}", r.nh)));
            }
            if r.len <= 24 {
                let start = (r.prefix >> 8) as usize;
                let n = 1usize << (24 - r.len);
                tbl24[start..start + n].fill(entry(r.nh));
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
                    tbl24[i24] = EXT | g as u32;
                    g
                };
                let start = group * 256 + (r.prefix & 0xff) as usize;
                let n = 1usize << (32 - r.len);
                tbl8[start..start + n].fill(entry(r.nh));
            }
        }
        debug_assert!(sorted.iter().all(|r| r.prefix & !mask(r.len) == 0));
        Ok(Dir24 { tbl24: t24, tbl8 })
    }

    #[inline(always)]
    pub fn prefetch(&self, addr: u32) {
        prefetch_ptr(self.tbl24.get().as_ptr().wrapping_add((addr >> 8) as usize));
    }

    /// The answer for `addr` given its tbl24 entry `e`: the entry of `e`'s tbl8 group when
    /// it has one (rarely: a branch, predicted not taken), then that entry minus one.
    #[inline(always)]
    fn resolve(&self, e: u32, addr: u32) -> u32 {
        // (e & VALUE_MASK) * 256 + low byte: `e << 8` drops the EXT bit.
        let e = if e & EXT != 0 { self.tbl8[((e << 8) | (addr & 0xff)) as usize] } else { e };
        e.wrapping_sub(1)
    }

    /// Longest-prefix match of one address: one tbl24 load (its index is below 2^24, so no
    /// bounds check), a tbl8 load for the few /24s holding longer prefixes.
    #[inline(always)]
    pub fn lookup(&self, addr: u32) -> u32 {
        self.resolve(self.tbl24.get()[(addr >> 8) as usize], addr)
    }

    /// Look up a group of `N` addresses as rte_lpm_lookupx4 does (`N` = 4 is its
    /// counterpart): every tbl24 load first, then one branch for the whole group on whether
    /// any entry extends into tbl8.
    #[inline(always)]
    pub fn lookup_group<const N: usize>(&self, addrs: &[u32; N], out: &mut [u32; N]) {
        let t24 = self.tbl24.get();
        let e: [u32; N] = std::array::from_fn(|i| t24[(addrs[i] >> 8) as usize]);
        if e.iter().fold(0, |any, &x| any | x) & EXT == 0 {
            for (o, x) in out.iter_mut().zip(e) {
                *o = x.wrapping_sub(1);
            }
        } else {
            for ((o, x), &a) in out.iter_mut().zip(e).zip(addrs) {
                *o = self.resolve(x, a);
            }
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

/// Lookup entry point of the `dir24` engine (stage: lookup), out of line under its own
/// symbol so that profiles of the forwarder name it (the call costs about as much as the
/// lookup's own instructions: [`Dir24::lookup`] is the same lookup inline, for code that
/// embeds the engine, as DPDK's rte_lpm_lookup is).
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_dir24(fib: &Dir24, addr: u32) -> u32 {
    // Dir24::lookup written out with built-in operations only (a raw pointer's deref, an
    // array index), so the entry's instructions are this function's own in the line table,
    // not an inlined callee's: a callchain through it names it alone.
    // SAFETY: `raw` is the live mapping of a zeroed Tbl24 (see HugeTbl24::get), only read.
    let t24: &Tbl24 = unsafe { &*fib.tbl24.raw };
    let e = t24[(addr >> 8) as usize];
    fib.resolve(e, addr)
}

/// Batched lookups (stage: lookup), out of line under their own symbol like
/// [`fwd_lookup_fib_dir24`]: [`Dir24::lookup_batch`] inline.
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_dir24_batch(fib: &Dir24, addrs: &[u32], out: &mut [u32], depth: usize) {
    fib.lookup_batch(addrs, out, depth)
}

impl Dir24 {
    /// Batched lookups of `addrs` into `out` (the shorter of the two is the batch). When
    /// `depth` covers the whole batch (a burst of 4, 8 or 32, as rte_lpm_lookupx4 and
    /// rte_lpm_lookup_bulk take) there is nothing to prefetch ahead of: the tbl24 loads are
    /// independent, so they are issued four at a time with one branch per four (as
    /// rte_lpm_lookupx4), and the out-of-order core overlaps their misses. Longer batches
    /// prefetch `depth` addresses ahead ([`Dir24::pipeline`]).
    #[inline(always)]
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [u32], depth: usize) {
        let n = addrs.len().min(out.len());
        let (addrs, out) = (&addrs[..n], &mut out[..n]);
        if depth < n {
            return self.pipeline(addrs, out, depth);
        }
        let (groups, rest) = addrs.as_chunks::<4>();
        let (out_groups, out_rest) = out.as_chunks_mut::<4>();
        for (a, o) in groups.iter().zip(out_groups) {
            self.lookup_group(a, o);
        }
        for (o, &a) in out_rest.iter_mut().zip(rest) {
            *o = self.lookup(a);
        }
    }

    /// Batched lookups of `addrs` into `out` (as long) with `depth` (less than their
    /// length) tbl24 entries prefetched ahead: prime, steady and drain loops, the way l3fwd
    /// feeds rte_lpm_lookup_bulk.
    #[inline(always)]
    fn pipeline(&self, addrs: &[u32], out: &mut [u32], depth: usize) {
        let n = addrs.len().min(out.len());
        let depth = depth.min(n);
        let t24 = self.tbl24.get();
        // prime
        for &a in &addrs[..depth] {
            prefetch_ptr(t24.as_ptr().wrapping_add((a >> 8) as usize));
        }
        // steady: look up i while prefetching i + depth
        let (head, tail) = out[..n].split_at_mut(n - depth);
        for ((o, &a), &ahead) in head.iter_mut().zip(addrs).zip(&addrs[depth..]) {
            prefetch_ptr(t24.as_ptr().wrapping_add((ahead >> 8) as usize));
            *o = self.lookup(a);
        }
        // drain
        for (o, &a) in tail.iter_mut().zip(&addrs[n - depth..]) {
            *o = self.lookup(a);
        }
    }
}
