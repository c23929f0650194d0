//! `annotate` against `report` and against `perf annotate`, as ratios inside one run
//! (`cargo bench -p analyzer --bench annotate`): a perf.data file of about 2M samples is
//! recorded here system-wide (every CPU every 20 us of cpu-clock while `yes` and `dd` keep
//! both busy; FWDSCOPE_BENCH_SECS, default 20 s), then in interleaved rounds
//! (FWDSCOPE_BENCH_ROUNDS, default 3): the stage table of the file (`report`'s work),
//! `annotate` of its top 20 symbols, and `perf annotate --stdio --skip-missing
//! --percent-limit P` where P is the 20th symbol's share, so perf answers the same
//! question (it annotates every symbol at or above it that it can disassemble). Goals:
//! annotate within 2x of the stage table's time, and faster than perf annotate. Skipped,
//! saying why, without perf or the right to sample every CPU.

use analyzer::annotate::{annotate, Options};
use analyzer::rules::Rules;
use analyzer::symbolize::SymbolPaths;
use std::process::Command;
use std::time::Instant;

type BenchResult = Result<(), Box<dyn std::error::Error>>;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> BenchResult {
    // `cargo test --benches` runs this without --bench: stay quick there.
    if !std::env::args().any(|a| a == "--bench") {
        println!("annotate bench: run with `cargo bench -p analyzer --bench annotate`");
        return Ok(());
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (secs, rounds) = (env("FWDSCOPE_BENCH_SECS", 20), env("FWDSCOPE_BENCH_ROUNDS", 3).max(1));
    let dir = std::env::temp_dir().join(format!("fwdscope-bench-annotate-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("perf.data");
    // Both killed by PID (no job control in `sh -c`), both off the pipes perf's output
    // is read through (a survivor holding one would keep this waiting).
    let load = format!(
        "yes > /dev/null 2>&1 & y=$!; dd if=/dev/zero of=/dev/null bs=64 > /dev/null 2>&1 & d=$!; sleep {secs}; \
         kill $y $d"
    );
    let rec = Command::new("perf")
        .args(["record", "-q", "-a", "-e", "cpu-clock", "-c", "20000", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", &load])
        .output();
    match rec {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!("SKIP annotate benchmark: perf record failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            return Ok(());
        }
        Err(e) => {
            println!("SKIP annotate benchmark: perf is not installed ({e})");
            return Ok(());
        }
    }
    let rules = Rules::builtin();
    let paths = SymbolPaths::default();
    let input = analyzer::input::open(&file)?;
    let o = Options { top: 20, ..Options::default() };
    let first = annotate(&input, &file, &rules, &paths, &o)?;
    let limit = first.symbols.last().map_or(0.0, |s| s.percent);
    let decoded = first.symbols.iter().filter(|s| s.instructions_total > 0).count();
    let (mut table, mut ours, mut perf) = (Vec::new(), Vec::new(), Vec::new());
    let mut perf_annotated = 0;
    for r in 0..rounds {
        // Each round in another order: drift on a shared machine spreads over all three.
        for k in 0..3 {
            match (k + r as usize) % 3 {
                0 => {
                    let t0 = Instant::now();
                    let t = input.stage_table(&rules, &paths)?;
                    table.push(t0.elapsed().as_secs_f64());
                    assert_eq!(t.samples, first.samples);
                }
                1 => {
                    let t0 = Instant::now();
                    let a = annotate(&input, &file, &rules, &paths, &o)?;
                    ours.push(t0.elapsed().as_secs_f64());
                    assert_eq!(a.symbols.len(), first.symbols.len());
                }
                _ => {
                    let t0 = Instant::now();
                    let out = Command::new("perf")
                        .args(["annotate", "--stdio", "--stdio-color", "never", "--skip-missing", "--percent-limit"])
                        .arg(format!("{limit:.2}"))
                        .arg("-i")
                        .arg(&file)
                        .output()?;
                    perf.push(t0.elapsed().as_secs_f64());
                    perf_annotated = String::from_utf8_lossy(&out.stdout).matches(" Percent |").count();
                }
            }
        }
    }
    let (t, a, p) = (median(table), median(ours), median(perf));
    println!(
        "perf.data of {} samples ({} distinct symbols' top 20: {} decoded, the rest kernel functions listed by address \
         without --vmlinux); medians of {rounds} interleaved rounds:",
        first.samples,
        first.symbols.len(),
        decoded
    );
    println!("  stage table (report's work)   {t:8.3} s");
    println!("  annotate --top 20             {a:8.3} s = {:.2}x the stage table (goal at most 2x)", a / t);
    println!(
        "  perf annotate --percent-limit {limit:.2}  {p:8.3} s ({perf_annotated} functions disassembled) = annotate {:.2}x \
         faster (goal above 1)",
        p / a
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average after: {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
