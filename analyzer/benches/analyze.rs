//! Analyzer throughput, measured as ratios inside one run (`cargo bench -p analyzer --bench
//! analyze`):
//!
//! 1. Native recordings: a recording of 5,000,000 samples over 4,000 distinct addresses in
//!    real forwarder functions, 4 threads, aggregated into the stage table. Goal: 5M
//!    samples/s.
//! 2. perf.data import + symbolize + attribute (`perfdata_table`) against
//!    `perf report --stdio --sort sym -g none` on the same file of 500k+ samples recorded
//!    here system-wide with callchains (skipped, saying why, without perf or root). Goal:
//!    10x faster. (`scripts/report-vs-perf.sh` also measures both sides' peak memory, on
//!    files of any size.)

use analyzer::rules::Rules;
use collector::recording::RecordingWriter;
use collector::records::Sample;
use std::process::Command;
use std::time::Instant;

type BenchResult = Result<(), Box<dyn std::error::Error>>;

fn perf_vs_ours() -> BenchResult {
    let dir = std::env::temp_dir().join(format!("fwdscope-bench-perf-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("perf.data");
    // Every CPU sampled every 20 us of cpu-clock, with callchains, while kept busy in user
    // and kernel mode.
    let rec = Command::new("perf")
        .args(["record", "-q", "-a", "-g", "-e", "cpu-clock", "-c", "20000", "-o"])
        .arg(&file)
        .args([
            "--",
            "sh",
            "-c",
            "yes > /dev/null & dd if=/dev/zero of=/dev/null bs=64 count=20000000 2>/dev/null; kill $!",
        ])
        .output();
    match rec {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!("SKIP perf.data benchmark: perf record failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            return Ok(());
        }
        Err(e) => {
            println!("SKIP perf.data benchmark: perf is not installed ({e})");
            return Ok(());
        }
    }
    let rules = Rules::builtin();
    let t0 = Instant::now();
    let look = analyzer::symbolize::kernel::KernelLookup::default();
    let (pd, ks) = analyzer::perfdata::read_perf_data_with_kernel(&file, &look, true)?;
    let t_read = t0.elapsed().as_secs_f64();
    let sym = analyzer::symbolize::Symbolizer::with_kernel(pd.maps.clone(), ks);
    let t = analyzer::stages::perfdata_table_with(&pd, sym, &rules)?;
    let ours = t0.elapsed().as_secs_f64();
    println!(
        "  fwdscope: read (then the recorded kernel's kallsyms) {t_read:.3} s, aggregate+symbolize+attribute {:.3} s",
        ours - t_read
    );
    let t0 = Instant::now();
    let out =
        Command::new("perf").args(["report", "--stdio", "--sort", "sym", "-g", "none", "-i"]).arg(&file).output()?;
    let theirs = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        return Err(format!("perf report failed: {}", String::from_utf8_lossy(&out.stderr).trim()).into());
    }
    println!(
        "perf.data of {} samples: fwdscope import+symbolize+attribute {:.3} s, perf report {:.3} s: {:.2}x faster (goal 10x)",
        t.samples,
        ours,
        theirs,
        theirs / ours
    );
    if t.samples < 500_000 {
        println!("NOTE: fewer than 500k samples were recorded ({})", t.samples);
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[path = "../tests/common/mod.rs"]
mod common;

fn native_aggregation() -> BenchResult {
    let dir = std::env::temp_dir().join(format!("fwdscope-bench-native-{}", std::process::id()));
    let funcs = [
        forwarder::fib::dir24::fwd_lookup_fib_dir24 as *const () as usize as u64,
        forwarder::slab::fwd_slab_alloc as *const () as usize as u64,
        forwarder::stages::driver_tx::fwd_driver_tx_doorbell as *const () as usize as u64,
        forwarder::packet::checksum as *const () as usize as u64,
    ];
    let pid = 777;
    let n = 5_000_000u64;
    let mut w = RecordingWriter::create(&dir, true)?;
    let mut x = 0x2545F4914F6CDD1Du64;
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let f = funcs[(x % 4) as usize];
        w.push_sample(Sample {
            time: i,
            pid,
            tid: pid + ((x >> 8) % 4) as u32,
            cpu: 0,
            ip: f + (x >> 16) % 1000,
            period: 250_000,
            kernel: false,
            callchain: vec![],
        });
    }
    common::map_functions(&mut w, &funcs, pid);
    let rec = common::finish(w, "cpu-clock", "cpu-clock", None);
    let rules = Rules::builtin();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = Instant::now();
        let t = analyzer::stages::stage_table(&rec, &rules)?;
        best = best.min(t0.elapsed().as_secs_f64());
        assert_eq!(t.samples, n);
    }
    println!(
        "native recording of {n} samples: stage table in {best:.3} s = {:.1} M samples/s (goal 5)",
        n as f64 / best / 1e6
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn main() -> BenchResult {
    // `cargo test --benches` runs this without --bench: stay quick there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("analyze bench: run with `cargo bench -p analyzer --bench analyze`");
        return Ok(());
    }
    native_aggregation()?;
    perf_vs_ours()
}
