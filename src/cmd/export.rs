//! `fwdscope export -i IN -f FORMAT -o OUT`: a recording's (or perf.data file's) stacks as
//! folded stacks, a flame graph SVG, pprof, speedscope JSON, CSV, JSON or Parquet.

pub use analyzer::cli::ExportArgs;
use analyzer::export::Profile;
use analyzer::symbolize::Symbolizer;
use anyhow::Result;

pub fn run(a: &ExportArgs) -> Result<()> {
    let rules = analyzer::rules::Rules::builtin_with(a.stages.as_deref())?;
    // One symbolizer: the binaries and kallsyms it loads serve the stacks and pprof.
    let (mut profile, mut sym): (Profile, Symbolizer) =
        analyzer::input::open_with(&a.input, a.strict)?.profile(&rules, &a.symbols.paths())?;
    profile.svg_options.keep_startup = a.keep_startup_frames;
    for w in &profile.warnings {
        eprintln!("warning: {}: {w}", collector::printable(a.input.display().to_string()));
    }
    let title = format!("fwdscope: {} ({})", a.input.display(), profile.event);
    let bytes = profile.encode(a.format, &title, &mut sym)?;
    match &a.output {
        Some(p) => collector::output_file::write_output(p, &bytes, if a.share { 0o644 } else { 0o600 }, a.share)?,
        None => {
            if a.format.is_binary() {
                // The format as the user typed it (`pprof`), not the Rust name.
                let name = clap::ValueEnum::to_possible_value(&a.format)
                    .map_or_else(|| format!("{:?}", a.format).to_lowercase(), |v| v.get_name().to_string());
                anyhow::bail!("-f {name} is binary, not for a terminal: name a file with -o");
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
