//! The bundled forwarder as a standalone process (what `record -p`, `top -p` and the lab
//! attach to). Same flags and output as `fwdscope forward`.

use clap::Parser;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "fwdscope-forwarder",
    version,
    about = "fwdscope's instrumented IPv4 forwarder",
    args_override_self = true
)]
struct Cli {
    #[command(flatten)]
    args: forwarder::cli::ForwardArgs,
}

fn main() {
    let cli = Cli::parse();
    let stop = match forwarder::signals::StopSignals::install() {
        Ok(s) => s.flag,
        Err(e) => {
            eprintln!("fwdscope-forwarder: {e}");
            Arc::new(AtomicBool::new(false))
        }
    };
    let mut out = std::io::stdout();
    if let Err(e) = forwarder::cli::run_forward(&cli.args, &mut out, &stop) {
        // A reader that closed our output ends us quietly; the forwarder is stopped.
        if matches!(&e, forwarder::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe) {
            std::process::exit(0);
        }
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "fwdscope-forwarder: {e}");
        std::process::exit(1);
    }
}
