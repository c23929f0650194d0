//! The perf ABI, in one file: opening events with perf_event_open (through perf-event2),
//! mapping the kernel's errors onto [`Error`]s a user can act on, reading counters, and
//! draining ring buffers into [`Record`]s. Nothing else in the crate touches perf.

use crate::events::EventId;
use crate::records::{Mapping, Record, TaskEvent};
use crate::sample_decode::{sample_bits, SampleLayout, PERF_RECORD_SAMPLE};
use crate::{Error, Result};
use perf_event::data::Record as PerfRecord;
use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Clock, Counter, Group, ReadFormat, SampleFlag, Sampler};

/// PERF_RECORD_MISC_COMM_EXEC.
const MISC_COMM_EXEC: u16 = 1 << 13;

/// Which task(s) and CPU an event observes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// A thread id, or `None` for every task (system-wide).
    pub pid: Option<i32>,
    /// A CPU, or `None` for any CPU the task runs on.
    pub cpu: Option<usize>,
    /// Follow threads and processes the observed task creates after the event is opened.
    pub inherit: bool,
    /// Stay disabled until the task calls exec (a child started for the recording).
    pub enable_on_exec: bool,
    /// Count kernel mode too.
    pub kernel: bool,
}

/// How samples get their callchains (perf's `--call-graph`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallGraph {
    /// No callchains (the default).
    #[default]
    None,
    /// The kernel walks frame pointers (perf's `-g`, `--call-graph fp`): cheap, but a user
    /// frame built without frame pointers ends the chain.
    FramePointer,
    /// The kernel's own callchain, plus the user registers and a copy of `stack_bytes` of
    /// the user stack with each sample, unwound from the binaries' DWARF CFI as the samples
    /// arrive (perf's `--call-graph dwarf,SIZE`; the copies are not kept).
    Dwarf { stack_bytes: u32 },
}

impl CallGraph {
    /// perf's default stack copy for `--call-graph dwarf`.
    pub const DEFAULT_STACK: u32 = 8192;
    /// The largest copy a sample can carry (a record's size is 16 bits; perf's limit).
    pub const MAX_STACK: u32 = 65528;

    /// perf's spelling: `fp`, `dwarf` or `dwarf,SIZE` (SIZE: bytes, a multiple of 8 from 8
    /// to 65528); `none` too.
    pub fn parse(s: &str) -> std::result::Result<CallGraph, String> {
        let (mode, size) = match s.split_once(',') {
            Some((m, n)) => (m, Some(n)),
            None => (s, None),
        };
        match (mode, size) {
            ("none", None) => Ok(CallGraph::None),
            ("fp", None) => Ok(CallGraph::FramePointer),
            ("dwarf", None) => Ok(CallGraph::Dwarf { stack_bytes: Self::DEFAULT_STACK }),
            ("dwarf", Some(n)) => match n.trim().parse::<u32>() {
                Ok(b) if (8..=Self::MAX_STACK).contains(&b) && b % 8 == 0 => Ok(CallGraph::Dwarf { stack_bytes: b }),
                _ => Err(format!(
                    "--call-graph dwarf,{n}: the stack copy must be bytes, a multiple of 8 from 8 to {}",
                    Self::MAX_STACK
                )),
            },
            ("fp" | "none", Some(_)) => Err(format!("--call-graph {s}: only dwarf takes a size (dwarf,SIZE)")),
            _ => Err(format!("--call-graph {s}: expected fp, dwarf, dwarf,SIZE or none")),
        }
    }

    /// Whether samples carry callchains at all.
    pub fn any(self) -> bool {
        self != CallGraph::None
    }

    /// How it is said in meta.json and headers: `fp`, `dwarf,8192`, `none`.
    pub fn name(self) -> String {
        match self {
            CallGraph::None => "none".into(),
            CallGraph::FramePointer => "fp".into(),
            CallGraph::Dwarf { stack_bytes } => format!("dwarf,{stack_bytes}"),
        }
    }
}

/// How a sampling event is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleSpec {
    pub event: EventId,
    /// Samples per second (perf's -F), or...
    pub freq: Option<u64>,
    /// ...one sample every `period` events (perf's -c).
    pub period: Option<u64>,
    /// Callchains: none, frame pointers, or DWARF (registers and stack copies).
    pub call_graph: CallGraph,
    /// Ring buffer data pages (a power of two).
    pub ring_pages: usize,
    /// Deliver MMAP2/COMM/FORK/EXIT records on this event.
    pub tracking: bool,
}

