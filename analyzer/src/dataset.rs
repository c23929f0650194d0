//! Recordings as one dataset across hosts: a directory of Hive-style partitions that
//! DuckDB, Spark and polars read as one table, and that `report` and `diff` read as one
//! profile (or as a column per host, run or setting).
//!
//! ```text
//! DIR/_dataset.json                      {"format": "fwdscope-dataset", "schema_version": 1}
//! DIR/host=H/run=R/run.json              the run: host, run, setting, event, samples, binaries
//! DIR/host=H/run=R/stacks.parquet        one row per distinct stack, symbolized and attributed
//! DIR/host=H/run=R/recording/...         the recording itself (samples.parquet/, meta.json, ...)
//! DIR/.staging/...                       runs being written (never matched by host=*/run=*)
//! ```
//!
//! `stacks.parquet` columns: host, run, setting, thread, stage, symbol, attributed_by
//! (symbol, inline, callchain, process, none), leaf, dso, build_id (of the DSO; empty when
//! unknown), stack (frames root first, `;`-joined), samples, period, event, unit. The
//! stage is the one `report` charges: with the stacks symbolized on the recording machine,
//! the dataset is analyzed without the binaries.
//!
//! A run is written under `.staging` and renamed into place whole, so a reader never sees
//! half a run, and a partition that exists already is refused (two runs never share one).

use crate::export::Stack;
use crate::rules::Rules;
use crate::stages::{build, By, Head, Item, StageTable};
use crate::symbolize::Symbolizer;
use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Layout version of datasets written by this build; readers refuse any other.
pub const SCHEMA_VERSION: u32 = 1;
/// The file that makes a directory a dataset.
pub const DATASET_FILE: &str = "_dataset.json";
/// The stack table of a run.
pub const STACKS_FILE: &str = "stacks.parquet";
/// What a run is.
pub const RUN_FILE: &str = "run.json";
/// The recording inside a run's partition.
pub const RECORDING_DIR: &str = "recording";
const STAGING: &str = ".staging";
const FORMAT: &str = "fwdscope-dataset";

fn err(path: &Path, msg: impl Into<String>) -> Error {
    Error::Dataset { path: path.display().to_string(), msg: msg.into() }
}
fn io(path: &Path, e: std::io::Error) -> Error {
    Error::Io { path: path.into(), source: e }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct DatasetFile {
    format: String,
    schema_version: u32,
}

/// One run of a dataset, as its `run.json` says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    pub schema_version: u32,
    pub host: String,
    pub run: String,
    /// The forwarder's settings at the start of the run (`cache=.. fib=.. prefetch=..`),
    /// or what the user named it.
    pub setting: String,
    /// The event sampled and its period unit.
    pub event: String,
    pub unit: String,
    pub samples: u64,
    pub stacks: usize,
    /// Packets the forwarder's workers forwarded while it was recorded, when known.
    pub packets: Option<u64>,
    pub start_unix_ns: u64,
    /// Each binary of the run and its build-id.
    pub binaries: BTreeMap<String, String>,
}

/// Check a host or run name: it becomes a path component and a Hive value.
fn check_name(what: &str, v: &str) -> std::result::Result<(), String> {
    let ok = !v.is_empty()
        && !v.starts_with('.')
        && v.len() <= 200
        && v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '+'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} `{}`: expected 1 to 200 of A-Z a-z 0-9 - _ . : + (not starting with a dot)",
            crate::printable(v.to_string())
        ))
    }
}

