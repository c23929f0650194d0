//! `fwdscope top`: the live, top-like view of where each packet's cycles go.
//!
//! - [`model`]: what is shown, computed from the collector's stream (samples attributed to
//!   stages and symbols, forwarder counters turned into rates, rtstat rows, stage clocks);
//!   no terminal involved, so it is tested with fixed inputs.
//! - [`view`]: ratatui rendering of a model (header, stage panel, rtstat panel, top
//!   symbols, help), degrading on small terminals; tested with TestBackend snapshots.
//! - [`source`]: where batches come from: a live recording session (the bundled forwarder,
//!   a PID, or system-wide), the forwarder's counters alone when perf is not permitted, or a
//!   recording replayed at its own pace.
//! - [`tty`]: the terminal's input watched with poll(2) before crossterm reads it, so a
//!   terminal that went away (hang-up, end of file) ends `top` instead of spinning.
//! - [`app`]: the terminal, the key bindings and the 1 Hz loop; control of a forwarder we
//!   started goes through its stats segment's control block.
//! - `cli` (with the `clap` feature): `top`'s flags.

pub mod app;
#[cfg(feature = "clap")]
pub mod cli;
pub mod model;
pub mod source;
pub mod tty;
pub mod view;

/// Errors of the live view.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("terminal: {0}")]
    Terminal(#[from] std::io::Error),
    #[error(transparent)]
    Collector(#[from] collector::Error),
    #[error(transparent)]
    Analyzer(#[from] analyzer::Error),
    #[error("{0}")]
    Config(String),
}

/// Result of the live view.
pub type Result<T> = std::result::Result<T, Error>;
