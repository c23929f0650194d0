//! `fwdscope report -i IN`: the stage table and top symbols of a recording.

use analyzer::rules::Rules;
use analyzer::stages::stage_table;
use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// A recording directory (from `fwdscope record`), a perf.data file, or a text profile
    /// (opreport, or `perf report --stdio`).
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
}

pub fn run(a: &ReportArgs) -> Result<()> {
    let mut rules = Rules::builtin();
    if let Some(p) = &a.stages {
        rules = rules.prepend(Rules::load(p)?);
    }
    let t = if a.input.is_file() {
        let mut magic = [0u8; 8];
        let is_perf_data =
            std::fs::File::open(&a.input).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok()
                && &magic == b"PERFILE2";
        if is_perf_data {
            // perf.data carries no kallsyms: kernel symbols come from this machine.
            let ks = std::fs::read_to_string("/proc/kallsyms").ok().map(|t| analyzer::symbolize::Kallsyms::parse(&t));
            analyzer::stages::perfdata_table(&analyzer::perfdata::read_perf_data(&a.input)?, ks, &rules)
        } else {
            analyzer::stages::profile_table(&analyzer::import::load_text(&a.input)?, &rules)
        }
    } else {
        stage_table(&collector::recording::Recording::open(&a.input)?, &rules)?
    };
    match a.format {
        Format::Table => print!("{}", t.text(a.top)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&t)?),
    }
    Ok(())
}