/// When `pid` belongs to another user and this process may not trace it (not root, no
/// CAP_SYS_PTRACE in its effective set): (its owner's uid, ours). The kernel refuses
/// per-task events on such a process whatever perf_event_paranoid says.
pub fn foreign_owner(pid: i32) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if me == 0 {
        return None;
    }
    let owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    if owner == me {
        return None;
    }
    const CAP_SYS_PTRACE: u32 = 19;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).map(str::trim)?;
    let caps = u64::from_str_radix(eff, 16).ok()?;
    (caps & (1 << CAP_SYS_PTRACE) == 0).then_some((owner, me))
}

/// kernel.perf_event_paranoid as the kernel reports it.
pub fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Refuse a sampling frequency above the kernel's limit, naming it: the kernel answers it
/// with a bare EINVAL (which for a hardware event would read as "unsupported").
pub fn check_sample_freq(f: u64) -> Result<()> {
    match max_sample_rate() {
        Some(max) if f > max => Err(Error::Config(format!(
            "-F {f}: above kernel.perf_event_max_sample_rate = {max} (sample at most {max} times a second, \
             or raise the limit: sysctl -w kernel.perf_event_max_sample_rate={f})"
        ))),
        _ => Ok(()),
    }
}

/// kernel.perf_event_max_sample_rate, when readable.
pub fn max_sample_rate() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate").ok()?.trim().parse().ok()
}

fn map_err(e: std::io::Error, event: EventId, what: &str, scope: &Scope) -> Error {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            Error::Permission { what: format!("{what} {event}"), paranoid: paranoid() }
        }
        Some(libc::ESRCH) => Error::NoSuchProcess(scope.pid.unwrap_or(-1)),
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
            Error::Unsupported { event: event.name().into(), source: e }
        }
        // Hardware events on a machine without a PMU may also come back EINVAL.
        Some(libc::EINVAL) if event.kind() != crate::events::EventKind::Software => {
            Error::Unsupported { event: event.name().into(), source: e }
        }
        _ => Error::Perf { what: format!("{what} {event}"), source: e },
    }
}

fn builder(event: EventId) -> Builder<'static> {
    let cache = |which, result| Cache { which, operation: CacheOp::READ, result };
    match event {
        EventId::Cycles => Builder::new(Hardware::CPU_CYCLES),
        EventId::Instructions => Builder::new(Hardware::INSTRUCTIONS),
        EventId::CacheReferences => Builder::new(Hardware::CACHE_REFERENCES),
        EventId::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
        EventId::Branches => Builder::new(Hardware::BRANCH_INSTRUCTIONS),
        EventId::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
        EventId::LlcLoadMisses => Builder::new(cache(CacheId::LL, CacheResult::MISS)),
        EventId::DtlbLoadMisses => Builder::new(cache(CacheId::DTLB, CacheResult::MISS)),
        EventId::TaskClock => Builder::new(Software::TASK_CLOCK),
        EventId::CpuClock => Builder::new(Software::CPU_CLOCK),
        EventId::PageFaults => Builder::new(Software::PAGE_FAULTS),
        EventId::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
    }
}

fn apply_scope(b: &mut Builder<'static>, s: &Scope) {
    match s.pid {
        Some(p) => b.observe_pid(p),
        None => b.any_pid(),
    };
    match s.cpu {
        Some(c) => b.one_cpu(c),
        None => b.any_cpu(),
    };
    b.inherit(s.inherit).enable_on_exec(s.enable_on_exec).exclude_kernel(!s.kernel).exclude_hv(true);
    b.enabled(false);
}

/// A counting event: count with time enabled and running, for multiplexing scale.
pub struct CountingEvent {
    pub event: EventId,
    counter: Counter,
}

impl CountingEvent {
    pub fn open(event: EventId, scope: &Scope) -> Result<CountingEvent> {
        let mut b = builder(event);
        apply_scope(&mut b, scope);
        let counter = b.build().map_err(|e| map_err(e, event, "counting", scope))?;
        Ok(CountingEvent { event, counter })
    }

    pub fn enable(&mut self) -> Result<()> {
        self.counter.enable().map_err(|e| Error::Perf { what: format!("enabling {}", self.event), source: e })
    }

