//! `lctrie` engine: a level- and path-compressed trie (Nilsson and Karlsson, "IP-address
//! lookup using LC-tries", 1999), the structure behind Linux's fib_trie.
//!
//! Build: nested prefixes are first resolved by leaf pushing into a prefix-free set of
//! disjoint leaves (adjacent leaves with the same next hop merged, then cut into CIDR
//! blocks). Where fib_trie backtracks through a leaf's list of shorter prefixes at lookup
//! time, this trie has already pushed them down, so every lookup ends at one leaf and one
//! compare. Level compression: a node branches on `b` bits, the largest `b` for which at
//! least half (the fill factor) of its `2^b` slots hold a distinct subtree; a slot under a
//! shorter leaf repeats that leaf. Path compression: a node records the absolute bit
//! position it branches at, so runs of one-child nodes cost nothing. The root branches on
//! 16 bits for large tables, as in the paper.
//!
//! Node word (u32): bits 31..27 branch (0 = leaf or empty), 26..22 bit position, 21..0
//! child block index (internal) or leaf index + 1 (leaf; 0 = empty).

use super::{mask, Route, NO_ROUTE};
use crate::cpu::prefetch_ptr;
use crate::{Error, Result};

const ADR_BITS: u32 = 22;
const ADR_MASK: u32 = (1 << ADR_BITS) - 1;
const FILL: f64 = 0.5;
const ROOT_BRANCH: u32 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Leaf {
    prefix: u32,
    len: u8,
    nh: u32,
}

/// Level- and path-compressed trie.
pub struct LcTrie {
    nodes: Vec<u32>,
    /// `(prefix, nh << 8 | len)`.
    leaves: Vec<(u32, u32)>,
}

/// Resolve nesting: the disjoint, prefix-free leaves that give every address the same next
/// hop as longest-prefix match over `routes` (sorted by prefix, then length).
fn leaf_push(routes: &[Route]) -> Vec<Leaf> {
    let mut segs: Vec<(u64, u64, u32)> = Vec::with_capacity(routes.len() * 2);
    let mut emit = |a: u64, b: u64, nh: u32| {
        if a > b {
            return;
        }
        if let Some(last) = segs.last_mut() {
            if last.2 == nh && last.1 + 1 == a {
                last.1 = b;
                return;
            }
        }
        segs.push((a, b, nh));
    };
    let mut stack: Vec<(u64, u32)> = Vec::with_capacity(33); // (end, nh)
    let mut cursor: u64 = 0;
    for r in routes {
        let s = u64::from(r.prefix);
        let e = s + (1u64 << (32 - u32::from(r.len))) - 1;
        while let Some(&(tend, tnh)) = stack.last() {
            if tend >= s {
                break;
            }
            emit(cursor, tend, tnh);
            cursor = tend + 1;
            stack.pop();
        }
        if let Some(&(_, tnh)) = stack.last() {
            if cursor < s {
                emit(cursor, s - 1, tnh);
            }
        }
        cursor = s;
        stack.push((e, r.nh));
    }
    while let Some((tend, tnh)) = stack.pop() {
        emit(cursor, tend, tnh);
        cursor = tend + 1;
    }
    // Cut each segment into maximal aligned blocks.
    let mut leaves = Vec::with_capacity(segs.len() * 2);
    for (mut a, b, nh) in segs {
        while a <= b {
            let align = if a == 0 { 32 } else { a.trailing_zeros().min(32) };
            let mut size_log = align;
            while (1u64 << size_log) > b - a + 1 {
                size_log -= 1;
            }
            leaves.push(Leaf { prefix: a as u32, len: (32 - size_log) as u8, nh });
            a += 1u64 << size_log;
        }
    }
    leaves
}

#[inline(always)]
fn extract(addr: u32, pos: u32, branch: u32) -> u32 {
    ((u64::from(addr) << pos) as u32) >> (32 - branch)
}

struct Builder<'a> {
    leaves: &'a [Leaf],
    nodes: Vec<u32>,
}

