//! FIB engines: longest-prefix match from an IPv4 destination to a next-hop id.
//!
//! Three engines, each in its own module, all built from the same normalized route list
//! (`&[Route]`, host bits clear, no duplicate prefix) and all returning the same answer:
//! - [`hash::HashFib`]: one hash table per prefix length, searched longest first (Linux fn_hash).
//! - [`lctrie::LcTrie`]: level- and path-compressed trie (Nilsson-Karlsson, as Linux fib_trie).
//! - [`dir24::Dir24`]: DIR-24-8 two-level table (DPDK rte_lpm).
//!
//! [`Fib`] is the enum the forwarder dispatches on; [`reference`] holds the naive reference
//! implementation that tests compare every engine against.

pub mod dir24;
pub mod hash;
pub mod lctrie;
pub mod reference;

use crate::Result;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Next-hop id returned by a lookup when no prefix covers the address.
pub const NO_ROUTE: u32 = u32::MAX;

/// One route: `prefix/len -> nexthop id`. `prefix` has its host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Route {
    pub prefix: u32,
    pub len: u8,
    pub nh: u32,
}

/// Network mask for a prefix length 0..=32.
#[inline(always)]
pub const fn mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

impl Route {
    /// A route whose prefix has its host bits cleared; `len` must be at most 32.
    pub fn new(prefix: u32, len: u8, nh: u32) -> Route {
        debug_assert!(len <= 32);
        Route { prefix: prefix & mask(len), len, nh }
    }
    /// True when `addr` lies inside this prefix.
    #[inline]
    pub fn contains(&self, addr: u32) -> bool {
        addr & mask(self.len) == self.prefix
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} nh {}", std::net::Ipv4Addr::from(self.prefix), self.len, self.nh)
    }
}

/// Which FIB engine to build: typed in fwd-abi, next to the cache mode, so a sweep's
/// axes name it without this crate.
pub use fwd_abi::FibKind;

/// A built FIB. Dispatch is a `match`, which the branch predictor resolves for free since
/// a forwarder runs one engine.
pub enum Fib {
    Hash(hash::HashFib),
    Lctrie(lctrie::LcTrie),
    Dir24(dir24::Dir24),
}

impl Fib {
    /// Build the engine `kind` from normalized routes (see [`normalize`]).
    pub fn build(kind: FibKind, routes: &[Route]) -> Result<Fib> {
        Ok(match kind {
            FibKind::Hash => Fib::Hash(hash::HashFib::build(routes)?),
            FibKind::Lctrie => Fib::Lctrie(lctrie::LcTrie::build(routes)?),
            FibKind::Dir24 => Fib::Dir24(dir24::Dir24::build(routes)?),
        })
    }

    pub fn kind(&self) -> FibKind {
        match self {
            Fib::Hash(_) => FibKind::Hash,
            Fib::Lctrie(_) => FibKind::Lctrie,
            Fib::Dir24(_) => FibKind::Dir24,
        }
    }

    /// Longest-prefix match: the next-hop id, or [`NO_ROUTE`].
    #[inline]
    pub fn lookup(&self, addr: u32) -> u32 {
        match self {
            Fib::Hash(f) => hash::fwd_lookup_fib_hash(f, addr),
            Fib::Lctrie(f) => lctrie::fwd_lookup_fib_lctrie(f, addr),
            Fib::Dir24(f) => dir24::fwd_lookup_fib_dir24(f, addr),
        }
    }

    /// Prefetch the first memory a lookup of `addr` will touch.
    #[inline]
    pub fn prefetch(&self, addr: u32) {
        match self {
            Fib::Hash(f) => f.prefetch(addr),
            Fib::Lctrie(f) => f.prefetch(addr),
            Fib::Dir24(f) => f.prefetch(addr),
        }
    }

    /// Look up a batch, prefetching `depth` addresses ahead (prime, steady, drain); dir24
    /// looks a batch that `depth` covers up in groups of 4 without prefetching (its loads
    /// are independent, so the core overlaps their misses).
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [u32], depth: usize) {
        match self {
            Fib::Dir24(f) => dir24::fwd_lookup_fib_dir24_batch(f, addrs, out, depth),
            _ => {
                let n = addrs.len().min(out.len());
                let k = depth.min(n);
                for &a in &addrs[..k] {
                    self.prefetch(a);
                }
                for i in 0..n {
                    if i + k < n {
                        self.prefetch(addrs[i + k]);
                    }
                    out[i] = self.lookup(addrs[i]);
                }
            }
        }
    }

    /// Bytes of memory the engine's tables use.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Fib::Hash(f) => f.memory_bytes(),
            Fib::Lctrie(f) => f.memory_bytes(),
            Fib::Dir24(f) => f.memory_bytes(),
        }
    }
}

/// Clear host bits and drop duplicate prefixes (the first occurrence wins).
/// Returns the routes sorted by (prefix, len) and the number of duplicates dropped.
pub fn normalize(routes: &mut Vec<Route>) -> usize {
    normalize_counted(routes).duplicates
}

/// What [`normalize_counted`] dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dedup {
    /// Routes dropped because an earlier one had the same prefix and length.
    pub duplicates: usize,
    /// Of those, the ones whose next hop differed from the kept route's.
    pub conflicts: usize,
}

/// [`normalize`], counting the dropped duplicates that named another next hop.
pub fn normalize_counted(routes: &mut Vec<Route>) -> Dedup {
    for r in routes.iter_mut() {
        r.prefix &= mask(r.len);
    }
    // Stable sort keeps file order among equal keys, so dedup keeps the first.
    routes.sort_by_key(|r| (r.prefix, r.len));
    let before = routes.len();
    let mut conflicts = 0;
    routes.dedup_by(|later, kept| {
        let same = (later.prefix, later.len) == (kept.prefix, kept.len);
        if same && later.nh != kept.nh {
            conflicts += 1;
        }
        same
    });
    Dedup { duplicates: before - routes.len(), conflicts }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_edges() {
        assert_eq!(mask(0), 0);
        assert_eq!(mask(1), 0x8000_0000);
        assert_eq!(mask(24), 0xffff_ff00);
        assert_eq!(mask(32), 0xffff_ffff);
    }

    #[test]
    fn normalize_clears_host_bits_and_keeps_first() {
        let mut r = vec![Route { prefix: 0x0a01_0203, len: 8, nh: 1 }, Route { prefix: 0x0a00_0000, len: 8, nh: 2 }];
        assert_eq!(normalize(&mut r), 1);
        assert_eq!(r, vec![Route { prefix: 0x0a00_0000, len: 8, nh: 1 }]);
    }

    #[test]
    fn normalize_counts_duplicates_that_name_another_next_hop() {
        let r = |nh| Route { prefix: 0x0a00_0000, len: 8, nh };
        let mut v = vec![r(1), r(1), r(2), Route { prefix: 0x0b00_0000, len: 8, nh: 2 }, r(3)];
        assert_eq!(normalize_counted(&mut v), Dedup { duplicates: 3, conflicts: 2 });
        assert_eq!(v, vec![r(1), Route { prefix: 0x0b00_0000, len: 8, nh: 2 }]);
    }
}
