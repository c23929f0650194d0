//! Forwarding rate for every cache mode x FIB engine x prefetch depth, in one run: the real
//! table in fixtures/ plus aggregates and a default route, 64-byte packets, 32768 flows x 10
//! packets, random destinations, one worker, the synthetic device on its own core.
//!
//! Run: `cargo bench --bench forward_grid` (FWDSCOPE_GRID_SECS per point, default 2;
//! FWDSCOPE_GRID_PREFETCH, default "0,1,2,3,4,5"; FWDSCOPE_GRID_DEVICE thread|inline).
//! Prints Mpps per point and, for rtcache, the peak entries and GC runs per slow path.

use forwarder::config::{CacheMode, Config, TableSource};
use forwarder::fib::FibKind;
use forwarder::nic::synthetic::GenMode;
use forwarder::run::Forwarder;
use fwd_abi::Ctr;
use std::path::Path;
use std::time::{Duration, Instant};

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` passes nothing useful: only run
    // when invoked as a benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let secs: f64 = std::env::var("FWDSCOPE_GRID_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let depths: Vec<fwd_abi::Prefetch> = std::env::var("FWDSCOPE_GRID_PREFETCH")
        .unwrap_or_else(|_| "0,1,2,3,4,5".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let device = match std::env::var("FWDSCOPE_GRID_DEVICE").as_deref() {
        Ok("inline") => GenMode::Inline,
        _ => GenMode::Auto,
    };
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tables/asn-ipv4-prefixes.txt.gz");
    println!("forward_grid: {secs} s per point, real table + aggregates, 64 B, 32768 flows x 10, random, 1 worker, device {device:?}");
    print!("{:>8} {:>7}", "cache", "fib");
    for d in &depths {
        print!(" {:>8}", format!("pf{d}"));
    }
    println!("   (Mpps)");
    for cache in CacheMode::ALL {
        for fib in FibKind::ALL {
            print!("{:>8} {:>7}", cache.name(), fib.name());
            let mut notes = String::new();
            for &d in &depths {
                let cfg = Config {
                    cache,
                    fib,
                    prefetch: d,
                    table: TableSource::File { path: table.clone(), aggregates: true },
                    gen_mode: device,
                    ..Config::default()
                };
                let fwd = Forwarder::start(&cfg).expect("start forwarder");
                let seg = fwd.segment().clone();
                // Let the route cache reach its steady state before measuring.
                std::thread::sleep(Duration::from_millis(300));
                let a = seg.snapshot();
                let t0 = Instant::now();
                let mut peak = 0;
                while t0.elapsed().as_secs_f64() < secs {
                    std::thread::sleep(Duration::from_millis(50));
                    peak = peak.max(seg.snapshot().total(Ctr::RtEntries));
                }
                let b = seg.snapshot();
                drop(seg);
                fwd.stop().expect("stop");
                let dt = b.at.duration_since(a.at).as_secs_f64();
                let tx = b.total(Ctr::TxPackets) - a.total(Ctr::TxPackets);
                print!(" {:>8.3}", tx as f64 / dt / 1e6);
                if cache == CacheMode::Rtcache && d == depths[0] {
                    let slow = b.total(Ctr::RtInSlowTot) - a.total(Ctr::RtInSlowTot);
                    let gc = b.total(Ctr::RtGcTotal) - a.total(Ctr::RtGcTotal);
                    notes = format!(
                        "  peak entries {peak} (max_size {}), gc/slow {:.3}, hit {:.1}%",
                        cfg.rt.max_size,
                        gc as f64 / slow.max(1) as f64,
                        100.0 * (b.total(Ctr::RtInHit) - a.total(Ctr::RtInHit)) as f64 / (tx.max(1)) as f64
                    );
                }
            }
            println!("{notes}");
        }
    }
}
