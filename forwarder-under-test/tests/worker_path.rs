//! The whole burst loop, driven on this thread: every forwarded frame is checked against an
//! independent expectation (the naive reference LPM, the synthetic neighbour table, TTL and
//! checksum), every malformed frame is dropped with its reason, and no packet is lost.

use forwarder::config::{CacheMode, Config};
use forwarder::fib::{reference, FibKind, NO_ROUTE};
use forwarder::nic::{RxDevice, RxRing};
use forwarder::packet::{self, checksum, get_u32, mac_for, off, port_mac, FlowKey};
use forwarder::run::standalone_worker;
use forwarder::table::RouteTable;
use forwarder::traffic::TrafficProfile;
use fwd_abi::Ctr;

fn config(cache: CacheMode, fib: FibKind, prefetch: u64) -> Config {
    Config {
        cache,
        fib,
        prefetch: fwd_abi::Prefetch::new(prefetch).expect("a depth 0..=8"),
        traffic: TrafficProfile { flows: 512, pkts_per_flow: 4, ..Default::default() },
        rx_ring: 256,
        tx_ring: 256,
        ..Config::default()
    }
}

#[test]
fn every_forwarded_frame_matches_reference_in_every_mode() {
    let table = RouteTable::generate(3000, 8, 42);
    for cache in CacheMode::ALL {
        for fib in FibKind::ALL {
            let cfg = config(cache, fib, 3);
            let mut w = standalone_worker(&cfg, &table).unwrap();
            let mut frames = Vec::new();
            for _ in 0..200 {
                if w.poll() > 0 {
                    frames.extend(w.last_sent());
                }
            }
            w.fill_counters();
            assert!(frames.len() > 3000, "{cache} {fib}: only {} frames", frames.len());
            for f in &frames {
                assert_eq!(checksum(&f[14..34]), 0, "checksum after TTL decrement");
                assert_eq!(f[off::TTL], 63);
                let d = get_u32(f, off::DADDR);
                let nh = reference::lookup(&table.routes, d);
                assert_ne!(nh, NO_ROUTE);
                let gw = u32::from(table.nexthops[nh as usize].gateway);
                assert_eq!(&f[0..6], &mac_for(gw), "{cache} {fib}: next hop for {d:#x}");
                assert_eq!(&f[6..12], &port_mac(table.nexthops[nh as usize].port));
            }
            let c = &w.ctr;
            let drops: u64 = fwd_abi::drop_counters().filter(|(_, n)| *n != "rx_missed").map(|(i, _)| c[i]).sum();
            assert_eq!(c[Ctr::RxPackets as usize], c[Ctr::TxPackets as usize] + drops, "{cache} {fib}: packets lost");
            assert_eq!(c[Ctr::TxPackets as usize], frames.len() as u64);
            match cache {
                CacheMode::Rtcache => {
                    assert!(c[Ctr::RtInHit as usize] > 0 && c[Ctr::RtInSlowTot as usize] > 0);
                    assert_eq!(
                        c[Ctr::RtInHit as usize] + c[Ctr::RtInSlowTot as usize],
                        c[Ctr::RxPackets as usize] - c[Ctr::DropMartianDst as usize] - c[Ctr::DropMartianSrc as usize]
                    );
                }
                _ => assert_eq!(c[Ctr::RtInHit as usize], 0),
            }
            if cache == CacheMode::Nocache {
                // One dst per packet, all returned.
                assert_eq!(c[Ctr::SlabDstAlloc as usize], c[Ctr::SlabDstFree as usize]);
                assert!(c[Ctr::SlabDstAlloc as usize] >= c[Ctr::TxPackets as usize]);
            }
        }
    }
}

/// A device that writes hand-made frames into the worker's ring.
fn inject(ring: &std::sync::Arc<RxRing>, dev: &mut RxDevice, arena: &forwarder::nic::BufferArena, frame: &[u8]) {
    let b = dev.posted(0).expect("posted buffer");
    // SAFETY: the test is the device: a posted buffer is its own until completed.
    let buf = unsafe { arena.buf_mut(b) };
    buf[..frame.len()].copy_from_slice(frame);
    dev.complete(b, frame.len() as u16);
    let _ = ring;
}

