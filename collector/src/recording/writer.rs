//! Writing a recording: samples and counter rows buffered and written as Parquet parts
//! (temporary name, then rename), maps, tasks, meta.json and the kallsyms snapshot.

use super::{pq_err, write_atomic, CounterRow, Meta};
use crate::records::{Mapping, Sample, TaskEvent};
use crate::{Error, Result};
use polars::prelude::*;
use std::fs::File;
use std::path::{Path, PathBuf};

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
