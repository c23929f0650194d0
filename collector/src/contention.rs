//! Was the machine busy? Per measured interval, for each worker thread of a forwarder:
//! the time it waited on a run queue while runnable (`/proc/PID/task/TID/schedstat`, in ns:
//! another process took its core), its involuntary context switches
//! (`/proc/PID/task/TID/status`), and the steal time of the CPUs they ran on (`/proc/stat`'s
//! `cpuN` lines: the hypervisor ran something else there). An interval over a threshold is
//! flagged and left out of the comparison, with the reason.
//!
//! Steal is taken per CPU, not from the aggregate `cpu` line: a burst on a worker's CPU is
//! diluted by every other CPU in the aggregate (1/64 of it on a 64-CPU host), and a burst on
//! a CPU no worker uses does not slow the workers. /proc/stat counts in USER_HZ ticks
//! (10 ms), and each counter is a nanosecond sum printed truncated to whole ticks: a
//! difference of d ticks between two readings means more than d-1 ticks were stolen, not d
//! (1 ns of steal that crosses a tick boundary shows as a whole tick). Over a 100 ms block
//! one tick is already 10% of a CPU's time, so an interval is flagged on the steal it
//! certainly had, (d-1) ticks: on a host that steals a few percent all the time, flagging on
//! d would flag a third of all 100 ms blocks for steal that may have been microseconds.

use crate::{Error, Result};
use std::path::PathBuf;

/// Flag an interval when a worker waited to run longer than this share of it. Default
/// 5%: on an idle machine the workers wait 0-3% (the timer tick, kernel threads).
pub const MAX_RUNQ_SHARE: f64 = 0.05;
/// Flag an interval when the hypervisor stole more than this share of a worker CPU's time.
pub const MAX_STEAL_SHARE: f64 = 0.05;

/// One worker thread to watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerThread {
    pub worker: usize,
    pub tid: u32,
    schedstat: PathBuf,
    status: PathBuf,
    stat: PathBuf,
}

impl WorkerThread {
    /// Thread `tid` of process `pid`, watched as worker `worker` (a thread other than a
    /// forwarder's worker whose waiting matters: a load generator's sender).
    pub fn of(pid: u32, tid: u32, worker: usize) -> WorkerThread {
        let dir = PathBuf::from(format!("/proc/{pid}/task/{tid}"));
        WorkerThread {
            worker,
            tid,
            schedstat: dir.join("schedstat"),
            status: dir.join("status"),
            stat: dir.join("stat"),
        }
    }
}

/// The worker threads (`fwd-worker-N`) of process `pid`, by worker index.
pub fn worker_threads(pid: u32) -> Result<Vec<WorkerThread>> {
    let dir = PathBuf::from(format!("/proc/{pid}/task"));
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
        let Ok(e) = e else { continue };
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if let Some(worker) = fwd_abi::threads::worker_index(comm.trim()) {
            out.push(WorkerThread {
                worker,
                tid,
                schedstat: e.path().join("schedstat"),
                status: e.path().join("status"),
                stat: e.path().join("stat"),
            });
        }
    }
    out.sort_by_key(|t| t.worker);
    Ok(out)
}

/// A worker thread's scheduler figures at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadReading {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub nonvoluntary: u64,
    /// The CPU it last ran on (`/proc/PID/task/TID/stat`, field 39), if readable.
    pub cpu: Option<usize>,
}

/// The CPU a thread last ran on, from its `stat` line (field 39, `processor`). The command
/// name (field 2, in parentheses) may hold spaces and parentheses: fields are counted from
/// the last `)`.
pub fn parse_task_cpu(stat: &str) -> Option<usize> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is the first; field 39 is the 37th.
    rest.split_whitespace().nth(36)?.parse().ok()
}

impl WorkerThread {
    /// Its scheduler state now (`/proc/PID/task/TID/stat`, field 3: `R`, `S`, `T` for
    /// stopped, ...); `None` when the thread is gone.
    pub fn state(&self) -> Option<char> {
        let stat = std::fs::read_to_string(&self.stat).ok()?;
        stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
    }

