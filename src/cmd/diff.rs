//! `fwdscope diff A B [C ...]`: stage tables of several recordings (or perf.data files, or
//! text profiles) side by side, the first as baseline.

pub use analyzer::cli::DiffArgs;
use analyzer::cli::Format;

use anyhow::Result;

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
        Format::Json => println!("{}", serde_json::to_string_pretty(&d)?),
        Format::Csv => print!("{}", d.csv()),
        Format::Table => print!("{}", d.text()),
    }
    Ok(())
}