/// Open (or create) the dataset at `dir` for writing: its `_dataset.json` must be of this
/// schema version, and the directory writable. Run as root, a dataset owned by another
/// user is refused unless `shared` (see [`collector::outdir::check_owner`]).
pub fn prepare(dir: &Path, shared: bool) -> Result<()> {
    // As root: the whole path root's (unless shared), checked before anything is made.
    collector::outdir::check_path(dir, shared).map_err(|why| {
        err(
            dir,
            format!(
                "{why}, and fwdscope runs as root: that user could redirect root's writes; {}",
                why.advice("choose another --dataset")
            ),
        )
    })?;
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let md = std::fs::metadata(dir).map_err(|e| io(dir, e))?;
    collector::outdir::check_owner(dir, &md, shared)?;
    own_dir(&dir.join(STAGING))?;
    let file = dir.join(DATASET_FILE);
    if file.exists() {
        read_dataset_file(dir)?;
    } else {
        let body = serde_json::to_string_pretty(&DatasetFile { format: FORMAT.into(), schema_version: SCHEMA_VERSION })
            .map_err(|e| err(dir, e.to_string()))?;
        write_shared(&file, body.as_bytes())?;
    }
    let probe = dir.join(STAGING).join(format!("probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| err(dir, format!("not writable: {e}")))?;
    std::fs::remove_dir(&probe).map_err(|e| io(&probe, e))?;
    Ok(())
}

fn read_dataset_file(dir: &Path) -> Result<DatasetFile> {
    let file = dir.join(DATASET_FILE);
    let text = collector::files::read_to_string(&file, collector::files::Kind::Description)?;
    let d: DatasetFile =
        serde_json::from_str(&text).map_err(|e| err(&file, format!("not a dataset description: {e}")))?;
    if d.format != FORMAT {
        return Err(err(&file, format!("format `{}`, expected `{FORMAT}`", d.format)));
    }
    if d.schema_version != SCHEMA_VERSION {
        return Err(err(
            &file,
            format!(
                "schema version {}, this fwdscope reads and writes version {SCHEMA_VERSION}: use a new dataset directory",
                d.schema_version
            ),
        ));
    }
    Ok(d)
}

/// Write a file several recorders may create at once (`_dataset.json`): through a
/// random temporary name, then renamed into place (readable by all, as datasets are
/// shared across hosts).
fn write_shared(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(collector::outdir::write_atomic(path, bytes, 0o644)?)
}

/// A directory of the dataset's own (`.staging`, `host=H`): made when missing (other
/// recorders may make it at the same moment), refused when anything but a directory
/// stands at its name: a planted symlink is never followed.
fn own_dir(path: &Path) -> Result<()> {
    let check = || match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(_) => Err(err(path, "is not a directory (a file, or a symlink, which is not followed): remove it")),
        Err(_) => Ok(false),
    };
    if check()? {
        return Ok(());
    }
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        // Made by another recorder meanwhile: a directory, or refused as above.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => match check()? {
            true => Ok(()),
            false => Err(io(path, e)),
        },
        Err(e) => Err(io(path, e)),
    }
}

/// A run being written: its staging directory, renamed into `host=H/run=R` by
/// [`Staging::publish`]; removed when dropped unpublished.
pub struct Staging {
    dataset: PathBuf,
    dir: PathBuf,
    host: String,
    run: String,
    /// Root may write into another user's dataset (`--share`).
    shared: bool,
    published: bool,
}

impl Staging {
    /// Start a run `run` of `host` in `dataset` (created if new). Refused when the names
    /// are not path-safe, the dataset is of another schema version or not writable, or the
    /// partition exists already.
    pub fn new(dataset: &Path, host: &str, run: &str) -> Result<Staging> {
        Staging::new_with(dataset, host, run, false)
    }

    /// [`Staging::new`]; `shared` lets root write into a dataset another user owns.
    pub fn new_with(dataset: &Path, host: &str, run: &str, shared: bool) -> Result<Staging> {
        check_name("host", host).map_err(|m| err(dataset, m))?;
        check_name("run", run).map_err(|m| err(dataset, m))?;
        prepare(dataset, shared)?;
        own_dir(&dataset.join(format!("host={host}")))?;
        let target = partition(dataset, host, run);
        if target.exists() {
            return Err(err(&target, "exists already: each run needs a partition of its own (choose another --run)"));
        }
        let dir = dataset.join(STAGING).join(format!("host={host}-run={run}-{}", std::process::id()));
        // A leftover of an earlier process of this PID (a symlink is removed, not followed).
        if std::fs::symlink_metadata(&dir).is_ok() {
            std::fs::remove_dir_all(&dir).or_else(|_| std::fs::remove_file(&dir)).map_err(|e| io(&dir, e))?;
        }
        std::fs::create_dir(&dir).map_err(|e| io(&dir, e))?;
        Ok(Staging { dataset: dataset.into(), dir, host: host.into(), run: run.into(), shared, published: false })
    }

