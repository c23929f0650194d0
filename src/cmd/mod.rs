//! One module per verb: its clap flags and the library call that does the work.

pub mod annotate;
pub mod diff;
pub mod export;
pub mod forward;
pub mod lab;
pub mod metrics;
pub mod record;
pub mod report;
pub mod stat;
pub mod sweep;
pub mod top;
