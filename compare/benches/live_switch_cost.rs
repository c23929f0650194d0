//! What a live comparison's switching costs the forwarder: one forwarder in this process
//! (1 worker, device inline, nocache + dir24 on the real table) forwards while a controller
//! alternates blocks in ABBA quads: in one kind of block it applies a setting every 50 ms
//! (the live mode's default block length; the setting is the one in force, so the switch
//! itself is all that is measured: control-block read, switch stamps, re-applying each
//! tunable), in the other it leaves the forwarder alone. Per block: packets over the
//! workers' own publish stamps. The effect is the live mode's own statistics
//! ([`compare::paired`]): the ratio of rates, switching against not, with its 95% interval.
//! The bookkeeping that is always on (a worker checks the control generation every 1024
//! polls) is in both kinds of block alike, so it is not in this figure.
//!
//! Run: `cargo bench -p compare --bench live_switch_cost` (FWDSCOPE_SWITCH_SECS, default
//! 30; FWDSCOPE_SWITCH_BLOCK_MS, default 200). Prints the machine's load before and after:
//! a figure taken while something else loaded the machine is not worth keeping.

use compare::paired::{effect, unit_differences, BlockRate};
use forwarder::config::{CacheMode, Config, TableSource};
use forwarder::fib::FibKind;
use forwarder::nic::synthetic::GenMode;
use fwd_abi::{Ctr, Request};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    let secs = env("FWDSCOPE_SWITCH_SECS").unwrap_or(30);
    let block = Duration::from_millis(env("FWDSCOPE_SWITCH_BLOCK_MS").unwrap_or(200));
    let every = Duration::from_millis(50);
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/tables/asn-ipv4-prefixes.txt.gz");
    let cfg = Config {
        cache: CacheMode::Nocache,
        fib: FibKind::Dir24,
        workers: 1,
        gen_mode: GenMode::Inline,
        table: TableSource::File { path: table, aggregates: true },
        ..Config::default()
    };
    let fwd = forwarder::run::Forwarder::start(&cfg).expect("start the forwarder");
    let seg = fwd.segment().clone();
    println!(
        "live_switch_cost: 1 worker, device inline, nocache + dir24, real table; {secs} s of {} ms blocks in ABBA quads, \
         a switch every {} ms in the switching blocks; load before: {}",
        block.as_millis(),
        every.as_millis(),
        loadavg()
    );
    std::thread::sleep(Duration::from_secs(1));
    let c = seg.control();
    let same = Request {
        prefetch: Some(fwd_abi::Prefetch::clamped(u64::from(c.prefetch.load(Ordering::Relaxed)))),
        cache_mode: Some(c.cache_mode.load(Ordering::Relaxed)),
        spin_ns: Some(0),
        gc: Some(c.gc()),
        flush: false,
        setting: 0,
    };
    // Packets and the worker's publish stamp now.
    let at = || {
        let s = seg.snapshot();
        (s.get(0, Ctr::TxPackets), s.get(0, Ctr::PublishMonoNs))
    };
    let mut blocks = Vec::new();
    let mut switches = 0u64;
    let t0 = Instant::now();
    let mut unit = 0usize;
    while t0.elapsed().as_secs() < secs {
        let order = if unit.is_multiple_of(2) { [1, 0, 0, 1] } else { [0, 1, 1, 0] };
        for setting in order {
            // Setting 0: left alone (the baseline); setting 1: switched every 50 ms.
            let start = Instant::now();
            let (p0, m0) = at();
            while start.elapsed() < block {
                if setting == 1 {
                    seg.apply(&same);
                    switches += 1;
                }
                std::thread::sleep(every.min(block.saturating_sub(start.elapsed())));
            }
            let (p1, m1) = at();
            let rate = (m1 > m0).then(|| p1.saturating_sub(p0) as f64 / ((m1 - m0) as f64 / 1e9));
            blocks.push(BlockRate { unit, setting, rate, flagged: false });
        }
        unit += 1;
    }
    let _ = fwd.stop();
    let (d, out) = unit_differences(&blocks, 1, 0);
    let e = effect(&d, out);
    let cost = |r: f64| 100.0 * (1.0 - r);
    println!(
        "rate while switching every {} ms / left alone: {:.4} [{:.4}, {:.4}] (95%, {} units, p = {:.3}); switching costs \
         {:+.2}% [{:+.2}%, {:+.2}%] of the forwarding rate (goal: under 1%); {switches} switches applied",
        every.as_millis(),
        e.ratio,
        e.ci.0,
        e.ci.1,
        e.units,
        e.p,
        cost(e.ratio),
        cost(e.ci.1),
        cost(e.ci.0)
    );
    println!("load after: {}", loadavg());
}