    /// Where the recording is to be written.
    pub fn recording_dir(&self) -> PathBuf {
        self.dir.join(RECORDING_DIR)
    }

    /// The partition this run will be.
    pub fn target(&self) -> PathBuf {
        partition(&self.dataset, &self.host, &self.run)
    }

    /// Symbolize and attribute the recording, write its stack table and run.json, and
    /// rename the run into place. `setting` None: taken from the forwarder's configuration.
    pub fn publish(mut self, setting: Option<&str>, rules: &Rules) -> Result<(PathBuf, RunInfo)> {
        let rec = collector::recording::Recording::open(&self.recording_dir())?;
        let mut sym = Symbolizer::for_recording(&rec)?;
        let profile = crate::export::recording_profile(&rec, &mut sym, rules)?;
        let maps = rec.maps()?;
        let mut binaries: BTreeMap<String, String> = BTreeMap::new();
        for m in &maps {
            if let Some(b) = &m.build_id {
                binaries.entry(m.path.clone()).or_insert_with(|| b.clone());
            }
        }
        if let Some(k) = &rec.meta.machine.kernel_build_id {
            binaries.insert("[kernel.kallsyms]".into(), k.clone());
        }
        if let Some(s) = setting.filter(|s| s.chars().any(char::is_control)) {
            return Err(err(
                &self.dataset,
                format!("setting {s:?} holds control characters: expected a printable label"),
            ));
        }
        let setting = setting.map_or_else(|| crate::export::setting_of(rec.meta.forwarder.as_ref()), str::to_string);
        let per_worker = crate::stages::packets_per_worker(&rec)?;
        let packets: u64 = per_worker.values().sum();
        let info = RunInfo {
            schema_version: SCHEMA_VERSION,
            host: self.host.clone(),
            run: self.run.clone(),
            setting,
            event: profile.event.clone(),
            unit: collector::events::period_unit(&profile.event),
            samples: profile.stacks.iter().map(|s| s.samples).sum(),
            stacks: profile.stacks.len(),
            packets: (packets > 0).then_some(packets),
            start_unix_ns: rec.meta.start_unix_ns,
            binaries,
        };
        let bytes = stacks_parquet(&info, &profile.stacks)?;
        collector::recording::write_atomic(&self.dir.join(STACKS_FILE), &bytes)?;
        let json = serde_json::to_string_pretty(&info).map_err(|e| err(&self.dir, e.to_string()))?;
        collector::recording::write_atomic(&self.dir.join(RUN_FILE), json.as_bytes())?;
        let target = self.target();
        let host_dir = self.dataset.join(format!("host={}", self.host));
        own_dir(&host_dir)?;
        // rename(2) onto an existing directory fails unless it is empty: a run that took
        // the partition meanwhile is never overwritten.
        if target.exists() {
            return Err(err(&target, "was written by another run meanwhile: each run needs a partition of its own"));
        }
        // Moved through directory descriptors opened without following, from the dataset's
        // own: a `host=` directory swapped for a symlink meanwhile receives nothing.
        let from = self.dir.strip_prefix(&self.dataset).map_err(|e| err(&self.dir, e.to_string()))?;
        let to = target.strip_prefix(&self.dataset).map_err(|e| err(&target, e.to_string()))?;
        collector::outdir::rename_beneath(&self.dataset, self.shared, from, to)
            .map_err(|e| err(&target, format!("cannot move the run into place: {e}")))?;
        self.published = true;
        Ok((target, info))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `20261201T141503Z-4242`: the start time (UTC) and this process's PID.
pub fn default_run_name() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z-{}", rem / 3600, rem % 3600 / 60, rem % 60, std::process::id())
}

/// `-m`: ring buffer pages, a power of two from 1 to 65536 (as perf requires).
fn partition(dataset: &Path, host: &str, run: &str) -> PathBuf {
    dataset.join(format!("host={host}")).join(format!("run={run}"))
}

/// The dataset run a recording directory belongs to (`host=H/run=R/recording`), from the
/// run.json beside it.
pub fn run_of_recording(dir: &Path) -> Option<RunInfo> {
    if dir.file_name()? != RECORDING_DIR {
        return None;
    }
    let text =
        collector::files::read_to_string(&dir.parent()?.join(RUN_FILE), collector::files::Kind::Description).ok()?;
    serde_json::from_str(&text).ok()
}

/// The stack table of one run as Parquet.
fn stacks_parquet(info: &RunInfo, stacks: &[Stack]) -> Result<Vec<u8>> {
    use polars::prelude::*;
    let n = stacks.len();
    let same = |v: &str| vec![v.to_string(); n];
    // Stacks name a DSO by its file name (or the kernel's `[kernel.kallsyms]`); the run's
    // binaries are keyed by path.
    let by_name: HashMap<&str, &str> = info
        .binaries
        .iter()
        .map(|(path, id)| (path.rsplit('/').next().unwrap_or(path.as_str()), id.as_str()))
        .collect();
    let build_id = |dso: &str| {
        info.binaries.get(dso).map(String::as_str).or_else(|| by_name.get(dso).copied()).unwrap_or("").to_string()
    };
    let mut df = DataFrame::new_infer_height(vec![
        Column::new("host".into(), same(&info.host)),
        Column::new("run".into(), same(&info.run)),
        Column::new("setting".into(), same(&info.setting)),
        Column::new("thread".into(), stacks.iter().map(|s| s.thread.as_str()).collect::<Vec<_>>()),
        Column::new("stage".into(), stacks.iter().map(|s| s.stage.as_str()).collect::<Vec<_>>()),
        Column::new("symbol".into(), stacks.iter().map(|s| s.symbol.as_str()).collect::<Vec<_>>()),
        Column::new("attributed_by".into(), stacks.iter().map(|s| s.by.name()).collect::<Vec<_>>()),
        Column::new(
            "leaf".into(),
            stacks.iter().map(|s| s.frames.last().map_or("", String::as_str)).collect::<Vec<_>>(),
        ),
        Column::new("dso".into(), stacks.iter().map(|s| s.dso.as_str()).collect::<Vec<_>>()),
        Column::new("build_id".into(), stacks.iter().map(|s| build_id(&s.dso)).collect::<Vec<_>>()),
        Column::new("stack".into(), stacks.iter().map(|s| s.frames.join(";")).collect::<Vec<_>>()),
        Column::new("samples".into(), stacks.iter().map(|s| s.samples).collect::<Vec<u64>>()),
        Column::new("period".into(), stacks.iter().map(|s| s.period).collect::<Vec<u64>>()),
        Column::new("event".into(), same(&info.event)),
        Column::new("unit".into(), same(&info.unit)),
    ])
    .map_err(|e| Error::Export(e.to_string()))?;
    let mut out = Vec::new();
    ParquetWriter::new(&mut out).finish(&mut df).map_err(|e| Error::Export(e.to_string()))?;
    Ok(out)
}

/// A run of an opened dataset.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: PathBuf,
    pub info: RunInfo,
}

