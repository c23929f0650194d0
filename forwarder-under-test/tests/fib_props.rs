//! Property tests: every FIB engine gives the naive reference LPM's answer on random nested
//! tables from /0 to /32, for random addresses and for the edges of every prefix.

use forwarder::fib::{mask, normalize, reference, Fib, FibKind, Route};
use proptest::prelude::*;

fn route_strategy() -> impl Strategy<Value = Route> {
    // Bias towards a few top bits so prefixes nest and collide.
    (0u32..16, any::<u32>(), 0u8..=32, 0u32..1000)
        .prop_map(|(top, low, len, nh)| Route::new((top << 28) | (low >> 4), len, nh))
}

fn check(routes: &mut Vec<Route>, addrs: &[u32]) -> Result<(), TestCaseError> {
    normalize(routes);
    let fibs: Vec<Fib> = FibKind::ALL.iter().map(|&k| Fib::build(k, routes).unwrap()).collect();
    let mut probes: Vec<u32> = addrs.to_vec();
    for r in routes.iter() {
        let last = r.prefix | !mask(r.len);
        probes.extend([r.prefix, last, r.prefix.wrapping_sub(1), last.wrapping_add(1)]);
    }
    for &a in &probes {
        let want = reference::lookup(routes, a);
        for f in &fibs {
            prop_assert_eq!(f.lookup(a), want, "engine {} addr {:#010x}", f.kind(), a);
        }
    }
    // Batched lookups agree with single ones at every prefetch depth.
    for f in &fibs {
        for depth in [0, 1, 3, 8] {
            let mut out = vec![0; probes.len()];
            f.lookup_batch(&probes, &mut out, depth);
            for (i, &a) in probes.iter().enumerate() {
                prop_assert_eq!(out[i], reference::lookup(routes, a));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn engines_match_reference(mut routes in prop::collection::vec(route_strategy(), 0..200),
                               addrs in prop::collection::vec(any::<u32>(), 200)) {
        check(&mut routes, &addrs)?;
    }

    #[test]
    fn engines_match_reference_dense(mut routes in prop::collection::vec(
            (any::<u16>(), 16u8..=32, 0u32..50).prop_map(|(x, len, nh)| Route::new(0x0a00_0000 | (u32::from(x) << 8) | u32::from(x & 0xff), len, nh)), 1..400),
            addrs in prop::collection::vec(0x0a00_0000u32..0x0a01_0000, 300)) {
        check(&mut routes, &addrs)?;
    }

    #[test]
    fn per_length_reference_matches_naive(mut routes in prop::collection::vec(route_strategy(), 0..100),
                                          addrs in prop::collection::vec(any::<u32>(), 100)) {
        normalize(&mut routes);
        let p = reference::PerLength::new(&routes);
        for a in addrs {
            prop_assert_eq!(p.lookup(a), reference::lookup(&routes, a));
        }
    }
}

#[test]
fn edge_tables() {
    let cases: Vec<Vec<Route>> = vec![
        vec![],
        vec![Route::new(0, 0, 1)],
        vec![Route::new(u32::MAX, 32, 2)],
        vec![Route::new(0, 0, 1), Route::new(0, 1, 2), Route::new(0x8000_0000, 1, 3)],
        (0..=32).map(|l| Route::new(0xC612_0401, l, u32::from(l))).collect(),
        vec![Route::new(0xC612_0400, 24, 5), Route::new(0xC612_0480, 25, 6), Route::new(0xc612_04ff, 32, 7)],
    ];
    for mut routes in cases {
        normalize(&mut routes);
        let addrs: Vec<u32> = vec![
            0,
            1,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX,
            0xC612_0400,
            0xC612_0401,
            0xc612_047f,
            0xC612_0480,
            0xc612_04fe,
            0xc612_04ff,
            0xC612_0500,
        ];
        for k in FibKind::ALL {
            let f = Fib::build(k, &routes).unwrap();
            for &a in &addrs {
                assert_eq!(f.lookup(a), reference::lookup(&routes, a), "{k} {a:#x} {routes:?}");
            }
        }
    }
}
