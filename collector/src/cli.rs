//! The flags of the verbs that observe (`record`, `stat`) and the target they share
//! (the forwarder, a PID, every CPU, another program), as clap arguments (with the `clap`
//! feature): the CLI crate turns them into options and dispatches.

use std::path::PathBuf;

#[derive(clap::Args, Debug)]
/// `fwdscope record`'s flags.
pub struct RecordArgs {
    /// Output directory.
    #[arg(short = 'o', long, required_unless_present = "dataset", conflicts_with = "dataset")]
    pub output: Option<PathBuf>,
    /// Add the recording to this dataset as DIR/host=H/run=R (created if new): the
    /// recording, its symbolized and attributed stack table (stacks.parquet) and run.json,
    /// moved into place whole when done.
    #[arg(long, value_name = "DIR")]
    pub dataset: Option<PathBuf>,
    /// The host partition [default: this machine's hostname].
    #[arg(long, requires = "dataset")]
    pub host: Option<String>,
    /// The run partition [default: the start time, UTC, and this process's PID].
    #[arg(long, requires = "dataset")]
    pub run: Option<String>,
    /// The run's setting column [default: the forwarder's cache, fib and prefetch at start].
    #[arg(long, requires = "dataset")]
    pub setting: Option<String>,
    /// Overwrite an existing recording.
    #[arg(long)]
    pub force: bool,
    /// Sampling event by perf's name [default: cycles, or cpu-clock where there is no PMU].
    #[arg(short = 'e', long)]
    pub event: Option<String>,
    /// Samples per second (at least 1, at most kernel.perf_event_max_sample_rate).
    #[arg(short = 'F', long, default_value_t = 4000, conflicts_with = "count",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub freq: u64,
    /// One sample every PERIOD events instead of -F.
    #[arg(short = 'c', long = "count")]
    pub count: Option<u64>,
    /// Record frame-pointer callchains (the same as --call-graph fp).
    #[arg(short = 'g', conflicts_with = "call_graph")]
    pub callchain: bool,
    /// Callchains: `fp` (frame pointers), or `dwarf[,SIZE]`: each sample carries the user
    /// registers and SIZE bytes of the user stack (default 8192, at most 65528), unwound
    /// from the binaries' DWARF CFI as they arrive, for programs built without frame
    /// pointers (the stack copies are not kept).
    #[arg(long, value_name = "MODE", value_parser = crate::perf_abi::CallGraph::parse)]
    pub call_graph: Option<crate::perf_abi::CallGraph>,
    /// Ring buffer pages per CPU (a power of two, 1 to 65536; with --call-graph dwarf 8 times
    /// as many are opened, at most 65536).
    #[arg(short = 'm', long, default_value_t = 128, value_parser = pages)]
    pub mmap_pages: usize,
    /// Stop after this many seconds, at least 0.01 [default: when the target exits, or Ctrl-C].
    #[arg(long, value_parser = fwd_abi::seconds::parse_run_seconds)]
    pub duration: Option<f64>,
    /// Milliseconds between Parquet parts (what survives if the recorder is killed), 10 to
    /// 3600000.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub chunk_ms: u64,
    /// Make the recording readable by other users [default: private, 0700 directory and
    /// 0600 files, whatever the umask; a kallsyms snapshot with real addresses stays 0600,
    /// but the sample parts' kernel addresses, which reveal where the kernel was loaded,
    /// become readable].
    /// Run as root, also allows writing into a directory or dataset another user owns
    /// (refused otherwise: its owner could plant symlinks there); another user's symlink
    /// on the path is refused with or without it.
    #[arg(long)]
    pub share: bool,
    /// Also save the function symbols of every mapped binary (symbols/BUILDID.map), so the
    /// recording analyzes the same after a rebuild or on another machine.
    #[arg(long)]
    pub keep_symbols: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

impl RecordArgs {
    /// The callchains asked for: `--call-graph`, else frame pointers with `-g`, else none.
    pub fn call_graph(&self) -> crate::perf_abi::CallGraph {
        use crate::perf_abi::CallGraph;
        self.call_graph.unwrap_or(if self.callchain { CallGraph::FramePointer } else { CallGraph::None })
    }
}

/// What to observe: the forwarder (default), a PID, every CPU, or another program.
#[derive(clap::Args, Debug)]
pub struct TargetArgs {
    /// Observe a running process (all its threads, and threads it starts later).
    #[arg(short = 'p', long, conflicts_with_all = ["all", "exec"])]
    pub pid: Option<i32>,
    /// Observe every CPU, kernel included.
    #[arg(short = 'a', long, conflicts_with = "exec")]
    pub all: bool,
    /// Observe this program (the words after `--` are its arguments) instead of the forwarder.
    #[arg(long)]
    pub exec: Option<PathBuf>,
    /// A forwarder binary to start (e.g. fwdscope-forwarder) [default: `fwdscope forward`].
    #[arg(long)]
    pub forwarder: Option<PathBuf>,
    /// Forwarder flags (or, with --exec, the program's arguments).
    #[arg(last = true, value_name = "FORWARDER FLAGS")]
    pub rest: Vec<String>,
}

/// `fwdscope stat`'s flags.
#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// Milliseconds between rows.
    #[arg(short = 'I', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub interval_ms: u64,
    /// Events by perf's names, comma-separated [default: cycles, instructions,
    /// cache-references, cache-misses, branch-misses, LLC-load-misses, dTLB-load-misses, task-clock].
    #[arg(short = 'e', long)]
    pub events: Option<String>,
    /// Stop after this many seconds [default: when the target exits, or Ctrl-C].
    #[arg(long, value_parser = fwd_abi::seconds::parse_seconds)]
    pub duration: Option<f64>,
    /// JSON lines: a header, then one object per unit per interval.
    #[arg(long, conflicts_with = "field_separator")]
    pub json: bool,
    /// CSV with this field separator (perf stat -x).
    #[arg(short = 'x', long = "field-separator")]
    pub field_separator: Option<String>,
    /// The target: the forwarder (default; per worker), `-p PID` (per worker if it is a
    /// forwarder), `-a` (per CPU) or `--exec PROG`.
    #[command(flatten)]
    pub target: TargetArgs,
}

/// A ring buffer size in pages: a power of two from 1 to 65536.
fn pages(s: &str) -> std::result::Result<usize, String> {
    let v: usize = s.trim().parse().map_err(|_| format!("`{s}`: expected a whole number of pages"))?;
    if !v.is_power_of_two() || v > 65536 {
        return Err(format!("`{s}`: expected a power of two from 1 to 65536 pages"));
    }
    Ok(v)
}
