//! `fwdscope stat`: interval counting (perf stat -I) with per-packet figures per worker.

use super::record::target;
use anyhow::Result;
pub use collector::cli::StatArgs;
use collector::events::EventId;
use collector::stat::{stat, StatFormat, StatOptions, StatPrinter};
use std::time::Duration;

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
