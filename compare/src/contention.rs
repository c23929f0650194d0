//! Was the machine busy? Per measured interval, for each worker thread of a forwarder:
//! the time it waited on a run queue while runnable (`/proc/PID/task/TID/schedstat`, in ns:
//! another process took its core), its involuntary context switches
//! (`/proc/PID/task/TID/status`), and the host's steal time (`/proc/stat`: the hypervisor
//! ran something else). An interval over a threshold is flagged and left out of the
//! comparison, with the reason.

use crate::{Error, Result};
use std::path::PathBuf;

/// Flag an interval when a worker waited to run longer than this share of it. Default
/// 5%: on an idle machine the workers wait 0-3% (the timer tick, kernel threads).
pub const MAX_RUNQ_SHARE: f64 = 0.05;
/// Flag an interval when the host stole more than this share of the CPU time.
pub const MAX_STEAL_SHARE: f64 = 0.05;

/// One worker thread to watch.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerThread {
    pub worker: usize,
    pub tid: u32,
    schedstat: PathBuf,
    status: PathBuf,
}

impl WorkerThread {
    /// Thread `tid` of process `pid`, watched as worker `worker` (a thread other than a
    /// forwarder's worker whose waiting matters: a load generator's sender).
    pub fn of(pid: u32, tid: u32, worker: usize) -> WorkerThread {
        let dir = PathBuf::from(format!("/proc/{pid}/task/{tid}"));
        WorkerThread { worker, tid, schedstat: dir.join("schedstat"), status: dir.join("status") }
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
}

impl WorkerThread {
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
        Some(ThreadReading { run_ns, wait_ns, nonvoluntary })
    }
}

/// The host's CPU time so far (all CPUs, USER_HZ ticks): total and stolen.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostReading {
    pub total: u64,
    pub steal: u64,
}

/// Parse the aggregate `cpu` line of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Option<HostReading> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice: inside user/nice].
    if v.len() < 8 {
        return None;
    }
    Some(HostReading { total: v[..8].iter().sum(), steal: v[7] })
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
    /// Share of the host's CPU time stolen by the hypervisor.
    pub steal_share: f64,
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
    if let (Some(x), Some(y)) = (a.host, b.host) {
        let total = y.total.saturating_sub(x.total);
        if total > 0 {
            c.steal_share = y.steal.saturating_sub(x.steal) as f64 / total as f64;
        }
    }
    c.flags.extend(flags(c.runq_share, c.steal_share));
    c
}

/// Why an interval with these shares of run-queue wait and steal is left out (empty: it
/// counts). The live comparison's blocks and the multi-process sweep's runs share it.
pub fn flags(runq_share: f64, steal_share: f64) -> Vec<String> {
    let mut out = Vec::new();
    if runq_share > MAX_RUNQ_SHARE {
        out.push(format!(
            "a worker waited to run {:.0}% of the time (over {:.0}%: another process had its core)",
            runq_share * 100.0,
            MAX_RUNQ_SHARE * 100.0
        ));
    }
    if steal_share > MAX_STEAL_SHARE {
        out.push(format!(
            "the hypervisor stole {:.0}% of the CPU time (over {:.0}%)",
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
        assert_eq!(h, HostReading { total: 1000, steal: 35 });
        assert_eq!(parse_proc_stat("cpu  1 2\n"), None);
        let t = |run, wait, nv| Some(ThreadReading { run_ns: run, wait_ns: wait, nonvoluntary: nv });
        let a = Reading {
            threads: vec![t(0, 1_000_000, 3), t(0, 0, 0)],
            host: Some(HostReading { total: 1000, steal: 0 }),
        };
        let b = Reading {
            threads: vec![t(0, 21_000_000, 10), t(0, 1_000_000, 1)],
            host: Some(HostReading { total: 1100, steal: 2 }),
        };
        // 200 ms: worker 0 waited 20 ms (10%), worker 1 1 ms; 2 of 100 ticks stolen.
        let c = between(&a, &b, 200_000_000);
        assert!((c.runq_share - 0.10).abs() < 1e-12);
        assert_eq!(c.nonvoluntary, 8);
        assert!((c.steal_share - 0.02).abs() < 1e-12);
        assert_eq!(c.flags.len(), 1, "{:?}", c.flags);
        assert!(c.flags[0].contains("waited to run 10%"));
        let gone = Reading { threads: vec![None, t(0, 0, 0)], host: None };
        assert!(between(&a, &gone, 1).flags.iter().any(|f| f.contains("could not be read")));
    }
}
