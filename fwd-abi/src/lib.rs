//! What fwdscope's bundled forwarder publishes to the processes that observe and steer it
//! (the collector, `top`, the lab, the comparison runner, tests), and nothing else: none of
//! the forwarder's code is linked by them.
//!
//! - [`segment`]: the stats segment, a shared-memory file per forwarder process: header,
//!   control block, counter names, the configuration as JSON, one seqlocked counter block
//!   per worker; [`Segment::find_for`] locates a running forwarder's segment by its PID.
//! - [`counters`]: counter indices and names, drop reasons, the clocked stages.
//! - [`clocks`]: stage clocks read back (VPP's columns, ns per forwarded packet, shares,
//!   whether a run was bound by the device or by the worker).
//! - [`published`]: the configuration and run information a forwarder publishes in its
//!   segment (and a recording keeps), typed for the writer and every reader.
//! - [`CacheMode`]: the cache modes and their codes in the control block.
//! - [`Prefetch`]: the prefetch depth with its one limit.
//! - [`file_kind`]: what a file a user named is (not regular, or on a kernel
//!   pseudo-filesystem), told before it is read: shared by every reader of such files.
//! - [`threads`]: the worker thread-name convention (`fwd-worker-N`).
//! - [`rows`]: counters as rows (time, source, worker, name, value), the form recordings and
//!   the live stream carry.
//! - [`rtstat`]: rtstat's columns between two snapshots.
//! - [`STAGE_MAP_TOML`]: the forwarder's symbol-to-stage map (`stages.toml`), which the
//!   analyzer loads: every stage entry point is a `fwd_<stage>_*` symbol.

mod cache_mode;
pub mod clocks;
pub mod counters;
mod error;
mod fib_kind;
pub mod file_kind;
pub mod published;
pub mod rows;
pub mod rtstat;
pub mod seconds;
pub mod segment;
pub mod setting;
pub mod threads;

pub use cache_mode::CacheMode;
pub use counters::{drop_counters, Ctr, COUNTER_NAMES, N_COUNTERS, STAGE_CLOCKS};
pub use error::{Error, Result};
pub use fib_kind::FibKind;
pub use published::Published;
pub use rows::{segment_rows, CounterRow, SOURCE_FORWARDER, SOURCE_PMU};
pub use segment::{default_path, Control, GcTunables, Request, Segment, Snapshot, State, VERSION};
pub use setting::Prefetch;

/// The symbol-to-stage map of the bundled forwarder, as published for the analyzer.
pub const STAGE_MAP_TOML: &str = include_str!("../stages.toml");