/// A dataset, or the part of it under a partition directory.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The directory holding `_dataset.json`.
    pub root: PathBuf,
    /// What was asked for (the root, `host=H`, or `host=H/run=R`).
    pub selected: PathBuf,
    pub runs: Vec<Run>,
}

/// The dataset `path` is (or lies in): the nearest directory at or above it holding
/// `_dataset.json`. None when there is none.
pub fn root_of(path: &Path) -> Option<PathBuf> {
    let mut p = Some(path);
    while let Some(d) = p {
        if d.join(DATASET_FILE).is_file() {
            return Some(d.to_path_buf());
        }
        // Only partition directories lead up to a dataset.
        let name = d.file_name()?.to_string_lossy().into_owned();
        if !(name.starts_with("host=") || name.starts_with("run=")) {
            return None;
        }
        p = d.parent();
    }
    None
}

/// What a grouped table groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum GroupBy {
    Host,
    Run,
    Setting,
}

impl GroupBy {
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Host => "host",
            GroupBy::Run => "run",
            GroupBy::Setting => "setting",
        }
    }
    fn key(self, r: &RunInfo) -> String {
        match self {
            GroupBy::Host => r.host.clone(),
            GroupBy::Run => format!("{}/{}", r.host, r.run),
            GroupBy::Setting => r.setting.clone(),
        }
    }
}

