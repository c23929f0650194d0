//! The forwarder's cache modes and their codes in the control block and the
//! `cache_mode` counter.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How the lookup stage finds a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// The Linux 2.4/2.6 route cache: per-flow dst entries in a hash, with GC.
    Rtcache,
    /// A FIB lookup and a fresh dst for every packet (Linux 3.6 and later, no caching).
    Nocache,
    /// A FIB lookup; the output dst is cached on the next hop.
    Nhcache,
}

impl CacheMode {
    pub const ALL: [CacheMode; 3] = [CacheMode::Rtcache, CacheMode::Nocache, CacheMode::Nhcache];
    /// Code used in the stats segment's control block and counters.
    pub fn code(self) -> u32 {
        match self {
            CacheMode::Rtcache => 0,
            CacheMode::Nocache => 1,
            CacheMode::Nhcache => 2,
        }
    }
    pub fn from_code(c: u32) -> Option<CacheMode> {
        CacheMode::ALL.into_iter().find(|m| m.code() == c)
    }
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Rtcache => "rtcache",
            CacheMode::Nocache => "nocache",
            CacheMode::Nhcache => "nhcache",
        }
    }
    /// The mode of a name as printed by [`CacheMode::name`].
    pub fn from_name(s: &str) -> Option<CacheMode> {
        CacheMode::ALL.into_iter().find(|m| m.name() == s)
    }
    /// The next mode in `rtcache -> nocache -> nhcache -> rtcache` order.
    pub fn next(self) -> CacheMode {
        CacheMode::from_code((self.code() + 1) % 3).unwrap_or(CacheMode::Rtcache)
    }
}

impl fmt::Display for CacheMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
