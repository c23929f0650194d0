//! What the always-on stage clocks cost: one worker (device inline, on the same thread)
//! forwards the real table while the clocks are switched on and off in short blocks, in
//! ABBA quads (on off off on, then off on on off, ...) so linear drift of the host cancels.
//! Per block: the thread's CPU time (CLOCK_THREAD_CPUTIME_ID) per forwarded packet. The
//! effect is the mean of the quads' log ratios (on / off) with a paired t interval.
//! The overhead is also given against the forwarding work alone (the stage clocks' own
//! figure without the synthetic device and waiting), since the device's time is part of
//! the CPU time per packet here.
//!
//! Run: `cargo bench --bench stage_clock_cost` (FWDSCOPE_CLK_SECS total, default 30;
//! FWDSCOPE_CLK_BLOCK_MS, default 50; FWDSCOPE_CLK_CACHE, default nocache;
//! FWDSCOPE_CLK_FIB, default dir24; FWDSCOPE_CLK_ONE_IN, default 8 as the forwarder's). Prints the machine's load before and after: a figure
//! taken while something else loaded the machine is not worth keeping.

use forwarder::config::{CacheMode, Config, TableSource};
use forwarder::fib::FibKind;
use forwarder::run::{load_table, standalone_worker};
use fwd_abi::clocks::ClockReport;
use fwd_abi::Ctr;
use std::path::Path;
use std::time::{Duration, Instant};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec for the kernel to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn involuntary_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:").and_then(|v| v.trim().parse().ok()))
        })
        .unwrap_or(0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string()
}

/// Two-sided 97.5% quantile of Student's t for `df` degrees of freedom.
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    if df == 0 {
        f64::INFINITY
    } else if df <= 30 {
        T[df - 1]
    } else {
        1.96 + 2.4 / df as f64
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let env = |k: &str| std::env::var(k).ok();
    let secs: f64 = env("FWDSCOPE_CLK_SECS").and_then(|s| s.parse().ok()).unwrap_or(30.0);
    let block = Duration::from_millis(env("FWDSCOPE_CLK_BLOCK_MS").and_then(|s| s.parse().ok()).unwrap_or(50));
    let cache = env("FWDSCOPE_CLK_CACHE").and_then(|s| CacheMode::from_name(&s)).unwrap_or(CacheMode::Nocache);
    let fib = env("FWDSCOPE_CLK_FIB")
        .and_then(|s| FibKind::ALL.into_iter().find(|f| f.name() == s))
        .unwrap_or(FibKind::Dir24);
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tables/asn-ipv4-prefixes.txt.gz");
    let one_in: u32 = env("FWDSCOPE_CLK_ONE_IN").and_then(|s| s.parse().ok()).unwrap_or(8);
    let cfg = Config {
        cache,
        fib,
        clock_one_in: one_in,
        table: TableSource::File { path: table, aggregates: true },
        ..Config::default()
    };
    let routes = load_table(&cfg).expect("load the table");
    let mut w = standalone_worker(&cfg, &routes).expect("worker");
    println!(
        "stage_clock_cost: {} + {}, real table, 1 worker, device inline, one poll in {one_in} clocked; {secs} s in \
         blocks of {} ms, ABBA quads; load before: {}",
        cache.name(),
        fib.name(),
        block.as_millis(),
        loadavg()
    );
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_secs(1) {
        w.poll();
    }
    let tx = |w: &forwarder::worker::Worker| w.ctr[Ctr::TxPackets as usize];
    let switches0 = involuntary_switches();
    // (on?, cpu ns, packets) per block.
    let mut blocks: Vec<(bool, u64, u64)> = Vec::new();
    let mut clocks_on_delta = vec![0u64; fwd_abi::N_COUNTERS];
    let t0 = Instant::now();
    let mut quad = 0usize;
    while t0.elapsed().as_secs_f64() < secs {
        let order = if quad.is_multiple_of(2) { [true, false, false, true] } else { [false, true, true, false] };
        for on in order {
            w.set_stage_clock(on);
            w.fill_counters();
            let before = w.ctr.clone();
            let (c0, p0, b0) = (thread_cpu_ns(), tx(&w), Instant::now());
            while b0.elapsed() < block {
                for _ in 0..64 {
                    w.poll();
                }
            }
            let (c1, p1) = (thread_cpu_ns(), tx(&w));
            blocks.push((on, c1 - c0, p1 - p0));
            if on {
                w.fill_counters();
                for (i, d) in clocks_on_delta.iter_mut().enumerate() {
                    *d += w.ctr[i].saturating_sub(before[i]);
                }
            }
        }
        quad += 1;
    }
    let switches = involuntary_switches() - switches0;
    let ns = |b: &(bool, u64, u64)| b.1 as f64 / b.2.max(1) as f64;
    let logs: Vec<f64> = blocks
        .chunks(4)
        .filter(|q| q.len() == 4)
        .map(|q| {
            let on: f64 = q.iter().filter(|b| b.0).map(ns).sum::<f64>() / 2.0;
            let off: f64 = q.iter().filter(|b| !b.0).map(ns).sum::<f64>() / 2.0;
            (on / off).ln()
        })
        .collect();
    let n = logs.len();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n.saturating_sub(1)).max(1) as f64).sqrt();
    let half = t975(n.saturating_sub(1)) * sd / (n as f64).sqrt();
    let mean_of = |on: bool| {
        let (c, p) = blocks.iter().filter(|b| b.0 == on).fold((0u64, 0u64), |a, b| (a.0 + b.1, a.1 + b.2));
        c as f64 / p.max(1) as f64
    };
    let (on_ns, off_ns) = (mean_of(true), mean_of(false));
    let pct = |x: f64| 100.0 * (x.exp() - 1.0);
    println!(
        "CPU per packet: clocks on {on_ns:.1} ns, off {off_ns:.1} ns; on/off {:.4} = {:+.2}% [{:+.2}%, {:+.2}%] (95%, paired \
         t over {n} quads)",
        mean.exp(),
        pct(mean),
        pct(mean - half),
        pct(mean + half)
    );
    let fwd = clocks_on_delta[Ctr::TxPackets as usize];
    if let Some(r) = ClockReport::new(|c| clocks_on_delta[c as usize], forwarder::cpu::tsc_hz(), fwd) {
        if let Some(f) = r.forwarding_ns_per_packet {
            let d = on_ns - off_ns;
            println!(
                "forwarding work alone (stage clocks, without device and waiting): {f:.1} ns/packet; the clocks' cost \
                 {d:+.2} ns/packet = {:+.2}% of it",
                100.0 * d / f
            );
        }
    }
    println!(
        "involuntary context switches during the run: {switches}; load after: {}; TSC {:.3} MHz ({})",
        loadavg(),
        forwarder::cpu::tsc_hz() as f64 / 1e6,
        forwarder::cpu::tsc_rate().source
    );
}
