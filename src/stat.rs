//! `fwdscope stat`: interval counting (perf stat -I) with per-packet figures per worker.

use crate::record::{target, TargetArgs};
use anyhow::Result;
use collector::events::EventId;
use collector::stat::{header_text, row_csv, row_text, stat, StatOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// Milliseconds between rows.
    #[arg(short = 'I', long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Events by perf's names, comma-separated [default: cycles, instructions,
    /// cache-references, cache-misses, branch-misses, LLC-load-misses, dTLB-load-misses, task-clock].
    #[arg(short = 'e', long)]
    pub events: Option<String>,
    /// Stop after this many seconds [default: when the target exits, or Ctrl-C].
    #[arg(long)]
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
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    ctrlc::set_handler(move || s2.store(true, Ordering::Relaxed))?;
    let counted: std::cell::RefCell<Vec<String>> = std::cell::RefCell::new(Vec::new());
    let json = a.json;
    let sep = a.field_separator.clone();
    stat(
        &opts,
        &stop,
        &mut |h| {
            *counted.borrow_mut() =
                h.events.iter().filter(|e| e.status == "counted").map(|e| e.event.clone()).collect();
            if json {
                let mut v = serde_json::to_value(h).unwrap_or_default();
                v["type"] = "header".into();
                println!("{v}");
                return;
            }
            let list: Vec<String> = h
                .events
                .iter()
                .map(|e| if e.status == "counted" { e.event.clone() } else { format!("{} <{}>", e.event, e.status) })
                .collect();
            match &sep {
                Some(s) => {
                    println!("# {}: {}", h.target, list.join(", "));
                    println!("time{s}unit{s}packets{s}{}", counted.borrow().join(s));
                }
                None => {
                    println!("# {}: events {}", h.target, list.join(", "));
                    println!("{}", header_text());
                }
            }
        },
        &mut |r| {
            if json {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["type"] = "interval".into();
                println!("{v}");
            } else if let Some(s) = &sep {
                println!("{}", row_csv(r, &counted.borrow(), s));
            } else {
                println!("{}", row_text(r));
            }
        },
    )?;
    Ok(())
}