    /// The count scaled by time_enabled / time_running (as perf stat scales multiplexed
    /// events), and whether the event ran at all.
    pub fn read_scaled(&mut self) -> Result<(u64, bool)> {
        let ct = self
            .counter
            .read_count_and_time()
            .map_err(|e| Error::Perf { what: format!("reading {}", self.event), source: e })?;
        if ct.time_running == 0 {
            return Ok((0, ct.time_enabled == 0));
        }
        let scaled = (ct.count as u128 * ct.time_enabled as u128 / ct.time_running as u128) as u64;
        Ok((scaled, true))
    }
}

/// A counting group: events scheduled onto the PMU together (so ratios such as IPC compare
/// counts of the same instants), read in one system call and scaled by the group's
/// time_enabled / time_running.
pub struct CountingGroup {
    group: Group,
    /// The leader's event, then each member with its counter.
    leader: EventId,
    members: Vec<(EventId, Counter)>,
}

impl CountingGroup {
    /// Open `events` as one group on `scope`; every event must be countable here (probe
    /// with [`CountingEvent::open`] first).
    pub fn open(events: &[EventId], scope: &Scope) -> Result<CountingGroup> {
        let (&leader, rest) = events.split_first().ok_or_else(|| Error::Config("an empty counting group".into()))?;
        let mut b = builder(leader);
        apply_scope(&mut b, scope);
        b.read_format(
            ReadFormat::GROUP | ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING | ReadFormat::ID,
        );
        let mut group = b.build_group().map_err(|e| map_err(e, leader, "counting group leader", scope))?;
        let mut members = Vec::new();
        for &ev in rest {
            let mut m = builder(ev);
            apply_scope(&mut m, scope);
            // Members follow the leader's enable state.
            m.enabled(true);
            m.read_format(
                ReadFormat::GROUP | ReadFormat::TOTAL_TIME_ENABLED | ReadFormat::TOTAL_TIME_RUNNING | ReadFormat::ID,
            );
            let c = m.build_with_group(&mut group).map_err(|e| map_err(e, ev, "counting group member", scope))?;
            members.push((ev, c));
        }
        Ok(CountingGroup { group, leader, members })
    }

    pub fn enable(&mut self) -> Result<()> {
        self.group
            .enable()
            .map_err(|e| Error::Perf { what: format!("enabling the group of {}", self.leader), source: e })
    }

    /// Every event's count, scaled by the group's time_enabled / time_running.
    pub fn read_scaled(&mut self) -> Result<Vec<(EventId, u64)>> {
        let data = self
            .group
            .read()
            .map_err(|e| Error::Perf { what: format!("reading the group of {}", self.leader), source: e })?;
        let enabled = data.time_enabled().map_or(0, |d| d.as_nanos());
        let running = data.time_running().map_or(0, |d| d.as_nanos());
        let scale = |v: u64| (v as u128 * enabled).checked_div(running).map_or(0, |x| x as u64);
        let mut out = Vec::with_capacity(1 + self.members.len());
        out.push((self.leader, scale(data.get(self.group.as_counter()).map_or(0, |e| e.value()))));
        for (ev, c) in &self.members {
            out.push((*ev, scale(data.get(c).map_or(0, |e| e.value()))));
        }
        Ok(out)
    }
}

/// A sampling event with its ring buffer.
pub struct SamplingEvent {
    pub event: EventId,
    sampler: Sampler,
    /// How this event's samples are laid out (what `open` asked for): samples are
    /// decoded by the one decoder the perf.data reader uses too.
    layout: SampleLayout,
}

