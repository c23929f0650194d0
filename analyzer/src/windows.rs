//! Samples split by time windows of a thread: a live comparison's blocks, each worker from
//! the first to the last publish it made under the block's settings (CLOCK_MONOTONIC, the
//! clock samples are stamped with). Each window gets its stage totals by the same
//! attribution the stage table uses, so the stages of each setting come from one run.

use crate::aggregate::group_by_window;
use crate::rules::Rules;
use crate::stages::Attributor;
use crate::symbolize::Symbolizer;
use crate::{Error, Result};
use collector::recording::Recording;
use polars::prelude::*;
use std::collections::{BTreeMap, HashMap};

/// Thread `tid` from `start_ns` (included) to `end_ns` (excluded), CLOCK_MONOTONIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub tid: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Stage totals per window.
#[derive(Debug, Clone, Default)]
pub struct WindowTotals {
    /// The event sampled and its period unit (`ns` for clock events).
    pub event: String,
    pub unit: String,
    /// Per window, in the order given: stage -> (samples, period).
    pub windows: Vec<BTreeMap<String, (u64, u64)>>,
    /// Samples of a windowed thread outside every window (warm-up after a switch, the
    /// time between blocks).
    pub outside: u64,
    /// Samples of threads no window names (the device, the main thread).
    pub other_threads: u64,
}

/// Windows by thread, sorted, checked not to overlap: a sample belongs to at most one.
struct Index(HashMap<u32, Vec<(u64, u64, u32)>>);

impl Index {
    fn new(windows: &[Window]) -> Result<Index> {
        let mut by_tid: HashMap<u32, Vec<(u64, u64, u32)>> = HashMap::new();
        for (i, w) in windows.iter().enumerate() {
            if w.end_ns <= w.start_ns {
                return Err(Error::Aggregate(format!("window {i} of thread {} ends before it starts", w.tid)));
            }
            let i = u32::try_from(i).map_err(|_| Error::Aggregate("more than 2^32 windows".into()))?;
            by_tid.entry(w.tid).or_default().push((w.start_ns, w.end_ns, i));
        }
        for (tid, v) in by_tid.iter_mut() {
            v.sort_unstable();
            if let Some(p) = v.windows(2).find(|p| p[1].0 < p[0].1) {
                return Err(Error::Aggregate(format!(
                    "windows {} and {} of thread {tid} overlap: a sample would belong to both",
                    p[0].2, p[1].2
                )));
            }
        }
        Ok(Index(by_tid))
    }

    /// The window of thread `tid` holding `time`: Ok(index), Err(true) when the thread has
    /// windows but none holds it, Err(false) when the thread has none.
    fn find(&self, tid: u32, time: u64) -> std::result::Result<u32, bool> {
        let v = self.0.get(&tid).ok_or(false)?;
        let at = v.partition_point(|w| w.0 <= time);
        match at.checked_sub(1).map(|k| v[k]) {
            Some((s, e, i)) if time >= s && time < e => Ok(i),
            _ => Err(true),
        }
    }
}

/// The window index of every sample in `df` (u32::MAX: none), and the counts of samples
/// outside every window and of unwindowed threads.
fn assign(df: &DataFrame, index: &Index) -> Result<(Vec<u32>, u64, u64)> {
    let err = |c: &str, e: PolarsError| Error::Aggregate(format!("samples column {c}: {e}"));
    let tid = df.column("tid").and_then(|c| c.u32().cloned()).map_err(|e| err("tid", e))?;
    let time = df.column("time").and_then(|c| c.u64().cloned()).map_err(|e| err("time", e))?;
    let (mut outside, mut others) = (0u64, 0u64);
    let ids = tid
        .iter()
        .zip(time.iter())
        .map(|(t, x)| match index.find(t.unwrap_or(0), x.unwrap_or(0)) {
            Ok(i) => i,
            Err(windowed) => {
                if windowed {
                    outside += 1;
                } else {
                    others += 1;
                }
                u32::MAX
            }
        })
        .collect();
    Ok((ids, outside, others))
}

/// Stage totals of each window of a recording, attributed as its stage table is.
pub fn stage_totals_by_window(rec: &Recording, rules: &Rules, windows: &[Window]) -> Result<WindowTotals> {
    let index = Index::new(windows)?;
    let mut df = rec.samples_df()?;
    let (ids, outside, other_threads) = assign(&df, &index)?;
    df.with_column(Column::new("window".into(), ids))
        .map_err(|e| Error::Aggregate(format!("adding the window column: {e}")))?;
    let inside = df
        .lazy()
        .filter(col("window").neq(lit(u32::MAX)))
        .collect()
        .map_err(|e| Error::Aggregate(format!("selecting windowed samples: {e}")))?;
    let groups = group_by_window(inside)?;
    let mut at = Attributor::new(Symbolizer::for_recording(rec)?, rules.clone());
    let names = crate::stages::thread_names(&rec.tasks()?);
    let mut out = vec![BTreeMap::<String, (u64, u64)>::new(); windows.len()];
    for (w, g) in &groups {
        let (a, _) = at.attribute_group(g, &names);
        if let Some(slot) = out.get_mut(*w as usize) {
            let e = slot.entry(a.stage).or_default();
            e.0 = e.0.saturating_add(g.samples);
            e.1 = e.1.saturating_add(g.period);
        }
    }
    let event = rec.meta.sampling.used.clone();
    Ok(WindowTotals { unit: collector::events::period_unit(&event), event, windows: out, outside, other_threads })
}

/// The forwarder's worker threads of a recording, by worker index (their `fwd-worker-N`
/// names in the recorded COMM events).
pub fn worker_tids(rec: &Recording) -> Result<Vec<(usize, u32)>> {
    let mut out: Vec<(usize, u32)> = crate::stages::thread_names(&rec.tasks()?)
        .into_iter()
        .filter_map(|(tid, name)| Some((fwd_abi::threads::worker_index(&name)?, tid)))
        .collect();
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each sample lands in the one window of its thread that holds its time (start
    /// included, end excluded), or in none; overlapping windows are refused.
    #[test]
    fn each_sample_is_in_at_most_one_window() {
        let w = |tid, s, e| Window { tid, start_ns: s, end_ns: e };
        let idx = Index::new(&[w(7, 100, 200), w(7, 300, 400), w(8, 100, 400)]).unwrap();
        assert_eq!(idx.find(7, 100), Ok(0));
        assert_eq!(idx.find(7, 199), Ok(0));
        assert_eq!(idx.find(7, 200), Err(true));
        assert_eq!(idx.find(7, 350), Ok(1));
        assert_eq!(idx.find(7, 50), Err(true));
        assert_eq!(idx.find(8, 399), Ok(2));
        assert_eq!(idx.find(9, 150), Err(false));
        let e = Index::new(&[w(7, 100, 200), w(7, 150, 250)]).err().expect("refused").to_string();
        assert!(e.contains("overlap"), "{e}");
        assert!(Index::new(&[w(7, 200, 200)]).is_err());

        let samples: Vec<collector::records::Sample> = [(7, 150), (7, 250), (8, 150), (9, 150), (7, 399)]
            .iter()
            .map(|&(tid, time)| collector::records::Sample {
                time,
                pid: 1,
                tid,
                cpu: 0,
                ip: 0x10,
                period: 1,
                kernel: false,
                callchain: vec![],
            })
            .collect();
        let df = collector::recording::samples_frame(&samples).unwrap();
        let (ids, outside, others) = assign(&df, &idx).unwrap();
        assert_eq!(ids, vec![0, u32::MAX, 2, u32::MAX, 1]);
        assert_eq!((outside, others), (1, 1));
    }
}
