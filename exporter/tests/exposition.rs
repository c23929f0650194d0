//! The exporter against a stats segment written by the test: every value served is the
//! hand-set counter it stands for (scaled by hand where the unit changes), an exited or
//! vanished forwarder gets a 503 with the reason, and a taken port a clear error. (Prometheus
//! itself parses the text in the fwdscope crate's prometheus test; `promtool check metrics`
//! reads only the older text format, not OpenMetrics.)

use exporter::{Answer, Exporter, SegmentSource};
use fwd_abi::{Ctr, Segment, State, N_COUNTERS};
use std::collections::HashMap;
use std::io::{Read, Write};

fn get(url_addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(url_addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let ctype = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type:").map(|v| v.trim().to_string()))
        .unwrap_or_default();
    (status, ctype, body.to_string())
}

/// `name{labels} value` lines, keyed by the whole series text.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse::<f64>().unwrap())
        })
        .collect()
}

const TSC_HZ: u64 = 2_000_000_000;

/// Tests that start exporters take turns: one of them counts this process's threads.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn segment(tag: &str) -> (Segment, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("fwdscope-exporter-{tag}-{}.stats", std::process::id()));
    let _ = std::fs::remove_file(&path);
    // As the forwarder writes it (run.rs): its Config and RunInfo.
    let cfg = r#"{"config":{"driver":"synthetic","fib":"dir24","clock_one_in":8,"rt":{"version":"2.6"}},"info":{}}"#;
    let seg = Segment::create(&path, 2, cfg, TSC_HZ).unwrap();
    seg.set_state(State::Running);
    (seg, path)
}