    /// Its figures now (`None` when the thread is gone).
    pub fn read(&self) -> Option<ThreadReading> {
        let s = std::fs::read_to_string(&self.schedstat).ok()?;
        let mut it = s.split_whitespace().map(|v| v.parse::<u64>().ok());
        let (run_ns, wait_ns) = (it.next()??, it.next()??);
        let st = std::fs::read_to_string(&self.status).ok()?;
        let nonvoluntary = st
            .lines()
            .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let cpu = std::fs::read_to_string(&self.stat).ok().as_deref().and_then(parse_task_cpu);
        Some(ThreadReading { run_ns, wait_ns, nonvoluntary, cpu })
    }
}

/// CPU time so far (USER_HZ ticks): total and stolen.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTicks {
    pub total: u64,
    pub steal: u64,
}

/// The host's CPU time so far: all CPUs together, and each CPU (index: CPU number; `None`
/// for a number /proc/stat does not list, an offline CPU).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostReading {
    pub all: CpuTicks,
    pub cpus: Vec<Option<CpuTicks>>,
}

/// The ticks of one `cpu`/`cpuN` line's values.
fn ticks(values: &str) -> Option<CpuTicks> {
    let v: Vec<u64> = values.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice: inside user/nice].
    if v.len() < 8 {
        return None;
    }
    Some(CpuTicks { total: v[..8].iter().sum(), steal: v[7] })
}

/// Parse /proc/stat's aggregate `cpu` line and its `cpuN` lines.
pub fn parse_proc_stat(text: &str) -> Option<HostReading> {
    let all = ticks(text.lines().find_map(|l| l.strip_prefix("cpu "))?)?;
    let mut cpus: Vec<Option<CpuTicks>> = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("cpu") else { continue };
        let Some((n, values)) = rest.split_once(' ') else { continue };
        let (Ok(n), Some(t)) = (n.parse::<usize>(), ticks(values)) else { continue };
        if n >= cpus.len() {
            cpus.resize(n + 1, None);
        }
        cpus[n] = Some(t);
    }
    Some(HostReading { all, cpus })
}

/// /proc/stat now (`None` without procfs).
pub fn read_host() -> Option<HostReading> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Everything read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Per worker, in the order of the threads given.
    pub threads: Vec<Option<ThreadReading>>,
    pub host: Option<HostReading>,
}

/// Read every worker thread and the host.
pub fn read(threads: &[WorkerThread]) -> Reading {
    Reading { threads: threads.iter().map(WorkerThread::read).collect(), host: read_host() }
}

/// Contention over one interval.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Contention {
    /// The largest share of the interval any worker waited on a run queue.
    pub runq_share: f64,
    /// Involuntary context switches of all workers.
    pub nonvoluntary: u64,
    /// The largest share of a worker CPU's time the hypervisor stole (the CPUs the workers
    /// ran on at either reading; the whole host's share where no worker's CPU is known).
    pub steal_share: f64,
    /// The CPU that share was stolen from (`None`: the whole host's share).
    pub steal_cpu: Option<usize>,
    /// The largest share stolen for certain: (d-1) of the d ticks /proc/stat's truncated
    /// counters moved by (see the module docs). This one decides the flag.
    pub steal_sure_share: f64,
    /// Why the interval is flagged (empty: clean).
    pub flags: Vec<String>,
}

