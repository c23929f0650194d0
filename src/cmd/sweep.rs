//! `fwdscope sweep`: the bundled forwarder over every combination of the swept settings,
//! each repeated, interleaved, a recording per run; or a historic experiment
//! (`--experiment NAME`). The flags and the plan they make are `compare::cli`; the work is
//! `compare::runner`, or with `--live` (one forwarder, the settings switched through its
//! control block in short balanced blocks) `compare::live`.

use anyhow::Result;
pub use compare::cli::SweepArgs;
use compare::cli::{Forwarder, Planned};

/// This binary as the forwarder (`fwdscope forward`), with the forwarder's own flag check.
fn forwarder() -> Result<Forwarder<'static>> {
    let (program, args) = forwarder::cli::forwarder_command(None)?;
    let check =
        &|flags: &[String], what: &str| forwarder::cli::check_forwarder_flags(flags, what).map_err(|e| e.to_string());
    Ok(Forwarder { program, args, check })
}

pub fn run(a: &SweepArgs) -> Result<()> {
    if a.live {
        let Planned { options: mut o, estimate } = compare::cli::live_options(a, forwarder()?)?;
        eprintln!("{estimate}");
        let signals = forwarder::signals::StopSignals::install()?;
        o.stop = Some(signals.flag.clone());
        let r = compare::live::run(&o)?;
        print!("{}", compare::live::text(&o, &r));
        println!("blocks: {}/blocks.parquet  results: {}/live.json", a.output.display(), a.output.display());
        return stopped_by(&signals);
    }
    let Planned { options: mut o, estimate } = compare::cli::sweep_options(a, forwarder()?)?;
    eprintln!("{estimate}");
    // Ctrl-C (once), SIGTERM or SIGHUP stop the run in progress; the finished runs are
    // written and reported, marked incomplete, and the sweep exits 130 (143, 129).
    let signals = forwarder::signals::StopSignals::install()?;
    o.stop = Some(signals.flag.clone());
    print!("{}", compare::runner::run(&o)?);
    println!("runs: {}/runs/NNN  results: {}/results.parquet", a.output.display(), a.output.display());
    stopped_by(&signals)
}

/// After a sweep a signal cut short: say so and exit as the signal asks.
fn stopped_by(signals: &forwarder::signals::StopSignals) -> Result<()> {
    if let (Some(sig), Some(status)) = (signals.received(), signals.exit_status()) {
        eprintln!("fwdscope sweep: stopped by {sig}: the finished part is kept and marked incomplete");
        std::process::exit(status);
    }
    Ok(())
}
