//! `fwdscope diff A B [C ...]`: stage tables of several recordings (or perf.data files, or
//! text profiles) side by side, the first as baseline.

use super::report;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// Inputs, baseline first: recording directories, perf.data files or text profiles.
    #[arg(required = true, num_args = 2..)]
    pub inputs: Vec<PathBuf>,
    /// Extra stage rules (TOML), tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: super::SymbolArgs,
    /// Symbols compared.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Output format.
    #[arg(long, value_enum, default_value_t = report::Format::Table)]
    pub format: report::Format,
    /// Refuse a recording with a part that cannot be read [default: skip the part and warn,
    /// naming it, with per-packet figures scaled to the parts read].
    #[arg(long)]
    pub strict: bool,
}

pub fn run(a: &DiffArgs) -> Result<()> {
    let rules = analyzer::rules::Rules::builtin_with(a.stages.as_deref())?;
    let mut tables = Vec::new();
    for p in &a.inputs {
        let t = analyzer::input::open_with(p, a.strict)?.stage_table(&rules, &a.symbols.paths())?;
        // What an input lacks changes what its column means: said for each input.
        for w in &t.warnings {
            eprintln!("warning: {}: {w}", collector::printable(p.display().to_string()));
        }
        tables.push(t);
    }
    let names = a.inputs.iter().map(|p| collector::printable(p.display().to_string())).collect();
    let d = analyzer::diff::diff(names, &tables, a.top);
    match a.format {
        report::Format::Json => println!("{}", serde_json::to_string_pretty(&d)?),
        report::Format::Csv => print!("{}", d.csv()),
        report::Format::Table => print!("{}", d.text()),
    }
    Ok(())
}
