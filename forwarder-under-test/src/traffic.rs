//! Traffic profiles and the flow generator behind the synthetic NIC.
//!
//! A profile is pktgen's flow model: `flows` concurrent flows, each `pkts_per_flow` packets
//! long, a new flow (new destination) replacing one that ends; packets of the concurrent
//! flows interleave at random. Destinations follow a pattern over the routing table:
//! `random` (a random prefix of the table, then a random host in it: the Juno floods of
//! 2003), `zipf` (prefix popularity Zipf-distributed) or `seq` (prefixes in order).
//! Sources are inside the lab range 198.18.0.0/15. Flows are steered to worker queues by a
//! Toeplitz RSS hash of (saddr, daddr, sport, dport) through a 128-entry indirection table.
//! Everything is deterministic for a seed.

use crate::fib::{mask, Route};
use crate::packet::{build_frame, mac_for, port_mac, FlowKey, MAX_FRAME, MIN_FRAME};
use crate::{Error, Result};
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::Distribution;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How flow destinations are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DstPattern {
    /// A random prefix of the table, a random host inside it.
    Random,
    /// Prefixes ranked at random, popularity Zipf(s = 1.0).
    Zipf,
    /// Prefixes in table order, one host after another.
    Seq,
}

/// A traffic profile. Defaults are the 2005 prefetch experiment: 32768 flows of 10
/// packets, random destinations, 64-byte packets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrafficProfile {
    /// Concurrent flows (default 32768).
    pub flows: usize,
    /// Packets per flow before it is replaced by a new one (default 10).
    pub pkts_per_flow: u32,
    /// Destination pattern (default random).
    pub dst: DstPattern,
    /// Packet size on the wire including FCS, 64..=1518 (default 64).
    pub size: usize,
    /// Seed of every random choice (default 1).
    pub seed: u64,
    /// Offered rate in packets per second over all queues; `None` (default) sends as fast
    /// as the forwarder takes packets, so the measured rate is the forwarder's.
    pub rate: Option<f64>,
    /// TTL of generated packets (default 64).
    pub ttl: u8,
}

impl Default for TrafficProfile {
    fn default() -> Self {
        TrafficProfile {
            flows: 32768,
            pkts_per_flow: 10,
            dst: DstPattern::Random,
            size: 64,
            seed: 1,
            rate: None,
            ttl: 64,
        }
    }
}

impl TrafficProfile {
    pub fn validate(&self) -> Result<()> {
        if !(MIN_FRAME + 4..=MAX_FRAME + 4).contains(&self.size) {
            return Err(Error::Config(format!("--size {}: expected 64 to 1518 bytes", self.size)));
        }
        if self.flows == 0 || self.pkts_per_flow == 0 {
            return Err(Error::Config("--flows and --pkts-per-flow must be at least 1".into()));
        }
        if self.flows > MAX_FLOWS {
            return Err(Error::Config(format!("--flows {}: expected 1 to {}", self.flows, MAX_FLOWS)));
        }
        if let Some(r) = self.rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(Error::Config(format!("--rate {r}: expected a positive packets-per-second figure")));
            }
        }
        Ok(())
    }
    /// Frame length without FCS.
    pub fn frame_len(&self) -> usize {
        self.size - 4
    }
}

/// Most concurrent flows of the synthetic traffic (2^24).
pub const MAX_FLOWS: usize = 1 << 24;

/// Microsoft's default RSS key, used by most NICs.
const RSS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b,
    0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac,
    0x01, 0xfa,
];

/// The Toeplitz hash is linear over GF(2): the hash of the 12-byte input is the XOR of what
/// each byte contributes at its position. `RSS_TABLE[i][v]` is what byte `i` with value `v`
/// contributes (input bit `p`, counted from the first byte's top bit, contributes the 32
/// key bits starting at bit `p`). Built at compile time from [`RSS_KEY`].
const RSS_TABLE: [[u32; 256]; 12] = rss_table();

