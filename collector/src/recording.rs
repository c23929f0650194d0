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
//! ```
//!
//! Each Parquet part is written to a temporary name and renamed into place, and meta.json
//! is replaced the same way, so a writer killed with SIGKILL leaves every part it finished
//! readable (`pl.scan_parquet("OUT/samples.parquet/*.parquet")` reads them all).

use crate::records::{Mapping, Sample, TaskEvent};
use crate::{Error, Result};
use polars::prelude::*;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};

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
    pub kernel: bool,
    pub ring_pages: usize,
}

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
    /// `recording` while the writer runs, `complete` when it finished.
    pub status: String,
    /// How the recording ended (duration, target exited, interrupted).
    pub ended_by: Option<String>,
    pub notes: Vec<String>,
}

/// One row of counters.parquet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterRow {
    /// CLOCK_MONOTONIC ns.
    pub time: u64,
    /// `pmu` (perf counts) or `forwarder` (stats segment).
    pub source: String,
    /// Worker index, or -1 for the whole target.
    pub worker: i32,
    pub name: String,
    pub value: u64,
}

fn pq_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Parquet { path: path.to_path_buf(), msg: e.to_string() }
}

/// Write `bytes` to `path` atomically (temporary file, then rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

fn write_df(path: &Path, df: &mut DataFrame) -> Result<()> {
    let tmp = path.with_extension("parquet.tmp");
    let f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    ParquetWriter::new(f).finish(df).map_err(|e| pq_err(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// Buffers rows and writes them as Parquet parts.
pub struct RecordingWriter {
    dir: PathBuf,
    samples: Vec<Sample>,
    counters: Vec<CounterRow>,
    sample_parts: u32,
    counter_parts: u32,
    pub samples_written: u64,
    pub counter_rows_written: u64,
    pub maps: Vec<Mapping>,
    pub tasks: Vec<TaskEvent>,
}

impl RecordingWriter {
    /// Create the directory layout. Refuses a directory that holds a recording unless `force`.
    pub fn create(dir: &Path, force: bool) -> Result<RecordingWriter> {
        if dir.join("meta.json").exists() || dir.join("samples.parquet").exists() {
            if !force {
                return Err(Error::OutputExists(dir.to_path_buf()));
            }
            for sub in ["samples.parquet", "counters.parquet"] {
                let p = dir.join(sub);
                if p.exists() {
                    std::fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
                }
            }
        }
        for sub in ["samples.parquet", "counters.parquet"] {
            let p = dir.join(sub);
            std::fs::create_dir_all(&p).map_err(|e| Error::io(&p, e))?;
        }
        Ok(RecordingWriter {
            dir: dir.to_path_buf(),
            samples: Vec::with_capacity(1 << 16),
            counters: Vec::new(),
            sample_parts: 0,
            counter_parts: 0,
            samples_written: 0,
            counter_rows_written: 0,
            maps: Vec::new(),
            tasks: Vec::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn push_sample(&mut self, s: Sample) {
        self.samples.push(s);
    }

    pub fn push_counter(&mut self, row: CounterRow) {
        self.counters.push(row);
    }

    /// Samples buffered and not yet written.
    pub fn pending_samples(&self) -> usize {
        self.samples.len()
    }

    /// Write buffered samples and counters as new parts.
    pub fn flush(&mut self) -> Result<()> {
        if !self.samples.is_empty() {
            self.sample_parts += 1;
            let path = self.dir.join("samples.parquet").join(format!("part-{:06}.parquet", self.sample_parts));
            let mut df = samples_frame(&self.samples).map_err(|e| pq_err(&path, e))?;
            write_df(&path, &mut df)?;
            self.samples_written += self.samples.len() as u64;
            self.samples.clear();
        }
        if !self.counters.is_empty() {
            self.counter_parts += 1;
            let path = self.dir.join("counters.parquet").join(format!("part-{:06}.parquet", self.counter_parts));
            let mut df = counters_frame(&self.counters).map_err(|e| pq_err(&path, e))?;
            write_df(&path, &mut df)?;
            self.counter_rows_written += self.counters.len() as u64;
            self.counters.clear();
        }
        Ok(())
    }

    /// Replace meta.json.
    pub fn write_meta(&self, meta: &Meta) -> Result<()> {
        let p = self.dir.join("meta.json");
        let s =
            serde_json::to_vec_pretty(meta).map_err(|e| Error::Recording { path: p.clone(), msg: e.to_string() })?;
        write_atomic(&p, &s)
    }

    /// Write maps.json and tasks.json from what was collected.
    pub fn write_maps_and_tasks(&self) -> Result<()> {
        let p = self.dir.join("maps.json");
        let s = serde_json::to_vec_pretty(&self.maps)
            .map_err(|e| Error::Recording { path: p.clone(), msg: e.to_string() })?;
        write_atomic(&p, &s)?;
        let p = self.dir.join("tasks.json");
        let s = serde_json::to_vec_pretty(&self.tasks)
            .map_err(|e| Error::Recording { path: p.clone(), msg: e.to_string() })?;
        write_atomic(&p, &s)
    }

    /// Copy /proc/kallsyms (addresses are zero unless the reader may see them).
    pub fn snapshot_kallsyms(&self) -> Result<bool> {
        let p = self.dir.join("kallsyms");
        let text = std::fs::read("/proc/kallsyms").map_err(|e| Error::io("/proc/kallsyms", e))?;
        let visible = text.split(|&b| b == b'\n').take(100).any(|l| l.iter().take(16).any(|&c| c != b'0'));
        write_atomic(&p, &text)?;
        Ok(visible)
    }
}

/// Samples as a DataFrame with the columns of `samples.parquet`.
pub fn samples_frame(s: &[Sample]) -> PolarsResult<DataFrame> {
    let mut chains = ListPrimitiveChunkedBuilder::<UInt64Type>::new(
        "callchain".into(),
        s.len(),
        s.iter().map(|x| x.callchain.len()).sum(),
        DataType::UInt64,
    );
    for x in s {
        chains.append_slice(&x.callchain);
    }
    DataFrame::new_infer_height(vec![
        Column::new("time".into(), s.iter().map(|x| x.time).collect::<Vec<u64>>()),
        Column::new("pid".into(), s.iter().map(|x| x.pid).collect::<Vec<u32>>()),
        Column::new("tid".into(), s.iter().map(|x| x.tid).collect::<Vec<u32>>()),
        Column::new("cpu".into(), s.iter().map(|x| x.cpu).collect::<Vec<u32>>()),
        Column::new("ip".into(), s.iter().map(|x| x.ip).collect::<Vec<u64>>()),
        Column::new("period".into(), s.iter().map(|x| x.period).collect::<Vec<u64>>()),
        Column::new("kernel".into(), s.iter().map(|x| x.kernel).collect::<Vec<bool>>()),
        chains.finish().into_series().into_column(),
    ])
}

fn counters_frame(c: &[CounterRow]) -> PolarsResult<DataFrame> {
    DataFrame::new_infer_height(vec![
        Column::new("time".into(), c.iter().map(|x| x.time).collect::<Vec<u64>>()),
        Column::new("source".into(), c.iter().map(|x| x.source.as_str()).collect::<Vec<&str>>()),
        Column::new("worker".into(), c.iter().map(|x| x.worker).collect::<Vec<i32>>()),
        Column::new("name".into(), c.iter().map(|x| x.name.as_str()).collect::<Vec<&str>>()),
        Column::new("value".into(), c.iter().map(|x| x.value).collect::<Vec<u64>>()),
    ])
}

/// A recording opened for reading.
pub struct Recording {
    pub dir: PathBuf,
    pub meta: Meta,
}

fn parts(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut v: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "parquet")).collect();
    v.sort();
    Ok(v)
}

/// Read one Parquet part. A corrupt part can make the Parquet reader panic (it indexes
/// by sizes from the file's metadata); that becomes an error naming the part.
fn read_part(path: &Path) -> Result<DataFrame> {
    // Whole part in memory: the counts polars would trust are checked first (a corrupt
    // count aborts polars on allocation, which no catch_unwind can stop).
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    crate::part_check::check_part(&bytes).map_err(|e| pq_err(path, format!("corrupt part: {e}")))?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ParquetReader::new(std::io::Cursor::new(bytes)).finish()))
        .map_err(|_| pq_err(path, "malformed Parquet: the reader failed on its metadata"))?
        .map_err(|e| pq_err(path, e))
}

fn col<'a>(df: &'a DataFrame, path: &Path, name: &str) -> Result<&'a Column> {
    df.column(name).map_err(|_| Error::Recording { path: path.to_path_buf(), msg: format!("missing column `{name}`") })
}

