//! The crate's one error type and its `Result` alias.

/// What can go wrong when starting an exporter.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listen address could not be bound.
    #[error("metrics listen address {addr}: {msg}")]
    Listen { addr: String, msg: String },
    /// No forwarder's stats segment was found.
    #[error("{0}")]
    NoForwarder(String),
    /// The stats segment could not be read.
    #[error(transparent)]
    Segment(#[from] fwd_abi::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