const fn rss_table() -> [[u32; 256]; 12] {
    let mut t = [[0u32; 256]; 12];
    let mut i = 0;
    while i < 12 {
        let mut v = 0;
        while v < 256 {
            let mut h = 0u32;
            let mut bit = 0;
            while bit < 8 {
                if v >> (7 - bit) & 1 == 1 {
                    h ^= key_window(8 * i + bit);
                }
                bit += 1;
            }
            t[i][v] = h;
            v += 1;
        }
        i += 1;
    }
    t
}

/// The 32 bits of [`RSS_KEY`] starting at bit `p` (bit 0: the first byte's top bit).
const fn key_window(p: usize) -> u32 {
    let b = p / 8;
    let five = (RSS_KEY[b] as u64) << 32
        | (RSS_KEY[b + 1] as u64) << 24
        | (RSS_KEY[b + 2] as u64) << 16
        | (RSS_KEY[b + 3] as u64) << 8
        | RSS_KEY[b + 4] as u64;
    (five >> (8 - p % 8)) as u32
}

/// Toeplitz hash of the IPv4 4-tuple, as RSS computes it (12 table lookups).
pub fn rss_hash(f: &FlowKey) -> u32 {
    rss_hash_parts(rss_hash_daddr(f.daddr), f.saddr, f.sport, f.dport)
}

/// What the destination address contributes to the hash.
fn rss_hash_daddr(daddr: u32) -> u32 {
    let d = daddr.to_be_bytes();
    RSS_TABLE[4][d[0] as usize]
        ^ RSS_TABLE[5][d[1] as usize]
        ^ RSS_TABLE[6][d[2] as usize]
        ^ RSS_TABLE[7][d[3] as usize]
}

/// The hash from the destination's contribution and the other three fields.
fn rss_hash_parts(of_daddr: u32, saddr: u32, sport: u16, dport: u16) -> u32 {
    let s = saddr.to_be_bytes();
    let (sp, dp) = (sport.to_be_bytes(), dport.to_be_bytes());
    of_daddr
        ^ RSS_TABLE[0][s[0] as usize]
        ^ RSS_TABLE[1][s[1] as usize]
        ^ RSS_TABLE[2][s[2] as usize]
        ^ RSS_TABLE[3][s[3] as usize]
        ^ RSS_TABLE[8][sp[0] as usize]
        ^ RSS_TABLE[9][sp[1] as usize]
        ^ RSS_TABLE[10][dp[0] as usize]
        ^ RSS_TABLE[11][dp[1] as usize]
}

/// Queue for a flow: RSS hash through a 128-entry round-robin indirection table.
pub fn rss_queue(f: &FlowKey, queues: usize) -> usize {
    queue_of_hash(rss_hash(f), queues)
}

fn queue_of_hash(h: u32, queues: usize) -> usize {
    ((h & 127) as usize) % queues.max(1)
}

/// Destination sampler over a table's prefixes (shared, read-only).
pub struct DstChooser {
    /// (prefix, host mask) of every non-default route, in table order.
    prefixes: Vec<(u32, u32)>,
    /// Zipf rank -> prefix index.
    ranking: Vec<u32>,
    zipf: Option<rand_distr::Zipf<f64>>,
    pattern: DstPattern,
}

impl DstChooser {
    pub fn new(routes: &[Route], pattern: DstPattern, seed: u64) -> Result<DstChooser> {
        let mut prefixes: Vec<(u32, u32)> =
            routes.iter().filter(|r| r.len > 0).map(|r| (r.prefix, !mask(r.len))).collect();
        if prefixes.is_empty() {
            // Only a default route: the whole unicast space.
            prefixes.push((0, u32::MAX));
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed_d057);
        let mut ranking: Vec<u32> = (0..prefixes.len() as u32).collect();
        let zipf = if pattern == DstPattern::Zipf {
            use rand::seq::SliceRandom;
            ranking.shuffle(&mut rng);
            Some(
                rand_distr::Zipf::new(prefixes.len() as u64, 1.0)
                    .map_err(|e| Error::Config(format!("zipf over {} prefixes: {e}", prefixes.len())))?,
            )
        } else {
            None
        };
        Ok(DstChooser { prefixes, ranking, zipf, pattern })
    }

