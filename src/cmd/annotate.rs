//! `fwdscope annotate -i IN [SYMBOL] [--against IN2]`: a function's instructions and source
//! lines with their samples and stages (the library call: [`analyzer::annotate`]); with a
//! second input, both side by side ([`analyzer::annotate_diff`]).

pub use analyzer::cli::{AnnotateArgs, AnnotateFormat as Format};
use analyzer::rules::Rules;
use anyhow::Result;

pub fn run(a: &AnnotateArgs) -> Result<()> {
    let rules = Rules::builtin_with(a.stages.as_deref())?;
    let input = analyzer::input::open(&a.input)?;
    let o = analyzer::annotate::Options {
        symbol: a.symbol.clone(),
        stage: a.stage.clone(),
        top: a.top.max(1),
        vmlinux: a.vmlinux.clone(),
        max_instructions: a.max_instructions,
        // A function named: also where it was inlined.
        inlined_copies: a.symbol.is_some(),
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
