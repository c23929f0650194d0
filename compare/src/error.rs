//! The crate's one error type and its `Result` alias.

use std::path::PathBuf;

/// What can go wrong while comparing settings.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad options (the message names the flag and what was expected).
    #[error("{0}")]
    Config(String),
    /// An experiment file did not parse; `origin` is its file name, `line` where.
    #[error("{origin}{}: {msg}", line.map_or(String::new(), |l| format!(":{l}")))]
    Experiment { origin: String, line: Option<usize>, msg: String },
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// results.parquet could not be written or read back.
    #[error("{path}: {msg}")]
    Results { path: PathBuf, msg: String },
    /// A chart could not be drawn.
    #[error("chart: {0}")]
    Chart(String),
    /// A run failed (its number and setting say which).
    #[error("run {run} ({setting}): {source}")]
    Run {
        run: usize,
        setting: String,
        #[source]
        source: Box<Error>,
    },
    /// Recording failed or a recording could not be read.
    #[error(transparent)]
    Collector(#[from] collector::Error),
    /// Analysis failed.
    #[error(transparent)]
    Analyzer(#[from] analyzer::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