    /// The destination of the `n`-th new flow.
    #[inline]
    pub fn pick(&self, rng: &mut Xoshiro256PlusPlus, n: u64) -> u32 {
        self.addr(self.draw(rng, n))
    }

    /// The `n`-th new flow's destination as drawn: (prefix index, host bits), so that a
    /// generator can prefetch the prefix's entry ([`DstChooser::prefetch`]) a flow ahead
    /// of reading it ([`DstChooser::addr`]): a random entry of a large table is a cache miss.
    #[inline]
    pub fn draw(&self, rng: &mut Xoshiro256PlusPlus, n: u64) -> (usize, u32) {
        match self.pattern {
            DstPattern::Random => (rng.gen_range(0..self.prefixes.len()), rng.gen::<u32>()),
            DstPattern::Zipf => {
                let z = self.zipf.as_ref().map_or(1.0, |z| z.sample(rng));
                let rank = (z as usize).saturating_sub(1).min(self.ranking.len() - 1);
                (self.ranking[rank] as usize, rng.gen::<u32>())
            }
            DstPattern::Seq => {
                let len = self.prefixes.len() as u64;
                ((n % len) as usize, (n / len) as u32 + 1)
            }
        }
    }

    /// Prefetch the entry of prefix `i`.
    #[inline]
    pub fn prefetch(&self, i: usize) {
        crate::cpu::prefetch_ptr(self.prefixes.as_ptr().wrapping_add(i));
    }

    /// The address a draw names: its prefix with the host bits under the prefix's mask.
    #[inline]
    pub fn addr(&self, (i, host): (usize, u32)) -> u32 {
        let (p, hm) = self.prefixes[i];
        p | (host & hm)
    }
}

/// One concurrent flow's prebuilt first cache line of its frames.
#[repr(C, align(64))]
struct Slot {
    hdr: [u8; 64],
}

/// How many slot draws ahead the generator prefetches.
const SLOT_AHEAD: usize = 8;

/// The flows of one queue, generating frames into buffers.
pub struct FlowGen {
    queue: usize,
    queues: usize,
    rng: Xoshiro256PlusPlus,
    chooser: Arc<DstChooser>,
    slots: Vec<Slot>,
    /// Packets left per flow slot (kept apart so the header lines stay one line each).
    remaining: Vec<u32>,
    /// Slots drawn but not yet used, oldest first (a ring of SLOT_AHEAD).
    ahead: [u32; SLOT_AHEAD],
    ahead_pos: usize,
    frame_len: usize,
    pkts_per_flow: u32,
    ttl: u8,
    /// Flows started so far.
    pub flows_started: u64,
    /// The next new flow's destination, drawn (and its prefix entry prefetched) when the
    /// flow before it started.
    next_dst: (usize, u32),
}

impl FlowGen {
    /// The generator for `queue` of `queues`: `profile.flows / queues` concurrent flows, all
    /// of which RSS-hash to this queue.
    pub fn new(profile: &TrafficProfile, chooser: Arc<DstChooser>, queue: usize, queues: usize) -> FlowGen {
        let n = (profile.flows / queues.max(1)).max(1);
        let rng = Xoshiro256PlusPlus::seed_from_u64(profile.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ queue as u64);
        let slots = (0..n).map(|_| Slot { hdr: [0; 64] }).collect();
        let mut rng = rng;
        let mut ahead = [0u32; SLOT_AHEAD];
        for a in ahead.iter_mut() {
            *a = ((u128::from(rng.next_u64()) * n as u128) >> 64) as u32;
        }
        let next_dst = chooser.draw(&mut rng, 0);
        FlowGen {
            queue,
            queues,
            rng,
            chooser,
            slots,
            remaining: vec![0; n],
            ahead,
            ahead_pos: 0,
            frame_len: profile.frame_len(),
            pkts_per_flow: profile.pkts_per_flow,
            ttl: profile.ttl,
            flows_started: 0,
            next_dst,
        }
    }

