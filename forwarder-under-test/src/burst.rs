//! The types every stage of a burst shares (as DPDK's l3fwd keeps its burst types in one
//! header): the burst itself, structure of arrays, its size limit, the "no object" index,
//! and the per-burst stage clocks. A leaf: it depends on nothing else in the crate but
//! [`crate::cpu`].

use crate::cpu::rdtsc;

/// Largest burst.
pub const MAX_BURST: usize = 64;

/// No object: the end of a route-cache chain, a packet without a per-packet dst.
pub const NIL: u32 = u32::MAX;

/// A clocked stage: an index into [`fwd_abi::STAGE_CLOCKS`] (same order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Stage {
    DriverRx,
    Ip,
    Lookup,
    Gc,
    Slab,
    DriverTx,
    Calib,
    Nic,
    Idle,
}

/// Number of clocked stages.
pub const N_STAGES: usize = 9;

/// Per-burst stage clocks, always on unless switched off: one TSC read at each stage
/// boundary of a burst ([`StageClock::lap`] charges the time since the previous boundary
/// to a stage), so the cost of reading the clock is spread over the burst's packets and
/// nothing is timed per packet. Calls and packets are counted whether clocks run or not.
/// Work nested inside a stage that must be charged apart (a garbage-collector run inside
/// lookup) is timed by its caller in every poll and moved with
/// [`StageClock::move_clocks`]: `gc`'s clocks are never scaled.
pub struct StageClock {
    /// Clocks run (calls and packets are counted either way).
    pub enabled: bool,
    /// This poll is clocked (enabled, and chosen).
    on: bool,
    /// Clock a poll when the next random draw is below this (2^64 / N for one in N).
    threshold: u64,
    rng: u64,
    /// Polls, and polls clocked: clocks are scaled up by their ratio.
    pub polls: u64,
    pub clocked_polls: u64,
    last: u64,
    pub clocks: [u64; N_STAGES],
    pub calls: [u64; N_STAGES],
    pub packets: [u64; N_STAGES],
}

impl StageClock {
    /// Clocks (if `enabled`) on one poll in `one_in`, chosen at random (`seed`).
    pub fn new(enabled: bool, one_in: u32, seed: u64) -> StageClock {
        StageClock {
            enabled,
            on: false,
            threshold: if one_in <= 1 { u64::MAX } else { u64::MAX / u64::from(one_in) },
            rng: seed | 1,
            polls: 0,
            clocked_polls: 0,
            last: 0,
            clocks: [0; N_STAGES],
            calls: [0; N_STAGES],
            packets: [0; N_STAGES],
        }
    }

    /// A poll begins: draw whether it is clocked (xorshift64, a few cycles) and take the
    /// first boundary if so.
    #[inline(always)]
    pub fn start(&mut self) {
        self.polls += 1;
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        self.on = self.enabled && x <= self.threshold;
        if self.on {
            self.clocked_polls += 1;
            self.last = rdtsc();
        }
    }

    /// Whether this poll is clocked (nested work is timed only then).
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.on
    }

    /// The phase since the last boundary was `stage`'s work.
    #[inline(always)]
    pub fn lap(&mut self, stage: Stage) {
        if self.on {
            let now = rdtsc();
            self.clocks[stage as usize] += now.wrapping_sub(self.last);
            self.last = now;
        }
    }

    /// `stage` ran once in this burst, over `packets` packets.
    #[inline(always)]
    pub fn call(&mut self, stage: Stage, packets: usize) {
        self.calls[stage as usize] += 1;
        self.packets[stage as usize] += packets as u64;
    }

    /// Nested work timed by its caller in every poll (rare, long work such as a
    /// garbage-collector run: clocking one poll in N would miss it): `clocks` go to `to`
    /// unscaled; in a clocked poll they also leave `from`'s lap, which included them.
    #[inline(always)]
    pub fn move_clocks(&mut self, clocks: u64, from: Stage, to: Stage) {
        if !self.enabled {
            return;
        }
        if self.on {
            let c = clocks.min(self.clocks[from as usize]);
            self.clocks[from as usize] -= c;
        }
        self.clocks[to as usize] += clocks;
    }

    /// Work timed apart in every poll (not scaled up): `clocks` to `stage`; in a clocked
    /// poll the next lap starts after it.
    #[inline(always)]
    pub fn add_every_poll(&mut self, stage: Stage, clocks: u64) {
        if self.enabled {
            self.clocks[stage as usize] += clocks;
            if self.on {
                self.last = self.last.wrapping_add(clocks);
            }
        }
    }

    /// Publish into a counter vector (the `clk_*`, `calls_*` and `pkts_*` counters, and
    /// the polls clocked).
    pub fn fill(&self, ctr: &mut [u64]) {
        ctr[fwd_abi::Ctr::Polls as usize] = self.polls;
        ctr[fwd_abi::Ctr::ClockedPolls as usize] = self.clocked_polls;
        for (i, c) in fwd_abi::STAGE_CLOCKS.iter().enumerate() {
            ctr[c.clocks as usize] = self.clocks[i];
            ctr[c.calls as usize] = self.calls[i];
            ctr[c.packets as usize] = self.packets[i];
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Nested GC time: in a clocked poll it leaves lookup's lap and goes to gc; in an
    /// unclocked poll lookup has no lap to leave, and gc still gets it (never scaled).
    #[test]
    fn nested_work_moves_between_stages_in_every_poll() {
        let mut every = StageClock::new(true, 1, 7);
        every.start();
        assert!(every.on());
        every.lap(Stage::Lookup);
        every.clocks[Stage::Lookup as usize] = 1_000; // a lap of 1000 ticks, by hand
        every.move_clocks(300, Stage::Lookup, Stage::Gc);
        assert_eq!((every.clocks[Stage::Lookup as usize], every.clocks[Stage::Gc as usize]), (700, 300));
        // More than the lap held: lookup is emptied, not wrapped.
        every.move_clocks(900, Stage::Lookup, Stage::Gc);
        assert_eq!((every.clocks[Stage::Lookup as usize], every.clocks[Stage::Gc as usize]), (0, 1_200));

        let mut never = StageClock::new(true, 1024, 7);
        let mut clocked = 0;
        for _ in 0..10 {
            never.start();
            clocked += u64::from(never.on());
            never.move_clocks(50, Stage::Lookup, Stage::Gc);
            never.add_every_poll(Stage::Gc, 5);
        }
        assert_eq!(never.polls, 10);
        assert_eq!(never.clocked_polls, clocked);
        assert_eq!(never.clocks[Stage::Gc as usize], 550, "gc timed in every poll");
        // Clocks off: nothing moves.
        let mut off = StageClock::new(false, 1, 7);
        off.start();
        off.move_clocks(50, Stage::Lookup, Stage::Gc);
        off.add_every_poll(Stage::Gc, 5);
        assert_eq!(off.clocks, [0; N_STAGES]);
        assert_eq!(off.clocked_polls, 0);
    }
}
