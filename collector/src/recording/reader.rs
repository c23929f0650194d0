//! Reading a recording back: meta.json, every Parquet part (each checked by
//! [`super::part_check`] and charged to the read's memory budget by [`super::decode`]
//! before polars decodes it), counters, maps and tasks. Every file is opened through
//! [`crate::files`] (regular files only, each size capped by its kind).

use super::decode::{decode, texts, DecodeBudget, DecodeError};
use super::{pq_err, CounterRow, Meta, FORMAT_VERSION};
use crate::records::{Mapping, Sample, TaskEvent};
use crate::{Error, Result};
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// A recording opened for reading.
pub struct Recording {
    pub dir: PathBuf,
    pub meta: Meta,
    /// Refuse the whole recording when one part cannot be read (default false: such a
    /// part is skipped and noted in [`Recording::problems`]).
    pub strict: bool,
    skipped: std::sync::Mutex<Vec<String>>,
}

fn parts(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    let mut v: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "parquet")).collect();
    v.sort();
    Ok(v)
}

/// A decoding failure as the collector's error: over the budget stops the read
/// ([`Error::Memory`]); anything else names the part as unreadable.
fn decode_err(path: &Path, e: DecodeError) -> Error {
    match e {
        DecodeError::Budget(msg) => Error::Memory { path: path.to_path_buf(), msg },
        DecodeError::Corrupt(msg) => pq_err(path, format!("unreadable part: {msg}")),
    }
}

