//! `fwdscope forward`: run the bundled forwarder until --duration, Ctrl-C, SIGTERM or SIGHUP,
//! optionally serving its counters to Prometheus (`--metrics`).

use anyhow::Result;

#[derive(clap::Args)]
pub struct ForwardCmd {
    #[command(flatten)]
    pub args: forwarder::cli::ForwardArgs,
    /// Serve the counters as OpenMetrics at http://ADDR:PORT/metrics while forwarding
    /// (port 0 picks a free one; the address is printed on stderr). Default: not served.
    #[arg(help_heading = "Stats and output", long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

pub fn run(cmd: &ForwardCmd) -> Result<()> {
    let stop = forwarder::signals::StopSignals::install()?;
    let mut out = std::io::stdout().lock();
    let listen = cmd.metrics.clone();
    let mut start_exporter = |info: &forwarder::run::RunInfo| -> std::result::Result<Box<dyn std::any::Any>, String> {
        let Some(listen) = &listen else { return Ok(Box::new(())) };
        let source =
            exporter::SegmentSource::open(std::path::Path::new(&info.stats_path)).map_err(|e| e.to_string())?;
        let ex = exporter::Exporter::start(listen, source).map_err(|e| e.to_string())?;
        eprintln!("fwdscope forward: metrics at {} (OpenMetrics, from stats segment {})", ex.url(), info.stats_path);
        Ok(Box::new(ex))
    };
    forwarder::cli::run_forward_with(&cmd.args, &mut out, &stop.flag, &mut start_exporter)?;
    Ok(())
}
