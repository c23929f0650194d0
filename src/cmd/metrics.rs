//! `fwdscope metrics`: serve a running forwarder's counters to Prometheus, read-only from
//! its stats segment, until interrupted. Once the forwarder exits, scrapes get 503.

use anyhow::{bail, Result};
pub use exporter::cli::MetricsArgs;
use std::sync::atomic::Ordering;

pub fn run(a: &MetricsArgs) -> Result<()> {
    let stop = forwarder::signals::StopSignals::install()?;
    let source = match (a.pid, &a.segment) {
        (_, Some(path)) => exporter::SegmentSource::open(path)?,
        (Some(pid), None) => exporter::SegmentSource::for_pid(pid)?,
        (None, None) => bail!("give the forwarder's PID (-p) or its stats segment (--segment)"),
    };
    let (pid, path) = (source.meta().pid, source.path().display().to_string());
    let ex = exporter::Exporter::start(&a.listen, source)?;
    eprintln!("fwdscope metrics: forwarder {pid} at {} (OpenMetrics, read-only from stats segment {path})", ex.url());
    let mut said = false;
    while !stop.flag.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        if !said && !fwd_abi::segment::process_runs(pid) {
            eprintln!("fwdscope metrics: forwarder {pid} has exited; scrapes now get 503");
            said = true;
        }
    }
    eprintln!("fwdscope metrics: stopped after {} scrapes", ex.scrapes());
    Ok(())
}
