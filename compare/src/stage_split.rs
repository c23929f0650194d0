//! Stages per setting from one live run: the samples recorded alongside the comparison are
//! split into its blocks by the workers' own publish stamps (each worker from the first to
//! the last publish it made under the block's settings, CLOCK_MONOTONIC, the samples'
//! clock), never by the controller's clock. Per block, each stage's sampled time over the
//! packets those workers forwarded in it; per setting, the pooled figure with a t interval
//! over units, and the paired difference against the baseline unit by unit.

use crate::{Error, Result};
use analyzer::rules::Rules;
use analyzer::windows::{stage_totals_by_window, Window};
use collector::recording::Recording;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// One stage of one setting.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageFigure {
    pub stage: String,
    /// Sampled time (or events) per forwarded packet over every counted block of the
    /// setting.
    pub per_packet: f64,
    /// 95% t interval of the per-unit figures.
    pub ci: (f64, f64),
    /// Against the baseline: mean of the per-unit differences and its 95% interval (none
    /// for the baseline).
    pub delta: Option<(f64, (f64, f64))>,
}

/// One setting's stages.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SettingStages {
    pub label: String,
    pub blocks: usize,
    pub stages: Vec<StageFigure>,
}

/// Stages per setting.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StageSplit {
    /// The event sampled and the unit of its periods (`ns` for clock events).
    pub event: String,
    pub unit: String,
    /// Samples of the workers inside a counted block's window, each in exactly one.
    pub in_blocks: u64,
    /// Samples of the workers outside every window (warm-up after switches, left-out
    /// blocks, between blocks).
    pub outside: u64,
    /// Samples of other threads (the device, the controller's process).
    pub other_threads: u64,
    pub settings: Vec<SettingStages>,
}

/// A counted block: its setting, its unit, and each worker's measured interval.
#[derive(Debug, Clone, PartialEq)]
pub struct CountedBlock {
    pub setting: usize,
    pub unit: usize,
    pub workers: Vec<WorkerInterval>,
}

/// A worker's interval in a block: from its first to its last publish under the block's
/// settings (CLOCK_MONOTONIC), and the packets it forwarded in between.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerInterval {
    pub worker: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub packets: u64,
}

/// Stage -> summed period, and the packets forwarded meanwhile: a block's, or the pooled
/// blocks of one setting in one unit.
type Totals = (BTreeMap<String, u64>, u64);

/// Split `rec`'s samples by the counted blocks and compute the stages per setting.
/// `tids[w]` is worker `w`'s thread id; `labels` name the settings, the first being the
/// baseline.
pub fn split(
    rec: &Recording,
    rules: &Rules,
    blocks: &[CountedBlock],
    tids: &[u32],
    labels: &[String],
) -> Result<StageSplit> {
    let (windows, owner) = block_windows(blocks, tids);
    if windows.is_empty() {
        return Err(Error::Config("no counted block to split the samples by".into()));
    }
    let totals = stage_totals_by_window(rec, rules, &windows)?;
    let (per_block, in_blocks) = block_totals(&totals.windows, &owner);
    let mut stages: Vec<String> =
        per_block.values().flat_map(|(m, _)| m.keys().cloned()).collect::<BTreeSet<_>>().into_iter().collect();
    stages.sort_by(|a, b| analyzer::rules::stage_rank(a).cmp(&analyzer::rules::stage_rank(b)).then(a.cmp(b)));
    let (cells, nblocks) = unit_cells(&per_block, blocks, labels.len());
    let settings = labels
        .iter()
        .enumerate()
        .map(|(si, label)| SettingStages {
            label: label.clone(),
            blocks: nblocks.get(si).copied().unwrap_or(0),
            stages: setting_figures(si, &stages, &cells),
        })
        .collect();
    Ok(StageSplit {
        event: totals.event,
        unit: totals.unit,
        in_blocks,
        outside: totals.outside,
        other_threads: totals.other_threads,
        settings,
    })
}

/// The sample windows of the counted blocks: one per worker with a thread id and a
/// non-empty interval, each with its block's index in `blocks` and the worker's packets.
fn block_windows(blocks: &[CountedBlock], tids: &[u32]) -> (Vec<Window>, Vec<(usize, u64)>) {
    let mut windows = Vec::new();
    let mut owner = Vec::new(); // window -> block index in `blocks`
    for (bi, b) in blocks.iter().enumerate() {
        for wb in &b.workers {
            let Some(&tid) = tids.get(wb.worker) else { continue };
            if wb.end_ns > wb.start_ns {
                windows.push(Window { tid, start_ns: wb.start_ns, end_ns: wb.end_ns });
                owner.push((bi, wb.packets));
            }
        }
    }
    (windows, owner)
}