    /// A new flow for this queue: its destination drawn once, then source address and
    /// ports drawn until the RSS hash sends the flow here (about `queues` draws; the
    /// destination's part of the hash is computed once). A NIC steers in hardware at no
    /// cost to the cores, so the generator keeps its own steering cheap: drawing the whole
    /// flow again cost the inline device as much as forwarding did with two queues.
    fn new_flow(&mut self) -> FlowKey {
        // The n-th flow's destination was drawn when flow n-1 started; draw flow n+1's now
        // and prefetch its prefix entry, whose load (a random entry of the whole table) was
        // most of this function's time.
        let daddr = self.chooser.addr(self.next_dst);
        self.flows_started += 1;
        self.next_dst = self.chooser.draw(&mut self.rng, self.flows_started);
        self.chooser.prefetch(self.next_dst.0);
        let of_daddr = rss_hash_daddr(daddr);
        loop {
            let r: u64 = self.rng.gen();
            let saddr = 0xC612_0000 | (r as u32 & 0xffff) | 1; // 198.18.x.y, never .0
            let (sport, dport) = ((r >> 16) as u16 | 1024, (r >> 32) as u16 | 1024);
            if self.queues <= 1
                || queue_of_hash(rss_hash_parts(of_daddr, saddr, sport, dport), self.queues) == self.queue
            {
                return FlowKey { saddr, daddr, sport, dport, tos: 0 };
            }
        }
    }

    /// Write the next packet into `buf`; returns its length.
    /// `buf` must hold at least 64 bytes; the whole first line is written.
    #[inline]
    pub fn next_frame(&mut self, buf: &mut [u8]) -> u16 {
        let i = self.next_slot();
        buf[..64].copy_from_slice(&self.slots[i].hdr);
        self.frame_len as u16
    }

    /// Write the next packet's first cache line at `dst` with DMA-like non-temporal stores;
    /// returns its length. Payload beyond the first line keeps the bytes the buffer held.
    ///
    /// # Safety
    /// `dst` must be 64-byte aligned and point at 64 writable bytes the caller owns.
    #[inline]
    pub unsafe fn next_frame_dma(&mut self, dst: *mut u8) -> u16 {
        let i = self.next_slot();
        // SAFETY: forwarded from this function's contract.
        unsafe { crate::cpu::dma_write_line(dst, &self.slots[i].hdr) };
        self.frame_len as u16
    }

