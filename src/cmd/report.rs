//! `fwdscope report -i IN`: the stage table and top symbols of a recording.

use analyzer::rules::Rules;
use analyzer::stages::SortKey;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// Orders of the symbol table.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    Samples,
    Symbol,
    Stage,
    Dso,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A recording directory (from `fwdscope record`), a dataset or a partition of one
    /// (`record --dataset`: every run under it together), a perf.data file, or a text
    /// profile (opreport, or `perf report --stdio`).
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// Extra stage rules (TOML), tried before the built-in forwarder and kernel rules.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Symbols listed.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Order of the symbol table.
    #[arg(long, value_enum, default_value_t = Sort::Samples)]
    pub sort: Sort,
    #[command(flatten)]
    pub symbols: super::SymbolArgs,
    /// Print each binary the samples touched with its recorded build-id and where its
    /// symbols came from, or why none (as `perf buildid-list`, with the lookup's outcome).
    #[arg(long)]
    pub buildid_list: bool,
    /// Also print a stage table per thread (forwarder workers get per-packet figures).
    #[arg(long)]
    pub per_worker: bool,
    /// Refuse a recording with a part that cannot be read [default: skip the part and warn,
    /// naming it].
    #[arg(long)]
    pub strict: bool,
    /// Write one self-contained HTML page: for a recording (or a perf.data file), its stage
    /// bars, top symbols, a flame graph coloured by stage, the clocks check and a timeline
    /// of stage shares per thread; for a sweep directory (-i from `fwdscope sweep -o`): Mpps
    /// with confidence intervals, stage bars, rtstat series, a flame graph per run; for a
    /// live comparison's directory (`sweep --live -o`): every block's rate over time by
    /// setting and the distribution of the paired differences.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,
    /// With --html of a sweep directory: count the runs left out for contention in the
    /// figures, marked [default: they are left out, listed greyed with their reason].
    #[arg(long, requires = "html")]
    pub keep_contended: bool,
    /// For a dataset (record --dataset): stage shares with a column per host, run or setting.
    #[arg(long, value_enum)]
    pub by: Option<analyzer::dataset::GroupBy>,
}

/// The mode of a page made from `input`: 0644 when others may read the input (its
/// directory, or the file itself), 0600 otherwise.
fn page_mode(input: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(input) {
        Ok(md) if md.permissions().mode() & 0o044 == 0 => 0o600,
        Ok(_) => 0o644,
        Err(_) => 0o600,
    }
}

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
        // Run as root, not into a directory (or through a symlink) another user owns; a new
        // file renamed into place: a symlink planted at the name is replaced, never
        // written through.
        let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        collector::outdir::check_path(dir, false).map_err(|why| {
            anyhow::anyhow!(
                "{}: {why}, and fwdscope runs as root: that user could redirect the page; choose a path in \
                 directories root owns",
                out.display()
            )
        })?;
        // The page shows what its input holds (kernel symbols, command lines): as private
        // as the input is. A private recording or sweep (0700) gives a 0600 page.
        let mode = page_mode(&a.input);
        collector::outdir::write_atomic(out, page.as_bytes(), mode)?;
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
    t.sort_symbols(match a.sort {
        Sort::Samples => SortKey::Samples,
        Sort::Symbol => SortKey::Symbol,
        Sort::Stage => SortKey::Stage,
        Sort::Dso => SortKey::Dso,
    });
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
