//! Comparing forwarder settings: which one is faster, by how much, how sure, and where
//! the cycles went in each.
//!
//! - [`plan`]: settings (a swept product, or an experiment's list) and the interleaved
//!   run order;
//! - [`experiments`]: the historic experiments (embedded TOML) and their then-and-now
//!   table;
//! - [`runner`]: a sweep: a recording of the bundled forwarder per run, results.parquet and
//!   the table;
//! - [`live`]: a live comparison: one forwarder, settings switched through its control
//!   block in short balanced blocks, each block measured by the workers' own stamps;
//! - [`live_procs`]: the live comparison's forwarder processes: one, or one per program
//!   compared, only one running at a time;
//! - [`live_setting`]: what can switch live and the control-block request for it;
//! - [`stage_split`]: samples recorded alongside a live comparison split into its blocks:
//!   stages per setting;
//! - [`paired`]: the live comparison's statistics: block order, paired log-rate
//!   differences, intervals, Holm's correction, verdicts;
//! - [`contention`]: whether the machine let the workers run (run-queue wait, involuntary
//!   switches, steal) per block;
//! - [`stats`]: median, confidence intervals, Welch's test;
//! - [`results`]: runs summarized per setting, the table, results.parquet;
//! - [`html`]: one self-contained page per sweep directory or live comparison
//!   (`report --html`);
//! - [`recording_page`]: the page for one recording or perf.data file (`report --html`);
//! - `cli` (with the `clap` feature): `sweep`'s flags and the options they become.

#[cfg(feature = "clap")]
pub mod cli;
mod error;
pub mod experiments;
pub mod html;
pub mod live;
pub mod live_procs;
pub mod live_setting;
pub mod paired;
pub mod plan;
pub mod recording_page;
pub mod results;
pub mod runner;
pub mod stage_split;

pub use error::{Error, Result};