    /// Pick the flow of the next packet, starting a new flow in its slot if it ended.
    #[inline]
    fn next_slot(&mut self) -> usize {
        // Lemire's multiply-shift maps a 64-bit draw onto 0..slots without division; the
        // slot used now was drawn SLOT_AHEAD packets ago and its line prefetched then.
        let drawn = ((u128::from(self.rng.next_u64()) * self.slots.len() as u128) >> 64) as usize;
        crate::cpu::prefetch_ptr(self.slots.as_ptr().wrapping_add(drawn));
        let i = std::mem::replace(&mut self.ahead[self.ahead_pos], drawn as u32) as usize;
        self.ahead_pos = (self.ahead_pos + 1) % SLOT_AHEAD;
        if self.remaining[i] == 0 {
            let f = self.new_flow();
            let len = self.frame_len;
            let slot = &mut self.slots[i];
            build_frame(&mut slot.hdr, &f, 60, self.ttl, mac_for(f.saddr), port_mac(0));
            // Header fields that depend on the real size.
            let tot = (len - crate::packet::ETH_HLEN) as u16;
            crate::packet::put_u16(&mut slot.hdr, crate::packet::off::TOT_LEN, tot);
            crate::packet::put_u16(&mut slot.hdr, crate::packet::off::CSUM, 0);
            let c = crate::packet::checksum(&slot.hdr[14..34]);
            crate::packet::put_u16(&mut slot.hdr, crate::packet::off::CSUM, c);
            crate::packet::put_u16(&mut slot.hdr, crate::packet::off::L4 + 4, tot - 20);
            self.remaining[i] = self.pkts_per_flow;
        }
        self.remaining[i] -= 1;
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toeplitz_matches_microsoft_verification_vector() {
        // From Microsoft's RSS verification suite: 66.9.149.187:2794 -> 161.142.100.80:1766.
        let f = FlowKey { saddr: 0x4209_95bb, daddr: 0xa18e_6450, sport: 2794, dport: 1766, tos: 0 };
        assert_eq!(rss_hash(&f), 0x51cc_c178);
    }

    #[test]
    fn flows_follow_the_profile() {
        let routes = vec![Route::new(0x0a00_0000, 8, 0), Route::new(0xc0a8_0000, 16, 1)];
        let p = TrafficProfile { flows: 4, pkts_per_flow: 3, ..Default::default() };
        let ch = Arc::new(DstChooser::new(&routes, DstPattern::Random, 1).unwrap());
        let mut g = FlowGen::new(&p, ch, 0, 1);
        let mut buf = [0u8; 128];
        let mut per_dst = std::collections::HashMap::new();
        for _ in 0..300 {
            assert_eq!(g.next_frame(&mut buf), 60);
            let d = crate::packet::get_u32(&buf, crate::packet::off::DADDR);
            assert!(routes.iter().any(|r| r.contains(d)));
            assert_eq!(crate::packet::checksum(&buf[14..34]), 0);
            *per_dst.entry(d).or_insert(0) += 1;
        }
        // 300 packets of 3-packet flows: about 100 flows (some still open).
        assert!((100..=104).contains(&g.flows_started), "{}", g.flows_started);
    }

    #[test]
    fn seq_walks_prefixes_in_order_and_zipf_favours_the_top_ranks() {
        let routes: Vec<Route> = (0..100u32).map(|i| Route::new(0x0a00_0000 | (i << 8), 24, 0)).collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let seq = DstChooser::new(&routes, DstPattern::Seq, 1).unwrap();
        for n in 0..250u64 {
            let d = seq.pick(&mut rng, n);
            assert_eq!(d, 0x0a00_0000 | ((n % 100) as u32) << 8 | (n / 100 + 1) as u32);
        }
        let zipf = DstChooser::new(&routes, DstPattern::Zipf, 1).unwrap();
        let mut counts = std::collections::HashMap::new();
        for n in 0..20_000 {
            *counts.entry(zipf.pick(&mut rng, n) >> 8).or_insert(0u32) += 1;
        }
        let mut c: Vec<u32> = counts.into_values().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        // Zipf(1) over 100 ranks: the top rank draws 1/H(100) = 19.3% of picks, the second half.
        let top = f64::from(c[0]) / 20_000.0;
        assert!((0.17..0.22).contains(&top), "top share {top}");
        assert!((1.7..2.3).contains(&(f64::from(c[0]) / f64::from(c[1]))), "{c:?}");
        let random = DstChooser::new(&routes, DstPattern::Random, 1).unwrap();
        let hits: std::collections::HashSet<u32> = (0..5000).map(|n| random.pick(&mut rng, n) >> 8).collect();
        assert_eq!(hits.len(), 100, "random covers every prefix");
    }

    #[test]
    fn rss_spreads_and_generators_respect_their_queue() {
        let routes = vec![Route::new(0x0a00_0000, 8, 0)];
        let ch = Arc::new(DstChooser::new(&routes, DstPattern::Random, 1).unwrap());
        let p = TrafficProfile { flows: 64, pkts_per_flow: 1, ..Default::default() };
        let mut g = FlowGen::new(&p, ch, 1, 2);
        let mut buf = [0u8; 128];
        for _ in 0..200 {
            g.next_frame(&mut buf);
            let f = FlowKey {
                saddr: crate::packet::get_u32(&buf, 26),
                daddr: crate::packet::get_u32(&buf, 30),
                sport: crate::packet::get_u16(&buf, 34),
                dport: crate::packet::get_u16(&buf, 36),
                tos: 0,
            };
            assert_eq!(rss_queue(&f, 2), 1);
        }
        // One flow per packet, each started once (no candidate flow thrown away).
        assert_eq!(g.flows_started, 200);
    }

    /// The bit-by-bit Toeplitz hash, as the RSS specification states it: the reference the
    /// table-driven hash is checked against.
    fn toeplitz_bitwise(f: &FlowKey) -> u32 {
        let mut input = [0u8; 12];
        input[0..4].copy_from_slice(&f.saddr.to_be_bytes());
        input[4..8].copy_from_slice(&f.daddr.to_be_bytes());
        input[8..10].copy_from_slice(&f.sport.to_be_bytes());
        input[10..12].copy_from_slice(&f.dport.to_be_bytes());
        let mut result = 0u32;
        let mut window = u32::from_be_bytes([RSS_KEY[0], RSS_KEY[1], RSS_KEY[2], RSS_KEY[3]]);
        for (next, byte) in (4..).zip(input) {
            for bit in (0..8).rev() {
                if byte >> bit & 1 == 1 {
                    result ^= window;
                }
                window = (window << 1) | u32::from(RSS_KEY[next] >> bit & 1);
            }
        }
        result
    }

    #[test]
    fn the_table_hash_is_the_bitwise_toeplitz_hash() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        for i in 0..100_000u32 {
            let r: u128 = rng.gen();
            let f = FlowKey {
                saddr: r as u32,
                daddr: (r >> 32) as u32,
                sport: (r >> 64) as u16,
                dport: (r >> 80) as u16,
                tos: 0,
            };
            assert_eq!(rss_hash(&f), toeplitz_bitwise(&f), "flow {i}: {f:?}");
        }
        let one_bits = FlowKey { saddr: 1 << 31, daddr: 1, sport: 0x8000, dport: 1, tos: 0 };
        assert_eq!(rss_hash(&one_bits), toeplitz_bitwise(&one_bits));
    }

