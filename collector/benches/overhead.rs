//! Collector overhead, in one run: the forwarder's Mpps with no profiling, under
//! `fwdscope record` at 1 kHz and 10 kHz, and under `perf record -F` at the same rates; and
//! the recorders' own CPU time (from /proc), which host noise cannot hide the way it hides a
//! few percent of Mpps. Settings are interleaved over the repeats so drift spreads evenly.
//!
//! Run: `cargo build --release && cargo bench -p collector --bench overhead`.
//! FWDSCOPE_OVERHEAD_SECS per run (default 3), FWDSCOPE_OVERHEAD_REPEATS (default 5).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn release_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench exe");
    exe.parent().and_then(|p| p.parent()).expect("target dir").to_path_buf()
}

fn mpps_from_json(out: &str) -> Option<f64> {
    let last = out.lines().rev().find(|l| l.contains("\"summary\""))?;
    let v: serde_json::Value = serde_json::from_str(last).ok()?;
    v["total_mpps"].as_f64()
}

/// utime + stime of a process in seconds (its own threads, not its children).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

/// Run a command to completion, sampling its own CPU time until it exits.
fn run_measured(cmd: &mut Command) -> (String, f64, f64) {
    let t0 = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let pid = child.id();
    let mut cpu = 0.0;
    let out = std::thread::scope(|s| {
        let mut stdout = child.stdout.take().expect("stdout");
        let reader = s.spawn(move || {
            let mut v = String::new();
            use std::io::Read;
            let _ = stdout.read_to_string(&mut v);
            v
        });
        loop {
            if let Some(c) = cpu_seconds(pid) {
                cpu = c;
            }
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        reader.join().unwrap_or_default()
    });
    (out, cpu, t0.elapsed().as_secs_f64())
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied()
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let secs: f64 = std::env::var("FWDSCOPE_OVERHEAD_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let repeats: usize = std::env::var("FWDSCOPE_OVERHEAD_REPEATS").ok().and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = release_dir();
    let fwdscope = dir.join("fwdscope");
    assert!(fwdscope.exists(), "{} missing: cargo build --release first", fwdscope.display());
    let fwd_args: Vec<String> = [
        "forward",
        "--duration",
        &secs.to_string(),
        "--cache",
        "nhcache",
        "--fib",
        "dir24",
        "--prefetch",
        "4",
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let perf_ok = Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success());
    let settings: [(&str, u64, bool); 5] = [
        ("none", 0, false),
        ("fwdscope 1 kHz", 1000, false),
        ("perf 1 kHz", 1000, true),
        ("fwdscope 10 kHz", 10_000, false),
        ("perf 10 kHz", 10_000, true),
    ];
    let mut mpps: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); settings.len()];
    let tmp = std::env::temp_dir().join(format!("fwdscope-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    for r in 0..repeats {
        for (i, (_, f, perf)) in settings.iter().enumerate() {
            let out_dir: &Path = &tmp.join(format!("rec-{r}-{i}"));
            let (stdout, cpu_s, wall) = match (f, perf) {
                (0, _) => run_measured(Command::new(&fwdscope).args(&fwd_args)),
                (_, true) if !perf_ok => continue,
                (f, true) => run_measured(
                    Command::new("perf")
                        .args(["record", "-q", "-F", &f.to_string(), "-o"])
                        .arg(out_dir)
                        .arg("--")
                        .arg(&fwdscope)
                        .args(&fwd_args),
                ),
                (f, false) => {
                    let (_, c, w) = run_measured(
                        Command::new(&fwdscope)
                            .args(["record", "-F", &f.to_string(), "-o"])
                            .arg(out_dir)
                            .arg("--")
                            .args(&fwd_args[1..]),
                    );
                    (std::fs::read_to_string(out_dir.join("target.log")).unwrap_or_default(), c, w)
                }
            };
            let _ = std::fs::remove_dir_all(out_dir);
            let _ = std::fs::remove_file(out_dir);
            if let Some(m) = mpps_from_json(&stdout) {
                mpps[i].push(m);
            }
            if *f > 0 {
                cpu[i].push(100.0 * cpu_s / wall);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let base = median(&mpps[0]);
    println!("collector overhead: fwdscope forward (nhcache + dir24), {secs} s x {repeats} interleaved repeats");
    println!("{:>16} {:>10} {:>12} {:>20}", "setting", "Mpps", "vs none", "recorder CPU (% core)");
    for (i, (name, _, _)) in settings.iter().enumerate() {
        let m = median(&mpps[i]);
        let c = median(&cpu[i]);
        println!(
            "{name:>16} {:>10} {:>12} {:>20}   Mpps runs {:?}",
            m.map_or("-".into(), |m| format!("{m:.3}")),
            match (m, base) {
                (Some(m), Some(b)) => format!("{:+.1}%", (m / b - 1.0) * 100.0),
                _ => "-".into(),
            },
            c.map_or("-".into(), |c| format!("{c:.2}")),
            mpps[i].iter().map(|x| (x * 100.0).round() / 100.0).collect::<Vec<_>>()
        );
    }
}
