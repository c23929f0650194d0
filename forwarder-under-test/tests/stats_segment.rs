//! The stats segment across processes: a reader never sees a torn snapshot, and a
//! controller in another process steers a running forwarder (prefetch, cache mode, flush,
//! stop) through the control block.

use fwd_abi::{Ctr, Segment, State, N_COUNTERS};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn tmp_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fwdscope-test-{tag}-{}.stats", std::process::id()))
}

#[test]
fn reader_never_sees_a_torn_snapshot() {
    let path = tmp_path("torn");
    let _ = std::fs::remove_file(&path);
    let writer = Arc::new(Segment::create(&path, 2, "{}", 1).unwrap());
    // A second, independent mapping of the file, as another process would have.
    let reader = Segment::open(&path).unwrap();
    assert_eq!(reader.counter_names().len(), N_COUNTERS);
    assert_eq!(reader.counter_names()[Ctr::TxPackets as usize], "tx_packets");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let stop = Arc::new(AtomicBool::new(false));
    let (w2, s2) = (writer.clone(), stop.clone());
    let t = std::thread::spawn(move || {
        let mut v = 0u64;
        while !s2.load(Ordering::Relaxed) {
            v += 1;
            w2.publish(1, &vec![v; N_COUNTERS]);
        }
        v
    });
    let mut reads = 0;
    let mut last = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(300) {
        let s = reader.read_worker(1);
        assert!(s.iter().all(|&x| x == s[0]), "torn snapshot: {:?}", &s[..4]);
        assert!(s[0] >= last, "went backwards");
        last = s[0];
        reads += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let written = t.join().unwrap();
    assert!(reads > 1000 && written > 1000, "reads {reads} writes {written}");
    drop(reader);
    drop(writer);
    assert!(!path.exists(), "creator removes the segment");
}

#[test]
fn open_rejects_bad_segments_with_a_clear_error() {
    let path = tmp_path("bad");
    std::fs::write(&path, vec![0u8; 4096]).unwrap();
    let e = Segment::open(&path).err().unwrap().to_string();
    assert!(e.contains(&path.display().to_string()) && e.contains("bad magic"), "{e}");
    std::fs::write(&path, b"short").unwrap();
    let e = Segment::open(&path).err().unwrap().to_string();
    assert!(e.contains("smaller than a header"), "{e}");
    std::fs::remove_file(&path).unwrap();
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn controller_in_another_process_steers_the_forwarder() {
    let path = tmp_path("ctl");
    let _ = std::fs::remove_file(&path);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fwdscope-forwarder"))
        .args([
            "--duration",
            "0",
            "--routes",
            "5000",
            "--flows",
            "1024",
            "--prefetch",
            "1",
            "--no-pin",
            "--device",
            "inline",
            "--json",
        ])
        .arg("--stats")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the segment", || {
        path.exists() && Segment::open(&path).map(|s| s.state() == State::Running).unwrap_or(false)
    });
    let seg = Segment::open(&path).unwrap();
    assert_eq!(seg.pid(), child.id());
    assert!(seg.config_json().contains("\"prefetch\":1"));
    wait_for("packets", || seg.snapshot().total(Ctr::TxPackets) > 10_000);
    assert_eq!(seg.snapshot().get(0, Ctr::PrefetchDepth), 1);

    seg.set_prefetch(fwd_abi::Prefetch::new(5).expect("depth"));
    wait_for("prefetch 5", || seg.snapshot().get(0, Ctr::PrefetchDepth) == 5);
    seg.set_cache_mode(forwarder::config::CacheMode::Nocache.code());
    wait_for("nocache", || seg.snapshot().get(0, Ctr::CacheMode) == 1);
    let slow0 = seg.snapshot().total(Ctr::RtInSlowTot);
    wait_for("every packet on the slow path", || seg.snapshot().total(Ctr::RtInSlowTot) > slow0 + 10_000);
    seg.set_cache_mode(forwarder::config::CacheMode::Rtcache.code());
    wait_for("cache refilled", || seg.snapshot().total(Ctr::RtEntries) > 100);
    let flushes = seg.snapshot().total(Ctr::RtFlushes);
    seg.request_flush();
    wait_for("flush", || seg.snapshot().total(Ctr::RtFlushes) > flushes);

    seg.request_stop();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "forwarder did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["type"], "summary");
    assert_eq!(summary["prefetch"], 5);
    assert!(!path.exists(), "segment removed at exit");
}
