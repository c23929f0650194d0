//! `fwdscope export -i IN -f FORMAT -o OUT`: a recording's (or perf.data file's) stacks as
//! folded stacks, a flame graph SVG, pprof, speedscope JSON, CSV, JSON or Parquet.

use analyzer::export::Profile;
use analyzer::symbolize::Symbolizer;
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// `thread;root;...;leaf COUNT` lines (inferno, flamegraph.pl).
    Folded,
    /// A flame graph (inferno).
    Svg,
    /// gzipped profile.proto for `go tool pprof`.
    Pprof,
    /// speedscope's JSON file format (open it at speedscope.app).
    Speedscope,
    Csv,
    Json,
    Parquet,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// A recording directory or a perf.data file.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// Output format.
    #[arg(short = 'f', long, value_enum)]
    pub format: ExportFormat,
    /// Output file (default: standard output; binary formats need a file).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Kernel symbols for a perf.data input (default: this machine's /proc/kallsyms).
    #[arg(long)]
    pub kallsyms: Option<PathBuf>,
    /// Extra stage rules (TOML), tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
}

pub fn run(a: &ExportArgs) -> Result<()> {
    let rules = crate::report::rules(a.stages.as_deref())?;
    // One symbolizer: the binaries and kallsyms it loads serve the stacks and pprof.
    let (profile, mut sym): (Profile, Symbolizer) = if a.input.is_dir() {
        let rec = collector::recording::Recording::open(&a.input)?;
        let mut sym = Symbolizer::for_recording(&rec)?;
        (analyzer::export::recording_profile(&rec, &mut sym, &rules)?, sym)
    } else {
        let (pd, ks) = analyzer::perfdata::read_perf_data_with_kallsyms(&a.input, a.kallsyms.as_deref())?;
        let mut sym = Symbolizer::new(pd.maps.clone(), ks);
        (analyzer::export::perfdata_profile(&pd, &mut sym, &rules)?, sym)
    };
    let title = format!("fwdscope: {} ({})", a.input.display(), profile.event);
    let bytes: Vec<u8> = match a.format {
        ExportFormat::Folded => profile.folded().into_bytes(),
        ExportFormat::Svg => profile.svg(&title)?,
        ExportFormat::Pprof => profile.pprof(&mut sym)?,
        ExportFormat::Speedscope => profile.speedscope(&title)?.into_bytes(),
        ExportFormat::Csv => profile.csv().into_bytes(),
        ExportFormat::Json => profile.json()?.into_bytes(),
        ExportFormat::Parquet => {
            let mut v = Vec::new();
            profile.parquet(&mut v)?;
            v
        }
    };
    match &a.output {
        Some(p) => std::fs::write(p, &bytes).with_context(|| format!("writing {}", p.display()))?,
        None => {
            if matches!(a.format, ExportFormat::Pprof | ExportFormat::Parquet) {
                anyhow::bail!("{:?} is binary: name a file with -o", a.format);
            }
            std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)?;
        }
    }
    eprintln!(
        "# {} stacks, {} samples, event used: {}",
        profile.stacks.len(),
        profile.stacks.iter().map(|s| s.samples).sum::<u64>(),
        profile.event
    );
    Ok(())
}
