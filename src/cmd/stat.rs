//! `fwdscope stat`: interval counting (perf stat -I) with per-packet figures per worker.

use super::record::{target, TargetArgs};
use anyhow::Result;
use collector::events::EventId;
use collector::stat::{stat, StatFormat, StatOptions, StatPrinter};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// Milliseconds between rows.
    #[arg(short = 'I', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub interval_ms: u64,
    /// Events by perf's names, comma-separated [default: cycles, instructions,
    /// cache-references, cache-misses, branch-misses, LLC-load-misses, dTLB-load-misses, task-clock].
    #[arg(short = 'e', long)]
    pub events: Option<String>,
    /// Stop after this many seconds [default: when the target exits, or Ctrl-C].
    #[arg(long, value_parser = forwarder::cli::parse_seconds)]
    pub duration: Option<f64>,
    /// JSON lines: a header, then one object per unit per interval.
    #[arg(long, conflicts_with = "field_separator")]
    pub json: bool,
    /// CSV with this field separator (perf stat -x).
    #[arg(short = 'x', long = "field-separator")]
    pub field_separator: Option<String>,
    /// The target: the forwarder (default; per worker), `-p PID` (per worker if it is a
    /// forwarder), `-a` (per CPU) or `--exec PROG`.
    #[command(flatten)]
    pub target: TargetArgs,
}

pub fn run(a: &StatArgs) -> Result<()> {
    if a.interval_ms == 0 {
        anyhow::bail!("-I 0: the interval must be at least 1 ms");
    }
    let events = match &a.events {
        Some(list) => EventId::parse_list(list)?,
        None => EventId::DEFAULT_COUNTING.to_vec(),
    };
    let opts = StatOptions {
        target: target(&a.target)?,
        events,
        interval: Duration::from_millis(a.interval_ms),
        duration: a.duration.map(Duration::from_secs_f64),
    };
    let stop = forwarder::signals::StopSignals::install()?.flag;
    let format = match (&a.field_separator, a.json) {
        (Some(sep), _) => StatFormat::Csv(sep.clone()),
        (None, true) => StatFormat::Json,
        (None, false) => StatFormat::Text,
    };
    let printer = std::cell::RefCell::new(StatPrinter::new(format));
    stat(&opts, &stop, &mut |h| println!("{}", printer.borrow_mut().header(h)), &mut |r| {
        println!("{}", printer.borrow().row(r))
    })?;
    Ok(())
}
