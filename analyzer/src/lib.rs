//! fwdscope's analyzer: turns samples into answers: which stage and which symbol cost how
//! much per packet. [`rules`] holds the stage rules (TOML data); [`symbolize`] resolves
//! addresses through ELF symbol tables (one lazily built table per binary) and the
//! recording's kallsyms snapshot; [`stages`] builds the stage table of a recording.

mod error;
pub mod import;
pub mod perfdata;
pub mod rules;
pub mod stages;
pub mod symbolize;

pub use error::{Error, Result};