#[test]
fn served_values_are_the_segment_counters() {
    let _serial = serial();
    let (seg, path) = segment("values");
    let mut w0 = vec![0u64; N_COUNTERS];
    w0[Ctr::TxPackets as usize] = 1_000_000;
    w0[Ctr::TxBytes as usize] = 64_000_000;
    w0[Ctr::DropNoRoute as usize] = 17;
    w0[Ctr::RxMissed as usize] = 5;
    w0[Ctr::RtEntries as usize] = 4096;
    w0[Ctr::RtGcIgnored as usize] = 900;
    w0[Ctr::ClkLookup as usize] = 50_000_000; // 8x sampled: 0.2 s
    w0[Ctr::ClkGc as usize] = 10_000_000; // every poll: 0.005 s
    w0[Ctr::PktsLookup as usize] = 999_000;
    w0[Ctr::CacheMode as usize] = 1; // nocache
    w0[Ctr::PrefetchDepth as usize] = 5;
    w0[Ctr::SchedWaitNs as usize] = 1_500_000_000;
    w0[Ctr::SpinNs as usize] = 12;
    w0[Ctr::SlabDstAllocFail as usize] = 3;
    let mut w1 = vec![0u64; N_COUNTERS];
    w1[Ctr::TxPackets as usize] = 42;
    w1[Ctr::CacheMode as usize] = 0;
    seg.publish(0, &w0);
    seg.publish(1, &w1);

    let ex = Exporter::start("127.0.0.1:0", SegmentSource::open(&path).unwrap()).unwrap();
    let (status, ctype, body) = get(ex.local_addr(), "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    let s = samples(&body);
    let want: &[(&str, f64)] = &[
        (r#"fwdscope_tx_packets_total{worker="0"}"#, 1e6),
        (r#"fwdscope_tx_packets_total{worker="1"}"#, 42.0),
        (r#"fwdscope_tx_bytes_total{worker="0"}"#, 64e6),
        (r#"fwdscope_dropped_packets_total{worker="0",reason="no_route"}"#, 17.0),
        (r#"fwdscope_dropped_packets_total{worker="0",reason="rx_missed"}"#, 5.0),
        (r#"fwdscope_dropped_packets_total{worker="1",reason="ttl_exceeded"}"#, 0.0),
        (r#"fwdscope_rtcache_entries{worker="0"}"#, 4096.0),
        (r#"fwdscope_rtcache_gc_total{worker="0",event="ignored"}"#, 900.0),
        (r#"fwdscope_stage_seconds_total{worker="0",stage="lookup"}"#, 0.2),
        (r#"fwdscope_stage_seconds_total{worker="0",stage="gc"}"#, 0.005),
        (r#"fwdscope_stage_packets_total{worker="0",stage="lookup"}"#, 999_000.0),
        (r#"fwdscope_cache_mode{worker="0",mode="nocache"}"#, 1.0),
        (r#"fwdscope_cache_mode{worker="0",mode="rtcache"}"#, 0.0),
        (r#"fwdscope_cache_mode{worker="1",mode="rtcache"}"#, 1.0),
        (r#"fwdscope_prefetch_depth{worker="0"}"#, 5.0),
        (r#"fwdscope_worker_runqueue_wait_seconds_total{worker="0"}"#, 1.5),
        (r#"fwdscope_calib_cost_seconds{worker="0"}"#, 12e-9),
        (r#"fwdscope_slab_alloc_failures_total{worker="0",cache="dst"}"#, 3.0),
        ("fwdscope_stage_clock_sample_ratio", 8.0),
        ("fwdscope_tsc_frequency_hertz", 2e9),
        ("fwdscope_forwarder_workers", 2.0),
    ];
    for (k, v) in want {
        let got = s.get(*k).unwrap_or_else(|| panic!("{k} missing from:\n{body}"));
        assert!((got - v).abs() <= 1e-9 * v.abs().max(1.0), "{k}: {got} != {v}");
    }
    let info = format!(
        r#"fwdscope_forwarder_info{{pid="{}",driver="synthetic",fib="dir24",rtcache_version="2.6"}}"#,
        std::process::id()
    );
    assert_eq!(s.get(&info), Some(&1.0), "{body}");
    // Counters carry _total, units are base units in the name.
    for line in body.lines().filter(|l| l.starts_with("# TYPE")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(f[2].starts_with("fwdscope_"), "{line}");
        assert!(!f[2].contains("_ns") && !f[2].contains("nanoseconds"), "{line}");
    }

    // Not /metrics: a 404 pointing there.
    let (status, _, body) = get(ex.local_addr(), "/other");
    assert_eq!(status, 404);
    assert!(body.contains("/metrics"));

    // The forwarder exits: 503 saying so, no numbers.
    seg.set_state(State::Exited);
    let (status, _, body) = get(ex.local_addr(), "/metrics");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("has exited") && !body.contains("fwdscope_tx"), "{body}");
    assert_eq!(ex.scrapes(), 2);
    drop(seg);
}

#[test]
fn a_vanished_or_stopped_writer_is_no_current_number() {
    let _serial = serial();
    let (mut seg, path) = segment("gone");
    let src = SegmentSource::open(&path).unwrap();
    assert!(matches!(src.answer(), Answer::Metrics(_)));
    let w = vec![0u64; N_COUNTERS];
    seg.publish(0, &w);
    seg.keep_file();
    drop(seg);
    // A segment whose recorded owner is not running: 503 naming the PID.
    let raw = std::fs::read(&path).unwrap();
    let mut doctored = raw.clone();
    // The header's pid field (after the magic, the version and nine u32 fields of layout).
    let pid_at = 8 + 4 * 10;
    assert_eq!(u32::from_ne_bytes(raw[pid_at..pid_at + 4].try_into().unwrap()), std::process::id());
    let dead = 0x3fff_fff0u32; // above pid_max: never a running process
    doctored[pid_at..pid_at + 4].copy_from_slice(&dead.to_ne_bytes());
    std::fs::write(&path, &doctored).unwrap();
    match SegmentSource::open(&path).unwrap().answer() {
        Answer::Unavailable(why) => assert!(why.contains(&dead.to_string()) && why.contains("gone"), "{why}"),
        Answer::Metrics(_) => panic!("a dead forwarder's counters served as current"),
    }
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn a_taken_port_is_named() {
    let _serial = serial();
    let (seg, path) = segment("port");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let e = Exporter::start(&addr, SegmentSource::open(&path).unwrap()).err().expect("refused").to_string();
    assert!(e.contains(&addr) && e.contains("in use"), "{e}");
    let e = Exporter::start("localhost", SegmentSource::open(&path).unwrap()).err().expect("refused").to_string();
    assert!(e.contains("expected HOST:PORT"), "{e}");
    drop(seg);
}

/// The exporter's threads in this process (named fwd-metrics*, /proc/self/task/*/comm;
/// the test harness's own threads come and go).
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("fwd-metrics"))
        .count()
}

/// Idle connections cost no threads and keep no scraper out: with 300 of them open (more
/// than [`exporter::server::PENDING`]), the exporter stays at its fixed pool, the oldest
/// past the cap are closed, and a scrape is answered while the rest still wait.
#[test]
fn idle_connections_do_not_grow_threads() {
    let _serial = serial();
    let (seg, path) = segment("idle");
    seg.set_state(State::Running);
    seg.publish(0, &vec![0u64; N_COUNTERS]);
    let before = threads();
    let ex = Exporter::start("127.0.0.1:0", SegmentSource::open(&path).unwrap()).unwrap();
    // A thread names itself as it starts: wait for them all.
    let want = before + exporter::server::WORKERS + 1;
    let t0 = std::time::Instant::now();
    while threads() < want && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let started = threads();
    assert_eq!(started, want, "the exporter's own threads");
    let idle: Vec<std::net::TcpStream> =
        (0..300).map(|_| std::net::TcpStream::connect(ex.local_addr()).unwrap()).collect();
    // Let the accepting thread take them all.
    let past_cap = (300 - exporter::server::PENDING) as u64;
    let t0 = std::time::Instant::now();
    while ex.refused() < past_cap && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!("300 idle connections: {} threads (were {started}), {} closed", threads(), ex.refused());
    assert_eq!(threads(), started, "threads grew with idle connections");
    assert!(ex.refused() >= past_cap, "{} closed, expected at least {past_cap}", ex.refused());
    // Idle connections are still open (those within the cap, until their deadline): a
    // scrape is answered all the same, at once.
    let (status, _, body) = get(ex.local_addr(), "/metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("# EOF\n"));
    drop(idle);
    drop(ex);
    assert_eq!(threads(), before, "the exporter's threads end with it");
}
