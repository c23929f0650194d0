//! The types every stage of a burst shares (as DPDK's l3fwd keeps its burst types in one
//! header): the burst itself, structure of arrays, its size limit, the "no object" index,
//! and the per-stage TSC clock. A leaf: it depends on nothing else in the crate but
//! [`crate::cpu`].

use crate::cpu::rdtsc;
use fwd_abi::{Ctr, N_COUNTERS};

/// Largest burst.
pub const MAX_BURST: usize = 64;

/// No object: the end of a route-cache chain, a packet without a per-packet dst.
pub const NIL: u32 = u32::MAX;

/// Per-stage TSC accumulators. Stage time is exclusive: time in nested slab calls is
/// charged to slab, not to the stage that called it.
pub struct StageClock {
    pub enabled: bool,
    /// Indexed by counter index (the `Clk*` counters).
    pub acc: [u64; N_COUNTERS],
    nested_total: u64,
}

impl StageClock {
    pub fn new(enabled: bool) -> StageClock {
        StageClock { enabled, acc: [0; N_COUNTERS], nested_total: 0 }
    }

    /// Time `f` as nested work charged to `c`.
    #[inline(always)]
    pub fn nested<R>(&mut self, c: Ctr, f: impl FnOnce() -> R) -> R {
        if !self.enabled {
            return f();
        }
        let t = rdtsc();
        let r = f();
        let d = rdtsc().wrapping_sub(t);
        self.acc[c as usize] += d;
        self.nested_total += d;
        r
    }

    /// Time a stage: its elapsed time less the nested time recorded inside it, plus
    /// `extra_nested` cycles the stage reports itself (gc and dst slab inside lookup).
    #[inline(always)]
    pub fn stage<R>(&mut self, c: Ctr, f: impl FnOnce(&mut StageClock) -> R) -> R {
        if !self.enabled {
            return f(self);
        }
        let t = rdtsc();
        let n0 = self.nested_total;
        let r = f(self);
        let d = rdtsc().wrapping_sub(t);
        let inner = self.nested_total - n0;
        self.acc[c as usize] += d.saturating_sub(inner);
        r
    }
}

/// Packets of one burst, structure of arrays.
pub struct Burst {
    pub n: usize,
    pub buf: [u32; MAX_BURST],
    pub len: [u16; MAX_BURST],
    pub saddr: [u32; MAX_BURST],
    pub daddr: [u32; MAX_BURST],
    pub tos: [u8; MAX_BURST],
    pub nh: [u32; MAX_BURST],
    pub dst: [u32; MAX_BURST],
}

impl Default for Burst {
    fn default() -> Self {
        Burst {
            n: 0,
            buf: [0; MAX_BURST],
            len: [0; MAX_BURST],
            saddr: [0; MAX_BURST],
            daddr: [0; MAX_BURST],
            tos: [0; MAX_BURST],
            nh: [0; MAX_BURST],
            dst: [NIL; MAX_BURST],
        }
    }
}
