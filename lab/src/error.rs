//! The crate's one error type, its `Result` alias, and a `context` helper that names what
//! was being done when a lower-level error happened.

use std::path::PathBuf;

/// What can go wrong in the lab.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad options, or a lab not in the state the command needs (the message says which).
    #[error("{0}")]
    Config(String),
    /// A command (iproute2, nft, sysctl) failed; its stderr says why.
    #[error("{what} failed: {stderr}")]
    Command { what: String, stderr: String },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// What was being done, and the lower-level error.
    #[error("{what}: {source}")]
    Context {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A system call failed.
    #[error(transparent)]
    Os(#[from] std::io::Error),
    /// The forwarder library failed (its route table, the AF_PACKET socket, the traffic).
    #[error(transparent)]
    Forwarder(#[from] forwarder::Error),
    /// Recording failed.
    #[error(transparent)]
    Collector(#[from] collector::Error),
    /// Analysis failed.
    #[error(transparent)]
    Analyzer(#[from] analyzer::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Name what was being done when an error happened (or when a value was missing).
pub(crate) trait Context<T> {
    fn context(self, what: impl Into<String>) -> Result<T>;
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Context { what: what.into(), source: Box::new(e) })
    }
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Context { what: what(), source: Box::new(e) })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::Config(what.into()))
    }
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| Error::Config(what()))
    }
}

/// Return early with an [`Error::Config`] built like `format!`.
macro_rules! bail {
    ($($arg:tt)*) => { return Err($crate::Error::Config(format!($($arg)*))) };
}
pub(crate) use bail;
