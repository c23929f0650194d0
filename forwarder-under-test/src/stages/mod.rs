//! The forwarding stages, one module each, in burst order (the types they share are in [`crate::burst`]). Every entry function is
//! `#[no_mangle]` and `#[inline(never)]` with a name `fwd_<stage>_...`; `stages.toml` (published
//! by the `fwd-abi` crate) maps those names to stages for the analyzer. Slab entry points live in
//! [`crate::slab`] (`fwd_slab_*`), the synthetic device in [`crate::nic::synthetic`]
//! (`fwd_nic_*`), FIB engines in [`crate::fib`] (`fwd_lookup_fib_*`), the route cache in
//! [`crate::rtcache`] (`fwd_lookup_rtcache_*`) and its garbage collector, stage gc, beside it
//! in [`crate::rtcache::gc`] (`fwd_gc_*`).

pub mod calib;
pub mod driver_rx;
pub mod driver_tx;
pub mod idle;
pub mod ip;
pub mod lookup;