/// Per block (by index): stage -> period and the packets of its windowed workers, from the
/// windows' totals (`owner`: each window's block and packets); and the samples in blocks.
fn block_totals(windows: &[BTreeMap<String, (u64, u64)>], owner: &[(usize, u64)]) -> (BTreeMap<usize, Totals>, u64) {
    let mut per_block: BTreeMap<usize, Totals> = BTreeMap::new();
    let mut in_blocks = 0u64;
    for (wi, stages) in windows.iter().enumerate() {
        let (bi, packets) = owner[wi];
        let e = per_block.entry(bi).or_default();
        e.1 += packets;
        for (stage, (n, period)) in stages {
            *e.0.entry(stage.clone()).or_default() += period;
            in_blocks += n;
        }
    }
    (per_block, in_blocks)
}

/// The blocks pooled per (setting, unit), and the blocks of each of the `n_settings`
/// settings.
fn unit_cells(
    per_block: &BTreeMap<usize, Totals>,
    blocks: &[CountedBlock],
    n_settings: usize,
) -> (BTreeMap<(usize, usize), Totals>, Vec<usize>) {
    let mut cells: BTreeMap<(usize, usize), Totals> = BTreeMap::new();
    let mut nblocks = vec![0usize; n_settings];
    for (bi, (m, packets)) in per_block {
        let b = &blocks[*bi];
        if let Some(n) = nblocks.get_mut(b.setting) {
            *n += 1;
        }
        let c = cells.entry((b.setting, b.unit)).or_default();
        c.1 += packets;
        for (s, p) in m {
            *c.0.entry(s.clone()).or_default() += p;
        }
    }
    (cells, nblocks)
}

/// Per unit of `setting`, `stage`'s period per packet (units without packets left out).
fn per_unit(cells: &BTreeMap<(usize, usize), Totals>, setting: usize, stage: &str) -> BTreeMap<usize, f64> {
    cells
        .iter()
        .filter(|((s, _), (_, pk))| *s == setting && *pk > 0)
        .map(|((_, u), (m, pk))| (*u, m.get(stage).copied().unwrap_or(0) as f64 / *pk as f64))
        .collect()
}

/// Setting `si`'s figure for each of `stages`: per packet over all its blocks, the interval
/// over its units, and (but for the baseline, setting 0) the paired difference against the
/// baseline.
fn setting_figures(si: usize, stages: &[String], cells: &BTreeMap<(usize, usize), Totals>) -> Vec<StageFigure> {
    let (mut period, mut packets): (BTreeMap<&str, u64>, u64) = (BTreeMap::new(), 0);
    for ((s, _), (m, pk)) in cells {
        if *s == si {
            packets += pk;
            for st in stages {
                *period.entry(st.as_str()).or_default() += m.get(st).copied().unwrap_or(0);
            }
        }
    }
    stages
        .iter()
        .map(|st| {
            let mine = per_unit(cells, si, st);
            let xs: Vec<f64> = mine.values().copied().collect();
            let ci = interval(&xs).1;
            let delta = (si > 0).then(|| {
                let base = per_unit(cells, 0, st);
                let d: Vec<f64> = mine.iter().filter_map(|(u, x)| Some(x - base.get(u)?)).collect();
                interval(&d)
            });
            StageFigure {
                stage: st.clone(),
                per_packet: if packets == 0 {
                    f64::NAN
                } else {
                    period.get(st.as_str()).copied().unwrap_or(0) as f64 / packets as f64
                },
                ci,
                delta,
            }
        })
        .collect()
}

/// Mean and 95% t interval; the interval is NaN (unknown) under two values.
fn interval(xs: &[f64]) -> (f64, (f64, f64)) {
    let (m, ci) = analyzer::stats::mean_ci95(xs);
    if xs.len() < 2 {
        (m, (f64::NAN, f64::NAN))
    } else {
        (m, ci)
    }
}

impl StageSplit {
    /// Stages down, settings across: per packet with its interval, then the difference
    /// against the baseline with its interval.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let unit = if self.unit == "ns" { "ns" } else { self.unit.as_str() };
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\nstages per setting, from the same run: samples of {} split by each worker's own publish stamps \
             ({} samples in counted blocks, each in exactly one; {} of the workers outside them, {} of other threads)",
            self.event, self.in_blocks, self.outside, self.other_threads
        );
        for set in &self.settings {
            let _ = writeln!(s, "  {} ({} blocks)", set.label, set.blocks);
            for f in &set.stages {
                let delta = match f.delta {
                    Some((d, (lo, hi))) => format!("  vs baseline {d:+8.1} [{lo:+.1}, {hi:+.1}]"),
                    None => String::new(),
                };
                let _ = writeln!(
                    s,
                    "    {:<10} {:>8.1} {unit}/packet [{:.1}, {:.1}]{delta}",
                    f.stage, f.per_packet, f.ci.0, f.ci.1
                );
            }
        }
        let _ = writeln!(
            s,
            "  intervals: 95% t over units (each unit's blocks of a setting pooled); vs baseline: paired by unit"
        );
        s
    }
}