impl SamplingEvent {
    pub fn open(spec: &SampleSpec, scope: &Scope) -> Result<SamplingEvent> {
        let mut b = builder(spec.event);
        apply_scope(&mut b, scope);
        let mut flags = SampleFlag::IP | SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::PERIOD;
        let mut sample_type =
            sample_bits::IP | sample_bits::TID | sample_bits::TIME | sample_bits::CPU | sample_bits::PERIOD;
        match spec.call_graph {
            CallGraph::None => {}
            CallGraph::FramePointer => {
                flags |= SampleFlag::CALLCHAIN;
                sample_type |= sample_bits::CALLCHAIN;
            }
            CallGraph::Dwarf { stack_bytes } => {
                // As perf does: the kernel's callchain without its user part (the stack copy
                // gives that), the registers an unwind starts from, and the copy.
                flags |= SampleFlag::CALLCHAIN | SampleFlag::REGS_USER | SampleFlag::STACK_USER;
                sample_type |= sample_bits::CALLCHAIN | sample_bits::REGS_USER | sample_bits::STACK_USER;
                b.exclude_callchain_user(true)
                    .sample_regs_user(crate::unwind::REGS_MASK_X86_64)
                    .sample_stack_user(stack_bytes.clamp(8, CallGraph::MAX_STACK) & !7);
            }
        }
        let layout =
            SampleLayout { sample_type, read_format: 0, default_period: 1, big_endian: cfg!(target_endian = "big") };
        b.sample(flags).sample_id_all(true).clockid(Clock::MONOTONIC);
        if spec.tracking {
            b.mmap(true).mmap2(true).comm(true).comm_exec(true).task(true);
        }
        match (spec.period, spec.freq) {
            (Some(p), _) => b.sample_period(p.max(1)),
            (None, Some(f)) => b.sample_frequency(f.max(1)),
            (None, None) => b.sample_frequency(4000),
        };
        if let (None, Some(f)) = (spec.period, spec.freq) {
            check_sample_freq(f)?;
        }
        let counter = b.build().map_err(|e| map_err(e, spec.event, "sampling", scope))?;
        let pages = spec.ring_pages.max(1).next_power_of_two();
        let sampler = counter
            .sampled(pages * page_size())
            .map_err(|e| Error::Perf { what: format!("mapping the ring buffer of {}", spec.event), source: e })?;
        Ok(SamplingEvent { event: spec.event, sampler, layout })
    }

    pub fn enable(&mut self) -> Result<()> {
        self.sampler
            .as_counter_mut()
            .enable()
            .map_err(|e| Error::Perf { what: format!("enabling {}", self.event), source: e })
    }

    pub fn disable(&mut self) -> Result<()> {
        self.sampler
            .as_counter_mut()
            .disable()
            .map_err(|e| Error::Perf { what: format!("disabling {}", self.event), source: e })
    }

    /// Move up to `max` records out of the ring buffer into `out`. Returns records moved;
    /// records the parser cannot read are counted in `unparsed`.
    pub fn drain(&mut self, out: &mut Vec<Record>, max: usize, unparsed: &mut u64) -> usize {
        let layout = self.layout;
        let mut n = 0;
        while n < max {
            let Some(rec) = self.sampler.next_record() else { break };
            n += 1;
            let misc = rec.misc();
            let decoded = if rec.ty() == PERF_RECORD_SAMPLE {
                decode_sample(&layout, &rec.to_contiguous(), misc)
            } else {
                match rec.parse_record() {
                    Ok(r) => convert(r, misc, layout.trailer_time(&rec.to_contiguous()).unwrap_or(0)),
                    Err(_) => {
                        *unparsed += 1;
                        None
                    }
                }
            };
            match decoded {
                Some(c) => out.push(c),
                None if rec.ty() == PERF_RECORD_SAMPLE => *unparsed += 1,
                None => {}
            }
        }
        n
    }
}

/// A sample body: with its user registers and stack copy (owned) when the event was opened
/// for DWARF unwinding.
fn decode_sample(layout: &SampleLayout, body: &[u8], misc: u16) -> Option<Record> {
    if layout.sample_type & sample_bits::STACK_USER == 0 {
        return layout.decode(body, misc).map(Record::Sample);
    }
    let (sample, stack) = layout.decode_with_stack(body, misc, crate::unwind::REGS_MASK_X86_64)?;
    Some(match stack {
        Some(st) => Record::StackSample(Box::new(crate::records::StackSample {
            sample,
            regs: st.regs,
            stack: st.stack.to_vec(),
        })),
        None => Record::Sample(sample),
    })
}

/// What a caller needs perf to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Count a software event on this process (`stat` on the forwarder).
    Count,
    /// Sample this process with a software clock (`record` of the forwarder).
    Sample,
    /// Sample every task on a CPU, kernel included (`record -a`).
    SystemWide,
}

