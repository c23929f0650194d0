//! The prefetch depth, typed once with its one limit: the forwarder's flag, `sweep
//! --prefetch`, a live setting, `top`'s keys, the control block and what a forwarder
//! publishes all hold a [`Prefetch`], so the limit 8 is written here and nowhere else.
//! The route-cache GC tunables' limits live here too ([`gc_limits`]), shared by the
//! forwarder's start flags and the live settings that change them.

use serde::{Deserialize, Serialize};

/// The bounds of the route-cache GC tunables, in their units: at start (the forwarder's
/// flags) and live (a setting switched through the control block) alike.
pub mod gc_limits {
    /// Most route-cache entries, and so the largest `--gc-thresh` (2^26).
    pub const MAX_ENTRIES: u32 = 1 << 26;
    /// Largest `--gc-elasticity`.
    pub const MAX_ELASTICITY: u32 = 1024;
    /// Largest `--gc-min-interval-ms` (one hour, in ms).
    pub const MAX_MIN_INTERVAL_MS: u32 = 3_600_000;
    /// Largest `--gc-timeout` (one day, in s).
    pub const MAX_TIMEOUT_S: u32 = 86_400;
}
use std::fmt;
use std::str::FromStr;

/// How many packets ahead the lookup stage prefetches (headers and the route-cache bucket
/// or FIB node of the next k packets): 0 to [`Prefetch::MAX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct Prefetch(u8);

impl Prefetch {
    /// The deepest prefetch the forwarder runs.
    pub const MAX: u8 = 8;
    /// The forwarder's default (the 2005 measurements' optimum).
    pub const DEFAULT: Prefetch = Prefetch(2);
    /// No prefetch.
    pub const NONE: Prefetch = Prefetch(0);

    /// `depth` when it is within 0..=MAX.
    pub fn new(depth: u64) -> Option<Prefetch> {
        u8::try_from(depth).ok().filter(|d| *d <= Self::MAX).map(Prefetch)
    }

    /// `depth`, or MAX when deeper (a value read from shared memory another process
    /// writes, which the type cannot vouch for).
    pub fn clamped(depth: u64) -> Prefetch {
        Prefetch::new(depth).unwrap_or(Prefetch(Self::MAX))
    }

    /// The depth.
    pub fn get(self) -> u8 {
        self.0
    }

    /// The depth as a count of packets.
    pub fn depth(self) -> usize {
        usize::from(self.0)
    }

    /// One deeper, at most MAX.
    pub fn deeper(self) -> Prefetch {
        Prefetch(self.0.saturating_add(1).min(Self::MAX))
    }

    /// One shallower, at least 0.
    pub fn shallower(self) -> Prefetch {
        Prefetch(self.0.saturating_sub(1))
    }
}

impl Default for Prefetch {
    fn default() -> Prefetch {
        Prefetch::DEFAULT
    }
}

impl fmt::Display for Prefetch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Prefetch> for u64 {
    fn from(p: Prefetch) -> u64 {
        u64::from(p.0)
    }
}

impl From<Prefetch> for u32 {
    fn from(p: Prefetch) -> u32 {
        u32::from(p.0)
    }
}

impl TryFrom<u64> for Prefetch {
    type Error = String;
    fn try_from(v: u64) -> Result<Prefetch, String> {
        Prefetch::new(v).ok_or_else(|| format!("{v} is not in 0..={}", Prefetch::MAX))
    }
}

/// Parses what a person types: a whole number 0..=MAX (clap's flags use this).
impl FromStr for Prefetch {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefetch, String> {
        let v: u64 = s
            .trim()
            .parse()
            .map_err(|_| format!("`{s}` is no depth: expected a whole number 0..={}", Prefetch::MAX))?;
        Prefetch::try_from(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_limit_holds_every_way_in() {
        assert_eq!("8".parse::<Prefetch>().map(Prefetch::get), Ok(8));
        assert_eq!("0".parse::<Prefetch>(), Ok(Prefetch::NONE));
        assert_eq!("9".parse::<Prefetch>(), Err("9 is not in 0..=8".to_string()));
        assert_eq!("-1".parse::<Prefetch>(), Err("`-1` is no depth: expected a whole number 0..=8".to_string()));
        assert_eq!(Prefetch::new(256), None);
        assert_eq!(Prefetch::clamped(u64::MAX).get(), 8);
        assert_eq!(Prefetch::clamped(3).get(), 3);
        assert_eq!(
            (Prefetch::new(8).map(Prefetch::deeper), Prefetch::NONE.shallower()),
            (Prefetch::new(8), Prefetch::NONE)
        );
        assert_eq!(serde_json::from_str::<Prefetch>("4").map(Prefetch::get).ok(), Some(4));
        assert!(serde_json::from_str::<Prefetch>("9").is_err());
        assert_eq!(serde_json::to_string(&Prefetch::DEFAULT).ok().as_deref(), Some("2"));
    }
}
