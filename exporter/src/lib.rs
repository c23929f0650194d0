//! Prometheus exposition of a running forwarder: its stats segment read at each scrape and
//! served as OpenMetrics text over HTTP, from inside the forwarder's process
//! (`fwdscope forward --metrics`) or from any other (`fwdscope metrics -p PID`). Read-only:
//! the exporter never writes the control block.
//!
//! - [`families`]: which counter becomes which metric family (names, units, help, labels),
//!   and the encoding of one snapshot through prometheus-client.
//! - [`server`]: the HTTP endpoint (`/metrics`), and the 503 answers once the forwarder has
//!   exited or was killed, so a scraper never stores stale numbers as current.
//! - `cli` (with the `clap` feature): `fwdscope metrics`' flags.

#[cfg(feature = "clap")]
pub mod cli;
mod error;
pub mod families;
pub mod server;

pub use error::{Error, Result};
pub use families::{encode, ForwarderMeta, SnapshotCollector, NOT_EXPORTED};
pub use server::{Answer, Exporter, SegmentSource};
