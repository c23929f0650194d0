//! Writing a recording: samples and counter rows buffered and written as Parquet parts
//! (temporary name, then rename), maps, tasks, meta.json and the kallsyms snapshot.

use super::{dir_mode, file_mode, pq_err, write_atomic_mode, CounterRow, Meta};
use crate::outdir::{create_dir_new, Claim, OutputDir};
use crate::records::{Mapping, Sample, TaskEvent};
use crate::{Error, Result};
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// Write `df` as the part `path`: a random temporary name (removed on error), renamed
/// into place.
fn write_df(path: &Path, df: &mut DataFrame, mode: u32) -> Result<()> {
    crate::outdir::write_parquet(path, mode, df)
}

/// Buffers rows and writes them as Parquet parts.
pub struct RecordingWriter {
    dir: PathBuf,
    /// The directory, claimed (its marker locked) while this writer lives.
    _out: OutputDir,
    samples: Vec<Sample>,
    counters: Vec<CounterRow>,
    sample_parts: u32,
    counter_parts: u32,
    pub samples_written: u64,
    pub counter_rows_written: u64,
    pub maps: Vec<Mapping>,
    pub tasks: Vec<TaskEvent>,
    /// How many maps and tasks the files on disk hold (written again when more are known).
    maps_on_disk: usize,
    tasks_on_disk: usize,
    /// File mode (0600 private, 0644 shared).
    mode: u32,
}

impl RecordingWriter {
    /// Create the directory layout, private to its owner (directories 0700, files 0600,
    /// whatever the umask: a recording made as root holds kernel addresses). The
    /// directory is claimed as [`OutputDir::claim`] says: new or empty, or with `force`
    /// one fwdscope made that no other fwdscope is writing.
    pub fn create(dir: &Path, force: bool) -> Result<RecordingWriter> {
        Self::create_with(dir, force, false)
    }

    /// [`create`](Self::create); `shared` makes it readable by others (0755/0644).
    pub fn create_with(dir: &Path, force: bool, shared: bool) -> Result<RecordingWriter> {
        let out = OutputDir::claim(dir, Claim { force, shared })?;
        for sub in ["samples.parquet", "counters.parquet"] {
            create_dir_new(&dir.join(sub), dir_mode(shared))?;
        }
        Ok(RecordingWriter {
            dir: dir.to_path_buf(),
            _out: out,
            samples: Vec::with_capacity(1 << 16),
            counters: Vec::new(),
            sample_parts: 0,
            counter_parts: 0,
            samples_written: 0,
            counter_rows_written: 0,
            maps: Vec::new(),
            tasks: Vec::new(),
            maps_on_disk: 0,
            tasks_on_disk: 0,
            mode: file_mode(shared),
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
            write_df(&path, &mut df, self.mode)?;
            self.samples_written += self.samples.len() as u64;
            self.samples.clear();
        }
        if !self.counters.is_empty() {
            self.counter_parts += 1;
            let path = self.dir.join("counters.parquet").join(format!("part-{:06}.parquet", self.counter_parts));
            let mut df = counters_frame(&self.counters).map_err(|e| pq_err(&path, e))?;
            write_df(&path, &mut df, self.mode)?;
            self.counter_rows_written += self.counters.len() as u64;
            self.counters.clear();
        }
        // Maps and tasks as they are learned, with each part: a recorder killed later
        // leaves a recording whose samples can still be named.
        if self.maps.len() != self.maps_on_disk || self.tasks.len() != self.tasks_on_disk {
            self.write_maps_and_tasks()?;
        }
        Ok(())
    }

    /// The mode of this recording's files.
    pub fn file_mode(&self) -> u32 {
        self.mode
    }

    /// Replace meta.json.
    pub fn write_meta(&self, meta: &Meta) -> Result<()> {
        let p = self.dir.join("meta.json");
        let s =
            serde_json::to_vec_pretty(meta).map_err(|e| Error::Recording { path: p.clone(), msg: e.to_string() })?;
        write_atomic_mode(&p, &s, self.mode)
    }

    /// Write maps.json and tasks.json from what was collected.
    pub fn write_maps_and_tasks(&mut self) -> Result<()> {
        let p = self.dir.join("maps.json");
        let s = serde_json::to_vec_pretty(&self.maps)
            .map_err(|e| Error::Recording { path: p.clone(), msg: e.to_string() })?;
        write_atomic_mode(&p, &s, self.mode)?;
        let p = self.dir.join("tasks.json");
        let s = serde_json::to_vec_pretty(&self.tasks)
            .map_err(|e| Error::Recording { path: p.clone(), msg: e.to_string() })?;
        write_atomic_mode(&p, &s, self.mode)?;
        (self.maps_on_disk, self.tasks_on_disk) = (self.maps.len(), self.tasks.len());
        Ok(())
    }

    /// Share `earlier`, the kallsyms snapshot of another recording made on this boot, as a
    /// hard link (no second copy of several megabytes); what
    /// [`snapshot_kallsyms`](Self::snapshot_kallsyms) returns. An error where no link can
    /// be made (another file system): copy instead.
    pub fn link_kallsyms(&self, earlier: &Path) -> Result<(bool, Option<u64>)> {
        let text = crate::files::read(earlier, crate::files::Kind::Kallsyms)?;
        let p = self.dir.join("kallsyms");
        std::fs::hard_link(earlier, &p).map_err(|e| Error::io(&p, e))?;
        let visible = text.split(|&b| b == b'\n').take(100).any(|l| l.iter().take(16).any(|&c| c != b'0'));
        Ok((visible, crate::buildid::kallsyms_text_address(&text)))
    }

    /// Copy /proc/kallsyms (addresses are zero unless the reader may see them). Returns
    /// whether the addresses are visible, and the address of `_text` in the copy (the
    /// recording's reference for the kernel's placement on this boot).
    pub fn snapshot_kallsyms(&self) -> Result<(bool, Option<u64>)> {
        let p = self.dir.join("kallsyms");
        let text = crate::files::read(Path::new("/proc/kallsyms"), crate::files::Kind::Kallsyms)?;
        let visible = text.split(|&b| b == b'\n').take(100).any(|l| l.iter().take(16).any(|&c| c != b'0'));
        // Private even in a shared recording when it holds real addresses: /proc hides them
        // from other users (kptr_restrict), and so does this copy.
        write_atomic_mode(&p, &text, if visible { file_mode(false) } else { self.mode })?;
        Ok((visible, crate::buildid::kallsyms_text_address(&text)))
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
