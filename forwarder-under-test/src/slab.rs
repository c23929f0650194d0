//! Slab caches with per-worker magazines (Bonwick's magazine layer, as in the Linux slab
//! allocator's per-CPU arrays). Objects are `u32` indices into an arena the owner keeps
//! (packet buffers in [`crate::nic::BufferArena`], dst entries in [`crate::rtcache`]).
//!
//! A [`Depot`] holds full and empty magazines behind a lock; each worker's [`SlabCache`]
//! keeps a loaded and a previous magazine and goes to the depot only when both are empty
//! (alloc) or both full (free). All magazines are created up front, so neither alloc nor
//! free ever calls the system allocator.

use std::sync::{Arc, Mutex};

/// Per-cache counters.
#[derive(Debug, Default, Clone, Copy)]
pub struct SlabStats {
    pub alloc: u64,
    pub free: u64,
    pub alloc_fail: u64,
    pub depot_get: u64,
    pub depot_put: u64,
}

/// The shared layer of one cache: full and empty magazines.
pub struct Depot {
    name: &'static str,
    mag_size: usize,
    inner: Mutex<DepotInner>,
}

struct DepotInner {
    full: Vec<Vec<u32>>,
    empty: Vec<Vec<u32>>,
}

impl Depot {
    /// A depot holding objects `0..objects` in full magazines of `mag_size`, with enough
    /// empty magazines for `workers` per-worker caches to never allocate.
    pub fn new(name: &'static str, objects: u32, mag_size: usize, workers: usize) -> Arc<Depot> {
        let mag_size = mag_size.max(1);
        let mut full = Vec::new();
        let mut it = 0..objects;
        loop {
            let mut m = Vec::with_capacity(mag_size);
            m.extend(it.by_ref().take(mag_size));
            if m.is_empty() {
                break;
            }
            full.push(m);
        }
        let total_mags = objects as usize / mag_size + 2 * workers + 2;
        let empty =
            (0..total_mags.saturating_sub(full.len()) + 2 * workers).map(|_| Vec::with_capacity(mag_size)).collect();
        Arc::new(Depot { name, mag_size, inner: Mutex::new(DepotInner { full, empty }) })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    fn swap_for_full(&self, empty: &mut Vec<u32>) -> bool {
        let mut d = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match d.full.pop() {
            Some(f) => {
                let e = std::mem::replace(empty, f);
                d.empty.push(e);
                true
            }
            None => false,
        }
    }

    fn swap_for_empty(&self, full: &mut Vec<u32>) -> bool {
        let mut d = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match d.empty.pop() {
            Some(e) => {
                let f = std::mem::replace(full, e);
                d.full.push(f);
                true
            }
            None => false,
        }
    }

    /// Objects currently held in full magazines in the depot.
    pub fn available(&self) -> usize {
        let d = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        d.full.iter().map(Vec::len).sum()
    }
}

/// A worker's view of one cache: two magazines plus the depot behind them.
pub struct SlabCache {
    loaded: Vec<u32>,
    previous: Vec<u32>,
    depot: Arc<Depot>,
    pub stats: SlabStats,
}

impl SlabCache {
    pub fn new(depot: Arc<Depot>) -> SlabCache {
        let n = depot.mag_size;
        let mut c = SlabCache {
            loaded: Vec::with_capacity(n),
            previous: Vec::with_capacity(n),
            depot,
            stats: SlabStats::default(),
        };
        // Start with one full magazine if the depot has one.
        if c.depot.swap_for_full(&mut c.loaded) {
            c.stats.depot_get += 1;
        }
        c
    }

    /// Take one object, or `None` when the cache is exhausted (counted in `alloc_fail`).
    #[inline]
    pub fn alloc(&mut self) -> Option<u32> {
        if let Some(x) = self.loaded.pop() {
            self.stats.alloc += 1;
            return Some(x);
        }
        self.alloc_slow()
    }

    #[cold]
    fn alloc_slow(&mut self) -> Option<u32> {
        if !self.previous.is_empty() {
            std::mem::swap(&mut self.loaded, &mut self.previous);
        } else if self.depot.swap_for_full(&mut self.loaded) {
            self.stats.depot_get += 1;
        } else {
            self.stats.alloc_fail += 1;
            return None;
        }
        self.stats.alloc += 1;
        self.loaded.pop()
    }

    /// Return one object.
    #[inline]
    pub fn free(&mut self, x: u32) {
        self.stats.free += 1;
        if self.loaded.len() < self.depot.mag_size {
            self.loaded.push(x);
            return;
        }
        self.free_slow(x)
    }

    #[cold]
    fn free_slow(&mut self, x: u32) {
        if self.previous.is_empty() {
            std::mem::swap(&mut self.loaded, &mut self.previous);
        } else if self.depot.swap_for_empty(&mut self.loaded) {
            self.stats.depot_put += 1;
        } else {
            // Cannot happen with the magazines Depot::new creates; keep the object anyway.
            self.loaded.reserve(1);
        }
        self.loaded.push(x);
    }

