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

/// Where symbols of another machine are found (report, diff, export).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SymbolArgs {
    /// Kernel symbols of the recording machine: a copy of its /proc/kallsyms, plain or
    /// gzipped, checked against the `_text` address the input recorded; for a recording it
    /// stands in for the recording's own snapshot [default: the recording's snapshot; for
    /// perf.data, perf's build-id cache, then this machine's when it runs the recorded
    /// kernel build].
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<std::path::PathBuf>,
    /// A copy of the recording machine's files: a binary recorded as PATH is looked for as
    /// DIR/PATH first, as perf's --symfs [default: perf's build-id cache, then the recorded
    /// path; a file is used only when its build-id is the recorded one].
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<std::path::PathBuf>,
}

impl SymbolArgs {
    /// The analyzer's form.
    pub fn paths(&self) -> analyzer::symbolize::SymbolPaths {
        analyzer::symbolize::SymbolPaths { kallsyms: self.kallsyms.clone(), symfs: self.symfs.clone() }
    }
}
