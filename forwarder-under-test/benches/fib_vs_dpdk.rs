//! fwdscope's FIB engines against DPDK's: `dir24` and `lctrie` beside DPDK's `rte_lpm` and
//! `rte_fib` (DIR24_8, 4-byte next hops), in one process, on the same real table (the
//! fixture's prefixes plus aggregates and a default route) and the same 1M random
//! addresses inside its prefixes. `dir24` runs twice: through the forwarder's entry points
//! (`fwd_lookup_fib_dir24` and `_batch`, out of line so profiles name the lookup stage) and
//! inline (`Dir24::lookup`, `lookup_group` for x4 and `lookup_batch`, as a program
//! embedding the engine calls them,
//! and as DPDK's lookups are inline functions). Every engine's answers are checked against `dir24`'s for
//! every address before anything is timed. Then interleaved rounds: in each round every
//! (engine, mode) walks the whole stream once, in an order rotated per round; a mode is one
//! lookup at a time (`single`), groups of 4 (`x4`: fwdscope's batch with 4 prefetched
//! ahead, DPDK's `rte_lpm_lookupx4`, `rte_fib_lookup_bulk` of 4), of 8 and of 32 (`x8`,
//! `burst32`: DPDK's bulk lookups, fwdscope's batch prefetching the whole group). Printed:
//! the build time and the resident memory each build added, then per mode and engine the
//! median ns per lookup, lookups per second, and the ratio to `rte_lpm`'s time in the same
//! round (geometric mean, 95% t interval over the rounds; above 1: slower than rte_lpm).
//!
//! Run: `cargo bench -p forwarder-under-test --bench fib_vs_dpdk` (FWDSCOPE_BENCH_ROUNDS,
//! default 15). DPDK's side needs its development files at build time (the build script
//! compiles benches/dpdk/lpm_shim.c against `pkg-config libdpdk`) and starts DPDK's EAL
//! without hugepages (`--no-huge --in-memory`, 1 GiB of ordinary memory); without them
//! the benchmark says why and times nothing.

#[cfg(fwd_dpdk_bench)]
mod common;

fn main() {
    #[cfg(fwd_dpdk_bench)]
    dpdk::run();
    #[cfg(not(fwd_dpdk_bench))]
    println!("fib_vs_dpdk: skipped: {}", env!("FWD_DPDK_BENCH_WHY"));
}

#[cfg(fwd_dpdk_bench)]
mod dpdk {
    use super::common::{stream, table, STREAM};
    use forwarder::fib::{Fib, FibKind};
    use forwarder::table::RouteTable;
    use std::ffi::{c_char, c_int, c_uint, c_void};
    use std::hint::black_box;
    use std::time::Instant;

    extern "C" {
        fn fs_dpdk_init(mem_mb: c_uint, err: *mut c_char, err_len: usize) -> c_int;
        fn fs_dpdk_cleanup();
        fn fs_lpm_create(max_rules: u32, tbl8s: u32) -> *mut c_void;
        fn fs_lpm_add(lpm: *mut c_void, ip: u32, depth: u8, nh: u32) -> c_int;
        fn fs_lpm_free(lpm: *mut c_void);
        fn fs_lpm_run(lpm: *const c_void, ips: *const u32, out: *mut u32, n: usize, chunk: c_uint);
        fn fs_fib_create(max_routes: c_int, tbl8s: u32) -> *mut c_void;
        fn fs_fib_add(fib: *mut c_void, ip: u32, depth: u8, nh: u32) -> c_int;
        fn fs_fib_free(fib: *mut c_void);
        fn fs_fib_run(fib: *mut c_void, ips: *mut u32, out: *mut u32, n: usize, chunk: c_uint);
    }

    /// The modes: addresses per call (1: one at a time).
    const MODES: [(&str, usize); 4] = [("single", 1), ("x4", 4), ("x8", 8), ("burst32", 32)];