/// Whether perf_event_open allows `need` here, found by opening such an event (and closing
/// it at once); the error says why not (permission, paranoid level, no perf at all).
pub fn probe(need: Need) -> Result<()> {
    let own = Scope { pid: Some(0), cpu: None, inherit: false, enable_on_exec: false, kernel: false };
    let sample = |scope: &Scope| {
        let spec = SampleSpec {
            event: EventId::CpuClock,
            freq: Some(100),
            period: None,
            call_graph: CallGraph::None,
            ring_pages: 1,
            tracking: false,
        };
        SamplingEvent::open(&spec, scope).map(drop)
    };
    match need {
        Need::Count => CountingEvent::open(EventId::TaskClock, &own).map(drop),
        Need::Sample => sample(&own),
        Need::SystemWide => {
            let cpu = online_cpus().first().copied().unwrap_or(0);
            sample(&Scope { pid: None, cpu: Some(cpu), inherit: false, enable_on_exec: false, kernel: true })
        }
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A side-band record (mappings, tasks, losses, throttling) as a [`Record`], `time` the
/// one its sample_id trailer gives (MMAP and COMM carry none of their own); samples are
/// decoded by [`SampleLayout::decode`] instead.
fn convert(r: PerfRecord<'_>, misc: u16, time: u64) -> Option<Record> {
    Some(match r {
        PerfRecord::Mmap2(m) => Record::Mmap(Mapping {
            time,
            pid: m.pid,
            tid: m.tid,
            start: m.addr,
            len: m.len,
            pgoff: m.pgoff,
            path: m.filename_os().to_string_lossy().into_owned(),
            build_id: m.build_id().map(hex),
        }),
        PerfRecord::Mmap(m) => Record::Mmap(Mapping {
            time,
            pid: m.pid,
            tid: m.tid,
            start: m.addr,
            len: m.len,
            pgoff: m.pgoff,
            path: m.filename_os().to_string_lossy().into_owned(),
            build_id: None,
        }),
        PerfRecord::Comm(c) => Record::Task(TaskEvent::Comm {
            time,
            pid: c.pid,
            tid: c.tid,
            comm: c.comm_os().to_string_lossy().into_owned(),
            exec: misc & MISC_COMM_EXEC != 0,
        }),
        PerfRecord::Fork(f) => {
            Record::Task(TaskEvent::Fork { time: f.time, pid: f.pid, tid: f.tid, ppid: f.ppid, ptid: f.ptid })
        }
        PerfRecord::Exit(e) => Record::Task(TaskEvent::Exit { time: e.time, pid: e.pid, tid: e.tid }),
        PerfRecord::Lost(l) => Record::Lost(l.lost),
        PerfRecord::LostSamples(l) => Record::Lost(l.lost),
        PerfRecord::Throttle(_) => Record::Throttle(true),
        PerfRecord::Unthrottle(_) => Record::Throttle(false),
        _ => return None,
    })
}

/// CLOCK_MONOTONIC in nanoseconds (the clock samples are stamped with).
pub use fwd_abi::rows::mono_ns;

/// Online CPUs (from /sys, falling back to the available parallelism).
pub fn online_cpus() -> Vec<usize> {
    if let Ok(s) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        let mut v = Vec::new();
        for part in s.trim().split(',') {
            let mut it = part.split('-');
            let a = it.next().and_then(|x| x.parse::<usize>().ok());
            let b = it.next().and_then(|x| x.parse::<usize>().ok());
            match (a, b) {
                (Some(a), Some(b)) if a <= b => v.extend(a..=b),
                (Some(a), None) => v.push(a),
                _ => {}
            }
        }
        if !v.is_empty() {
            return v;
        }
    }
    (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect()
}

/// Thread ids of a process, from /proc.
pub fn threads_of(pid: i32) -> Result<Vec<i32>> {
    let dir = format!("/proc/{pid}/task");
    let rd = std::fs::read_dir(&dir).map_err(|_| Error::NoSuchProcess(pid))?;
    let mut v: Vec<i32> = rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    v.sort_unstable();
    if v.is_empty() {
        return Err(Error::NoSuchProcess(pid));
    }
    Ok(v)
}

/// A thread's name (/proc/PID/task/TID/comm).
pub fn thread_name(pid: i32, tid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok().map(|s| s.trim().to_string())
}

/// True while the process exists (and is not a zombie we are about to reap).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    if r != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope { pid: Some(4242), cpu: None, inherit: false, enable_on_exec: false, kernel: false }
    }

    #[test]
    fn kernel_errors_become_actionable_messages() {
        let e = |errno, ev| map_err(std::io::Error::from_raw_os_error(errno), ev, "sampling", &scope());
        let perm = e(libc::EACCES, EventId::Cycles).to_string();
        assert!(perm.contains("kernel.perf_event_paranoid") && perm.contains("CAP_PERFMON"), "{perm}");
        assert!(matches!(e(libc::EPERM, EventId::TaskClock), Error::Permission { .. }));
        assert_eq!(e(libc::ESRCH, EventId::TaskClock).to_string(), "process 4242 does not exist");
        assert!(matches!(e(libc::ENOENT, EventId::Cycles), Error::Unsupported { .. }));
        assert!(matches!(e(libc::EOPNOTSUPP, EventId::LlcLoadMisses), Error::Unsupported { .. }));
        // EINVAL on a software event is a real error, not "unsupported".
        assert!(matches!(e(libc::EINVAL, EventId::CpuClock), Error::Perf { .. }));
    }

    #[test]
    fn online_cpus_parses_ranges() {
        let cpus = online_cpus();
        assert!(!cpus.is_empty());
        assert!(cpus.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn another_users_process_is_named_as_such_not_as_paranoia() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIP: needs root to become another user in a child");
            return;
        }
        // As root nothing is foreign.
        assert_eq!(foreign_owner(1), None);
        // A child that becomes nobody sees init (root's) as foreign, and its own self not.
        // SAFETY: the child only makes system calls and exits; it touches no lock.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let code = unsafe {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    3
                } else {
                    match (foreign_owner(1), foreign_owner(libc::getpid())) {
                        (Some((0, 65534)), None) => 0,
                        (None, _) => 1,
                        _ => 2,
                    }
                }
            };
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "child did not exit");
        assert_eq!(libc::WEXITSTATUS(status), 0, "1: init not foreign to nobody; 2: self foreign; 3: setuid failed");
        let e = crate::Error::ForeignProcess { pid: 1, owner: 0, me: 65534 }.to_string();
        assert!(e.contains("belongs to uid 0") && e.contains("does not help") && !e.contains("sysctl"), "{e}");
    }

    /// perf's spellings of --call-graph, and what is refused with the rule said.
    #[test]
    fn call_graph_modes_parse_as_perf_spells_them() {
        assert_eq!(CallGraph::parse("fp"), Ok(CallGraph::FramePointer));
        assert_eq!(CallGraph::parse("none"), Ok(CallGraph::None));
        assert_eq!(CallGraph::parse("dwarf"), Ok(CallGraph::Dwarf { stack_bytes: 8192 }));
        assert_eq!(CallGraph::parse("dwarf,4096"), Ok(CallGraph::Dwarf { stack_bytes: 4096 }));
        assert_eq!(CallGraph::parse("dwarf,65528").map(CallGraph::name), Ok("dwarf,65528".to_string()));
        for bad in ["dwarf,65536", "dwarf,12", "dwarf,0", "dwarf,x"] {
            let e = CallGraph::parse(bad).unwrap_err();
            assert!(e.contains("a multiple of 8 from 8 to 65528"), "{bad}: {e}");
        }
        assert!(CallGraph::parse("fp,64").unwrap_err().contains("only dwarf takes a size"));
        assert!(CallGraph::parse("lbr").unwrap_err().contains("expected fp, dwarf"));
    }

    /// A sample opened for DWARF unwinding comes out of the ring with its registers and
    /// stack copy owned; one without stays a plain sample.
    #[test]
    fn stack_samples_keep_their_registers_and_stack() {
        use crate::sample_decode::sample_bits::*;
        let words = |w: &[u64]| -> Vec<u8> { w.iter().flat_map(|x| x.to_le_bytes()).collect() };
        let layout = SampleLayout {
            sample_type: IP | TID | TIME | CPU | PERIOD | CALLCHAIN | REGS_USER | STACK_USER,
            read_format: 0,
            default_period: 1,
            big_endian: false,
        };
        // ip, pid/tid, time, cpu, period, an empty callchain, regs (abi 2, BP SP IP), a
        // 16-byte stack copy of which 8 were filled, then dyn_size.
        let body = words(&[0x4000, 7 | (7 << 32), 5, 0, 1, 0, 2, 0xb, 0x5, 0x4000, 16, 0xaa, 0xbb, 8]);
        match decode_sample(&layout, &body, 2) {
            Some(Record::StackSample(s)) => {
                assert_eq!((s.sample.ip, s.regs.clone()), (0x4000, vec![0xb, 0x5, 0x4000]));
                assert_eq!(s.stack, 0xaau64.to_le_bytes().to_vec(), "only dyn_size bytes kept");
            }
            other => panic!("{other:?}"),
        }
        let plain = SampleLayout { sample_type: IP | TID | TIME | CPU | PERIOD, ..layout };
        assert!(matches!(decode_sample(&plain, &body[..40], 2), Some(Record::Sample(_))));
    }
}
