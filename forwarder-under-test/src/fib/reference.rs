//! The naive reference LPM: a linear scan over every route. Slow on purpose and obviously
//! correct; property tests compare each engine with it. [`PerLength`] is a second, still
//! simple reference (a std `HashMap` probed from /32 down to /0) for tables too large to scan.

use super::{mask, Route, NO_ROUTE};
use std::collections::HashMap;

/// Longest-prefix match by scanning every route.
pub fn lookup(routes: &[Route], addr: u32) -> u32 {
    let mut best: Option<&Route> = None;
    for r in routes {
        if addr & mask(r.len) == r.prefix && best.is_none_or(|b| r.len > b.len) {
            best = Some(r);
        }
    }
    best.map_or(NO_ROUTE, |r| r.nh)
}

/// Exact-match map per prefix length, probed longest first.
pub struct PerLength {
    map: HashMap<(u32, u8), u32>,
}

impl PerLength {
    pub fn new(routes: &[Route]) -> Self {
        PerLength { map: routes.iter().map(|r| ((r.prefix, r.len), r.nh)).collect() }
    }
    pub fn lookup(&self, addr: u32) -> u32 {
        for len in (0..=32u8).rev() {
            if let Some(&nh) = self.map.get(&(addr & mask(len), len)) {
                return nh;
            }
        }
        NO_ROUTE
    }
}
