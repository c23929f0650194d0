//! `fwdscope lab`'s subcommands as clap arguments: each one's flags are the option struct
//! of the module that does the work.

/// `fwdscope lab`'s subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum LabCmd {
    /// Create the lab (or check it is complete).
    Up(crate::netns::UpOptions),
    /// Send traffic from the sender namespace (AF_XDP tx sockets where libxdp works, else
    /// an AF_PACKET tx ring; --via chooses).
    Send {
        #[command(flatten)]
        o: crate::sender::SendOptions,
        /// Print the result as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Packets per second forwarded by every forwarder the lab can run (kernel, kernel-rps,
    /// xdp, dpdk-afpacket, dpdk-afxdp, fwdscope-afpacket, fwdscope-afxdp; `--forwarders`)
    /// on the same lab and routes: CPU per packet, each one's stage split from a recording,
    /// and with `--html` a page of stacked bars.
    Bench(crate::bench::BenchOptions),
    /// Remove the lab's namespaces (and with them its veth pairs).
    Down(NameArg),
    /// Namespaces, interfaces and their packet counters.
    Status(NameArg),
    /// The process `lab up --mode xdp` starts in the forwarding namespace: holds the XDP
    /// forwarder attached and publishes its counters until stopped.
    #[command(hide = true)]
    XdpForward(crate::xdp_forwarder::XdpForwardArgs),
}

/// The lab a subcommand acts on.
#[derive(clap::Args, Debug)]
pub struct NameArg {
    /// Lab name: prefix of its namespaces and interfaces (1 to 8 of [a-z0-9]).
    #[arg(long, default_value = "fsl")]
    pub name: String,
}
