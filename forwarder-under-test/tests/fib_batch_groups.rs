//! Batched lookups in the group sizes a forwarder and the fib_vs_dpdk benchmark use (1 to
//! 33 addresses, with 0, 4, the whole group and more prefetched ahead) give the naive
//! reference's answer, on a table whose /24s mix plain entries, tbl8 groups and holes, for
//! every engine.

use forwarder::fib::{mask, normalize, reference, Fib, FibKind, Route};
use rand::{Rng, SeedableRng};

fn table() -> Vec<Route> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
    let mut routes: Vec<Route> = (0..3000)
        .map(|i| {
            // Mostly 10.0.0.0/12, so /25-/32 land in /24s that shorter routes also cover.
            let top = if i % 4 == 0 { rng.gen::<u32>() } else { 0x0a00_0000 | (rng.gen::<u32>() >> 12) };
            Route::new(top, rng.gen_range(8..=32), rng.gen_range(0..1_000_000))
        })
        .collect();
    routes.push(Route::new(0x0a00_0000, 9, 7));
    normalize(&mut routes);
    routes
}

#[test]
fn small_groups_match_reference() {
    let routes = table();
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(12);
    let addrs: Vec<u32> = (0..20_000)
        .map(|i| match i % 3 {
            0 => rng.gen(),
            1 => 0x0a00_0000 | (rng.gen::<u32>() >> 12),
            _ => {
                let r = routes[rng.gen_range(0..routes.len())];
                r.prefix | (rng.gen::<u32>() & !mask(r.len))
            }
        })
        .collect();
    let want: Vec<u32> = addrs.iter().map(|&a| reference::lookup(&routes, a)).collect();
    for k in FibKind::ALL {
        let f = Fib::build(k, &routes).expect("build");
        for (i, &a) in addrs.iter().enumerate() {
            assert_eq!(f.lookup(a), want[i], "{k} single {a:#010x}");
        }
        for chunk in 1..=33 {
            for depth in [0, 4, chunk, 64] {
                let mut out = vec![u32::MAX - 1; addrs.len()];
                for (a, o) in addrs.chunks(chunk).zip(out.chunks_mut(chunk)) {
                    f.lookup_batch(a, o, depth);
                }
                assert!(out == want, "{k}: groups of {chunk}, depth {depth}");
            }
        }
        // A longer `out` than `addrs` keeps its tail; a shorter one bounds the batch.
        let mut out = vec![5u32; 8];
        f.lookup_batch(&addrs[..4], &mut out, 4);
        assert_eq!((&out[..4], &out[4..]), (&want[..4], &[5u32; 4][..]), "{k}");
        let mut out = vec![5u32; 3];
        f.lookup_batch(&addrs[..4], &mut out, 4);
        assert_eq!(out, want[..3], "{k}");
        // dir24's inline lookups (what a program embedding the engine calls).
        if let Fib::Dir24(d) = &f {
            for (i, &a) in addrs.iter().enumerate() {
                assert_eq!(d.lookup(a), want[i], "dir24 inline {a:#010x}");
            }
            let (groups, _) = addrs.as_chunks::<4>();
            for (g, w) in groups.iter().zip(want.as_chunks::<4>().0) {
                let mut out = [0u32; 4];
                d.lookup_group(g, &mut out);
                assert_eq!(&out, w, "dir24 lookup_group of {g:08x?}");
            }
        }
    }
}
