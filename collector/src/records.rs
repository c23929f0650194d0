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

/// A sample taken for DWARF unwinding (`record --call-graph dwarf`), with the user
/// registers (by [`crate::unwind::REGS_MASK_X86_64`]) and the copy of the user stack it
/// carried, owned: the ring's bytes are handed back before the sink unwinds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSample {
    pub sample: Sample,
    /// Empty when the sample interrupted a kernel thread (no user registers).
    pub regs: Vec<u64>,
    pub stack: Vec<u8>,
}

/// Everything a ring buffer can hand over, converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Sample(Sample),
    /// A sample with its user stack, to be unwound (and its stack dropped) by the sink.
    StackSample(Box<StackSample>),
    Mmap(Mapping),
    Task(TaskEvent),
    /// PERF_RECORD_LOST: this many records were lost (ring full).
    Lost(u64),
    /// PERF_RECORD_THROTTLE (true) or UNTHROTTLE (false).
    Throttle(bool),
}

impl Record {
    /// When it was taken (CLOCK_MONOTONIC ns); 0 for records without a time (lost,
    /// throttle), so sorting a pass by time puts them first.
    pub fn time(&self) -> u64 {
        match self {
            Record::Sample(s) => s.time,
            Record::StackSample(s) => s.sample.time,
            Record::Mmap(m) => m.time,
            Record::Task(
                TaskEvent::Comm { time, .. } | TaskEvent::Fork { time, .. } | TaskEvent::Exit { time, .. },
            ) => *time,
            Record::Lost(_) | Record::Throttle(_) => 0,
        }
    }
}

/// What perf synthesizes for a process that was already running: its executable file
/// mappings from `/proc/PID/maps` (build-ids are filled in later, as for MMAP2 records)
/// and each thread's name from `/proc/PID/task/TID/comm`. A process that is gone, or
/// unreadable, gives nothing.
pub fn synthesize_process(pid: u32, time: u64) -> (Vec<Mapping>, Vec<TaskEvent>) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mappings = maps.lines().filter_map(|l| parse_maps_line(l, pid, time)).collect();
    let mut tasks = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in rd.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) {
                tasks.push(TaskEvent::Comm { time, pid, tid, comm: comm.trim_end().to_string(), exec: false });
            }
        }
    }
    (mappings, tasks)
}

/// One line of /proc/PID/maps (`start-end perms offset dev inode path`), when it maps a
/// file executable.
fn parse_maps_line(line: &str, pid: u32, time: u64) -> Option<Mapping> {
    let mut f = line.split_whitespace();
    let (range, perms, off) = (f.next()?, f.next()?, f.next()?);
    let (_dev, _inode) = (f.next()?, f.next()?);
    let path = f.collect::<Vec<_>>().join(" ");
    if !perms.contains('x') || !path.starts_with('/') {
        return None;
    }
    let (a, b) = range.split_once('-')?;
    let start = u64::from_str_radix(a, 16).ok()?;
    let end = u64::from_str_radix(b, 16).ok()?;
    Some(Mapping {
        time,
        pid,
        tid: pid,
        start,
        len: end.checked_sub(start)?,
        pgoff: u64::from_str_radix(off, 16).ok()?,
        path,
        build_id: None,
    })
}

#[cfg(test)]
mod proc_tests {
    use super::*;

    #[test]
    fn maps_lines_keep_executable_file_mappings() {
        let m = parse_maps_line("5581c2a00000-5581c2b2f000 r-xp 0001a000 fd:01 393231   /usr/bin/my prog", 7, 1)
            .expect("parsed");
        assert_eq!((m.start, m.len, m.pgoff, m.path.as_str()), (0x5581c2a00000, 0x12f000, 0x1a000, "/usr/bin/my prog"));
        assert!(parse_maps_line("7ffd1000-7ffd2000 r-xp 00000000 00:00 0   [vdso]", 7, 1).is_none());
        assert!(parse_maps_line("5581c2a00000-5581c2b2f000 r--p 00000000 fd:01 393231 /usr/bin/x", 7, 1).is_none());
        assert!(parse_maps_line("garbage", 7, 1).is_none());
    }

    #[test]
    fn this_process_maps_its_own_test_binary() {
        let me = std::process::id();
        let (maps, tasks) = synthesize_process(me, 0);
        let exe = std::fs::read_link("/proc/self/exe").expect("exe");
        assert!(maps.iter().any(|m| std::path::Path::new(&m.path) == exe), "{maps:?}");
        assert!(tasks.iter().any(|t| matches!(t, TaskEvent::Comm { tid, .. } if *tid == me)));
    }
}