    enum Engine {
        Fwdscope(Fib),
        /// dir24's lookups inline (the `Fib` is a dir24 one).
        Inline(Fib),
        Lpm(*mut c_void),
        RteFib(*mut c_void),
    }

    impl Engine {
        fn name(&self) -> String {
            match self {
                Engine::Fwdscope(f) => format!("fwdscope {}", f.kind().name()),
                Engine::Inline(f) => format!("fwdscope {} inline", f.kind().name()),
                Engine::Lpm(_) => "rte_lpm".into(),
                Engine::RteFib(_) => "rte_fib dir24_8".into(),
            }
        }

        /// Look up every address of `addrs` into `out`, `chunk` per call.
        fn run(&self, addrs: &mut [u32], out: &mut [u32], chunk: usize) {
            match self {
                Engine::Fwdscope(f) if chunk == 1 => {
                    for (o, &a) in out.iter_mut().zip(addrs.iter()) {
                        *o = f.lookup(a);
                    }
                }
                Engine::Fwdscope(f) => {
                    for (a, o) in addrs.chunks(chunk).zip(out.chunks_mut(chunk)) {
                        f.lookup_batch(a, o, chunk);
                    }
                }
                Engine::Inline(Fib::Dir24(d)) if chunk == 1 => {
                    for (o, &a) in out.iter_mut().zip(addrs.iter()) {
                        *o = d.lookup(a);
                    }
                }
                // Groups of 4 as rte_lpm_lookupx4 takes them (the stream's length is a
                // multiple of 4).
                Engine::Inline(Fib::Dir24(d)) if chunk == 4 => {
                    for (a, o) in addrs.as_chunks::<4>().0.iter().zip(out.as_chunks_mut::<4>().0) {
                        d.lookup_group(a, o);
                    }
                }
                Engine::Inline(Fib::Dir24(d)) => {
                    for (a, o) in addrs.chunks(chunk).zip(out.chunks_mut(chunk)) {
                        d.lookup_batch(a, o, chunk);
                    }
                }
                Engine::Inline(_) => unreachable!("only dir24 runs inline"),
                // SAFETY: the table was built by fs_lpm_create; both slices hold addrs.len()
                // values, and the shim reads and writes within them.
                Engine::Lpm(p) => unsafe {
                    fs_lpm_run(*p, addrs.as_ptr(), out.as_mut_ptr(), addrs.len(), chunk as c_uint)
                },
                // SAFETY: as above (rte_fib_lookup_bulk only reads the addresses).
                Engine::RteFib(p) => unsafe {
                    fs_fib_run(*p, addrs.as_mut_ptr(), out.as_mut_ptr(), addrs.len(), chunk as c_uint)
                },
            }
        }
    }

    impl Drop for Engine {
        fn drop(&mut self) {
            match self {
                // SAFETY: each pointer came from its create function and is freed once.
                Engine::Lpm(p) => unsafe { fs_lpm_free(*p) },
                Engine::RteFib(p) => unsafe { fs_fib_free(*p) },
                Engine::Fwdscope(_) | Engine::Inline(_) => {}
            }
        }
    }

    /// Resident bytes of this process (/proc/self/statm).
    fn rss() -> u64 {
        let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
        let pages: u64 = s.split_whitespace().nth(1).and_then(|x| x.parse().ok()).unwrap_or(0);
        // SAFETY: sysconf has no preconditions.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
    }

    /// The routes as DPDK takes them: prefix lengths 1 to 32, so a default route becomes
    /// the two /1 halves it covers (each unless the table has that /1 already): the same
    /// answers, since any longer prefix still wins.
    fn dpdk_routes(t: &RouteTable) -> Vec<(u32, u8, u32)> {
        let mut v: Vec<(u32, u8, u32)> =
            t.routes.iter().filter(|r| r.len > 0).map(|r| (r.prefix, r.len, r.nh)).collect();
        for d in t.routes.iter().filter(|r| r.len == 0) {
            for half in [0u32, 0x8000_0000] {
                if !t.routes.iter().any(|r| r.len == 1 && r.prefix == half) {
                    v.push((half, 1, d.nh));
                }
            }
        }
        v
    }