fn u64s(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<u64>> {
    let c = col(df, path, name)?;
    let ca = c
        .u64()
        .map_err(|_| Error::Recording { path: path.to_path_buf(), msg: format!("column `{name}` is not u64") })?;
    Ok(ca.iter().map(|v| v.unwrap_or(0)).collect())
}

fn u32s(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<u32>> {
    let c = col(df, path, name)?;
    let ca = c
        .u32()
        .map_err(|_| Error::Recording { path: path.to_path_buf(), msg: format!("column `{name}` is not u32") })?;
    Ok(ca.iter().map(|v| v.unwrap_or(0)).collect())
}

/// Largest sample period accepted (2^40: over four minutes of cycles at 4 GHz, or of
/// cpu-clock ns, in one sample). Periods are summed per stack, and a corrupt one near 2^64
/// would overflow the sum.
pub const MAX_PERIOD: u64 = 1 << 40;

fn check_periods(df: &DataFrame, path: &Path) -> Result<()> {
    let ca = col(df, path, "period")?
        .u64()
        .map_err(|_| Error::Recording { path: path.to_path_buf(), msg: "column `period` is not u64".into() })?;
    if let Some(row) = ca.iter().position(|p| p.is_some_and(|p| p > MAX_PERIOD)) {
        return Err(Error::Recording {
            path: path.to_path_buf(),
            msg: format!(
                "row {row}: period {} over the limit of {MAX_PERIOD} (corrupt part)",
                ca.get(row).unwrap_or(0)
            ),
        });
    }
    Ok(())
}

impl Recording {
    /// Open a recording directory (meta.json must parse; a recording whose writer died
    /// reads as status `recording`).
    pub fn open(dir: &Path) -> Result<Recording> {
        let p = dir.join("meta.json");
        let text = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        let meta: Meta = serde_json::from_slice(&text)
            .map_err(|e| Error::Recording { path: p.clone(), msg: format!("meta.json line {}: {e}", e.line()) })?;
        if meta.format != "fwdscope-recording" || meta.version != FORMAT_VERSION {
            return Err(Error::Recording {
                path: p,
                msg: format!(
                    "format `{}` version {}: expected fwdscope-recording version {FORMAT_VERSION}",
                    meta.format, meta.version
                ),
            });
        }
        Ok(Recording { dir: dir.to_path_buf(), meta })
    }

    /// Every sample, in part order.
    pub fn samples(&self) -> Result<Vec<Sample>> {
        let mut out = Vec::new();
        for path in parts(&self.dir.join("samples.parquet"))? {
            let df = read_part(&path)?;
            let (time, ip, period) = (u64s(&df, &path, "time")?, u64s(&df, &path, "ip")?, u64s(&df, &path, "period")?);
            let (pid, tid, cpu) = (u32s(&df, &path, "pid")?, u32s(&df, &path, "tid")?, u32s(&df, &path, "cpu")?);
            let kernel: Vec<bool> = col(&df, &path, "kernel")?
                .bool()
                .map_err(|_| Error::Recording { path: path.clone(), msg: "column `kernel` is not bool".into() })?
                .iter()
                .map(|v| v.unwrap_or(false))
                .collect();
            let chains = col(&df, &path, "callchain")?
                .list()
                .map_err(|_| Error::Recording { path: path.clone(), msg: "column `callchain` is not a list".into() })?
                .clone();
            for (i, chain) in chains.amortized_iter().enumerate() {
                let callchain: Vec<u64> = match chain {
                    Some(s) => s.as_ref().u64().map(|c| c.iter().flatten().collect()).unwrap_or_default(),
                    None => Vec::new(),
                };
                out.push(Sample {
                    time: time[i],
                    pid: pid[i],
                    tid: tid[i],
                    cpu: cpu[i],
                    ip: ip[i],
                    period: period[i],
                    kernel: kernel[i],
                    callchain,
                });
            }
        }
        Ok(out)
    }

    /// Every sample part concatenated into one DataFrame (the columns of `samples.parquet`);
    /// no per-sample conversion, for aggregation in polars.
    pub fn samples_df(&self) -> Result<DataFrame> {
        let mut out: Option<DataFrame> = None;
        for path in parts(&self.dir.join("samples.parquet"))? {
            let df = read_part(&path)?;
            for name in ["time", "pid", "tid", "cpu", "ip", "period", "kernel", "callchain"] {
                col(&df, &path, name)?;
            }
            check_periods(&df, &path)?;
            match &mut out {
                None => out = Some(df),
                Some(o) => {
                    o.vstack_mut(&df).map_err(|e| Error::Recording {
                        path: path.clone(),
                        msg: format!("columns differ from the first part: {e}"),
                    })?;
                }
            }
        }
        match out {
            Some(df) => Ok(df),
            None => samples_frame(&[]).map_err(|e| pq_err(&self.dir, e)),
        }
    }

    /// tasks.json (empty if the writer died before writing it).
    pub fn tasks(&self) -> Result<Vec<TaskEvent>> {
        let p = self.dir.join("tasks.json");
        if !p.exists() {
            return Ok(Vec::new());
        }
        let text = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        serde_json::from_slice(&text).map_err(|e| Error::Recording { path: p, msg: format!("line {}: {e}", e.line()) })
    }

    /// Every counter row, in part order.
    pub fn counters(&self) -> Result<Vec<CounterRow>> {
        let mut out = Vec::new();
        for path in parts(&self.dir.join("counters.parquet"))? {
            let df = read_part(&path)?;
            let time = u64s(&df, &path, "time")?;
            let value = u64s(&df, &path, "value")?;
            let strs = |name: &str| -> Result<Vec<String>> {
                Ok(col(&df, &path, name)?
                    .str()
                    .map_err(|_| Error::Recording { path: path.clone(), msg: format!("column `{name}` is not text") })?
                    .iter()
                    .map(|v| v.unwrap_or("").to_string())
                    .collect())
            };
            let (source, name) = (strs("source")?, strs("name")?);
            let worker: Vec<i32> = col(&df, &path, "worker")?
                .i32()
                .map_err(|_| Error::Recording { path: path.clone(), msg: "column `worker` is not i32".into() })?
                .iter()
                .map(|v| v.unwrap_or(-1))
                .collect();
            for i in 0..time.len() {
                out.push(CounterRow {
                    time: time[i],
                    source: source[i].clone(),
                    worker: worker[i],
                    name: name[i].clone(),
                    value: value[i],
                });
            }
        }
        Ok(out)
    }

    /// maps.json (empty if the writer died before writing it).
    pub fn maps(&self) -> Result<Vec<Mapping>> {
        let p = self.dir.join("maps.json");
        if !p.exists() {
            return Ok(Vec::new());
        }
        let text = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        serde_json::from_slice(&text).map_err(|e| Error::Recording { path: p, msg: format!("line {}: {e}", e.line()) })
    }
}
