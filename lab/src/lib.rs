//! fwdscope's network-namespace lab, for runs on real interfaces without a real network:
//! [`netns`] builds and removes three namespaces joined by veth pairs (every address in
//! 198.18.0.0/15, the sink owning the range) and forwards between them with the kernel or
//! the bundled forwarder over AF_PACKET; [`sender`] transmits the bundled traffic
//! generator's frames from the sender namespace; [`bench`] measures every forwarder the lab
//! can run (the kernel, XDP, DPDK's l3fwd, the bundled forwarder) on the same lab, and
//! [`bench_page`] draws it (`--html`: ns per packet by stage per forwarder, the table, the
//! provenance); [`dpdk`] runs DPDK's l3fwd as the lab's forwarder (`--mode dpdk`), built
//! from the distribution's example source at first use; [`xdp`] and [`xdp_forwarder`] are fwdscope's XDP forwarder (`lab up --mode xdp`): the program's
//! loader and the process that holds it and publishes its counters; [`cli`] holds the
//! `lab` subcommands' flags; [`watch`] says what observing a lab means (`top --lab`).

pub mod bench;
pub mod bench_page;
pub mod cli;
pub mod dpdk;
mod error;
pub mod netns;
mod process;
pub mod sender;
pub mod watch;
pub mod xdp;
pub mod xdp_forwarder;

pub use error::{Error, Result};
pub use netns::{Lab, Mode, Sink};