    fn build(t: &RouteTable) -> Vec<(Engine, f64, u64)> {
        // tbl8 groups: one per /24 holding a longer prefix (rte_lpm and rte_fib alike).
        let groups: std::collections::HashSet<u32> =
            t.routes.iter().filter(|r| r.len > 24).map(|r| r.prefix >> 8).collect();
        let tbl8s = groups.len() as u32 + 1024;
        let mut out = Vec::new();
        for k in [FibKind::Dir24, FibKind::Lctrie] {
            let (m0, t0) = (rss(), Instant::now());
            let f = Fib::build(k, &t.routes).expect("build");
            out.push((Engine::Fwdscope(f), t0.elapsed().as_secs_f64(), rss().saturating_sub(m0)));
        }
        let (m0, t0) = (rss(), Instant::now());
        let f = Fib::build(FibKind::Dir24, &t.routes).expect("build");
        out.push((Engine::Inline(f), t0.elapsed().as_secs_f64(), rss().saturating_sub(m0)));
        let routes = dpdk_routes(t);
        let (m0, t0) = (rss(), Instant::now());
        // SAFETY: the EAL is up; every route is a valid prefix (host bits clear, len 1..=32).
        let lpm = unsafe { fs_lpm_create(routes.len() as u32, tbl8s) };
        assert!(!lpm.is_null(), "rte_lpm_create failed");
        for &(prefix, len, nh) in &routes {
            // SAFETY: as above.
            let rc = unsafe { fs_lpm_add(lpm, prefix, len, nh) };
            assert_eq!(rc, 0, "rte_lpm_add {prefix:#x}/{len}");
        }
        out.push((Engine::Lpm(lpm), t0.elapsed().as_secs_f64(), rss().saturating_sub(m0)));
        let (m0, t0) = (rss(), Instant::now());
        // SAFETY: as above.
        let fib = unsafe { fs_fib_create(routes.len() as c_int + 1, tbl8s) };
        assert!(!fib.is_null(), "rte_fib_create failed");
        for &(prefix, len, nh) in &routes {
            // SAFETY: as above.
            let rc = unsafe { fs_fib_add(fib, prefix, len, nh) };
            assert_eq!(rc, 0, "rte_fib_add {prefix:#x}/{len}");
        }
        out.push((Engine::RteFib(fib), t0.elapsed().as_secs_f64(), rss().saturating_sub(m0)));
        out
    }

