//! The flags of the verbs that read what was recorded (`report`, `diff`, `export`,
//! `annotate`) as clap arguments (with the `clap` feature), with the symbol paths they
//! share: the CLI crate only dispatches to them.

use std::path::PathBuf;

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
    pub fn paths(&self) -> crate::symbolize::SymbolPaths {
        crate::symbolize::SymbolPaths { kallsyms: self.kallsyms.clone(), symfs: self.symfs.clone() }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
/// `report`'s and `diff`'s output formats.
pub enum Format {
    Table,
    Json,
    Csv,
}

/// Orders of the symbol table.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Samples,
    Symbol,
    Stage,
    Dso,
}

impl From<Sort> for crate::stages::SortKey {
    fn from(s: Sort) -> Self {
        match s {
            Sort::Samples => Self::Samples,
            Sort::Symbol => Self::Symbol,
            Sort::Stage => Self::Stage,
            Sort::Dso => Self::Dso,
        }
    }
}

/// `fwdscope report`'s flags.
#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A recording directory (from `fwdscope record`), a dataset or a partition of one
    /// (`record --dataset`: every run under it together), a perf.data file, or a text
    /// profile (opreport, or `perf report --stdio`).
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// Extra stage rules (TOML), tried before the built-in forwarder and kernel rules.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Symbols listed.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Order of the symbol table.
    #[arg(long, value_enum, default_value_t = Sort::Samples)]
    pub sort: Sort,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Print each binary the samples touched with its recorded build-id and where its
    /// symbols came from, or why none (as `perf buildid-list`, with the lookup's outcome).
    #[arg(long)]
    pub buildid_list: bool,
    /// Also print a stage table per thread (forwarder workers get per-packet figures).
    #[arg(long)]
    pub per_worker: bool,
    /// Refuse a recording with a part that cannot be read [default: skip the part and warn,
    /// naming it].
    #[arg(long)]
    pub strict: bool,
    /// Write one self-contained HTML page: for a recording (or a perf.data file), its stage
    /// bars, top symbols, a flame graph coloured by stage, the clocks check and a timeline
    /// of stage shares per thread; for a sweep directory (-i from `fwdscope sweep -o`): Mpps
    /// with confidence intervals, stage bars, rtstat series, a flame graph per run; for a
    /// live comparison's directory (`sweep --live -o`): every block's rate over time by
    /// setting and the distribution of the paired differences.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
    /// With --html of a sweep directory: count the runs left out for contention in the
    /// figures, marked [default: they are left out, listed greyed with their reason].
    #[arg(long, requires = "html")]
    pub keep_contended: bool,
    /// For a dataset (record --dataset): stage shares with a column per host, run or setting.
    #[arg(long, value_enum)]
    pub by: Option<crate::dataset::GroupBy>,
}

/// `fwdscope diff`'s flags.
#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// Inputs, baseline first: recording directories, perf.data files or text profiles.
    #[arg(required = true, num_args = 2..)]
    pub inputs: Vec<PathBuf>,
    /// Extra stage rules (TOML), tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Symbols compared.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Refuse a recording with a part that cannot be read [default: skip the part and warn,
    /// naming it, with per-packet figures scaled to the parts read].
    #[arg(long)]
    pub strict: bool,
}

/// `fwdscope export`'s flags.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// A recording directory or a perf.data file.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// Output format.
    #[arg(short = 'f', long, value_enum)]
    pub format: crate::export::Format,
    /// Output file (default: standard output; binary formats need a file).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Extra stage rules (TOML), tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    /// Refuse a recording with a part that cannot be read [default: skip the part and warn,
    /// naming it].
    #[arg(long)]
    pub strict: bool,
    /// SVG: keep the thread start-up frames (_start, std::rt::lang_start, start_thread...)
    /// under every stack [default: trimmed].
    #[arg(long)]
    pub keep_startup_frames: bool,
    /// Make the output file readable by others (0644). Without it the file is private
    /// (0600), as recordings are: a root recording's exports carry kernel addresses. Run
    /// as root, also allows writing into a directory (or to a pipe) another user owns;
    /// another user's symlink is never followed, with or without it.
    #[arg(long)]
    pub share: bool,
}

/// `annotate`'s output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnnotateFormat {
    Text,
    Json,
}

/// `fwdscope annotate`'s flags.
#[derive(clap::Args, Debug)]
pub struct AnnotateArgs {
    /// A recording directory (from `fwdscope record`) or a perf.data file.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// The symbol to annotate, by its exact name as `report` prints it, or a function
    /// inlined into others by its full name as a flame graph shows it (annotated in each
    /// function it was inlined into, that copy's instructions only) [default: the top
    /// symbols by samples]; a name not found is answered with the nearest names.
    #[arg(conflicts_with = "stage")]
    pub symbol: Option<String>,
    /// The top symbols of this stage (lookup, gc, slab, driver, ip, ...), by the samples
    /// charged to it.
    #[arg(long)]
    pub stage: Option<String>,
    /// How many symbols.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Fold the samples by source line (with the call sites inlined code came through)
    /// instead of listing instructions.
    #[arg(long)]
    pub source: bool,
    /// A second recording or perf.data file (B) to set beside the first (A): the same
    /// functions (those A's choice gives), per source line the share of the function's
    /// samples in A and in B and the difference; instructions too where both ran the same
    /// build (`--source` leaves them out).
    #[arg(long, value_name = "INPUT")]
    pub against: Option<PathBuf>,
    /// Output format (json: every instruction's and line's row, for notebooks).
    #[arg(long, value_enum, default_value_t = AnnotateFormat::Text)]
    pub format: AnnotateFormat,
    /// The recorded kernel's image (an ELF vmlinux with symbols, of the recorded build-id),
    /// to annotate kernel functions [default: none: kernel functions list their sampled
    /// addresses only, saying why].
    #[arg(long, value_name = "FILE")]
    pub vmlinux: Option<PathBuf>,
    /// A function of more instructions shows the windows around its hottest ones only.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    pub max_instructions: usize,
    /// Extra stage rules (TOML), tried before the built-in forwarder and kernel rules.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}