impl Builder<'_> {
    fn alloc(&mut self, n: usize) -> Result<usize> {
        let at = self.nodes.len();
        if at + n > ADR_MASK as usize {
            return Err(Error::Config("lctrie: table too large for 22-bit node indices".into()));
        }
        self.nodes.resize(at + n, 0);
        Ok(at)
    }

    fn leaf_word(i: usize) -> u32 {
        (i as u32) + 1
    }

    /// Choose the branching factor for leaves[lo..hi] at bit `pos`.
    fn branch(&self, lo: usize, hi: usize, pos: u32, root: bool) -> u32 {
        let n = hi - lo;
        if root && n > 4096 && pos + ROOT_BRANCH <= 32 {
            return ROOT_BRANCH;
        }
        let mut best = 1;
        let mut b = 2;
        while pos + b <= 32 && (1usize << b) <= 2 * n {
            let mut distinct = 1usize;
            for i in lo + 1..hi {
                if extract(self.leaves[i].prefix, pos, b) != extract(self.leaves[i - 1].prefix, pos, b) {
                    distinct += 1;
                }
            }
            if (distinct as f64) < FILL * (1u64 << b) as f64 {
                break;
            }
            best = b;
            b += 1;
        }
        best
    }

    fn build(&mut self, lo: usize, hi: usize, slot: usize, root: bool) -> Result<()> {
        if hi - lo == 1 {
            self.nodes[slot] = Self::leaf_word(lo);
            return Ok(());
        }
        let a = self.leaves[lo].prefix;
        let b = self.leaves[hi - 1].prefix;
        // Prefix-free and distinct: the first and last leaf differ before either one ends.
        let pos = (a ^ b).leading_zeros();
        let branch = self.branch(lo, hi, pos, root);
        let adr = self.alloc(1 << branch)?;
        self.nodes[slot] = (branch << 27) | (pos << ADR_BITS) | adr as u32;
        let end = pos + branch;
        let mut i = lo;
        while i < hi {
            let l = self.leaves[i];
            let p = extract(l.prefix, pos, branch) as usize;
            if u32::from(l.len) < end {
                // A short leaf fills every slot it covers.
                let span = 1usize << (end - u32::from(l.len));
                for q in p..p + span {
                    self.nodes[adr + q] = Self::leaf_word(i);
                }
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < hi
                && u32::from(self.leaves[j].len) >= end
                && extract(self.leaves[j].prefix, pos, branch) as usize == p
            {
                j += 1;
            }
            self.build(i, j, adr + p, false)?;
            i = j;
        }
        Ok(())
    }
}

impl LcTrie {
    pub fn build(routes: &[Route]) -> Result<Self> {
        let mut sorted = routes.to_vec();
        sorted.sort_by_key(|r| (r.prefix, r.len));
        let leaves = leaf_push(&sorted);
        if leaves.len() >= ADR_MASK as usize {
            return Err(Error::Config("lctrie: too many leaves".into()));
        }
        let mut packed = Vec::with_capacity(leaves.len());
        for l in &leaves {
            if l.nh != NO_ROUTE && l.nh >= (1 << 24) {
                return Err(Error::Config(format!("lctrie: next-hop id {} exceeds 2^24", l.nh)));
            }
            packed.push((l.prefix, (l.nh << 8) | u32::from(l.len)));
        }
        let mut b = Builder { leaves: &leaves, nodes: vec![0] };
        if !leaves.is_empty() {
            b.build(0, leaves.len(), 0, true)?;
        }
        Ok(LcTrie { nodes: b.nodes, leaves: packed })
    }

    #[inline]
    pub fn prefetch(&self, addr: u32) {
        let root = self.nodes[0];
        let branch = root >> 27;
        if branch != 0 {
            let pos = (root >> ADR_BITS) & 31;
            let i = (root & ADR_MASK) as usize + extract(addr, pos, branch) as usize;
            prefetch_ptr(self.nodes.as_ptr().wrapping_add(i));
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * 4 + self.leaves.len() * 8
    }

    /// (nodes, leaves) counts, for reports.
    pub fn size(&self) -> (usize, usize) {
        (self.nodes.len(), self.leaves.len())
    }
}

/// Lookup entry point of the `lctrie` engine (stage: lookup).
#[no_mangle]
#[inline(never)]
pub fn fwd_lookup_fib_lctrie(fib: &LcTrie, addr: u32) -> u32 {
    let mut node = fib.nodes[0];
    loop {
        let branch = node >> 27;
        if branch == 0 {
            break;
        }
        let pos = (node >> ADR_BITS) & 31;
        node = fib.nodes[(node & ADR_MASK) as usize + extract(addr, pos, branch) as usize];
    }
    let li = (node & ADR_MASK) as usize;
    if li == 0 {
        return NO_ROUTE;
    }
    let (prefix, nl) = fib.leaves[li - 1];
    if (addr ^ prefix) & mask((nl & 0xff) as u8) == 0 {
        nl >> 8
    } else {
        NO_ROUTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_push_of_nested_routes() {
        // 10/8 -> 1, 10.1/16 -> 2: pushed into 10.0/16 (1), 10.1/16 (2), 10.2/15 .. 10.128/9 (1).
        let routes = [Route::new(0x0a00_0000, 8, 1), Route::new(0x0a01_0000, 16, 2)];
        let l = leaf_push(&routes);
        assert_eq!(l[0], Leaf { prefix: 0x0a00_0000, len: 16, nh: 1 });
        assert_eq!(l[1], Leaf { prefix: 0x0a01_0000, len: 16, nh: 2 });
        assert_eq!(l[2], Leaf { prefix: 0x0a02_0000, len: 15, nh: 1 });
        assert_eq!(l.last().copied(), Some(Leaf { prefix: 0x0a80_0000, len: 9, nh: 1 }));
        // Blocks tile 10/8 exactly.
        let total: u64 = l.iter().map(|x| 1u64 << (32 - x.len)).sum();
        assert_eq!(total, 1 << 24);
    }

    #[test]
    fn default_route_alone() {
        let t = LcTrie::build(&[Route::new(0, 0, 7)]).unwrap();
        assert_eq!(fwd_lookup_fib_lctrie(&t, 0), 7);
        assert_eq!(fwd_lookup_fib_lctrie(&t, u32::MAX), 7);
    }
}
