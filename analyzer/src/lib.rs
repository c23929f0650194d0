//! fwdscope's analyzer: turns samples into answers: which stage and which symbol cost how
//! much per packet. [`rules`] holds the stage rules (TOML data); [`symbolize`] resolves
//! addresses through ELF symbol tables (one lazily built table per binary) and the
//! recording's kallsyms snapshot, and DWARF lines and inline frames (one lazily built
//! addr2line context per binary); [`aggregate`] groups samples in polars; [`stages`] builds
//! the stage table of a recording, a perf.data file or a text profile; [`input`] tells
//! those three apart; [`diff`] puts tables side by side; [`export`] writes stacks for other
//! tools; [`import`] and [`perfdata`] read other profilers' files; [`dataset`] keeps runs
//! of many hosts as one Hive-partitioned dataset; [`windows`] splits samples by thread and
//! time window (a live comparison's blocks); [`agreement`] lists the hosts and settings
//! where samples and stage clocks are known to part; [`annotate`] goes below the symbol:
//! instructions and source lines with their samples and stages; [`annotate_diff`] sets
//! two inputs' annotations of the same functions side by side; `cli` (with the `clap`
//! feature) holds the flags of the verbs that read recordings.

pub mod aggregate;
pub mod agreement;
pub mod annotate;
pub mod annotate_diff;
#[cfg(feature = "clap")]
pub mod cli;
pub mod crosscheck;
pub mod dataset;
pub mod diff;
mod error;
pub mod export;
pub mod import;
pub mod input;
pub mod perfdata;
pub mod rules;
pub mod stages;
pub mod stats;
pub mod symbolize;
pub mod windows;

pub use error::{Error, Result};

/// One CSV field (RFC 4180): quoted when it holds a comma, quote or newline.
pub(crate) fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// A name read from input (a text profile's symbol, a thread's name, a file's line) as it
/// may be printed: see [`collector::printable`].
pub use collector::printable;
