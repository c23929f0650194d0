//! `top`'s flags as clap arguments: the CLI crate turns them into [`crate::app::TopOptions`].

use std::path::PathBuf;

/// `fwdscope top`'s flags.
#[derive(clap::Args, Debug)]
pub struct TopArgs {
    /// Seconds between screen updates.
    #[arg(short = 'd', long, default_value_t = 1.0, value_parser = fwd_abi::seconds::parse_seconds)]
    pub delay: f64,
    /// Quit after this many updates (as top -n) [default: run until q].
    #[arg(short = 'n', long)]
    pub iterations: Option<u64>,
    /// Samples per second.
    #[arg(short = 'F', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub freq: u64,
    /// Without callchains (shared helpers then count as `other`).
    #[arg(long, conflicts_with = "call_graph")]
    pub no_callchain: bool,
    /// Callchains: `fp` (frame pointers, the default) or `dwarf[,SIZE]` (user stack copies
    /// of SIZE bytes, default 8192, unwound from DWARF CFI as they arrive: for programs
    /// built without frame pointers, such as DPDK's l3fwd).
    #[arg(long, value_name = "MODE", value_parser = collector::perf_abi::CallGraph::parse)]
    pub call_graph: Option<collector::perf_abi::CallGraph>,
    /// Keep the live recording in this directory [default: a temporary one, removed at exit].
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Stage rules (TOML) tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    /// Watch lab NAME's forwarder (`fwdscope lab up --name NAME`): fwdscope's or DPDK's
    /// l3fwd by its PID (observe only), the kernel or the XDP program on every CPU.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pid", "all", "exec", "replay"])]
    pub lab: Option<String>,
    /// Play a recording back at its own pace instead of watching something live.
    #[arg(long, conflicts_with_all = ["pid", "all", "exec"])]
    pub replay: Option<PathBuf>,
    /// Replay speed (2 = twice as fast as recorded).
    #[arg(long, default_value_t = 1.0, requires = "replay", value_parser = fwd_abi::seconds::parse_speed)]
    pub speed: f64,
    #[command(flatten)]
    pub target: collector::cli::TargetArgs,
}

impl TopArgs {
    /// The callchains asked for: none with --no-callchain, else --call-graph, else frame
    /// pointers.
    pub fn call_graph(&self) -> collector::perf_abi::CallGraph {
        use collector::perf_abi::CallGraph;
        match (self.no_callchain, self.call_graph) {
            (true, _) => CallGraph::None,
            (false, Some(c)) => c,
            (false, None) => CallGraph::FramePointer,
        }
    }
}