#[test]
fn malformed_frames_are_dropped_by_reason_through_the_worker() {
    use forwarder::config::RtParams;
    use forwarder::fib::{Fib, Route};
    use forwarder::nic::synthetic::DeviceStats;
    use forwarder::nic::BufferArena;
    use forwarder::slab::{Depot, SlabCache};
    use forwarder::table::{NextHop, RouteTable};
    use std::sync::Arc;

    let mut table = RouteTable::generate(10, 1, 1);
    table.routes = vec![Route::new(0x0a00_0000, 8, 0)];
    table.nexthops = vec![NextHop { gateway: "198.19.0.1".parse().unwrap(), port: 0, dev: "port0".into() }];
    let cfg = Config { rx_ring: 64, tx_ring: 64, rt: RtParams::default(), ..Config::default() };
    let fib = Arc::new(Fib::build(FibKind::Lctrie, &table.routes).unwrap());
    let arena = Arc::new(BufferArena::new(512).unwrap());
    let ring = Arc::new(RxRing::new(64));
    let mut w = forwarder::worker::Worker::new(
        0,
        &cfg,
        fib,
        forwarder::run::resolve_nexthops(&table),
        arena.clone(),
        SlabCache::new(Depot::new("pktbuf", 512, 16, 1)),
        ring.clone(),
        None,
        Arc::new(DeviceStats::default()),
        None,
    );
    let mut dev = RxDevice { ring: ring.clone(), filled: 0 };
    let good = |d: u32, s: u32, ttl: u8| {
        let mut f = vec![0u8; 60];
        packet::build_frame(
            &mut f,
            &FlowKey { saddr: s, daddr: d, sport: 1, dport: 2, tos: 0 },
            60,
            ttl,
            [0; 6],
            [0; 6],
        );
        f
    };
    let fix_csum = |f: &mut Vec<u8>, ihl: usize| {
        packet::put_u16(f, off::CSUM, 0);
        let c = checksum(&f[14..14 + ihl]);
        packet::put_u16(f, off::CSUM, c);
    };
    let src = 0xC612_0001;
    let mut cases: Vec<(Vec<u8>, Ctr)> = Vec::new();
    cases.push((good(0x0a01_0203, src, 64)[..20].to_vec(), Ctr::DropRunt));
    let mut f = good(0x0a01_0203, src, 64);
    f[12] = 0x08;
    f[13] = 0x06;
    cases.push((f, Ctr::DropNotIpv4));
    let mut f = good(0x0a01_0203, src, 64);
    f[14] = 0x65;
    cases.push((f, Ctr::DropBadVersion));
    let mut f = good(0x0a01_0203, src, 64);
    f[14] = 0x43;
    cases.push((f, Ctr::DropBadIhl));
    let mut f = good(0x0a01_0203, src, 64);
    f[off::CSUM] ^= 0x55;
    cases.push((f, Ctr::DropBadChecksum));
    let mut f = good(0x0a01_0203, src, 64);
    packet::put_u16(&mut f, off::TOT_LEN, 19);
    fix_csum(&mut f, 20);
    cases.push((f, Ctr::DropBadTotalLength));
    let mut f = good(0x0a01_0203, src, 64);
    f[14] = 0x46;
    fix_csum(&mut f, 24);
    cases.push((f, Ctr::DropIpOptions));
    cases.push((good(0x0a01_0203, src, 1), Ctr::DropTtlExceeded));
    cases.push((good(0x0a01_0203, 0x7f00_0001, 64), Ctr::DropMartianSrc));
    cases.push((good(0x7f00_0001, src, 64), Ctr::DropMartianDst));
    cases.push((good(0xe000_0001, src, 64), Ctr::DropMulticast));
    cases.push((good(0xffff_ffff, src, 64), Ctr::DropBroadcast));
    cases.push((good(0x0b00_0001, src, 64), Ctr::DropNoRoute));
    let ok = good(0x0a01_0203, src, 64);
    for (frame, _) in &cases {
        inject(&ring, &mut dev, &arena, frame);
        inject(&ring, &mut dev, &arena, &ok);
    }
    while w.poll() > 0 {}
    w.fill_counters();
    for (_, reason) in &cases {
        assert_eq!(w.ctr[*reason as usize], 1, "{reason:?}");
    }
    assert_eq!(w.ctr[Ctr::RxPackets as usize], 2 * cases.len() as u64);
    assert_eq!(w.ctr[Ctr::TxPackets as usize], cases.len() as u64);
    assert_eq!(w.ctr[Ctr::RtInNoRoute as usize], 1);
    assert_eq!(w.ctr[Ctr::RtInSlowMc as usize], 1);
    assert_eq!(w.ctr[Ctr::RtInBrd as usize], 1);
    // Every buffer is accounted for: 64 posted on the rx ring, and the 13 forwarded frames
    // still on the tx ring (reclaimed on the next tx burst); every dropped one was freed.
    assert_eq!(w.ctr[Ctr::SlabBufAlloc as usize] - w.ctr[Ctr::SlabBufFree as usize], 64 + cases.len() as u64);
}

#[test]
fn rtcache_under_random_flood_stays_within_max_size_and_gcs_per_slow_path() {
    let table = RouteTable::generate(20_000, 16, 3);
    let mut cfg = config(CacheMode::Rtcache, FibKind::Dir24, 2);
    cfg.traffic = TrafficProfile { flows: 32768, pkts_per_flow: 1, ..Default::default() };
    cfg.rt.hash_buckets = 256;
    cfg.rt.gc_thresh = 256;
    cfg.rt.max_size = 4096;
    let mut w = standalone_worker(&cfg, &table).unwrap();
    let mut max_seen = 0;
    for _ in 0..3000 {
        w.poll();
        max_seen = max_seen.max(w.rt.entries);
    }
    w.fill_counters();
    let c = &w.ctr;
    assert!(max_seen <= 4096, "entries peaked at {max_seen}");
    let slow = c[Ctr::RtInSlowTot as usize];
    let gc = c[Ctr::RtGcTotal as usize];
    // Once past gc_thresh every slow-path allocation runs GC (the 2003 logs: GC tot ~ tot).
    assert!(slow > 50_000, "slow {slow}");
    assert!(gc as f64 > 0.95 * (slow as f64 - 300.0), "gc {gc} slow {slow}");
    assert!(c[Ctr::RtGcIgnored as usize] > 0);
}
