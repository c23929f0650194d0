//! perf.data import (linux-perf-data): samples, mappings and lost counts of a `perf record`
//! file, converted into the collector's record types so the same symbolizer and stage
//! table apply. Kernel addresses resolve through a kallsyms file (the recording machine's
//! /proc/kallsyms when analyzed there).

use crate::{Error, Result};
use collector::records::{Mapping, Sample};
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, Mmap2FileId};
use linux_perf_data::{PerfFileReader, PerfFileRecord};

/// What a perf.data file held.
#[derive(Debug, Clone, Default)]
pub struct PerfData {
    /// The sampled event's name (first event of the file).
    pub event: String,
    pub samples: Vec<Sample>,
    pub maps: Vec<Mapping>,
    /// COMM records (thread names).
    pub tasks: Vec<collector::records::TaskEvent>,
    pub lost: u64,
}

/// perf's callchain context markers (PERF_CONTEXT_KERNEL, _USER, ...) are the top 4095
/// values of u64.
const PERF_CONTEXT_MAX: u64 = u64::MAX - 4094;

fn bad(path: &std::path::Path, msg: impl std::fmt::Display) -> Error {
    Error::Import { path: path.display().to_string(), line: 0, msg: format!("perf.data: {msg}") }
}

/// A file mapping from the fields MMAP and MMAP2 records share.
fn mapping(pid: i32, tid: i32, start: u64, len: u64, pgoff: u64, path: &[u8], build_id: Option<String>) -> Mapping {
    Mapping {
        time: 0,
        pid: pid as u32,
        tid: tid as u32,
        start,
        len,
        pgoff,
        path: String::from_utf8_lossy(path).into_owned(),
        build_id,
    }
}

/// Read a perf.data file.
pub fn read_perf_data(path: &std::path::Path) -> Result<PerfData> {
    let f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    let PerfFileReader { mut perf_file, mut record_iter } =
        PerfFileReader::parse_file(std::io::BufReader::new(f)).map_err(|e| bad(path, e))?;
    let event = perf_file
        .event_attributes()
        .first()
        .and_then(|a| a.name())
        .map(|n| n.split(':').next().unwrap_or(n).to_string())
        .unwrap_or_else(|| "unknown".into());
    let mut out = PerfData { event, ..Default::default() };
    let mut n = 0u64;
    while let Some(rec) = record_iter.next_record(&mut perf_file).map_err(|e| bad(path, format!("record {n}: {e}")))? {
        n += 1;
        let PerfFileRecord::EventRecord { record, .. } = rec else { continue };
        let parsed = record.parse().map_err(|e| bad(path, format!("record {n}: {e}")))?;
        match parsed {
            EventRecord::Sample(s) => out.samples.push(Sample {
                time: s.timestamp.unwrap_or(0),
                pid: s.pid.unwrap_or(0) as u32,
                tid: s.tid.unwrap_or(0) as u32,
                cpu: s.cpu.unwrap_or(0),
                ip: s.ip.unwrap_or(0),
                period: s.period.unwrap_or(1),
                kernel: matches!(s.cpu_mode, CpuMode::Kernel | CpuMode::GuestKernel),
                callchain: s
                    .callchain
                    .map(|c| (0..c.len()).filter_map(|i| c.get(i)).filter(|&a| a < PERF_CONTEXT_MAX).collect())
                    .unwrap_or_default(),
            }),
            EventRecord::Comm(c) => out.tasks.push(collector::records::TaskEvent::Comm {
                time: 0,
                pid: c.pid as u32,
                tid: c.tid as u32,
                comm: String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                exec: c.is_execve,
            }),
            EventRecord::Mmap(m) if !matches!(m.cpu_mode, CpuMode::Kernel) => {
                out.maps.push(mapping(m.pid, m.tid, m.address, m.length, m.page_offset, &m.path.as_slice(), None))
            }
            EventRecord::Mmap2(m) if !matches!(m.cpu_mode, CpuMode::Kernel) => {
                let build_id = match &m.file_id {
                    Mmap2FileId::BuildId(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
                    _ => None,
                };
                out.maps.push(mapping(m.pid, m.tid, m.address, m.length, m.page_offset, &m.path.as_slice(), build_id))
            }
            EventRecord::Lost(l) => out.lost += l.count,
            _ => {}
        }
    }
    Ok(out)
}
