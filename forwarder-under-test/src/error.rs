//! The crate's one error type and its `Result` alias.

use std::path::{Path, PathBuf};

/// A path as it may be printed: control and bidirectional-formatting characters escaped
/// (`\u{1b}`), never passed to the terminal raw.
pub fn shown(p: &Path) -> String {
    p.display()
        .to_string()
        .chars()
        .flat_map(|c| {
            let hidden = c.is_control()
                || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
            if hidden {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// Everything that can go wrong in the forwarder library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{}: {source}", shown(path))]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A line of a route table or traffic file did not parse.
    #[error("{}:{line}: {msg}", shown(path))]
    Parse { path: PathBuf, line: usize, msg: String },
    /// An option or combination of options is invalid.
    #[error("{0}")]
    Config(String),
    /// The stats segment could not be created (or is in use by another forwarder).
    #[error(transparent)]
    Segment(#[from] fwd_abi::Error),
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
