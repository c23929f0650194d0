//! `fwdscope sweep`: the bundled forwarder over every combination of the swept settings
//! (prefetch depth, cache mode, FIB engine, workers), each repeated, in interleaved order
//! (round r runs the settings rotated by r, so drift spreads over all of them); every run
//! is a recording; then one results Parquet and the table (analyzer::sweep).

use crate::record::forwarder_command;
use analyzer::rules::Rules;
use analyzer::sweep::{summarize, table_text, write_parquet, RunResult};
use anyhow::{bail, Context, Result};
use collector::recording::Recording;
use collector::session::{record, RecordOptions, Target};
use forwarder::config::CacheMode;
use forwarder::fib::FibKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// Prefetch depths to sweep, e.g. 0,1,2,3,4,5.
    #[arg(long, value_delimiter = ',')]
    pub prefetch: Vec<u8>,
    /// Cache modes to sweep, e.g. rtcache,nocache,nhcache.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub cache: Vec<CacheMode>,
    /// FIB engines to sweep, e.g. hash,lctrie,dir24.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub fib: Vec<FibKind>,
    /// Worker counts to sweep, e.g. 1,2.
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// Runs per setting.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Seconds of forwarding per run.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Output directory: runs/NNN/ recordings, results.parquet, table.txt.
    #[arg(short = 'o', long, default_value = "sweep-out")]
    pub output: PathBuf,
    /// Replace an existing output directory.
    #[arg(long)]
    pub force: bool,
    /// Samples per second in each run's recording.
    #[arg(short = 'F', long, default_value_t = 999)]
    pub freq: u64,
    /// Record callchains (charges shared helpers to their caller's stage; costs a little).
    #[arg(short = 'g')]
    pub callchain: bool,
    /// Forwarder flags every run shares (after `--`).
    #[arg(last = true)]
    pub rest: Vec<String>,
}

/// One setting: its label, its parameters, and the forwarder flags that make it.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub label: String,
    pub params: BTreeMap<String, String>,
    pub flags: Vec<String>,
}

/// Every combination of the swept values (one setting, the base, when nothing is swept).
pub fn settings(a: &SweepArgs) -> Vec<Setting> {
    let mut axes: Vec<(&str, Vec<String>)> = Vec::new();
    let names = |v: Vec<String>| v;
    if !a.prefetch.is_empty() {
        axes.push(("prefetch", names(a.prefetch.iter().map(u8::to_string).collect())));
    }
    if !a.cache.is_empty() {
        axes.push(("cache", a.cache.iter().map(|c| c.name().to_string()).collect()));
    }
    if !a.fib.is_empty() {
        axes.push(("fib", a.fib.iter().map(|f| f.to_string()).collect()));
    }
    if !a.workers.is_empty() {
        axes.push(("workers", a.workers.iter().map(usize::to_string).collect()));
    }
    let mut out = vec![Setting { label: String::new(), params: BTreeMap::new(), flags: Vec::new() }];
    for (name, values) in &axes {
        out = out
            .into_iter()
            .flat_map(|s| {
                values.iter().map(move |v| {
                    let mut n = s.clone();
                    n.label =
                        if n.label.is_empty() { format!("{name} {v}") } else { format!("{}, {name} {v}", n.label) };
                    n.params.insert(name.to_string(), v.clone());
                    n.flags.extend([format!("--{name}"), v.clone()]);
                    n
                })
            })
            .collect();
    }
    if out.len() == 1 && out[0].label.is_empty() {
        out[0].label = "base".into();
    }
    out
}

/// The run order: round r runs the settings rotated by r (interleaved: no setting's repeats
/// in a row, and each setting takes each position in turn).
pub fn order(n_settings: usize, repeat: usize) -> Vec<(usize, usize)> {
    (0..repeat).flat_map(|r| (0..n_settings).map(move |i| ((i + r) % n_settings, r))).collect()
}

/// Forwarded Mpps of a recording: tx_packets of every worker, last minus first, over the
/// time between those counter rows.
fn mpps(rec: &Recording) -> Result<f64> {
    let rows: Vec<_> =
        rec.counters()?.into_iter().filter(|r| r.source == "forwarder" && r.name == "tx_packets").collect();
    let (Some(t0), Some(t1)) = (rows.iter().map(|r| r.time).min(), rows.iter().map(|r| r.time).max()) else {
        bail!("{}: no forwarder counters (did the forwarder start?)", rec.dir.display());
    };
    let at = |t: u64| -> u64 { rows.iter().filter(|r| r.time == t).map(|r| r.value).sum() };
    if t1 <= t0 {
        bail!("{}: the counters cover no time", rec.dir.display());
    }
    Ok((at(t1).saturating_sub(at(t0))) as f64 / ((t1 - t0) as f64 / 1e9) / 1e6)
}

