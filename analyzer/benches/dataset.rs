//! `report` over a fleet dataset (`cargo bench -p analyzer --bench dataset`): 100 runs on 10
//! hosts, 10,000,000 samples in all, built from the fixture dataset's real stack tables
//! (each run one of them, its counts scaled to 100,000 samples). Times opening the
//! dataset plus the whole stage table, and the table by host, five rounds each,
//! interleaved; prints samples per second (goal: 5M/s; the samples a run's stack rows
//! stand for: each distinct stack is one row) and the process's peak memory.

use analyzer::dataset::{Dataset, GroupBy};
use analyzer::rules::Rules;
use polars::prelude::*;
use std::path::Path;
use std::time::Instant;

type BenchResult = Result<(), Box<dyn std::error::Error>>;

const RUNS: usize = 100;
const HOSTS: usize = 10;
const SAMPLES_PER_RUN: u64 = 100_000;

fn peak_rss_mib() -> f64 {
    // SAFETY: getrusage fills the struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss as f64 / 1024.0
}

fn build(dir: &Path) -> BenchResult {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/notebooks/dataset");
    let mut sources = Vec::new();
    for host in std::fs::read_dir(&fixture)? {
        let host = host?.path();
        if !host.file_name().is_some_and(|n| n.to_string_lossy().starts_with("host=")) {
            continue;
        }
        for run in std::fs::read_dir(&host)? {
            let run = run?.path();
            let df = ParquetReader::new(std::fs::File::open(run.join("stacks.parquet"))?).finish()?;
            let info: analyzer::dataset::RunInfo =
                serde_json::from_str(&std::fs::read_to_string(run.join("run.json"))?)?;
            sources.push((df, info));
        }
    }
    std::fs::create_dir_all(dir)?;
    std::fs::copy(fixture.join("_dataset.json"), dir.join("_dataset.json"))?;
    for i in 0..RUNS {
        let (df, info) = &sources[i % sources.len()];
        let (host, run) = (format!("h{:02}", i % HOSTS), format!("r{i:03}"));
        let total: u64 = df.column("samples")?.u64()?.iter().flatten().sum();
        // Scale every stack by the same factor; the remainder goes to the largest stack.
        let k = SAMPLES_PER_RUN / total.max(1);
        let mut samples: Vec<u64> = df.column("samples")?.u64()?.iter().map(|v| v.unwrap_or(0) * k).collect();
        let rest = SAMPLES_PER_RUN - samples.iter().sum::<u64>();
        if let Some(m) = samples.iter_mut().max() {
            *m += rest;
        }
        let period: Vec<u64> = df.column("period")?.u64()?.iter().map(|v| v.unwrap_or(0) * k).collect();
        let mut out = df.clone();
        out.with_column(Column::new("samples".into(), samples))?;
        out.with_column(Column::new("period".into(), period))?;
        out.with_column(Column::new("host".into(), vec![host.clone(); df.height()]))?;
        out.with_column(Column::new("run".into(), vec![run.clone(); df.height()]))?;
        let part = dir.join(format!("host={host}")).join(format!("run={run}"));
        std::fs::create_dir_all(&part)?;
        ParquetWriter::new(std::fs::File::create(part.join("stacks.parquet"))?).finish(&mut out)?;
        let mut info = info.clone();
        (info.host, info.run, info.samples, info.stacks) = (host, run, SAMPLES_PER_RUN, df.height());
        std::fs::write(part.join("run.json"), serde_json::to_string_pretty(&info)?)?;
    }
    Ok(())
}

fn main() -> BenchResult {
    let dir = std::env::temp_dir().join(format!("fwdscope-bench-dataset-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    build(&dir)?;
    let rss_built = peak_rss_mib();
    let rules = Rules::builtin();
    let total = (RUNS as u64 * SAMPLES_PER_RUN) as f64;
    let (mut whole, mut by_host) = (Vec::new(), Vec::new());
    for round in 0..5 {
        let one = |grouped: bool| -> Result<f64, Box<dyn std::error::Error>> {
            let t0 = Instant::now();
            let ds = Dataset::open(&dir)?;
            let n = if grouped {
                ds.grouped(GroupBy::Host)?.groups.iter().map(|g| g.samples).sum::<u64>()
            } else {
                ds.stage_table(&rules)?.samples
            };
            assert_eq!(n, RUNS as u64 * SAMPLES_PER_RUN);
            Ok(t0.elapsed().as_secs_f64())
        };
        // Alternate which goes first.
        if round % 2 == 0 {
            whole.push(one(false)?);
            by_host.push(one(true)?);
        } else {
            by_host.push(one(true)?);
            whole.push(one(false)?);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (w, h) = (median(&mut whole), median(&mut by_host));
    let rows: usize = Dataset::open(&dir)?.runs.iter().map(|r| r.info.stacks).sum();
    println!(
        "dataset: {RUNS} runs on {HOSTS} hosts, {} samples in {rows} stack rows (a run's stacks are aggregated), {}",
        total as u64,
        dir.display()
    );
    println!("  report (stage table):  {w:.3} s median of 5 = {:.1}M samples/s (goal 5M/s)", total / w / 1e6);
    println!("  report --by host:      {h:.3} s median of 5 = {:.1}M samples/s", total / h / 1e6);
    println!("  peak RSS {:.0} MiB (after building the dataset: {rss_built:.0} MiB)", peak_rss_mib());
    if std::env::var_os("FWDSCOPE_BENCH_KEEP").is_some() {
        println!("  kept {} (FWDSCOPE_BENCH_KEEP)", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
