//! `fwdscope sweep`: the bundled forwarder over every combination of the swept settings,
//! each repeated, interleaved, a recording per run; or a historic experiment
//! (`--experiment NAME`). The work is `compare::runner`.

use super::record::forwarder_command;
use anyhow::Result;
use compare::plan::{settings, Axis};
use compare::runner::SweepOptions;
use forwarder::config::CacheMode;
use forwarder::fib::FibKind;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Prefetch depths to sweep, e.g. 0,1,2,3,4,5.
    #[arg(long, value_delimiter = ',')]
    pub prefetch: Vec<u8>,
    /// Cache modes to sweep, e.g. rtcache,nocache,nhcache.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub cache: Vec<CacheMode>,
    /// FIB engines to sweep, e.g. hash,lctrie,dir24.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub fib: Vec<FibKind>,
    /// Worker counts to sweep, e.g. 1,2.
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// Runs per setting [default: 5, or the experiment's].
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Seconds of forwarding per run [default: 3, or the experiment's].
    #[arg(long)]
    pub duration: Option<f64>,
    /// A historic experiment: prefetch-2005, rtcache-flood-2003, rtcache-removal-2012, or a
    /// TOML file of the same form.
    #[arg(long, conflicts_with_all = ["prefetch", "cache", "fib", "workers"])]
    pub experiment: Option<String>,
    /// Output directory: runs/NNN/ recordings, results.parquet, table.txt.
    #[arg(short = 'o', long, default_value = "sweep-out")]
    pub output: PathBuf,
    /// Replace an existing output directory.
    #[arg(long)]
    pub force: bool,
    /// Samples per second in each run's recording.
    #[arg(short = 'F', long, default_value_t = 999)]
    pub freq: u64,
    /// Record callchains (charges shared helpers to their caller's stage; costs a little).
    #[arg(short = 'g')]
    pub callchain: bool,
    /// Forwarder flags every run shares (after `--`).
    #[arg(last = true)]
    pub rest: Vec<String>,
}

pub fn run(a: &SweepArgs) -> Result<()> {
    let exp = a.experiment.as_deref().map(compare::experiments::load_experiment).transpose()?;
    let sets = match &exp {
        Some(e) => e.settings(),
        None => settings(&[
            Axis::new("prefetch", &a.prefetch),
            Axis::new("cache", a.cache.iter().map(|c| c.name())),
            Axis::new("fib", &a.fib),
            Axis::new("workers", &a.workers),
        ]),
    };
    let (program, program_args) = forwarder_command(&None)?;
    let mut o = SweepOptions::new(a.output.clone(), sets, program, program_args);
    o.force = a.force;
    o.repeat = a.repeat.or(exp.as_ref().map(|e| e.repeat)).unwrap_or(o.repeat);
    o.duration = a.duration.or(exp.as_ref().map(|e| e.duration)).unwrap_or(o.duration);
    o.freq = a.freq;
    o.callchain = a.callchain;
    o.shared_flags = a.rest.clone();
    o.experiment = exp;
    print!("{}", compare::runner::run(&o)?);
    println!("runs: {}/runs/NNN  results: {}/results.parquet", a.output.display(), a.output.display());
    Ok(())
}
