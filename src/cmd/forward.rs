//! `fwdscope forward`: run the bundled forwarder until --duration, Ctrl-C, SIGTERM or SIGHUP.

use anyhow::Result;

pub fn run(args: &forwarder::cli::ForwardArgs) -> Result<()> {
    let stop = forwarder::signals::StopSignals::install()?;
    let mut out = std::io::stdout().lock();
    forwarder::cli::run_forward(args, &mut out, &stop.flag)?;
    Ok(())
}
