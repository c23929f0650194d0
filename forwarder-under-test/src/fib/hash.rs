//! `hash` engine: one open-addressing hash table ("zone") per prefix length, searched from
//! the longest non-empty length down, as Linux's fn_hash did before fib_trie replaced it.

use super::{mask, Route, NO_ROUTE};
use crate::cpu::prefetch_ptr;
use crate::Result;

const EMPTY: u64 = u64::MAX;

struct Zone {
    len: u8,
    mask: u32,
    /// `prefix << 32 | nh`, or [`EMPTY`].
    slots: Vec<u64>,
    slot_mask: usize,
}

impl Zone {
    #[inline(always)]
    fn home(&self, key: u32) -> usize {
        // fn_hash folds the significant bits; a multiplicative hash spreads them well.
        let h = key.wrapping_mul(0x9E37_79B1) ^ (key >> 16);
        (h as usize) & self.slot_mask
    }

    #[inline(always)]
    fn get(&self, addr: u32) -> u32 {
        let key = addr & self.mask;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s == EMPTY {
                return NO_ROUTE;
            }
            if (s >> 32) as u32 == key {
                return s as u32;
            }
            i = (i + 1) & self.slot_mask;
        }
    }
}

/// One hash table per prefix length, longest first.
pub struct HashFib {
    zones: Vec<Zone>,
}

impl HashFib {
    pub fn build(routes: &[Route]) -> Result<Self> {
        let mut per_len: Vec<Vec<&Route>> = vec![Vec::new(); 33];
        for r in routes {
            per_len[r.len as usize].push(r);
        }
        let mut zones = Vec::new();
        for len in (0..=32u8).rev() {
            let rs = &per_len[len as usize];
            if rs.is_empty() {
                continue;
            }
            // Load factor at most 1/2 keeps probe chains short.
            let cap = (rs.len() * 2).next_power_of_two().max(4);
            let mut z = Zone { len, mask: mask(len), slots: vec![EMPTY; cap], slot_mask: cap - 1 };
            for r in rs {
                let mut i = z.home(r.prefix);
                while z.slots[i] != EMPTY {
                    i = (i + 1) & z.slot_mask;
                }
                z.slots[i] = (u64::from(r.prefix) << 32) | u64::from(r.nh);
            }
            zones.push(z);
        }
        Ok(HashFib { zones })
    }

    #[inline]
    pub fn prefetch(&self, addr: u32) {
        if let Some(z) = self.zones.first() {
            let i = z.home(addr & z.mask);
            prefetch_ptr(z.slots.as_ptr().wrapping_add(i));
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.zones.iter().map(|z| z.slots.len() * 8).sum()
    }

    /// Prefix lengths present, longest first.
    pub fn lengths(&self) -> Vec<u8> {
        self.zones.iter().map(|z| z.len).collect()
    }
}

/// Lookup entry point of the `hash` engine (stage: lookup). The home slot of every zone is
/// prefetched first, so the cache misses of the longest-first search overlap instead of
/// following one another.
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_hash(fib: &HashFib, addr: u32) -> u32 {
    for z in fib.zones.iter().skip(1) {
        prefetch_ptr(z.slots.as_ptr().wrapping_add(z.home(addr & z.mask)));
    }
    for z in &fib.zones {
        let nh = z.get(addr);
        if nh != NO_ROUTE {
            return nh;
        }
    }
    NO_ROUTE
}
