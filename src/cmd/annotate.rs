//! `fwdscope annotate -i IN [SYMBOL] [--against IN2]`: a function's instructions and source
//! lines with their samples and stages (the library call: [`analyzer::annotate`]); with a
//! second input, both side by side ([`analyzer::annotate_diff`]).

use analyzer::rules::Rules;
use anyhow::Result;
use std::path::PathBuf;

/// Output formats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct AnnotateArgs {
    /// A recording directory (from `fwdscope record`) or a perf.data file.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// The symbol to annotate, by its exact name as `report` prints it [default: the top
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
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
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
    pub symbols: super::SymbolArgs,
}

pub fn run(a: &AnnotateArgs) -> Result<()> {
    let rules = Rules::builtin_with(a.stages.as_deref())?;
    let input = analyzer::input::open(&a.input)?;
    let o = analyzer::annotate::Options {
        symbol: a.symbol.clone(),
        stage: a.stage.clone(),
        top: a.top.max(1),
        vmlinux: a.vmlinux.clone(),
        max_instructions: a.max_instructions,
        ..Default::default()
    };
    let ann = analyzer::annotate::annotate(&input, &a.input, &rules, &a.symbols.paths(), &o)?;
    if let Some(b_path) = &a.against {
        let b_input = analyzer::input::open(b_path)?;
        let names = ann.symbols.iter().map(|s| s.symbol.clone()).collect();
        let ob = analyzer::annotate::Options { symbol: None, stage: None, names, ..o };
        let b = analyzer::annotate::annotate(&b_input, b_path, &rules, &a.symbols.paths(), &ob)?;
        let d = analyzer::annotate_diff::diff(&ann, &b);
        match a.format {
            Format::Text => print!("{}", d.text(!a.source)),
            Format::Json => println!("{}", serde_json::to_string_pretty(&d)?),
        }
        return Ok(());
    }
    match a.format {
        Format::Text => print!("{}", ann.text(a.source)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&ann)?),
    }
    Ok(())
}