    /// Objects held by this worker's magazines.
    pub fn held(&self) -> usize {
        self.loaded.len() + self.previous.len()
    }
}

/// Allocate up to `out.len()` objects; returns how many (stage: slab). The same objects
/// in the same order as that many [`SlabCache::alloc`] calls (the most recently freed
/// first), copied from the loaded magazine as a block, one bounds check and one count per
/// magazine rather than per object.
#[no_mangle]
#[inline(never)]
pub fn fwd_slab_alloc_bulk(cache: &mut SlabCache, out: &mut [u32]) -> usize {
    let mut done = 0;
    while done < out.len() {
        let have = cache.loaded.len();
        let k = (out.len() - done).min(have);
        for (o, &x) in out[done..done + k].iter_mut().zip(cache.loaded[have - k..].iter().rev()) {
            *o = x;
        }
        cache.loaded.truncate(have - k);
        cache.stats.alloc += k as u64;
        done += k;
        if done < out.len() {
            match cache.alloc_slow() {
                Some(x) => out[done] = x,
                None => return done,
            }
            done += 1;
        }
    }
    done
}

/// Free a batch of objects (stage: slab): as that many [`SlabCache::free`] calls, each
/// magazine's share appended as a block.
#[no_mangle]
#[inline(never)]
pub fn fwd_slab_free_bulk(cache: &mut SlabCache, objs: &[u32]) {
    let mut rest = objs;
    while !rest.is_empty() {
        let room = cache.depot.mag_size.saturating_sub(cache.loaded.len()).min(rest.len());
        cache.loaded.extend_from_slice(&rest[..room]);
        cache.stats.free += room as u64;
        rest = &rest[room..];
        if let Some((&x, tail)) = rest.split_first() {
            cache.stats.free += 1;
            cache.free_slow(x);
            rest = tail;
        }
    }
}

/// Allocate one object (stage: slab).
#[no_mangle]
#[inline(never)]
pub fn fwd_slab_alloc(cache: &mut SlabCache) -> Option<u32> {
    cache.alloc()
}

/// Free one object (stage: slab).
#[no_mangle]
#[inline(never)]
pub fn fwd_slab_free(cache: &mut SlabCache, x: u32) {
    cache.free(x)
}

impl SlabCache {
    /// Objects in full magazines in the depot behind this cache.
    pub fn depot_available(&self) -> usize {
        self.depot.available()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bulk alloc and free give what as many single calls give, object for object and in
    /// order, across magazine changes, the depot, and exhaustion; the counts agree too.
    #[test]
    fn bulk_calls_are_single_calls_in_a_row() {
        let depot_a = Depot::new("a", 300, 16, 1);
        let depot_b = Depot::new("b", 300, 16, 1);
        let (mut bulk, mut single) = (SlabCache::new(depot_a.clone()), SlabCache::new(depot_b.clone()));
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut held_bulk: Vec<u32> = Vec::new();
        let mut held_single: Vec<u32> = Vec::new();
        for round in 0..400 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let n = (rng % 40) as usize;
            if !rng.is_multiple_of(3) {
                let mut out = vec![0u32; n];
                let got = fwd_slab_alloc_bulk(&mut bulk, &mut out);
                let want: Vec<u32> = (0..n).map_while(|_| single.alloc()).collect();
                assert_eq!(&out[..got], &want[..], "round {round}: alloc {n}");
                held_bulk.extend(&out[..got]);
                held_single.extend(want);
            } else {
                let k = n.min(held_bulk.len());
                let back: Vec<u32> = held_bulk.split_off(held_bulk.len() - k);
                fwd_slab_free_bulk(&mut bulk, &back);
                for x in held_single.split_off(held_single.len() - k) {
                    single.free(x);
                }
            }
            assert_eq!(bulk.held(), single.held(), "round {round}");
            assert_eq!(depot_a.available(), depot_b.available(), "round {round}");
        }
        let (a, b) = (bulk.stats, single.stats);
        assert_eq!(
            (a.alloc, a.free, a.alloc_fail, a.depot_get, a.depot_put),
            (b.alloc, b.free, b.alloc_fail, b.depot_get, b.depot_put)
        );
        assert!(a.alloc_fail > 0 && a.depot_put > 0, "the rounds reached exhaustion and the depot: {a:?}");
    }

    #[test]
    fn objects_are_conserved_across_workers() {
        let depot = Depot::new("t", 1000, 16, 2);
        let mut a = SlabCache::new(depot.clone());
        let mut b = SlabCache::new(depot.clone());
        let mut got = Vec::new();
        while let Some(x) = a.alloc() {
            got.push(x);
        }
        assert_eq!(got.len() + b.held(), 1000);
        assert_eq!(a.stats.alloc_fail, 1);
        // Free everything through the other worker: it spills to the depot.
        for &x in &got {
            b.free(x);
        }
        let mut all: Vec<u32> = Vec::new();
        while let Some(x) = b.alloc() {
            all.push(x);
        }
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }
}
