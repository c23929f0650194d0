//! `fwdscope record`: sample the bundled forwarder (started as a child), a PID, or the
//! whole system into a recording directory.

use anyhow::{bail, Result};
pub use collector::cli::{RecordArgs, TargetArgs};
use collector::events::EventId;
use collector::session::{record, RecordOptions, Target};
use forwarder::cli::{check_forwarder_flags, forwarder_command};
use std::time::Duration;

/// The target the flags describe; forwarder flags are checked before anything starts.
pub fn target(t: &TargetArgs) -> Result<Target> {
    let (forwarder, rest) = (&t.forwarder, &t.rest);
    Ok(match (t.pid, t.all, &t.exec) {
        (Some(p), _, _) => Target::Pid(p),
        (None, true, _) => Target::All,
        (None, false, Some(prog)) => Target::Command { program: prog.clone(), args: rest.to_vec() },
        (None, false, None) => {
            check_forwarder_flags(rest, "forwarder flags after `--`")?;
            let (program, mut args) = forwarder_command(forwarder.as_deref())?;
            args.extend(rest.iter().cloned());
            Target::Forwarder { program, args }
        }
    })
}

pub fn run(a: &RecordArgs) -> Result<()> {
    let event = a.event.as_deref().map(EventId::parse).transpose()?;
    if a.count.is_none() {
        // Before anything is created: a refused frequency leaves no output behind.
        collector::perf_abi::check_sample_freq(a.freq)?;
    }
    // A dataset run is recorded into its staging directory, published when complete.
    let staging = match &a.dataset {
        Some(dir) => {
            let host = match &a.host {
                Some(h) => h.clone(),
                None => collector::recording::Machine::current().hostname,
            };
            let run = a.run.clone().unwrap_or_else(analyzer::dataset::default_run_name);
            Some(analyzer::dataset::Staging::new_with(dir, &host, &run, a.share)?)
        }
        None => None,
    };
    let output = match (&staging, &a.output) {
        (Some(s), _) => s.recording_dir(),
        (None, Some(o)) => o.clone(),
        (None, None) => bail!("give an output directory (-o) or a dataset (--dataset)"),
    };
    let mut opts = RecordOptions::new(output.clone(), target(&a.target)?);
    opts.force = a.force;
    opts.event = event;
    opts.freq = Some(a.freq);
    opts.period = a.count;
    opts.call_graph = a.call_graph();
    opts.ring_pages = a.mmap_pages;
    opts.duration = a.duration.map(Duration::from_secs_f64);
    opts.chunk_interval = Duration::from_millis(a.chunk_ms.max(10));
    opts.command = std::env::args().collect();
    opts.shared = a.share;
    let stop = forwarder::signals::StopSignals::install()?;
    opts.stop_signal = Some(stop.which.clone());
    eprintln!("fwdscope record: {} -> {}", opts.target.describe(), opts.output.display());
    let meta = record(&opts, &stop.flag, None, &mut |note| eprintln!("fwdscope record: {note}"))?;
    eprintln!("fwdscope record: {}", meta.summary());
    if a.keep_symbols {
        let rec = collector::recording::Recording::open(&output)?;
        let n = analyzer::symbolize::write_symbol_maps(&output, &rec.maps()?)?;
        eprintln!("fwdscope record: symbol maps of {n} binaries in {}", output.join("symbols").display());
    }
    if let Some(s) = staging {
        let rules = analyzer::rules::Rules::builtin_with(None)?;
        let (dir, info) = s.publish(a.setting.as_deref(), &rules)?;
        eprintln!(
            "fwdscope record: dataset run {} ({} stacks, {} samples, setting `{}`)",
            dir.display(),
            info.stacks,
            info.samples,
            info.setting
        );
    }
    Ok(())
}