fn run_one(a: &SweepArgs, s: &Setting, dir: &Path, program: &Path, base: &[String]) -> Result<RunResult> {
    let mut args = base.to_vec();
    args.extend(a.rest.iter().cloned());
    args.extend(s.flags.iter().cloned());
    args.extend(["--duration".to_string(), a.duration.to_string(), "-i".into(), a.duration.to_string()]);
    let mut o = RecordOptions::new(dir.to_path_buf(), Target::Forwarder { program: program.to_path_buf(), args });
    o.force = true;
    o.freq = Some(a.freq);
    o.callchain = a.callchain;
    record(&o, &AtomicBool::new(false), None, &mut |_| {})?;
    let rec = Recording::open(dir)?;
    let t = analyzer::stages::stage_table(&rec, &Rules::builtin())?;
    Ok(RunResult {
        setting: s.label.clone(),
        params: s.params.clone(),
        repeat: 0,
        mpps: mpps(&rec)?,
        stages: t.stages.iter().filter_map(|r| Some((r.stage.clone(), r.per_packet?))).collect(),
    })
}

pub fn run(a: &SweepArgs) -> Result<()> {
    if a.repeat == 0 || !a.duration.is_finite() || a.duration <= 0.0 {
        bail!("--repeat must be at least 1 and --duration positive");
    }
    if a.output.exists() {
        if !a.force {
            bail!("{} exists (use --force to replace it)", a.output.display());
        }
        std::fs::remove_dir_all(&a.output).with_context(|| format!("removing {}", a.output.display()))?;
    }
    std::fs::create_dir_all(a.output.join("runs"))?;
    let sets = settings(a);
    let plan = order(sets.len(), a.repeat);
    let (program, base) = forwarder_command(&None)?;
    let bar = indicatif::ProgressBar::new(plan.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {elapsed} elapsed, {eta} left  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let t0 = Instant::now();
    let mut results = Vec::new();
    for (k, &(si, r)) in plan.iter().enumerate() {
        let s = &sets[si];
        bar.set_message(format!("{} (repeat {})", s.label, r + 1));
        let dir = a.output.join("runs").join(format!("{:03}", k + 1));
        let mut res = run_one(a, s, &dir, &program, &base).with_context(|| format!("run {} ({})", k + 1, s.label))?;
        res.repeat = r;
        results.push(res);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let wall = t0.elapsed();
    write_parquet(&a.output.join("results.parquet"), &results)?;
    let sums = summarize(&results);
    let stages = ["lookup", "gc", "slab", "driver", "ip"];
    let mut text = format!(
        "sweep: {} settings x {} repeats, {:.1} s each, interleaved; sampling cpu-clock or cycles per the recordings\n",
        sets.len(),
        a.repeat,
        a.duration
    );
    text.push_str(&table_text(&sums, &stages, "ns"));
    let forwarding = Duration::from_secs_f64(a.duration * plan.len() as f64);
    let overhead = wall.saturating_sub(forwarding);
    text.push_str(&format!(
        "time: {:.1} s in all, {:.1} s forwarding; overhead (start-up, recording, analysis) {:.1} s = {:.1}%\n",
        wall.as_secs_f64(),
        forwarding.as_secs_f64(),
        overhead.as_secs_f64(),
        100.0 * overhead.as_secs_f64() / wall.as_secs_f64().max(1e-9)
    ));
    std::fs::write(a.output.join("table.txt"), &text)?;
    print!("{text}");
    println!("runs: {}/runs/NNN  results: {}/results.parquet", a.output.display(), a.output.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        a: SweepArgs,
    }

    #[test]
    fn settings_are_the_product_and_runs_interleave() {
        let c = Cli::parse_from(["x", "--prefetch", "0,2", "--cache", "rtcache,nocache", "--", "--routes", "1000"]);
        let s = settings(&c.a);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "prefetch 0, cache rtcache",
                "prefetch 0, cache nocache",
                "prefetch 2, cache rtcache",
                "prefetch 2, cache nocache"
            ]
        );
        assert_eq!(s[3].flags, ["--prefetch", "2", "--cache", "nocache"]);
        assert_eq!(c.a.rest, ["--routes", "1000"]);
        // 3 settings x 3 repeats: each round rotated; no setting twice in a row.
        let o = order(3, 3);
        assert_eq!(o.iter().map(|x| x.0).collect::<Vec<_>>(), [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        assert!(o.windows(2).all(|w| w[0].0 != w[1].0));
        assert_eq!(settings(&Cli::parse_from(["x"]).a)[0].label, "base");
    }
}
