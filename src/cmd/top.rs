//! `fwdscope top`: the live view (the `tui` crate) of the bundled forwarder (flags after
//! `--`), a PID (-p, observe only), every CPU (-a, kernel rules) or a recording (--replay).

use super::record::target;
use anyhow::{bail, Result};
use collector::session::Target;
use std::time::Duration;
use tui::app::{TopOptions, TopTarget};
pub use tui::cli::TopArgs;

pub fn run(a: &TopArgs) -> Result<()> {
    if !(a.delay > 0.0 && a.delay.is_finite()) {
        bail!("--delay {}: expected a positive number of seconds", a.delay);
    }
    // The target is checked before the screen opens: a missing one is an error, not an
    // empty screen.
    if let Some(p) = a.target.pid {
        if p <= 0 || !fwd_abi::segment::process_runs(p as u32) {
            bail!("top -p {p}: process {p} does not exist (or has exited)");
        }
    }
    let t = match (&a.replay, &a.lab) {
        (Some(dir), _) => TopTarget::Replay(dir.clone()),
        (None, Some(name)) => match lab::watch::watch(name)? {
            lab::watch::Watch::Pid { pid, .. } => TopTarget::Pid(pid),
            lab::watch::Watch::AllCpus { .. } => TopTarget::All,
        },
        (None, None) => match target(&a.target)? {
            Target::Forwarder { program, mut args } => {
                // Watched live, the forwarder runs until `q` unless told otherwise.
                if !a.target.rest.iter().any(|x| x == "--duration" || x.starts_with("--duration=")) {
                    args.extend(["--duration".to_string(), "0".to_string()]);
                }
                TopTarget::Forwarder { program, args }
            }
            Target::Pid(p) => TopTarget::Pid(p),
            Target::All => TopTarget::All,
            Target::Command { .. } => bail!("top watches the forwarder, -p PID, -a or --replay; not --exec"),
        },
    };
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        bail!("top draws on a terminal, and stdout is not one (for a file, use `record` then `report`)");
    }
    let mut o = TopOptions::new(t);
    o.interval = Duration::from_secs_f64(a.delay);
    o.iterations = a.iterations;
    o.freq = a.freq;
    o.call_graph = a.call_graph();
    o.output = a.output.clone();
    o.stages = a.stages.clone();
    o.speed = a.speed;
    // SIGTERM and SIGHUP end top as `q` does (the forwarder stopped, the terminal
    // restored), then top exits as a process ended by that signal would report it:
    // 128 + the signal (143 for SIGTERM, 129 for SIGHUP). A terminal that went away (a
    // closed tmux session, an ssh drop) ends it as a hang-up does: 129.
    let signals = forwarder::signals::StopSignals::install()?;
    o.stop = Some(signals.flag.clone());
    let stats = tui::app::run(&o)?;
    use std::io::Write;
    let mut err = std::io::stderr();
    let _ = writeln!(err, "{}", stats.summary());
    let code = match (&stats.ended, signals.received()) {
        (tui::app::Ending::TerminalGone(why), _) => {
            let _ = writeln!(err, "fwdscope top: the terminal went away: {why}");
            128 + libc::SIGHUP
        }
        (_, Some(sig)) => {
            let _ = writeln!(err, "fwdscope top: stopped by {sig}");
            signals.exit_status().unwrap_or(130)
        }
        _ => 0,
    };
    if code != 0 {
        // Everything top started is stopped and its temporary recording removed by now.
        std::process::exit(code);
    }
    Ok(())
}
