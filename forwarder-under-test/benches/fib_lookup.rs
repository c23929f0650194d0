//! FIB lookups per second: the three engines (single and batched with prefetch) beside the
//! crates `poptrie` and `prefix-trie`, on the real table in fixtures/ plus aggregates and a
//! default route, all fed the same stream of random addresses inside the table's prefixes.
//! Build times are printed before the measurements. Run: `cargo bench --bench fib_lookup`.
//! FWDSCOPE_BENCH_SKIP_POPTRIE=1 skips poptrie (its build takes tens of seconds).

mod common;

use common::{stream, table, STREAM};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use forwarder::fib::{Fib, FibKind};
use std::time::Instant;

fn bench(c: &mut Criterion) {
    let t = table();
    let addrs = stream(&t);
    println!("table: {} routes ({} aggregates added)", t.routes.len(), t.aggregates_added);
    let mut engines = Vec::new();
    for k in FibKind::ALL {
        let t0 = Instant::now();
        let f = Fib::build(k, &t.routes).expect("build");
        println!(
            "build {k:>7}: {:>8.1} ms, {:>6.1} MiB",
            t0.elapsed().as_secs_f64() * 1e3,
            f.memory_bytes() as f64 / 1048576.0
        );
        engines.push(f);
    }
    let t0 = Instant::now();
    let mut pt = prefix_trie::PrefixMap::<ipnet::Ipv4Net, u32>::new();
    for r in &t.routes {
        pt.insert(ipnet::Ipv4Net::new(r.prefix.into(), r.len).expect("valid prefix"), r.nh);
    }
    println!("build prefix-trie: {:>8.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    let pop = if std::env::var_os("FWDSCOPE_BENCH_SKIP_POPTRIE").is_none() {
        let t0 = Instant::now();
        let p: poptrie::Poptrie<(u32, u8), u32> = t.routes.iter().map(|r| ((r.prefix, r.len), r.nh)).collect();
        println!("build poptrie: {:>8.1} ms", t0.elapsed().as_secs_f64() * 1e3);
        Some(p)
    } else {
        None
    };
    // Every implementation must agree before it is timed.
    for &a in addrs.iter().take(100_000) {
        let want = engines[0].lookup(a);
        for f in &engines {
            assert_eq!(f.lookup(a), want);
        }
        let lpm = pt.get_lpm(&ipnet::Ipv4Net::new(a.into(), 32).expect("host")).map_or(u32::MAX, |(_, v)| *v);
        assert_eq!(lpm, want);
        if let Some(p) = &pop {
            assert_eq!(p.lookup(a).copied().unwrap_or(u32::MAX), want);
        }
    }

    let mut g = c.benchmark_group("fib_lookup");
    g.throughput(Throughput::Elements(STREAM as u64));
    g.sample_size(10);
    for f in &engines {
        g.bench_function(BenchmarkId::new("single", f.kind().name()), |b| {
            b.iter(|| {
                let mut x = 0u32;
                for &a in &addrs {
                    x = x.wrapping_add(f.lookup(a));
                }
                black_box(x)
            })
        });
        let mut out = vec![0u32; STREAM];
        for depth in [4usize, 8, 16] {
            g.bench_function(BenchmarkId::new(format!("batch_prefetch{depth}"), f.kind().name()), |b| {
                b.iter(|| {
                    f.lookup_batch(&addrs, &mut out, depth);
                    black_box(out[STREAM - 1])
                })
            });
        }
    }
    g.finish();
    // The crates are slower: time them on an eighth of the same stream.
    let mut g = c.benchmark_group("fib_lookup_crates");
    g.throughput(Throughput::Elements((STREAM / 8) as u64));
    g.sample_size(10);
    g.bench_function("prefix-trie", |b| {
        b.iter(|| {
            let mut x = 0u32;
            for &a in &addrs[..STREAM / 8] {
                let k = ipnet::Ipv4Net::new(a.into(), 32).expect("host");
                x = x.wrapping_add(pt.get_lpm(&k).map_or(0, |(_, v)| *v));
            }
            black_box(x)
        })
    });
    if let Some(p) = &pop {
        g.bench_function("poptrie", |b| {
            b.iter(|| {
                let mut x = 0u32;
                for &a in &addrs[..STREAM / 8] {
                    x = x.wrapping_add(p.lookup(a).copied().unwrap_or(0));
                }
                black_box(x)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
