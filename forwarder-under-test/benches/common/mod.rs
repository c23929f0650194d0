//! What the FIB benchmarks share: the real table from fixtures/ with aggregates, and one
//! stream of random addresses inside its prefixes (the same seed for every engine).

use forwarder::fib::mask;
use forwarder::table::{LoadOptions, RouteTable};
use rand::{Rng, SeedableRng};
use std::path::Path;

/// Addresses looked up per pass.
pub const STREAM: usize = 1 << 20;

/// The fixture's real table plus aggregates and a default route.
pub fn table() -> RouteTable {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tables/asn-ipv4-prefixes.txt.gz");
    let mut t = RouteTable::load(&p, &LoadOptions::default()).expect("fixture table");
    t.add_aggregates();
    t
}

/// [`STREAM`] random addresses, each inside a route of `t` picked at random (seed 7).
pub fn stream(t: &RouteTable) -> Vec<u32> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    (0..STREAM)
        .map(|_| {
            let r = t.routes[rng.gen_range(0..t.routes.len())];
            r.prefix | (rng.gen::<u32>() & !mask(r.len))
        })
        .collect()
}