/// One row of a run's stack table, as the report needs it.
struct Row {
    thread: String,
    stage: String,
    symbol: String,
    by: By,
    dso: String,
    samples: u64,
    period: u64,
}

impl Dataset {
    /// Open the dataset at or above `path`, with the runs under `path`. Every run's
    /// run.json must be of this schema version; the runs must share one event.
    pub fn open(path: &Path) -> Result<Dataset> {
        let root = root_of(path).ok_or_else(|| err(path, format!("no {DATASET_FILE} here or above: not a dataset")))?;
        read_dataset_file(&root)?;
        let mut runs = Vec::new();
        for host in sorted_dirs(&root, "host=")? {
            for run in sorted_dirs(&host, "run=")? {
                if !run.starts_with(path) && !path.starts_with(&run) {
                    continue;
                }
                let info = read_run(&host, &run)?;
                check_not_a_copy(&runs, &run, &info)?;
                runs.push(Run { dir: run, info });
            }
        }
        if runs.is_empty() {
            return Err(err(path, "holds no runs (host=H/run=R directories with run.json)"));
        }
        check_one_event(path, &runs)?;
        Ok(Dataset { root, selected: path.to_path_buf(), runs })
    }

    /// The hosts, runs and samples, in one line.
    pub fn summary(&self) -> String {
        let hosts: std::collections::BTreeSet<&str> = self.runs.iter().map(|r| r.info.host.as_str()).collect();
        let samples: u64 = self.runs.iter().map(|r| r.info.samples).sum();
        format!(
            "dataset {}: {} run(s) on {} host(s), {} samples",
            self.selected.display(),
            self.runs.len(),
            hosts.len(),
            samples
        )
    }

    /// Read every run's stack table, one file at a time, folding rows with `f`.
    fn for_rows(&self, mut f: impl FnMut(&Run, Row)) -> Result<()> {
        // One budget for the whole read: every run's table is charged to it.
        let mut budget = collector::recording::decode::DecodeBudget::from_env();
        for run in &self.runs {
            let file = run.dir.join(STACKS_FILE);
            let bytes = collector::files::read(&file, collector::files::Kind::Part)?;
            let cols = ["thread", "stage", "symbol", "attributed_by", "dso", "samples", "period"];
            // Checked, charged to the read's memory budget, then decoded.
            let df = collector::recording::decode::decode(bytes, Some(&cols), &mut budget)
                .map_err(|e| err(&file, format!("unreadable stack table: {e}")))?;
            // Symbols may be long (C++ and Rust generics); every other text is a name.
            let mut text = |name: &str| -> Result<Vec<String>> {
                let max = if name == "symbol" || name == "dso" { 64 * 1024 } else { 4096 };
                collector::recording::decode::texts(&df, name, max, &mut budget)
                    .map_err(|e| err(&file, format!("unreadable stack table: {e}")))
            };
            let num = |name: &str| -> Result<Vec<u64>> {
                let c = df.column(name).map_err(|e| err(&file, e.to_string()))?;
                let s = c.u64().map_err(|e| err(&file, format!("column {name}: {e}")))?;
                Ok(s.iter().map(|v| v.unwrap_or(0)).collect())
            };
            let (thread, stage, symbol, by, dso) =
                (text("thread")?, text("stage")?, text("symbol")?, text("attributed_by")?, text("dso")?);
            let (samples, period) = (num("samples")?, num("period")?);
            for i in 0..df.height() {
                let b = By::from_name(&by[i]).ok_or_else(|| {
                    err(
                        &file,
                        format!(
                            "row {i}: attributed_by `{}` is none of symbol, inline, callchain, process, none",
                            by[i]
                        ),
                    )
                })?;
                f(
                    run,
                    Row {
                        thread: thread[i].clone(),
                        stage: stage[i].clone(),
                        symbol: symbol[i].clone(),
                        by: b,
                        dso: dso[i].clone(),
                        samples: samples[i],
                        period: period[i],
                    },
                );
            }
        }
        Ok(())
    }

