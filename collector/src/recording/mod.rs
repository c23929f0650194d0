//! Recordings: a directory written incrementally while sampling, readable at any moment.
//!
//! ```text
//! OUT/meta.json              what was recorded: command, target, machine, events used,
//!                            rates, lost/throttled counts, times, status
//! OUT/samples.parquet/       part-NNNNNN.parquet: time, pid, tid, cpu, ip, period, kernel, callchain
//! OUT/counters.parquet/      part-NNNNNN.parquet: time, source, worker, name, value (long format)
//! OUT/maps.json              file mappings (MMAP2) with build-ids
//! OUT/tasks.json             COMM, FORK and EXIT records
//! OUT/kallsyms               a copy of /proc/kallsyms taken at the start
//! OUT/symbols/BUILDID.map    with `record --keep-symbols`: each mapped binary's functions
//! OUT/.fwdscope-output       the marker (and lock) of a directory fwdscope made
//! ```
//!
//! Each Parquet part is written to a random temporary name and renamed into place, and
//! meta.json is replaced the same way, so a writer killed with SIGKILL leaves every part it finished
//! readable (`pl.scan_parquet("OUT/samples.parquet/*.parquet")` reads them all).
//!
//! Here: what meta.json holds; [`writer`] (parts, atomic renames), [`reader`] (parts read
//! back, each checked by [`part_check`] and charged to a memory budget by [`decode`]
//! before polars decodes it).

pub mod decode;
pub mod part_check;
mod reader;
mod writer;

pub use fwd_abi::CounterRow;
pub use reader::{Recording, MAX_PERIOD};
pub use writer::{samples_frame, RecordingWriter};

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Layout version written to meta.json.
pub const FORMAT_VERSION: u32 = 1;

/// The machine a recording was made on.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
    pub cpu_model: String,
    pub perf_event_paranoid: String,
    /// The kernel's GNU build-id (/sys/kernel/notes), to check kernel symbols against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_build_id: Option<String>,
    /// The address of the kernel's `_text` on the recording boot (KASLR moves it between
    /// boots), hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_text: Option<String>,
}

impl Machine {
    pub fn current() -> Machine {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).unwrap_or_default();
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Machine {
            kernel_build_id: crate::buildid::running_kernel_build_id(),
            // Filled from the kallsyms snapshot a recording takes (read once).
            kernel_text: None,
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpus: crate::perf_abi::online_cpus().len(),
            cpu_model,
            perf_event_paranoid: crate::perf_abi::paranoid(),
        }
    }
}

/// The sampling event actually used.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct SamplingInfo {
    /// What was asked for (`cycles` unless -e said otherwise).
    pub requested: String,
    /// What was opened.
    pub used: String,
    /// Why `used` differs from `requested`, when it does.
    pub fallback: Option<String>,
    pub freq: Option<u64>,
    pub period: Option<u64>,
    pub callchain: bool,
    /// How callchains were taken: `fp`, `dwarf,SIZE` (absent in recordings made before
    /// DWARF unwinding, which took frame pointers when `callchain` says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_graph: Option<String>,
    /// With `dwarf`: how the user stacks were unwound as they arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwinding: Option<crate::unwind::UnwindStats>,
    pub kernel: bool,
    pub ring_pages: usize,
}

/// The status of an event that was counted ([`CountingInfo::status`]).
pub const COUNTED: &str = "counted";

/// One counting event and whether it could be counted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CountingInfo {
    pub event: String,
    /// `counted`, or why not.
    pub status: String,
}

/// meta.json.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Meta {
    pub format: String,
    pub version: u32,
    /// The fwdscope command line.
    pub command: Vec<String>,
    /// What was observed: `forwarder (pid N)`, `pid N`, `system-wide`, `command ...`.
    pub target: String,
    pub target_pid: Option<i32>,
    /// The forwarder's configuration (from its stats segment), when the target is one.
    pub forwarder: Option<serde_json::Value>,
    pub machine: Machine,
    pub sampling: SamplingInfo,
    pub counting: Vec<CountingInfo>,
    pub samples: u64,
    /// Records the kernel reported lost (ring buffer full).
    pub lost: u64,
    pub throttled: u64,
    pub unthrottled: u64,
    /// Records the parser could not read.
    pub unparsed: u64,
    /// Live-stream batches dropped because the consumer was slow (never recording data).
    pub stream_dropped: u64,
    pub start_unix_ns: u64,
    pub start_mono_ns: u64,
    pub end_unix_ns: Option<u64>,
    pub end_mono_ns: Option<u64>,
    /// `recording` while the writer runs, `complete` when it finished, `failed` when an
    /// error stopped it (`ended_by` says which).
    pub status: String,
    /// How the recording ended (duration, target exited, interrupted).
    pub ended_by: Option<String>,
    pub notes: Vec<String>,
}

pub(crate) fn pq_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Parquet { path: path.to_path_buf(), msg: e.to_string() }
}

/// Mode of a recording's files: private (0600) unless shared (0644).
pub fn file_mode(shared: bool) -> u32 {
    if shared {
        0o644
    } else {
        0o600
    }
}

/// Mode of a recording's directories: private (0700) unless shared (0755).
pub fn dir_mode(shared: bool) -> u32 {
    crate::outdir::dir_mode(shared)
}

/// Create the new file `path` with `mode`, whatever the umask; never through a symlink
/// ([`crate::outdir::create_new`]).
pub fn create_file(path: &Path, mode: u32) -> Result<std::fs::File> {
    crate::outdir::create_new(path, mode)
}

/// Write `bytes` to `path` atomically (a random temporary name, then rename), private
/// (0600).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_mode(path, bytes, file_mode(false))
}

/// [`write_atomic`] with the file's mode ([`crate::outdir::write_atomic`]).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    crate::outdir::write_atomic(path, bytes, mode)
}

impl Meta {
    /// What was recorded, in one line: samples of which event at what rate (and why that
    /// event), losses, what was counted, how it ended.
    pub fn summary(&self) -> String {
        let s = &self.sampling;
        let rate = match (s.period, s.freq) {
            (Some(p), _) => format!("every {p} events"),
            (None, Some(f)) => format!("{f} Hz"),
            _ => String::new(),
        };
        let counted: Vec<&str> =
            self.counting.iter().filter(|c| c.status == COUNTED).map(|c| c.event.as_str()).collect();
        format!(
            "{} samples of {} at {rate}{} ({}), {} lost, {} throttled; counted: {}; ended by {}",
            self.samples,
            s.used,
            if s.callchain { " with callchains" } else { "" },
            s.fallback.as_deref().map_or("as requested".to_string(), |_| format!("{} unavailable", s.requested)),
            self.lost,
            self.throttled,
            if counted.is_empty() { "nothing".to_string() } else { counted.join(", ") },
            self.ended_by.as_deref().unwrap_or("?")
        )
    }
}