    /// The destination is drawn once per flow whatever the queue: with `seq`, queue 1 of 2
    /// walks every prefix in order (a generator that drew whole flows again skipped the
    /// prefixes of flows the hash sent elsewhere).
    #[test]
    fn steering_keeps_the_destination_pattern() {
        let (dsts, _) = seq_prefixes(2, 1, (1, 2), 100);
        let want: Vec<u32> = (0..100).map(|n| n % 50).collect();
        assert_eq!(dsts, want);
    }

    /// The prefix index (third byte) of the destinations of `packets` frames of queue
    /// `queue.0` of `queue.1`, over 50 /24 prefixes walked with `seq`, `flows` flows of
    /// `pkts_per_flow` packets; and the flows started.
    fn seq_prefixes(flows: usize, pkts_per_flow: u32, queue: (usize, usize), packets: usize) -> (Vec<u32>, u64) {
        let routes: Vec<Route> = (0..50u32).map(|i| Route::new(0x0a00_0000 | (i << 8), 24, 0)).collect();
        let ch = Arc::new(DstChooser::new(&routes, DstPattern::Seq, 1).unwrap());
        let p = TrafficProfile { flows, pkts_per_flow, ..Default::default() };
        let mut g = FlowGen::new(&p, ch, queue.0, queue.1);
        let mut buf = [0u8; 128];
        let dsts = (0..packets)
            .map(|_| {
                g.next_frame(&mut buf);
                crate::packet::get_u32(&buf, 30) >> 8 & 0xff
            })
            .collect();
        (dsts, g.flows_started)
    }

    /// With one queue and `seq`, flow n goes to prefix n (the destination drawn a flow
    /// ahead is the next flow's, never skipped or repeated), each for its packets per flow.
    #[test]
    fn one_queue_walks_the_prefixes_in_order_a_flow_at_a_time() {
        let (dsts, flows) = seq_prefixes(1, 3, (0, 1), 300);
        let want: Vec<u32> = (0..300).map(|n| (n / 3) % 50).collect();
        assert_eq!(dsts, want);
        assert_eq!(flows, 100);
    }
}
