//! `fwdscope export -i IN -f FORMAT -o OUT`: a recording's (or perf.data file's) stacks as
//! folded stacks, a flame graph SVG, pprof, speedscope JSON, CSV, JSON or Parquet.

use analyzer::export::{Format, Profile};
use analyzer::symbolize::Symbolizer;
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// A recording directory or a perf.data file.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// Output format.
    #[arg(short = 'f', long, value_enum)]
    pub format: Format,
    /// Output file (default: standard output; binary formats need a file).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: super::SymbolArgs,
    /// Extra stage rules (TOML), tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
}

pub fn run(a: &ExportArgs) -> Result<()> {
    let rules = analyzer::rules::Rules::builtin_with(a.stages.as_deref())?;
    // One symbolizer: the binaries and kallsyms it loads serve the stacks and pprof.
    let (profile, mut sym): (Profile, Symbolizer) =
        analyzer::input::open(&a.input)?.profile(&rules, &a.symbols.paths())?;
    let title = format!("fwdscope: {} ({})", a.input.display(), profile.event);
    let bytes = profile.encode(a.format, &title, &mut sym)?;
    match &a.output {
        Some(p) => std::fs::write(p, &bytes).with_context(|| format!("writing {}", p.display()))?,
        None => {
            if a.format.is_binary() {
                anyhow::bail!("{:?} is binary: name a file with -o", a.format);
            }
            std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)?;
        }
    }
    for w in sym.warnings() {
        eprintln!("# WARNING: {w}");
    }
    eprintln!("# {}", profile.summary());
    Ok(())
}