    /// The stage table of every selected run together, as `report` prints a recording's.
    pub fn stage_table(&self, rules: &Rules) -> Result<StageTable> {
        // (thread, stage, symbol, how it was attributed, dso) -> (samples, period).
        type Row = (String, String, String, By, String);
        let mut merged: HashMap<Row, (u64, u64)> = HashMap::new();
        self.for_rows(|_, r| {
            let e = merged.entry((r.thread, r.stage, r.symbol, r.by, r.dso)).or_default();
            e.0 = e.0.saturating_add(r.samples);
            e.1 = e.1.saturating_add(r.period);
        })?;
        let items = merged
            .into_iter()
            .map(|((thread, stage, symbol, by, dso), (samples, period))| Item {
                symbol,
                dso,
                stage,
                by,
                thread: Some(thread),
                samples,
                period,
            })
            .collect();
        let first = &self.runs[0].info;
        let packets = self.runs.iter().map(|r| r.info.packets).sum::<Option<u64>>();
        let head = Head {
            event: first.event.clone(),
            requested: first.event.clone(),
            fallback: None,
            unit: first.unit.clone(),
            packets,
        };
        let mut t = build(head, items, rules);
        // The runs' stacks were attributed where they were recorded: callchains show as
        // stacks charged through them.
        t.callchains = t.attribution.callchain > 0;
        t.clocks_absent = Some(format!(
            "not in a dataset (it keeps its runs' stacks, not their clocks): report a run's recording for them, \
             e.g. -i {}",
            self.runs[0].dir.join(RECORDING_DIR).display()
        ));
        t.symbol_sources = vec![format!(
            "symbolized and attributed on the recording machines ({}: {})",
            self.summary(),
            self.runs.iter().map(|r| format!("{}/{}", r.info.host, r.info.run)).collect::<Vec<_>>().join(", ")
        )];
        Ok(t)
    }

    /// Stage shares with one column per host, run or setting.
    pub fn grouped(&self, by: GroupBy) -> Result<GroupedTable> {
        let mut cells: BTreeMap<String, BTreeMap<String, (u64, u64)>> = BTreeMap::new();
        let mut runs_in: BTreeMap<String, usize> = BTreeMap::new();
        for r in &self.runs {
            *runs_in.entry(by.key(&r.info)).or_default() += 1;
        }
        self.for_rows(|run, r| {
            let e = cells.entry(by.key(&run.info)).or_default().entry(r.stage).or_default();
            e.0 = e.0.saturating_add(r.samples);
            e.1 = e.1.saturating_add(r.period);
        })?;
        let mut stages: Vec<String> = cells.values().flat_map(|m| m.keys().cloned()).collect();
        stages.sort_by(|a, b| crate::rules::stage_rank(a).cmp(&crate::rules::stage_rank(b)).then(a.cmp(b)));
        stages.dedup();
        let groups = cells
            .into_iter()
            .map(|(key, by_stage)| {
                let samples: u64 = by_stage.values().map(|v| v.0).sum();
                let shares = stages
                    .iter()
                    .map(|s| {
                        let n = by_stage.get(s).map_or(0, |v| v.0);
                        (n, if samples == 0 { 0.0 } else { 100.0 * n as f64 / samples as f64 })
                    })
                    .collect();
                Group { runs: runs_in.get(&key).copied().unwrap_or(0), key, samples, shares }
            })
            .collect();
        Ok(GroupedTable { by: by.name().into(), event: self.runs[0].info.event.clone(), stages, groups })
    }
}

