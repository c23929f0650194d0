//! `fwdscope record`: sample the bundled forwarder (started as a child), a PID, or the
//! whole system into a recording directory.

use anyhow::{bail, Context, Result};
use collector::events::EventId;
use collector::session::{record, RecordOptions, Target};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
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
    /// Record frame-pointer callchains.
    #[arg(short = 'g')]
    pub callchain: bool,
    /// Ring buffer pages per CPU (a power of two, 1 to 65536).
    #[arg(short = 'm', long, default_value_t = 128, value_parser = pages)]
    pub mmap_pages: usize,
    /// Stop after this many seconds, at least 0.01 [default: when the target exits, or Ctrl-C].
    #[arg(long, value_parser = forwarder::cli::parse_run_seconds)]
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

/// The forwarder to start: `--forwarder PATH` (e.g. the standalone fwdscope-forwarder), or
/// by default this very binary running `fwdscope forward`.
pub fn forwarder_command(explicit: &Option<PathBuf>) -> Result<(PathBuf, Vec<String>)> {
    if let Some(p) = explicit {
        if !p.exists() {
            bail!("--forwarder {}: no such file", p.display());
        }
        return Ok((p.clone(), Vec::new()));
    }
    let exe = std::env::current_exe().context("locating fwdscope's own executable")?;
    Ok((exe, vec!["forward".to_string()]))
}

/// Forwarder flags parsed as `forward` parses them and turned into the configuration they
/// describe (its ranges and combinations checked), without starting anything: what the
/// commands that start forwarders check before they create or replace anything; `what`
/// says where the flags came from in the error.
pub fn check_forwarder_flags(flags: &[String], what: &str) -> Result<()> {
    use clap::Parser;
    #[derive(clap::Parser)]
    #[command(name = "forwarder flags", args_override_self = true)]
    struct Check {
        #[command(flatten)]
        a: forwarder::cli::ForwardArgs,
    }
    let mut argv = vec!["forwarder flags".to_string()];
    argv.extend(flags.iter().cloned());
    let c = Check::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("{what}: {}", e.to_string().trim_end()))?;
    c.a.fwd.to_config().map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    Ok(())
}

/// The target the flags describe; forwarder flags are checked before anything starts.
pub fn target(t: &TargetArgs) -> Result<Target> {
    let (forwarder, rest) = (&t.forwarder, &t.rest);
    Ok(match (t.pid, t.all, &t.exec) {
        (Some(p), _, _) => Target::Pid(p),
        (None, true, _) => Target::All,
        (None, false, Some(prog)) => Target::Command { program: prog.clone(), args: rest.to_vec() },
        (None, false, None) => {
            check_forwarder_flags(rest, "forwarder flags after `--`")?;
            let (program, mut args) = forwarder_command(forwarder)?;
            args.extend(rest.iter().cloned());
            Target::Forwarder { program, args }
        }
    })
}

pub fn run(a: &RecordArgs) -> Result<()> {
    let event = a.event.as_deref().map(EventId::parse).transpose()?;
    if a.count.is_none() {
        // Before anything is created: a refused frequency leaves no output behind.
        collector::perf_abi::check_sample_freq(a.freq)?;
    }
    // A dataset run is recorded into its staging directory, published when complete.
    let staging = match &a.dataset {
        Some(dir) => {
            let host = match &a.host {
                Some(h) => h.clone(),
                None => collector::recording::Machine::current().hostname,
            };
            let run = a.run.clone().unwrap_or_else(analyzer::dataset::default_run_name);
            Some(analyzer::dataset::Staging::new_with(dir, &host, &run, a.share)?)
        }
        None => None,
    };
    let output = match (&staging, &a.output) {
        (Some(s), _) => s.recording_dir(),
        (None, Some(o)) => o.clone(),
        (None, None) => bail!("give an output directory (-o) or a dataset (--dataset)"),
    };
    let mut opts = RecordOptions::new(output.clone(), target(&a.target)?);
    opts.force = a.force;
    opts.event = event;
    opts.freq = Some(a.freq);
    opts.period = a.count;
    opts.callchain = a.callchain;
    opts.ring_pages = a.mmap_pages;
    opts.duration = a.duration.map(Duration::from_secs_f64);
    opts.chunk_interval = Duration::from_millis(a.chunk_ms.max(10));
    opts.command = std::env::args().collect();
    opts.shared = a.share;
    let stop = forwarder::signals::StopSignals::install()?;
    opts.stop_signal = Some(stop.which.clone());
    eprintln!("fwdscope record: {} -> {}", opts.target.describe(), opts.output.display());
    let meta = record(&opts, &stop.flag, None, &mut |note| eprintln!("fwdscope record: {note}"))?;
    eprintln!("fwdscope record: {}", meta.summary());
    if a.keep_symbols {
        let rec = collector::recording::Recording::open(&output)?;
        let n = analyzer::symbolize::write_symbol_maps(&output, &rec.maps()?)?;
        eprintln!("fwdscope record: symbol maps of {n} binaries in {}", output.join("symbols").display());
    }
    if let Some(s) = staging {
        let rules = analyzer::rules::Rules::builtin_with(None)?;
        let (dir, info) = s.publish(a.setting.as_deref(), &rules)?;
        eprintln!(
            "fwdscope record: dataset run {} ({} stacks, {} samples, setting `{}`)",
            dir.display(),
            info.stacks,
            info.samples,
            info.setting
        );
    }
    Ok(())
}

fn pages(s: &str) -> std::result::Result<usize, String> {
    let v: usize = s.trim().parse().map_err(|_| format!("`{s}`: expected a whole number of pages"))?;
    if !v.is_power_of_two() || v > 65536 {
        return Err(format!("`{s}`: expected a power of two from 1 to 65536 pages"));
    }
    Ok(v)
}
