//! The crate's one error type and its `Result` alias.

use std::path::PathBuf;

/// What can go wrong with a stats segment or what it publishes.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The segment file could not be created, opened or mapped.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The segment is of another version, malformed, or in use.
    #[error("stats segment {path}: {msg}")]
    Segment { path: PathBuf, msg: String },
    /// What a forwarder would publish about itself does not fit [`crate::published::Published`].
    #[error("{0}")]
    Config(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