/// The description of run directory `run` under `host`, checked: of this schema version,
/// with its stack table, started when its recording did, and in the partition it names.
fn read_run(host: &Path, run: &Path) -> Result<RunInfo> {
    let file = run.join(RUN_FILE);
    let text = collector::files::read_to_string(&file, collector::files::Kind::Description)?;
    let info: RunInfo = serde_json::from_str(&text).map_err(|e| err(&file, format!("not a run description: {e}")))?;
    if info.schema_version != SCHEMA_VERSION {
        return Err(err(
            &file,
            format!(
                "schema version {} in a dataset of version {SCHEMA_VERSION}: a dataset must not mix versions",
                info.schema_version
            ),
        ));
    }
    check_stacks_file(run)?;
    check_recording_start(run, &file, &info)?;
    check_partition(host, run, &file, &info)?;
    Ok(info)
}

/// The run's stack table is a regular file: missing, or there but not a file (a device, a
/// FIFO, a directory, what a symlink leads to included), is said as what it is.
fn check_stacks_file(run: &Path) -> Result<()> {
    match std::fs::metadata(run.join(STACKS_FILE)) {
        Ok(md) if md.is_file() => Ok(()),
        Ok(_) => Err(err(
            &run.join(STACKS_FILE),
            "is not a regular file (a device, a pipe or a directory, itself or where its symlink leads): \
                 not read",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(err(run, format!("has no {STACKS_FILE}"))),
        Err(e) => Err(io(&run.join(STACKS_FILE), e)),
    }
}

/// run.json's start (`info`, read from `file`) must be its recording's: an edited copy is
/// not a new run.
fn check_recording_start(run: &Path, file: &Path, info: &RunInfo) -> Result<()> {
    let meta = run.join(RECORDING_DIR).join("meta.json");
    if std::fs::symlink_metadata(&meta).is_err() {
        return Ok(());
    }
    let text = collector::files::read_to_string(&meta, collector::files::Kind::Meta)?;
    let start = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|m| m["start_unix_ns"].as_u64());
    if start.is_some_and(|s| s != info.start_unix_ns) {
        return Err(err(
            file,
            format!(
                "says the run started at {} ns, its recording at {} ns: run.json was edited (a copy \
                 made to look like another run?); remove the copy",
                info.start_unix_ns,
                start.unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// The partition a run sits in (`host`, `run`) is what its run.json (`info`, read from
/// `file`) says: a run copied under another host= or run= would be counted twice.
fn check_partition(host: &Path, run: &Path, file: &Path, info: &RunInfo) -> Result<()> {
    let named = |d: &Path, key: &str| {
        d.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix(key)).map(str::to_string)
    };
    let (dir_host, dir_run) = (named(host, "host=").unwrap_or_default(), named(run, "run=").unwrap_or_default());
    if dir_host != info.host || dir_run != info.run {
        return Err(err(
            file,
            format!(
                "describes host={} run={} but sits in host={dir_host}/run={dir_run}: a run moved or copied \
                 (move it back, or remove the copy)",
                info.host, info.run
            ),
        ));
    }
    Ok(())
}

/// Run `run` (described by `info`) is not one of `runs` again: the same recording whatever
/// its names has one start to the nanosecond, the same samples and stacks (a copy whose
/// run.json was edited to a new run). Failing that (every date edited), the same samples
/// and stacks with a byte-identical stack table is the same recording too.
fn check_not_a_copy(runs: &[Run], run: &Path, info: &RunInfo) -> Result<()> {
    let same_table = |r: &Run| -> bool {
        let read = |d: &Path| collector::files::read(&d.join(STACKS_FILE), collector::files::Kind::Part).ok();
        matches!((read(&r.dir), read(run)), (Some(a), Some(b)) if a == b)
    };
    if let Some(first) = runs.iter().find(|r: &&Run| {
        r.info.samples == info.samples
            && r.info.stacks == info.stacks
            && (r.info.start_unix_ns == info.start_unix_ns || same_table(r))
    }) {
        return Err(err(
            &run.join(RUN_FILE),
            format!(
                "the same recording as {} (run {} there, started at {} ns, {} samples): a copy would be \
                 counted twice; remove one",
                first.dir.display(),
                first.info.run,
                info.start_unix_ns,
                info.samples
            ),
        ));
    }
    Ok(())
}

/// The runs sampled one event: periods of different events do not add up.
fn check_one_event(path: &Path, runs: &[Run]) -> Result<()> {
    let mut events: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *events.entry(r.info.event.as_str()).or_default() += 1;
    }
    if events.len() > 1 {
        let list: Vec<String> = events.iter().map(|(e, n)| format!("{e}: {n} run(s)")).collect();
        return Err(err(
            path,
            format!(
                "its runs sampled different events ({}): their periods do not add up; select a partition of one event",
                list.join(", ")
            ),
        ));
    }
    Ok(())
}

fn sorted_dirs(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let e = e.map_err(|e| io(dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(prefix) && e.file_type().map_err(|x| io(&e.path(), x))?.is_dir() {
            out.push(e.path());
        }
    }
    out.sort();
    Ok(out)
}

/// One column of a grouped table.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    /// The host, `host/run`, or the setting.
    pub key: String,
    pub runs: usize,
    pub samples: u64,
    /// Per stage (in [`GroupedTable::stages`] order): samples and percent of the group's.
    pub shares: Vec<(u64, f64)>,
}

/// Stage shares by host, run or setting.
#[derive(Debug, Clone, Serialize)]
pub struct GroupedTable {
    pub by: String,
    pub event: String,
    pub stages: Vec<String>,
    pub groups: Vec<Group>,
}

impl GroupedTable {
    /// Stages down, groups across: percent of each group's samples.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let w = self.groups.iter().map(|g| g.key.len()).max().unwrap_or(0).clamp(8, 40);
        let _ = writeln!(s, "# stage shares by {} (event {}; percent of each column's samples)", self.by, self.event);
        let _ = write!(s, "{:<16}", "stage");
        for g in &self.groups {
            let _ = write!(s, " {:>w$}", g.key);
        }
        s.push('\n');
        for (i, stage) in self.stages.iter().enumerate() {
            let _ = write!(s, "{stage:<16}");
            for g in &self.groups {
                let _ = write!(s, " {:>w$}", format!("{:.2}%", g.shares[i].1));
            }
            s.push('\n');
        }
        for (label, f) in [("samples", 0usize), ("runs", 1)] {
            let _ = write!(s, "{label:<16}");
            for g in &self.groups {
                let v = if f == 0 { g.samples as usize } else { g.runs };
                let _ = write!(s, " {v:>w$}");
            }
            s.push('\n');
        }
        s
    }

    /// One line per (group, stage): by, key, stage, samples, percent.
    pub fn csv(&self) -> String {
        let q = crate::csv_field;
        let mut s = String::from("by,key,stage,samples,percent\n");
        for g in &self.groups {
            for (i, stage) in self.stages.iter().enumerate() {
                s.push_str(&format!("{},{},{},{},{:.4}\n", self.by, q(&g.key), q(stage), g.shares[i].0, g.shares[i].1));
            }
        }
        s
    }
}
