//! `fwdscope lab up|send|bench|status|down`: the network-namespace lab (the `lab` crate,
//! whose option structs are these subcommands' flags) for real-interface runs, every
//! address inside 198.18.0.0/15.

use anyhow::Result;
use lab::bench::BenchOptions;
use lab::netns::{ForwarderProgram, Lab, UpOptions};
use lab::sender::SendOptions;

#[derive(clap::Subcommand, Debug)]
pub enum LabCmd {
    /// Create the lab (or check it is complete).
    Up(UpOptions),
    /// Send traffic from the sender namespace (AF_XDP tx sockets where libxdp works, else
    /// an AF_PACKET tx ring; --via chooses).
    Send {
        #[command(flatten)]
        o: SendOptions,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Packets per second forwarded by every forwarder the lab can run (kernel, kernel-rps,
    /// xdp, dpdk-afpacket, dpdk-afxdp, fwdscope-afpacket, fwdscope-afxdp; `--forwarders`)
    /// on the same lab and routes: CPU per packet, each one's stage split from a recording,
    /// and with `--html` a page of stacked bars.
    Bench(BenchOptions),
    /// Remove the lab's namespaces (and with them its veth pairs).
    Down(NameArg),
    /// Namespaces, interfaces and their packet counters.
    Status(NameArg),
    /// The process `lab up --mode xdp` starts in the forwarding namespace: holds the XDP
    /// forwarder attached and publishes its counters until stopped.
    #[command(hide = true)]
    XdpForward(lab::xdp_forwarder::XdpForwardArgs),
}

#[derive(clap::Args, Debug)]
pub struct NameArg {
    /// Lab name: prefix of its namespaces and interfaces (1 to 8 of [a-z0-9]).
    #[arg(long, default_value = "fsl")]
    pub name: String,
}

/// This very binary running `fwdscope forward`: the lab's forwarder.
fn forwarder_program() -> Result<ForwarderProgram> {
    let (program, args) = super::record::forwarder_command(&None)?;
    Ok(ForwarderProgram { program, args })
}

pub fn run(cmd: &LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(o) => print!("{}", lab::netns::up(&UpOptions { forwarder: forwarder_program()?, ..o.clone() })?),
        LabCmd::Send { o, json } => {
            // Ctrl-C (or SIGTERM, SIGHUP) ends the sending with the count so far.
            let signals = forwarder::signals::StopSignals::install()?;
            let sent = lab::sender::send(&lab::sender::SendOptions { stop: Some(signals.flag.clone()), ..o.clone() })?;
            if *json {
                println!("{}", serde_json::to_string(&sent)?);
            } else {
                println!("{}", sent.line(&o.name));
            }
            if let Some(sig) = signals.received() {
                std::process::exit(match sig {
                    "SIGTERM" => 143,
                    "SIGHUP" => 129,
                    _ => 130,
                });
            }
            if let Some(why) = &sent.ended {
                anyhow::bail!("lab {}: sending ended early after {} packets: {why}", o.name, sent.packets);
            }
        }
        LabCmd::Bench(o) => {
            // The page's directory is checked before minutes of measuring: as root, not one
            // (or through a symlink) another user owns.
            if let Some(out) = &o.html {
                let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
                collector::outdir::check_path(dir, false).map_err(|why| {
                    anyhow::anyhow!(
                        "--html {}: {why}, and fwdscope runs as root: that user could redirect the page; choose a \
                         path in directories root owns",
                        out.display()
                    )
                })?;
            }
            // Ctrl-C (or SIGTERM, SIGHUP) ends the run in progress; the lab comes down as on
            // every other exit.
            let signals = forwarder::signals::StopSignals::install()?;
            let r = lab::bench::bench(&BenchOptions {
                forwarder: forwarder_program()?,
                stop: Some(signals.flag.clone()),
                ..o.clone()
            });
            if let Some(sig) = signals.received() {
                eprintln!("fwdscope lab bench: stopped by {sig}; lab {} taken down", o.name);
                std::process::exit(match sig {
                    "SIGTERM" => 143,
                    "SIGHUP" => 129,
                    _ => 130,
                });
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