/// Read one Parquet part. Whole part in memory: the counts polars would trust are
/// checked first (a corrupt count aborts polars on allocation, which no catch_unwind can
/// stop), and its decoded size charged to `budget`; a reader panic on malformed metadata
/// becomes an error naming the part.
fn read_part(path: &Path, budget: &mut DecodeBudget) -> Result<DataFrame> {
    let bytes = crate::files::read(path, crate::files::Kind::Part)?;
    decode(bytes, None, budget).map_err(|e| decode_err(path, e))
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
        let text = crate::files::read(&p, crate::files::Kind::Meta)?;
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
        Ok(Recording { dir: dir.to_path_buf(), meta, strict: false, skipped: Default::default() })
    }

    /// Every sample, in part order (parts that cannot be read are skipped and noted,
    /// unless strict). The read runs under one [`DecodeBudget`] (see
    /// [`DecodeBudget::from_env`]), charged for the decoded parts and for the samples made
    /// of them; passing it is an [`Error::Memory`] naming the part.
    pub fn samples(&self) -> Result<Vec<Sample>> {
        let mut budget = DecodeBudget::from_env();
        let per_part = self.sound_parts("samples.parquet", |path| {
            let df = read_part(path, &mut budget)?;
            let path = path.to_path_buf();
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
            // The samples made of the part: one struct per row and its callchain's addresses.
            let frames: u64 = chains.iter().map(|c| c.map_or(0, |s| s.len() as u64)).sum();
            let made = (time.len() as u64)
                .saturating_mul(std::mem::size_of::<Sample>() as u64)
                .saturating_add(frames.saturating_mul(8));
            budget.charge(made, "the samples of this part").map_err(|msg| Error::Memory { path: path.clone(), msg })?;
            let mut out = Vec::with_capacity(time.len());
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
            Ok(out)
        })?;
        Ok(per_part.into_iter().flatten().collect())
    }

    /// Read every part of `sub` with `read`; a part it fails on is skipped and noted
    /// ([`Recording::skipped`]), or, when strict, the error.
    fn sound_parts<T>(&self, sub: &str, mut read: impl FnMut(&Path) -> Result<T>) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for path in parts(&self.dir.join(sub))? {
            match read(&path) {
                Ok(v) => out.push(v),
                // Over the memory budget: the read stops (skipping would change the figures
                // without the part being at fault).
                Err(e @ Error::Memory { .. }) => return Err(e),
                Err(e) if !self.strict => {
                    let note = format!("skipped {}: {e}", path.display());
                    if let Ok(mut s) = self.skipped.lock() {
                        if !s.contains(&note) {
                            s.push(note);
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// The parts skipped so far because they could not be read, each with why.
    pub fn skipped(&self) -> Vec<String> {
        // File names come from the directory: printed escaped.
        self.skipped.lock().map(|s| s.iter().cloned().map(crate::printable).collect()).unwrap_or_default()
    }

    /// What this recording lacks and what that costs the analysis: a writer that did not
    /// finish, missing maps or tasks, parts skipped so far. Empty for a whole recording.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.meta.status == "failed" {
            out.push(format!(
                "the recording is incomplete: it stopped on an error ({}), so it ends at its last part",
                self.meta.ended_by.as_deref().unwrap_or("not recorded")
            ));
        } else if self.meta.status != "complete" {
            out.push(format!(
                "the recording is incomplete: its writer did not finish (status `{}`), so it ends at its last \
                 part (one is written every --chunk-ms) and its summary counts are missing",
                self.meta.status
            ));
        }
        if !self.dir.join("maps.json").exists() {
            out.push(
                "no maps.json: the binaries the samples fall in are unknown, so user-space samples cannot be named \
                 ([unknown]) and count as other"
                    .into(),
            );
        }
        if !self.dir.join("tasks.json").exists() {
            out.push("no tasks.json: threads are unnamed, so there are no per-worker tables".into());
        }
        // Why the recording has no kernel snapshot (a full disk, no /proc/kallsyms): kernel
        // names then come from elsewhere or stay unnamed, and the reader should know why.
        for n in self.meta.notes.iter().filter(|n| n.starts_with("no kallsyms snapshot")) {
            out.push(format!("{n}: kernel symbols come from elsewhere (see `# symbols: kernel`) or stay unnamed"));
        }
        out.extend(self.skipped());
        out
    }

    /// Every sample part concatenated into one DataFrame (the columns of `samples.parquet`);
    /// no per-sample conversion, for aggregation in polars.
    pub fn samples_df(&self) -> Result<DataFrame> {
        let mut out: Option<DataFrame> = None;
        let mut budget = DecodeBudget::from_env();
        self.sound_parts("samples.parquet", |path| {
            let df = read_part(path, &mut budget)?;
            for name in ["time", "pid", "tid", "cpu", "ip", "period", "kernel", "callchain"] {
                col(&df, path, name)?;
            }
            check_periods(&df, path)?;
            match &mut out {
                None => out = Some(df),
                Some(o) => {
                    o.vstack_mut(&df).map_err(|e| Error::Recording {
                        path: path.to_path_buf(),
                        msg: format!("columns differ from the first part: {e}"),
                    })?;
                }
            }
            Ok(())
        })?;
        match out {
            Some(df) => Ok(df),
            None => super::samples_frame(&[]).map_err(|e| pq_err(&self.dir, e)),
        }
    }

    /// tasks.json (empty if the writer died before writing it).
    pub fn tasks(&self) -> Result<Vec<TaskEvent>> {
        let p = self.dir.join("tasks.json");
        if std::fs::symlink_metadata(&p).is_err() {
            return Ok(Vec::new());
        }
        let text = crate::files::read(&p, crate::files::Kind::Tasks)?;
        serde_json::from_slice(&text).map_err(|e| Error::Recording { path: p, msg: format!("line {}: {e}", e.line()) })
    }

    /// Every counter row, in part order.
    pub fn counters(&self) -> Result<Vec<CounterRow>> {
        let mut budget = DecodeBudget::from_env();
        let per_part = self.sound_parts("counters.parquet", |path| {
            let df = read_part(path, &mut budget)?;
            let path = path.to_path_buf();
            let time = u64s(&df, &path, "time")?;
            let value = u64s(&df, &path, "value")?;
            // Counter sources and names are short (`forwarder`, `rx_packets`, an event
            // name): 256 bytes is far above any.
            let source = texts(&df, "source", 256, &mut budget).map_err(|e| decode_err(&path, e))?;
            let name = texts(&df, "name", 256, &mut budget).map_err(|e| decode_err(&path, e))?;
            let worker: Vec<i32> = col(&df, &path, "worker")?
                .i32()
                .map_err(|_| Error::Recording { path: path.clone(), msg: "column `worker` is not i32".into() })?
                .iter()
                .map(|v| v.unwrap_or(-1))
                .collect();
            // The strings move into the rows (the budget counted them once).
            Ok(source
                .into_iter()
                .zip(name)
                .enumerate()
                .map(|(i, (source, name))| CounterRow {
                    time: time[i],
                    source,
                    worker: worker[i],
                    name,
                    value: value[i],
                })
                .collect::<Vec<_>>())
        })?;
        Ok(per_part.into_iter().flatten().collect())
    }

    /// Rows of the forwarder's counter `name` (as its stats segment names it), in part
    /// order (time order per worker); empty when the target was not a forwarder.
    pub fn forwarder_counter(&self, name: &str) -> Result<Vec<CounterRow>> {
        Ok(self.counters()?.into_iter().filter(|r| r.is_forwarder() && r.name == name).collect())
    }

    /// maps.json (empty if the writer died before writing it).
    pub fn maps(&self) -> Result<Vec<Mapping>> {
        let p = self.dir.join("maps.json");
        if std::fs::symlink_metadata(&p).is_err() {
            return Ok(Vec::new());
        }
        let text = crate::files::read(&p, crate::files::Kind::Maps)?;
        serde_json::from_slice(&text).map_err(|e| Error::Recording { path: p, msg: format!("line {}: {e}", e.line()) })
    }
}
