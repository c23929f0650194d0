//! The records the collector keeps, as plain data: what the kernel wrote, converted out of
//! the perf ABI (see [`crate::perf_abi`]) so everything downstream (recordings, the live
//! stream, the analyzer and its tests) works without perf.

use serde::{Deserialize, Serialize};

/// One sample (PERF_RECORD_SAMPLE with IP, TID, TIME, CPU, PERIOD, optional CALLCHAIN).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// CLOCK_MONOTONIC nanoseconds.
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    pub ip: u64,
    /// Events (or nanoseconds for clock events) this sample stands for.
    pub period: u64,
    /// True when the sample was taken in kernel mode.
    pub kernel: bool,
    /// Return addresses, innermost first, without perf's context markers; empty without -g.
    pub callchain: Vec<u64>,
}

/// A file mapping (PERF_RECORD_MMAP2 or MMAP).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub time: u64,
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub path: String,
    /// Hex build-id, from the record when the kernel supplied it, else read from the file.
    pub build_id: Option<String>,
}

/// Thread and process lifecycle records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum TaskEvent {
    Comm { time: u64, pid: u32, tid: u32, comm: String, exec: bool },
    Fork { time: u64, pid: u32, tid: u32, ppid: u32, ptid: u32 },
    Exit { time: u64, pid: u32, tid: u32 },
}

/// Everything a ring buffer can hand over, converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Sample(Sample),
    Mmap(Mapping),
    Task(TaskEvent),
    /// PERF_RECORD_LOST: this many records were lost (ring full).
    Lost(u64),
    /// PERF_RECORD_THROTTLE (true) or UNTHROTTLE (false).
    Throttle(bool),
}
