//! The forwarder's FIB engines, by name: the forwarder's `--fib` and a sweep's axis hold
//! a [`FibKind`].

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Which FIB engine to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum FibKind {
    /// One hash table per prefix length, longest first (Linux fn_hash).
    Hash,
    /// Level- and path-compressed trie (Linux fib_trie).
    Lctrie,
    /// DIR-24-8 (DPDK rte_lpm).
    Dir24,
}

impl FibKind {
    pub const ALL: [FibKind; 3] = [FibKind::Hash, FibKind::Lctrie, FibKind::Dir24];
    pub fn name(self) -> &'static str {
        match self {
            FibKind::Hash => "hash",
            FibKind::Lctrie => "lctrie",
            FibKind::Dir24 => "dir24",
        }
    }
}

impl fmt::Display for FibKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FibKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "hash" => Ok(FibKind::Hash),
            "lctrie" => Ok(FibKind::Lctrie),
            "dir24" => Ok(FibKind::Dir24),
            _ => Err(Error::Config(format!("unknown FIB engine `{s}`: expected hash, lctrie or dir24"))),
        }
    }
}
