//! `fwdscope report -i IN`: the stage table and top symbols of a recording.

pub use analyzer::cli::{Format, ReportArgs};
use analyzer::rules::Rules;
use anyhow::Result;

pub fn run(a: &ReportArgs) -> Result<()> {
    if let Some(out) = &a.html {
        let page = if a.input.join("live.json").exists() {
            compare::html::live_page(&a.input)?
        } else if a.input.join("results.parquet").exists() {
            let o = compare::html::PageOptions { keep_contended: a.keep_contended };
            compare::html::sweep_page_with(&a.input, &Rules::builtin_with(a.stages.as_deref())?, &o)?
        } else {
            if a.keep_contended {
                anyhow::bail!("--keep-contended: {} is not a sweep directory (no results.parquet)", a.input.display());
            }
            let input = analyzer::input::open_with(&a.input, a.strict)?;
            let o = compare::recording_page::RecordingPageOptions { top: a.top.max(1), ..Default::default() };
            compare::recording_page::recording_page(
                &a.input,
                &input,
                &Rules::builtin_with(a.stages.as_deref())?,
                &a.symbols.paths(),
                &o,
            )?
        };
        let mode = collector::output_file::write_page(out, page.as_bytes(), &a.input)?;
        println!(
            "wrote {}{}",
            out.display(),
            if mode == 0o600 { " (private, 0600, as its input is; chmod it to share)" } else { "" }
        );
        return Ok(());
    }
    let rules = Rules::builtin_with(a.stages.as_deref())?;
    if let Some(by) = a.by {
        let ds = match analyzer::input::open_with(&a.input, a.strict)? {
            analyzer::input::Input::Dataset(d) => d,
            other => anyhow::bail!(
                "--by {}: {} is a {}; --by groups the runs of a dataset (record --dataset)",
                by.name(),
                a.input.display(),
                other.kind()
            ),
        };
        let g = ds.grouped(by)?;
        match a.format {
            Format::Table => print!("# {}\n{}", ds.summary(), g.text()),
            Format::Json => println!("{}", serde_json::to_string_pretty(&g)?),
            Format::Csv => print!("{}", g.csv()),
        }
        return Ok(());
    }
    let mut t = analyzer::input::open_with(&a.input, a.strict)?.stage_table(&rules, &a.symbols.paths())?;
    if a.buildid_list {
        print!("{}", t.buildid_list());
        return Ok(());
    }
    // The text table carries them itself; JSON and CSV readers see them here too.
    if !matches!(a.format, Format::Table) {
        for w in &t.warnings {
            eprintln!("fwdscope report: WARNING: {w}");
        }
    }
    t.sort_symbols(a.sort.into());
    if !a.per_worker {
        t.workers.clear();
    }
    match a.format {
        Format::Table => {
            print!("{}", t.text(a.top));
            print!("{}", t.workers_text());
        }
        Format::Json => {
            t.symbols.truncate(a.top);
            println!("{}", serde_json::to_string_pretty(&t)?)
        }
        Format::Csv => print!("{}", t.csv(a.top)),
    }
    Ok(())
}