    /// Mean and 95% t half-width of `x`.
    fn mean_ci(x: &[f64]) -> (f64, f64) {
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let v = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0);
        // t(0.975, n-1) for the round counts used (2..=30), else the normal's 1.96.
        const T: [f64; 30] = [
            0.0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
            2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045,
        ];
        let df = x.len() - 1;
        let t = T.get(df).copied().unwrap_or(1.96);
        (m, t * (v / n).sqrt())
    }

    fn median(mut x: Vec<f64>) -> f64 {
        x.sort_by(f64::total_cmp);
        let n = x.len();
        if n % 2 == 1 {
            x[n / 2]
        } else {
            (x[n / 2 - 1] + x[n / 2]) / 2.0
        }
    }

    pub fn run() {
        let rounds: usize =
            std::env::var("FWDSCOPE_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).filter(|&r| r >= 2).unwrap_or(15);
        let mut err = [0 as c_char; 256];
        // SAFETY: err is a writable buffer of the length given.
        if unsafe { fs_dpdk_init(1024, err.as_mut_ptr(), err.len()) } != 0 {
            // SAFETY: the shim wrote a NUL-terminated message into err.
            let msg = unsafe { std::ffi::CStr::from_ptr(err.as_ptr()) };
            println!("fib_vs_dpdk: skipped: DPDK's EAL did not start ({})", msg.to_string_lossy());
            return;
        }
        let t = table();
        let mut addrs = stream(&t);
        let load0 = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let engines = build(&t);
        println!(
            "fib_vs_dpdk: {} routes ({} aggregates added), {STREAM} random addresses inside them, {rounds} interleaved rounds",
            t.routes.len(),
            t.aggregates_added
        );
        println!("{:<18} {:>10} {:>12}", "build", "ms", "RSS MiB");
        for (e, secs, bytes) in &engines {
            println!("{:<18} {:>10.1} {:>12.1}", e.name(), secs * 1e3, *bytes as f64 / 1048576.0);
        }
        // Every engine agrees with dir24 on every address, in every mode, before timing.
        let mut want = vec![0u32; STREAM];
        engines[0].0.run(&mut addrs, &mut want, 1);
        let mut got = vec![0u32; STREAM];
        for (e, _, _) in &engines {
            for &(mode, chunk) in &MODES {
                e.run(&mut addrs, &mut got, chunk);
                if let Some(i) = (0..STREAM).find(|&i| got[i] != want[i]) {
                    panic!(
                        "{} ({mode}) answers {} for {}, dir24 {}",
                        e.name(),
                        got[i],
                        std::net::Ipv4Addr::from(addrs[i]),
                        want[i]
                    );
                }
            }
        }
        // ns per lookup, [mode][engine][round].
        let mut ns = vec![vec![vec![0.0f64; rounds]; engines.len()]; MODES.len()];
        let cells: Vec<(usize, usize)> =
            (0..MODES.len()).flat_map(|m| (0..engines.len()).map(move |e| (m, e))).collect();
        for r in 0..rounds {
            for k in 0..cells.len() {
                let (m, e) = cells[(k + r * 7) % cells.len()];
                let t0 = Instant::now();
                engines[e].0.run(&mut addrs, &mut got, MODES[m].1);
                let dt = t0.elapsed().as_secs_f64();
                black_box(&got);
                ns[m][e][r] = dt * 1e9 / STREAM as f64;
            }
        }
        let load1 = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let lpm = 3; // engines' order: dir24, lctrie, dir24 inline, rte_lpm, rte_fib
        println!(
            "{:<8} {:<18} {:>10} {:>12} {:>26}",
            "mode", "engine", "ns/lookup", "Mlookups/s", "time vs rte_lpm [95%]"
        );
        for (m, (mode, _)) in MODES.iter().enumerate() {
            for (e, (eng, _, _)) in engines.iter().enumerate() {
                let med = median(ns[m][e].clone());
                let logs: Vec<f64> = (0..rounds).map(|r| (ns[m][e][r] / ns[m][lpm][r]).ln()).collect();
                let (lm, lh) = mean_ci(&logs);
                let ratio = if e == lpm {
                    "1".to_string()
                } else {
                    format!("{:.3} [{:.3}, {:.3}]", lm.exp(), (lm - lh).exp(), (lm + lh).exp())
                };
                println!("{:<8} {:<18} {:>10.2} {:>12.1} {:>26}", mode, eng.name(), med, 1e3 / med, ratio);
            }
        }
        // SAFETY: sysconf and sched_getcpu have no preconditions.
        let (cpus, cpu) = unsafe { (libc::sysconf(libc::_SC_NPROCESSORS_ONLN), libc::sched_getcpu()) };
        println!(
            "host: {cpus} CPUs online, this thread on CPU {cpu} (DPDK's EAL pins it), load average before {}, after {}",
            load0.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
            load1.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
        );
        drop(engines);
        // SAFETY: every DPDK object was freed above.
        unsafe { fs_dpdk_cleanup() };
        // The EAL's runtime directory (its --file-prefix is this process's own).
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/fwdscope-bench-{}", std::process::id()));
    }
}
