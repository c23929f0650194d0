//! The exporters against a real Prometheus server (Debian's `prometheus`, started here on
//! 127.0.0.1 with a generated scrape config): `forward --metrics` and `metrics -p PID` are
//! both scraped every second; PromQL's rate() of the forwarded packets agrees within 10%
//! with the forwarder's own interval lines over the same window; with the forwarder
//! stopped (SIGSTOP), the drop counter Prometheus stored equals the one in the stats
//! segment exactly; once the forwarder exits, the exporter answers 503 and Prometheus marks
//! the target down. Skips, saying why, when the server is not installed.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// GET `path` from `addr`: status and body.
fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let out = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    // Prometheus answers queries chunked: keep only the JSON between the chunk sizes.
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut rest = body;
        let mut joined = String::new();
        while let Some((size, tail)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || tail.len() < n {
                break;
            }
            joined.push_str(&tail[..n]);
            rest = tail[n..].trim_start_matches("\r\n");
        }
        joined
    } else {
        body.to_string()
    };
    Ok((status, body))
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant PromQL query: the vector's (labels, timestamp, value) rows.
fn query(prom: &str, q: &str, at: Option<f64>) -> Vec<(serde_json::Value, f64, f64)> {
    let mut path = format!("/api/v1/query?query={}", urlencode(q));
    if let Some(t) = at {
        path.push_str(&format!("&time={t:.3}"));
    }
    let (status, body) = http_get(prom, &path).expect("query Prometheus");
    assert_eq!(status, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{q}: {e}: {body}"));
    v["data"]["result"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let t = r["value"][0].as_f64().unwrap_or(f64::NAN);
                    let x = r["value"][1].as_str().and_then(|s| s.parse().ok()).unwrap_or(f64::NAN);
                    (r["metric"].clone(), t, x)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// The `http://ADDR/metrics` a process printed on stderr, read on a thread (its other
/// stderr lines go to `log`).
fn url_from_stderr(child: &mut Child, log: std::path::PathBuf) -> String {
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if let Some(u) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                let _ = tx.send(u.trim_end_matches("/metrics").trim_start_matches("http://").to_string());
            }
            keep.push(line);
            let _ = std::fs::write(&log, keep.join("\n"));
        }
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the exporter printed its address")
}

struct Kill(Vec<Child>);
impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SAFETY: signalling a child of ours by its PID.
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Kills a forwarder left running by a failed assertion (it runs until told to stop).
struct KillPid(u32);
impl Drop for KillPid {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // SAFETY: signalling our own child by its PID.
            unsafe {
                libc::kill(self.0 as i32, libc::SIGCONT);
                libc::kill(self.0 as i32, libc::SIGKILL);
            }
        }
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: signalling a child of ours by its PID.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn prometheus_scrapes_agree_with_the_forwarder() {
    if !common::have("prometheus", &["--version"]) {
        println!("SKIP: no Prometheus server to scrape the exporter (Debian package `prometheus`)");
        return;
    }
    let dir = common::tmpdir("prometheus");
    std::fs::create_dir_all(&dir).unwrap();

    // A forwarder that drops (a route cache too small for its flows: dst_overflow) at a
    // steady offered rate, with its in-process exporter.
    let mut fwd = common::fwdscope()
        .args(["forward", "--duration", "0", "--json", "-i", "1", "--metrics", "127.0.0.1:0"])
        .args(["--rate", "200k", "--max-size", "256", "--gc-thresh", "128"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _fwd_guard = KillPid(fwd.id());
    let fwd_addr = url_from_stderr(&mut fwd, dir.join("forward.err"));
    // Interval lines, stamped with the wall clock as they arrive.
    let (lines_tx, lines_rx) = mpsc::channel::<(f64, serde_json::Value)>();
    let out = fwd.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                let _ = lines_tx.send((now(), v));
            }
        }
    });
    let (_, start) = lines_rx.recv_timeout(Duration::from_secs(60)).expect("the start line");
    let stats = start["info"]["stats_path"].as_str().expect("stats path").to_string();
    let mut ext = common::fwdscope()
        .args(["metrics", "-p", &fwd.id().to_string(), "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ext_addr = url_from_stderr(&mut ext, dir.join("metrics.err"));

    let prom_addr = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: forward\n    static_configs:\n      - targets: ['{fwd_addr}']\n  - job_name: external\n    static_configs:\n      - targets: ['{ext_addr}']\n"
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let prom_log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
        .arg(format!("--web.listen-address={prom_addr}"))
        .stdout(prom_log.try_clone().unwrap())
        .stderr(prom_log)
        .spawn()
        .unwrap();
    let procs = Kill(vec![prom, ext]);
    let t0 = Instant::now();
    while !http_get(&prom_addr, "/-/ready").is_ok_and(|(s, _)| s == 200) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "Prometheus not ready; see {}",
            dir.join("prometheus.log").display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // Both targets up, then 20 s of scrapes.
    let t0 = Instant::now();
    loop {
        let up = query(&prom_addr, "up", None);
        if up.len() == 2 && up.iter().all(|(_, _, v)| *v == 1.0) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "targets not up: {up:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut lines: Vec<(f64, serde_json::Value)> = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        if let Ok(l) = lines_rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    let intervals: Vec<(f64, f64, f64)> = lines
        .iter()
        .filter(|(_, v)| v["type"] == "interval")
        .map(|(stamp, v)| (*stamp, v["t"].as_f64().unwrap(), v["tx_mpps"].as_f64().unwrap()))
        .collect();
    assert!(intervals.len() >= 18, "{} interval lines", intervals.len());
    // Wall time of the forwarder's elapsed t: the smallest offset seen (stamps lag lines).
    let offset = intervals.iter().map(|(s, t, _)| s - t).fold(f64::INFINITY, f64::min);
    let (j, k) = (intervals.len() - 2, intervals.len() - 2 - 15);
    let span = intervals[j].1 - intervals[k].1;
    let packets: f64 = (k + 1..=j).map(|i| intervals[i].2 * 1e6 * (intervals[i].1 - intervals[i - 1].1)).sum();
    let own = packets / span;
    let at = offset + intervals[j].1;
    let rate = |job: &str| {
        let q = format!("sum(rate(fwdscope_tx_packets_total{{job=\"{job}\"}}[{}ms]))", (span * 1000.0).round());
        query(&prom_addr, &q, Some(at)).first().map(|r| r.2).expect("a rate")
    };
    let (prom_rate, ext_rate) = (rate("forward"), rate("external"));
    println!("forwarder's own {own:.0} pps over {span:.1} s; Prometheus rate(): in-process {prom_rate:.0}, external {ext_rate:.0}");
    for r in [prom_rate, ext_rate] {
        assert!((r / own - 1.0).abs() < 0.10, "Prometheus rate {r:.0} vs the forwarder's own {own:.0} pps");
    }

    // Stopped forwarder: its counters hold still; the external exporter still reads them.
    let seg = fwd_abi::Segment::open(std::path::Path::new(&stats)).unwrap();
    let mut stopped_at;
    let frozen = loop {
        signal(&fwd, libc::SIGSTOP);
        stopped_at = now();
        std::thread::sleep(Duration::from_millis(100));
        if let Some(s) = seg.snapshot_within(Duration::from_millis(50)) {
            break s;
        }
        // Stopped in the middle of publishing: let it finish and stop it again.
        signal(&fwd, libc::SIGCONT);
        std::thread::sleep(Duration::from_millis(50));
    };
    let dropped = frozen.get(0, fwd_abi::Ctr::DropDstOverflow);
    assert!(dropped > 0, "the forwarder was meant to drop");
    let q = "fwdscope_dropped_packets_total{job=\"external\",reason=\"dst_overflow\"}";
    let t0 = Instant::now();
    let stored = loop {
        std::thread::sleep(Duration::from_millis(500));
        let rows = query(&prom_addr, &format!("timestamp({q})"), None);
        if rows.first().is_some_and(|r| r.2 > stopped_at + 0.2) {
            break query(&prom_addr, q, None)[0].2;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "no scrape after the stop: {rows:?}");
    };
    println!("dst_overflow drops: segment {dropped}, Prometheus {stored}");
    assert_eq!(stored, dropped as f64);

    // The forwarder exits: 503 from the exporter, and Prometheus sees the target down.
    signal(&fwd, libc::SIGCONT);
    signal(&fwd, libc::SIGTERM);
    let status = fwd.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let (code, body) = http_get(&ext_addr, "/metrics").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains(&format!("forwarder {}", fwd.id())), "{body}");
    let t0 = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let up = query(&prom_addr, "up{job=\"external\"}", None);
        if up.first().is_some_and(|r| r.2 == 0.0) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "external target still up: {up:?}");
    }
    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}