/// Contention between two readings `elapsed_ns` apart.
pub fn between(a: &Reading, b: &Reading, elapsed_ns: u64) -> Contention {
    let mut c = Contention::default();
    for (x, y) in a.threads.iter().zip(&b.threads) {
        match (x, y) {
            (Some(x), Some(y)) => {
                let wait = y.wait_ns.saturating_sub(x.wait_ns) as f64;
                c.runq_share = c.runq_share.max(wait / elapsed_ns.max(1) as f64);
                c.nonvoluntary += y.nonvoluntary.saturating_sub(x.nonvoluntary);
            }
            _ => c.flags.push("a worker's scheduler figures could not be read".into()),
        }
    }
    if let (Some(x), Some(y)) = (&a.host, &b.host) {
        // (share, share for certain) of one CPU's (or the host's) ticks.
        let share = |x: CpuTicks, y: CpuTicks| {
            let total = y.total.saturating_sub(x.total);
            let d = y.steal.saturating_sub(x.steal);
            (total > 0).then(|| (d as f64 / total as f64, d.saturating_sub(1) as f64 / total as f64))
        };
        let mut worker_cpus: Vec<usize> = a.threads.iter().chain(&b.threads).flatten().filter_map(|t| t.cpu).collect();
        worker_cpus.sort_unstable();
        worker_cpus.dedup();
        let per_cpu: Vec<(usize, (f64, f64))> =
            worker_cpus.iter().filter_map(|&n| Some((n, share((*x.cpus.get(n)?)?, (*y.cpus.get(n)?)?)?))).collect();
        if per_cpu.is_empty() {
            (c.steal_share, c.steal_sure_share) = share(x.all, y.all).unwrap_or((0.0, 0.0));
        } else if let Some(&(n, (v, _))) = per_cpu.iter().max_by(|p, q| p.1 .0.total_cmp(&q.1 .0)) {
            c.steal_share = v;
            c.steal_cpu = Some(n);
            c.steal_sure_share = per_cpu.iter().map(|p| p.1 .1).fold(0.0, f64::max);
        }
    }
    c.flags.extend(flags_on(c.runq_share, c.steal_sure_share, c.steal_cpu));
    c
}

/// Why an interval with these shares of run-queue wait and steal is left out (empty: it
/// counts). The live comparison's blocks and the multi-process sweep's runs share it.
pub fn flags(runq_share: f64, steal_share: f64) -> Vec<String> {
    flags_on(runq_share, steal_share, None)
}

