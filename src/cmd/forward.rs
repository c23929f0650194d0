//! `fwdscope forward`: run the bundled forwarder until --duration or Ctrl-C.

use anyhow::Result;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub fn run(args: &forwarder::cli::ForwardArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    ctrlc::set_handler(move || s2.store(true, Ordering::Relaxed))?;
    let mut out = std::io::stdout().lock();
    forwarder::cli::run_forward(args, &mut out, &stop)?;
    Ok(())
}
