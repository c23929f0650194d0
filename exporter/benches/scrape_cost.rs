//! What the exporter costs (`cargo bench -p exporter --bench scrape_cost`): a stats segment
//! of 4 workers with every counter set, 2000 scrapes of /metrics over HTTP, and the CPU time
//! the exporter's threads (every thread but the client's, from /proc/self/task/TID/stat)
//! took for them.
//! At one scrape per second, that CPU per scrape is the share of a core it uses (goal:
//! under 0.5%). Between scrapes the thread blocks in accept() and takes none.

use exporter::{Exporter, SegmentSource};
use fwd_abi::{Segment, State, N_COUNTERS};
use std::io::{Read, Write};
use std::time::Instant;

/// utime + stime of every thread of this process but the main one (the client), in
/// seconds: the exporter's accepting and answering threads.
fn server_cpu() -> Option<f64> {
    let tick = 100.0; // USER_HZ on Linux
    let me = std::process::id().to_string();
    let mut sum = 0.0;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = t.ok()?.path();
        if dir.file_name()?.to_string_lossy() == me {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = after.split_whitespace().collect();
        let (u, s): (f64, f64) = (f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?);
        sum += (u + s) / tick;
    }
    Some(sum)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::temp_dir().join(format!("fwdscope-bench-exporter-{}.stats", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let cfg = r#"{"config":{"driver":"synthetic","fib":"lctrie","clock_one_in":8,"rt":{"version":"2.6"}},"info":{}}"#;
    let seg = Segment::create(&path, 4, cfg, 2_300_000_000)?;
    seg.set_state(State::Running);
    for w in 0..4 {
        let v: Vec<u64> = (0..N_COUNTERS as u64).map(|i| 1_000_000_007 * (i + 1) + w).collect();
        seg.publish(w as usize, &v);
    }
    let ex = Exporter::start("127.0.0.1:0", SegmentSource::open(&path)?)?;
    let addr = ex.local_addr();
    let scrape = || -> std::io::Result<usize> {
        let mut s = std::net::TcpStream::connect(addr)?;
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut body = Vec::new();
        s.read_to_end(&mut body)?;
        Ok(body.len())
    };
    let bytes = scrape()?; // warm-up
    let n = 2000;
    let cpu0 = server_cpu().ok_or("cannot read /proc/self/task")?;
    let t0 = Instant::now();
    for _ in 0..n {
        scrape()?;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = server_cpu().ok_or("cannot read /proc/self/task")? - cpu0;
    let per = cpu / n as f64;
    println!("exporter: {n} scrapes of {bytes} bytes (4 workers) in {wall:.2} s wall");
    println!("  exporter threads' CPU {:.3} ms per scrape (10 ms clock ticks over all scrapes)", per * 1e3);
    println!("  at one scrape per second: {:.3}% of a core (goal < 0.5%)", per * 100.0);
    drop(ex);
    drop(seg);
    Ok(())
}
