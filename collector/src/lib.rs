//! fwdscope's collector: counts and samples CPU events with perf_event_open on the bundled
//! forwarder, a running process or the whole system, and turns what the kernel writes into
//! recordings and a live stream.
//!
//! Capture is kept apart from conversion, as samply does: [`perf_abi`] is the only module
//! that touches perf (events, ring buffers, kernel errors) and hands out plain
//! [`records`]; [`recording`] writes and reads recording directories without perf;
//! [`session`] runs a `record`; [`stat`] runs interval counting; [`stream`] is the bounded
//! live channel for the TUI; [`child`] starts a target held at a gate so its first
//! instruction is already observed.

pub mod buildid;
pub mod child;
mod error;
pub mod events;
pub mod part_check;
pub mod perf_abi;
pub mod recording;
pub mod records;
pub mod session;
pub mod stat;
pub mod stream;

pub use error::{Error, Result};