/// [`flags`], with the steal share measured on one CPU (`Some(n)`) or the whole host. The
/// steal share given is the one that decides: for [`between`], the share stolen for certain.
fn flags_on(runq_share: f64, steal_share: f64, steal_cpu: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    if runq_share > MAX_RUNQ_SHARE {
        out.push(format!(
            "a worker waited to run {:.0}% of the time (over {:.0}%: another process had its core)",
            runq_share * 100.0,
            MAX_RUNQ_SHARE * 100.0
        ));
    }
    if steal_share > MAX_STEAL_SHARE {
        let of = steal_cpu.map_or("the CPU time".to_string(), |n| format!("worker CPU {n}'s time"));
        out.push(format!(
            "the hypervisor stole at least {:.0}% of {of} (over {:.0}%)",
            steal_share * 100.0,
            MAX_STEAL_SHARE * 100.0
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_and_intervals() {
        let h = parse_proc_stat("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n").unwrap();
        // cpu0's line is too short to read: left out, not guessed.
        assert_eq!(h, HostReading { all: CpuTicks { total: 1000, steal: 35 }, cpus: Vec::new() });
        assert_eq!(parse_proc_stat("cpu  1 2\n"), None);
        let t = |run, wait, nv| Some(ThreadReading { run_ns: run, wait_ns: wait, nonvoluntary: nv, cpu: None });
        let host = |total, steal| Some(HostReading { all: CpuTicks { total, steal }, cpus: Vec::new() });
        let a = Reading { threads: vec![t(0, 1_000_000, 3), t(0, 0, 0)], host: host(1000, 0) };
        let b = Reading { threads: vec![t(0, 21_000_000, 10), t(0, 1_000_000, 1)], host: host(1100, 2) };
        // 200 ms: worker 0 waited 20 ms (10%), worker 1 1 ms; 2 of 100 ticks stolen (no
        // worker's CPU known: the whole host's share).
        let c = between(&a, &b, 200_000_000);
        assert!((c.runq_share - 0.10).abs() < 1e-12);
        assert_eq!(c.nonvoluntary, 8);
        assert!((c.steal_share - 0.02).abs() < 1e-12);
        assert_eq!(c.steal_cpu, None);
        assert_eq!(c.flags.len(), 1, "{:?}", c.flags);
        assert!(c.flags[0].contains("waited to run 10%"));
        let gone = Reading { threads: vec![None, t(0, 0, 0)], host: None };
        assert!(between(&a, &gone, 1).flags.iter().any(|f| f.contains("could not be read")));
    }

    #[test]
    fn steal_is_taken_on_the_workers_cpus() {
        // Three CPUs; over the interval CPU 0 (no worker) lost 4 of 20 ticks, CPU 2 (the
        // worker, at both readings) 1 of 10; the aggregate 5 of 40 = 12.5%.
        let before = "cpu  300 0 0 3000 0 0 0 10 0 0\n\
                      cpu0 100 0 0 1000 0 0 0 5 0 0\n\
                      cpu1 100 0 0 1000 0 0 0 3 0 0\n\
                      cpu2 100 0 0 1000 0 0 0 2 0 0\n";
        let after = "cpu  310 0 0 3025 0 0 0 15 0 0\n\
                     cpu0 100 0 0 1016 0 0 0 9 0 0\n\
                     cpu1 101 0 0 1009 0 0 0 3 0 0\n\
                     cpu2 109 0 0 1000 0 0 0 3 0 0\n";
        let (x, y) = (parse_proc_stat(before).expect("before"), parse_proc_stat(after).expect("after"));
        assert_eq!(y.cpus[2], Some(CpuTicks { total: 1112, steal: 3 }));
        let on = |cpu| vec![Some(ThreadReading { cpu, ..Default::default() })];
        let c = between(
            &Reading { threads: on(Some(2)), host: Some(x.clone()) },
            &Reading { threads: on(Some(2)), host: Some(y.clone()) },
            100_000_000,
        );
        assert_eq!(c.steal_cpu, Some(2));
        assert!((c.steal_share - 0.1).abs() < 1e-12, "{}", c.steal_share);
        // One tick of a truncated counter: maybe 1 ns of steal. Nothing certain, no flag.
        assert_eq!(c.steal_sure_share, 0.0);
        assert!(c.flags.is_empty(), "{:?}", c.flags);
        // A worker that moved from CPU 1 to CPU 0: both count, the worse one decides.
        let c = between(
            &Reading { threads: on(Some(1)), host: Some(x.clone()) },
            &Reading { threads: on(Some(0)), host: Some(y.clone()) },
            100_000_000,
        );
        assert_eq!(c.steal_cpu, Some(0));
        assert!((c.steal_share - 0.2).abs() < 1e-12);
        // 4 ticks moved: more than 3 of 20 (15%) stolen for certain.
        assert!((c.steal_sure_share - 0.15).abs() < 1e-12, "{}", c.steal_sure_share);
        assert_eq!(c.flags, vec!["the hypervisor stole at least 15% of worker CPU 0's time (over 5%)".to_string()]);
        // CPU 1 alone lost nothing: the steal elsewhere is not the worker's.
        let c = between(
            &Reading { threads: on(Some(1)), host: Some(x.clone()) },
            &Reading { threads: on(Some(1)), host: Some(y) },
            100_000_000,
        );
        assert_eq!((c.steal_cpu, c.steal_share), (Some(1), 0.0));
        assert!(c.flags.is_empty());
    }

    #[test]
    fn a_tasks_cpu_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (fwd (worker) 0) R 1 4242 4242 0 -1 4194560 100 0 0 0 500 20 0 0 20 0 3 0 \
                    1000 100000 50 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";
        assert_eq!(parse_task_cpu(line), Some(3));
        assert_eq!(parse_task_cpu("4242 (x) R 1 2"), None);
        assert_eq!(parse_task_cpu("no name here"), None);
    }
}
