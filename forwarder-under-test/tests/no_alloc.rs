//! The per-packet path makes no system allocation: a counting global allocator sees none
//! while a warmed-up worker forwards thousands of packets in every cache mode.

use forwarder::config::{CacheMode, Config};
use forwarder::fib::FibKind;
use forwarder::run::standalone_worker;
use forwarder::table::RouteTable;
use forwarder::traffic::TrafficProfile;
use fwd_abi::Ctr;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Counting;
static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn per_packet_path_does_not_allocate() {
    let table = RouteTable::generate(5000, 8, 9);
    for cache in CacheMode::ALL {
        let cfg = Config {
            cache,
            fib: FibKind::Hash,
            prefetch: fwd_abi::Prefetch::new(4).expect("depth"),
            stage_clock: true,
            traffic: TrafficProfile { flows: 4096, pkts_per_flow: 2, ..Default::default() },
            rx_ring: 256,
            tx_ring: 256,
            rt: forwarder::config::RtParams { hash_buckets: 64, gc_thresh: 64, max_size: 1024, ..Default::default() },
            ..Config::default()
        };
        let mut w = standalone_worker(&cfg, &table).unwrap();
        for _ in 0..100 {
            w.poll();
        }
        ALLOCS.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        for _ in 0..2000 {
            w.poll();
        }
        COUNTING.store(false, Ordering::Relaxed);
        w.fill_counters();
        assert!(w.ctr[Ctr::TxPackets as usize] > 30_000, "{cache}: {}", w.ctr[Ctr::TxPackets as usize]);
        assert_eq!(ALLOCS.load(Ordering::Relaxed), 0, "{cache}: allocations on the packet path");
    }
}
