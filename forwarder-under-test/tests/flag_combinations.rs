//! Every combination of the forwarder's size and route-cache flags either is refused with a
//! message naming a flag, or yields tunables that keep their promises: a cache that fills
//! past gc_thresh runs GC, never holds more than max_size, and never overflows while GC
//! could still have made room.

use clap::Parser;
use forwarder::cli::ForwarderArgs;
use forwarder::config::{MAX_CACHE_ENTRIES, MAX_HASH_BUCKETS};
use forwarder::run::standalone_worker;
use forwarder::table::RouteTable;
use fwd_abi::Ctr;
use proptest::prelude::*;

#[derive(Parser, Debug)]
struct Cmd {
    #[command(flatten)]
    fwd: ForwarderArgs,
}

/// A flag value from the ranges a careless user reaches for: zero, small, typical, huge.
fn size_value() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 1u64..64, 64u64..70_000, Just(1u64 << 24), Just(1u64 << 40), Just(u64::MAX),]
}

fn argv(flags: &[(&str, u64)]) -> Vec<String> {
    let mut v = vec!["forward".to_string()];
    for (f, n) in flags {
        v.push((*f).to_string());
        v.push(n.to_string());
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_size_flag_combination_is_refused_or_consistent(
        buckets in size_value(),
        thresh in prop::option::of(size_value()),
        max_size in prop::option::of(size_value()),
        elasticity in size_value(),
        flows in size_value(),
        routes in size_value(),
        nexthops in size_value(),
        min_interval in size_value(),
        timeout in size_value(),
    ) {
        let mut flags = vec![
            ("--rt-hash-buckets", buckets),
            ("--gc-elasticity", elasticity),
            ("--flows", flows),
            ("--routes", routes),
            ("--nexthops", nexthops),
            ("--gc-min-interval-ms", min_interval),
            ("--gc-timeout", timeout),
        ];
        if let Some(t) = thresh { flags.push(("--gc-thresh", t)); }
        if let Some(m) = max_size { flags.push(("--max-size", m)); }
        let args = argv(&flags);
        let cmd = match Cmd::try_parse_from(&args) {
            Ok(c) => c,
            // Refused by the parser (out of the type's range): clap names the flag.
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains("--"), "parser error names no flag: {msg}");
                return Ok(());
            }
        };
        match cmd.fwd.to_config() {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains("--"), "refusal names no flag: {msg}");
            }
            Ok(cfg) => {
                let rt = &cfg.rt;
                prop_assert!(rt.hash_buckets.is_power_of_two() && rt.hash_buckets <= MAX_HASH_BUCKETS);
                prop_assert!(rt.gc_thresh < rt.max_size, "gc_thresh {} max_size {}", rt.gc_thresh, rt.max_size);
                prop_assert!(rt.max_size <= MAX_CACHE_ENTRIES);
                if max_size.is_none() {
                    prop_assert_eq!(rt.max_size, (rt.hash_buckets * 16).min(MAX_CACHE_ENTRIES));
                }
                if thresh.is_none() {
                    prop_assert_eq!(rt.gc_thresh, rt.hash_buckets);
                }
                // The memory estimate never wraps: it grows with every part.
                let total: u64 = forwarder::run::memory_estimate(&cfg).iter().map(|(_, b)| *b).fold(0, u64::saturating_add);
                prop_assert!(total > 0);
            }
        }
    }
}

/// The run-time promise behind the rule gc_thresh < max_size: with any accepted small
/// tunables, a random-destination flood drives GC once the cache passes gc_thresh, and the
/// cache never passes max_size.
#[test]
fn accepted_tunables_gc_under_a_flood() {
    let table = RouteTable::generate(5_000, 16, 9);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 24, ..ProptestConfig::default() });
    let strategy = (4u32..12, prop::option::of(1usize..3000), prop::option::of(2usize..6000), 1usize..16);
    runner
        .run(&strategy, |(log_buckets, thresh, max_size, elasticity)| {
            let buckets = 1usize << log_buckets;
            let mut flags = vec![
                ("--rt-hash-buckets", buckets as u64),
                ("--gc-elasticity", elasticity as u64),
                ("--flows", 4096),
                ("--pkts-per-flow", 1),
                ("--gc-min-interval-ms", 0),
            ];
            if let Some(t) = thresh {
                flags.push(("--gc-thresh", t as u64));
            }
            if let Some(m) = max_size {
                flags.push(("--max-size", m as u64));
            }
            let cmd = Cmd::try_parse_from(argv(&flags)).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let Ok(cfg) = cmd.fwd.to_config() else { return Ok(()) };
            let mut w = standalone_worker(&cfg, &table).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut peak = 0;
            for _ in 0..400 {
                w.poll();
                peak = peak.max(w.rt.entries);
            }
            w.fill_counters();
            prop_assert!(peak <= cfg.rt.max_size, "peak {peak} > max_size {}", cfg.rt.max_size);
            if peak > cfg.rt.gc_thresh {
                prop_assert!(
                    w.ctr[Ctr::RtGcTotal as usize] > 0,
                    "past gc_thresh {} but GC never ran",
                    cfg.rt.gc_thresh
                );
            }
            let forwarded = w.ctr[Ctr::TxPackets as usize] as f64;
            let no_dst = w.ctr[Ctr::DropNoDst as usize] as f64;
            prop_assert!(no_dst < 0.5 * (forwarded + no_dst), "{no_dst} no_dst drops against {forwarded} forwarded");
            Ok(())
        })
        .unwrap();
}
