//! The three engines against a reference on the real-world table shipped in fixtures/
//! (564,580 prefixes) plus covering aggregates and a default route, on two million
//! addresses: half inside random prefixes of the table, half uniform over the space.

use forwarder::fib::{reference::PerLength, Fib, FibKind};
use forwarder::table::{LoadOptions, RouteTable};
use rand::{Rng, SeedableRng};
use std::path::Path;

#[test]
fn engines_agree_with_reference_on_real_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tables/asn-ipv4-prefixes.txt.gz");
    let mut t = RouteTable::load(&path, &LoadOptions::default()).expect("fixture table");
    // 564,580 lines; one prefix appears twice (two origins), the first is kept.
    assert_eq!((t.routes.len(), t.duplicates), (564_579, 1), "fixture changed?");
    let added = t.add_aggregates();
    assert!(added > 1000, "aggregates added: {added}");
    let reference = PerLength::new(&t.routes);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(2026);
    let addrs: Vec<u32> = (0..2_000_000)
        .map(|i| {
            if i % 2 == 0 {
                let r = t.routes[rng.gen_range(0..t.routes.len())];
                r.prefix | (rng.gen::<u32>() & !forwarder::fib::mask(r.len))
            } else {
                rng.gen()
            }
        })
        .collect();
    let want: Vec<u32> = addrs.iter().map(|&a| reference.lookup(a)).collect();
    for k in FibKind::ALL {
        let f = Fib::build(k, &t.routes).expect("build");
        let mut mismatches = 0;
        for (a, w) in addrs.iter().zip(&want) {
            if f.lookup(*a) != *w {
                mismatches += 1;
            }
        }
        assert_eq!(mismatches, 0, "engine {k}");
        let mut out = vec![0; addrs.len()];
        f.lookup_batch(&addrs, &mut out, 8);
        assert!(out == want, "engine {k} batched");
    }
}
