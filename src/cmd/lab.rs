//! `fwdscope lab up|send|bench|status|down`: the network-namespace lab (the `lab` crate,
//! whose option structs are these subcommands' flags) for real-interface runs, every
//! address inside 198.18.0.0/15.

use anyhow::Result;
pub use lab::cli::LabCmd;
use lab::netns::{ForwarderProgram, Lab};

/// This very binary running `fwdscope forward`: the lab's forwarder.
fn forwarder_program() -> Result<ForwarderProgram> {
    let (program, args) = forwarder::cli::forwarder_command(None)?;
    Ok(ForwarderProgram { program, args })
}

pub fn run(cmd: &LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(o) => {
            print!("{}", lab::netns::up(&lab::netns::UpOptions { forwarder: forwarder_program()?, ..o.clone() })?)
        }
        LabCmd::Send { o, json } => {
            // Ctrl-C (or SIGTERM, SIGHUP) ends the sending with the count so far.
            let signals = forwarder::signals::StopSignals::install()?;
            let sent = lab::sender::send(&lab::sender::SendOptions { stop: Some(signals.flag.clone()), ..o.clone() })?;
            if *json {
                println!("{}", serde_json::to_string(&sent)?);
            } else {
                println!("{}", sent.line(&o.name));
            }
            if let Some(status) = signals.exit_status() {
                std::process::exit(status);
            }
            if let Some(why) = &sent.ended {
                anyhow::bail!("lab {}: sending ended early after {} packets: {why}", o.name, sent.packets);
            }
        }
        LabCmd::Bench(o) => {
            // The page's directory is checked before minutes of measuring: as root, not one
            // (or through a symlink) another user owns.
            if let Some(out) = &o.html {
                collector::output_file::check_page_path(out, &format!("--html {}", out.display()))?;
            }
            // Ctrl-C (or SIGTERM, SIGHUP) ends the run in progress; the lab comes down as on
            // every other exit.
            let signals = forwarder::signals::StopSignals::install()?;
            let r = lab::bench::bench(&lab::bench::BenchOptions {
                forwarder: forwarder_program()?,
                stop: Some(signals.flag.clone()),
                ..o.clone()
            });
            if let (Some(sig), Some(status)) = (signals.received(), signals.exit_status()) {
                eprintln!("fwdscope lab bench: stopped by {sig}; lab {} taken down", o.name);
                std::process::exit(status);
            }
            let r = r?;
            print!("{}", r.text);
            if let Some(out) = &o.html {
                // Figures, stage names and the lab's settings: nothing private (0644). A new
                // file renamed into place: a symlink planted at the name is replaced.
                collector::outdir::write_atomic(out, lab::bench_page::bench_page(&r.page).as_bytes(), 0o644)
                    .map_err(|e| anyhow::anyhow!("--html {}: {e}", out.display()))?;
                println!("wrote {}", out.display());
            }
        }
        LabCmd::Down(n) => {
            let lab = Lab::new(&n.name)?;
            // Nothing of the lab is left, its lock file neither.
            let removed = lab.down_and_unlock()?;
            println!("lab {}: down ({} namespaces removed)", lab.name, removed);
        }
        LabCmd::Status(n) => print!("{}", Lab::new(&n.name)?.status()?),
        LabCmd::XdpForward(a) => {
            // SIGTERM (lab down), SIGINT or SIGHUP: detach and exit.
            let signals = forwarder::signals::StopSignals::install()?;
            let site = Lab::new(&a.name)?.xdp_site();
            println!("{}", lab::xdp_forwarder::run(a, &site, &signals.flag)?);
        }
    }
    Ok(())
}
