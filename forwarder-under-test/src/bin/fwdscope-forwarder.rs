//! The bundled forwarder as a standalone process (what `record -p`, `top -p` and the lab
//! attach to). Same flags and output as `fwdscope forward`.

use clap::Parser;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "fwdscope-forwarder", version, about = "fwdscope's instrumented IPv4 forwarder")]
struct Cli {
    #[command(flatten)]
    args: forwarder::cli::ForwardArgs,
}

fn main() {
    let cli = Cli::parse();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    if let Err(e) = ctrlc::set_handler(move || s2.store(true, Ordering::Relaxed)) {
        eprintln!("fwdscope-forwarder: cannot install the interrupt handler: {e}");
    }
    let mut out = std::io::stdout();
    if let Err(e) = forwarder::cli::run_forward(&cli.args, &mut out, &stop) {
        eprintln!("fwdscope-forwarder: {e}");
        std::process::exit(1);
    }
}
