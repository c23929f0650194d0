//! The analyzer's one error type and its `Result` alias.

use std::path::PathBuf;

/// Everything that can go wrong while analyzing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A rules file did not parse or says something impossible.
    #[error("{path}: {msg}")]
    Rules { path: String, msg: String },
    /// A text profile line did not parse (line 0: the file as a whole).
    #[error("{path}{}: {msg}", if *line > 0 { format!(":{line}") } else { String::new() })]
    Import { path: String, line: usize, msg: String },
    /// A perf.data file is malformed (the message names the offset or record).
    #[error("{path}: perf.data: {msg}")]
    PerfData { path: String, msg: String },
    /// A kallsyms file holds no usable symbols.
    #[error("{path}: {msg}")]
    Kallsyms { path: String, msg: String },
    /// The input is not of a kind the analyzer reads (what was found, and what is read).
    #[error("{path}: {found}; expected {}", crate::input::ACCEPTED)]
    InputKind { path: String, found: String },
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Aggregation (polars) failed.
    #[error("aggregating samples: {0}")]
    Aggregate(String),
    /// An export could not be produced.
    #[error("export: {0}")]
    Export(String),
    /// A dataset (or a run being added to one) is unusable: the path and what is wrong.
    #[error("dataset {path}: {msg}")]
    Dataset { path: String, msg: String },
    /// A symbol cannot be annotated as asked (not found: the nearest names; a kernel image
    /// of another build: both build-ids).
    #[error("annotate: {0}")]
    Annotate(String),
    /// The recording could not be read.
    #[error(transparent)]
    Recording(#[from] collector::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
