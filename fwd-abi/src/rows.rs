//! Counter rows: the long format (time, source, worker, name, value) in which the
//! collector records and streams counters, and the conversion of a segment's snapshot into
//! rows. The forwarder's rows have source [`SOURCE_FORWARDER`]; PMU counts [`SOURCE_PMU`].

use crate::segment::Segment;
use serde::{Deserialize, Serialize};

/// Source of rows read from a forwarder's stats segment.
pub const SOURCE_FORWARDER: &str = "forwarder";
/// Source of rows of perf counting events.
pub const SOURCE_PMU: &str = "pmu";

/// One row of counters (counters.parquet, the live stream).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterRow {
    /// CLOCK_MONOTONIC ns.
    pub time: u64,
    /// [`SOURCE_PMU`] (perf counts) or [`SOURCE_FORWARDER`] (stats segment).
    pub source: String,
    /// Worker index, or -1 for the whole target.
    pub worker: i32,
    pub name: String,
    pub value: u64,
}

impl CounterRow {
    /// Whether the row comes from a forwarder's stats segment.
    pub fn is_forwarder(&self) -> bool {
        self.source == SOURCE_FORWARDER
    }
}

/// Every counter of every worker of `seg`, now, as rows stamped `time`; names as the
/// segment publishes them.
pub fn segment_rows(seg: &Segment, time: u64) -> Vec<CounterRow> {
    let names = seg.counter_names();
    let snap = seg.snapshot();
    let mut rows = Vec::with_capacity(snap.workers.len() * names.len());
    for (w, vals) in snap.workers.iter().enumerate() {
        for (name, v) in names.iter().zip(vals) {
            rows.push(CounterRow {
                time,
                source: SOURCE_FORWARDER.into(),
                worker: w as i32,
                name: name.clone(),
                value: *v,
            });
        }
    }
    rows
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of counter rows, of the workers' publish and
/// switch stamps, and of the samples the collector records.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
