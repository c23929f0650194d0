//! `fwdscope metrics`' flags as clap arguments (with the `clap` feature).

/// `fwdscope metrics`' flags: which forwarder, and where to serve.
#[derive(clap::Args)]
// One of -p and --segment, and the usage line shows both: `<--pid <PID>|--segment <PATH>>`.
#[command(group(clap::ArgGroup::new("source").required(true).args(["pid", "segment"])))]
pub struct MetricsArgs {
    /// The forwarder's PID (its stats segment is found through /proc/PID/maps).
    #[arg(short = 'p', long)]
    pub pid: Option<u32>,
    /// Read this stats segment file instead of finding one by PID.
    #[arg(long, value_name = "PATH")]
    pub segment: Option<std::path::PathBuf>,
    /// Serve OpenMetrics at http://ADDR:PORT/metrics (port 0 picks a free one).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9469")]
    pub listen: String,
}
