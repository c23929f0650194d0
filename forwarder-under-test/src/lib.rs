//! fwdscope's bundled forwarder under test: a real, instrumented IPv4 forwarding path.
//!
//! Per burst the stages run in order, each in its own module under [`stages`], each entered
//! through `#[no_mangle]`, `#[inline(never)]` functions named `fwd_<stage>_...` so that a
//! sampled instruction pointer says its stage (see `stages.toml`, the published
//! symbol-to-stage map):
//!
//! 1. driver rx ([`stages::driver_rx`]): take descriptors from the rx ring, refill it.
//! 2. ip ([`stages::ip`]): validate Ethernet and IPv4 headers, drop with a counted reason,
//!    decrement TTL with an incremental checksum update.
//! 3. lookup ([`stages::lookup`]): route cache ([`rtcache`]), no cache, or next-hop cache,
//!    over a FIB engine ([`fib`]).
//! 4. gc ([`rtcache::gc`]): route-cache garbage collection, triggered as Linux triggered it.
//! 5. slab ([`slab`]): packet buffers and dst entries from slab caches with per-worker
//!    magazines.
//! 6. driver tx ([`stages::driver_tx`]): rewrite MACs, place on the tx ring, reclaim.
//!
//! The types a burst's stages share are in [`burst`], CPU hints and the TSC in [`cpu`] (both
//! leaves); packet I/O is the synthetic NIC and the AF_PACKET driver in [`nic`]; traffic
//! profiles in [`traffic`]; tables in [`table`]; the worker burst loop in [`worker`];
//! running a whole forwarder in [`run`]. What observers see (the stats segment, counter
//! names, the control block, the symbol-to-stage map) is the `fwd-abi` crate's.

pub mod burst;
pub mod cli;
pub mod config;
pub mod cpu;
pub mod error;
pub mod fib;
pub mod nic;
pub mod packet;
pub mod report;
pub mod rtcache;
pub mod run;
pub mod signals;
pub mod slab;
pub mod stages;
pub mod table;
pub mod traffic;
pub mod worker;

pub use error::{Error, Result};

/// The symbol-to-stage map of this forwarder, as published for the analyzer.
pub use fwd_abi::STAGE_MAP_TOML;
