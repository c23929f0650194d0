//! The forwarder processes of a live comparison: one forwarder whose control block the
//! settings switch, or, when programs are compared ([`crate::live::LiveOptions::programs`]:
//! two builds of the forwarder, say), one process per program of which only one runs at a
//! time. The others are stopped (SIGSTOP), so the program measured in a block has the CPUs
//! to itself, and each is continued (SIGCONT) for its own blocks: one process's caches and
//! TLB are cold after the other's block, alike for every program, and the block's warm-up
//! discard takes that out.
//!
//! Each process is started and waited for by the collector's one launcher, bound to this
//! thread (it gets SIGTERM if this process dies; SIGKILL when several programs are compared,
//! since a stopped process acts on no SIGTERM), and stopped when dropped, continued first so
//! that it can handle the stop.

use crate::{Error, Result};
use collector::contention::{self, WorkerThread};
use fwd_abi::Segment;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A program compared in a live comparison: what to start, with the shared flags after
/// `args`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Program {
    pub path: PathBuf,
    /// Arguments before the forwarder flags (`forward` for a `fwdscope` binary).
    pub args: Vec<String>,
}

impl Program {
    /// `path` as a forwarder: a `fwdscope` binary runs as `fwdscope forward`; any other
    /// program (`fwdscope-forwarder`, a wrapper script) takes the forwarder flags alone.
    /// Refused, naming it, when it is not an executable file.
    pub fn from_path(path: PathBuf) -> Result<Program> {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(&path).map_err(|e| Error::Config(format!("--program {}: {e}", path.display())))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(Error::Config(format!("--program {}: expected an executable file", path.display())));
        }
        let args = if path.file_name().is_some_and(|n| n == "fwdscope") { vec!["forward".to_string()] } else { vec![] };
        // The file checked is the file run: a bare name would otherwise be looked up in PATH.
        let path =
            std::path::absolute(&path).map_err(|e| Error::Config(format!("--program {}: {e}", path.display())))?;
        Ok(Program { path, args })
    }
}

/// What to start: the programs (one, or one per program compared), with which flags, and
/// where their logs go.
pub struct Launch<'a> {
    /// The comparison's output directory (`forwarder.log`, or `forwarder-N.log` per program).
    pub output: &'a Path,
    pub programs: &'a [Program],
    /// Flags every program takes (after its own arguments).
    pub shared_flags: &'a [String],
    /// The baseline setting's start flags (one forwarder whose settings switch).
    pub first: &'a [String],
}

/// One forwarder child and its log.
struct Forwarder {
    child: collector::child::GatedChild,
    log: PathBuf,
}

impl Forwarder {
    /// Start `program args` with the launch's shared flags, running until stopped, its
    /// output to `log`.
    fn start(l: &Launch<'_>, program: &Program, log: PathBuf) -> Result<Forwarder> {
        let out = collector::outdir::create_new(&log, 0o644)?;
        let mut args: Vec<String> = program.args.iter().chain(l.shared_flags).cloned().collect();
        args.extend(["--duration".to_string(), "0".to_string()]);
        if !device_given(l.shared_flags) {
            args.extend(["--device".to_string(), "inline".to_string()]);
        }
        args.extend(l.first.iter().cloned());
        // With several programs all but one are stopped at any time, and a stopped process
        // acts on no SIGTERM: if this process dies without stopping them, SIGKILL does.
        let death_signal = if l.programs.len() > 1 { libc::SIGKILL } else { libc::SIGTERM };
        let opts = collector::child::SpawnOptions { output: Some(&out), death_signal, ..Default::default() };
        let mut child = collector::child::GatedChild::spawn_with(&program.path, &args, &opts)?;
        child.release()?;
        Ok(Forwarder { child, log })
    }

    /// Its stats segment once every worker runs (a large table takes a while to build).
    fn segment(&mut self) -> Result<Segment> {
        let how =
            collector::launch::Wait { log: Some(&self.log), timeout: Duration::from_secs(180), ..Default::default() };
        Ok(collector::launch::running(&mut self.child, &how)?)
    }

    fn stop(&mut self, seg: Option<&Segment>) {
        // A stopped process handles no stop request until it is continued.
        self.child.signal(libc::SIGCONT);
        self.child.stop(seg, Duration::from_secs(5));
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        let pid = self.child.pid as u32;
        self.child.signal(libc::SIGCONT);
        self.child.stop(None, Duration::from_secs(5));
        // A forwarder that was killed leaves its segment behind: it is gone now, and the
        // segment names it as its owner.
        for path in fwd_abi::segment::named_for(pid) {
            if Segment::open(&path).is_ok_and(|s| s.pid() == pid) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

/// The running forwarder processes: their segments and worker threads, and which one runs.
pub(crate) struct Procs {
    fwds: Vec<Forwarder>,
    pub segs: Vec<Segment>,
    pub threads: Vec<Vec<WorkerThread>>,
    running: usize,
}

impl Procs {
    /// Start the launch's programs one after the other (each stopped once it runs, when
    /// there are several, so the next builds its table alone); the first is left running.
    pub fn start(l: &Launch<'_>) -> Result<Procs> {
        let several = l.programs.len() > 1;
        let mut p = Procs { fwds: Vec::new(), segs: Vec::new(), threads: Vec::new(), running: 0 };
        for (i, prog) in l.programs.iter().enumerate() {
            let log = if several {
                l.output.join(format!("forwarder-{}.log", i + 1))
            } else {
                l.output.join("forwarder.log")
            };
            let mut fwd = Forwarder::start(l, prog, log)?;
            let seg = match fwd.segment() {
                Ok(s) => s,
                Err(e) => {
                    fwd.stop(None);
                    return Err(e);
                }
            };
            let threads = wait_threads(fwd.child.pid as u32, seg.n_workers())?;
            if several && threads.len() < seg.n_workers() {
                // Stopping it is checked on its worker threads: all of them must be known.
                let n = seg.n_workers();
                fwd.stop(Some(&seg));
                return Err(Error::Config(format!(
                    "forwarder {} ({}): {} of its {n} worker threads (fwd-worker-N) found after 5 s",
                    i + 1,
                    prog.path.display(),
                    threads.len()
                )));
            }
            p.fwds.push(fwd);
            p.segs.push(seg);
            p.threads.push(threads);
            if several {
                p.pause(i)?;
            }
        }
        if several {
            p.resume(0);
        }
        Ok(p)
    }

    pub fn pids(&self) -> Vec<u32> {
        self.fwds.iter().map(|f| f.child.pid as u32).collect()
    }

    /// Let process `i` run alone: the one running is stopped, and only once every one of
    /// its worker threads is seen stopped is `i` continued.
    pub fn run_only(&mut self, i: usize) -> Result<()> {
        if i == self.running || self.fwds.len() < 2 {
            return Ok(());
        }
        self.pause(self.running)?;
        self.resume(i);
        Ok(())
    }

    fn resume(&mut self, i: usize) {
        self.fwds[i].child.signal(libc::SIGCONT);
        self.running = i;
    }

    /// SIGSTOP process `i` and wait (up to a second) until its workers are stopped.
    fn pause(&mut self, i: usize) -> Result<()> {
        self.fwds[i].child.signal(libc::SIGSTOP);
        let t0 = Instant::now();
        while !self.threads[i].iter().all(stopped) {
            if t0.elapsed() > Duration::from_secs(1) {
                return Err(Error::Config(format!(
                    "forwarder {} (pid {}) did not stop within a second of SIGSTOP",
                    i + 1,
                    self.fwds[i].child.pid
                )));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    /// Why a process is no longer running, if one is not: which, its exit status and last
    /// log lines.
    pub fn ended(&mut self) -> Option<String> {
        let n = self.fwds.len();
        self.fwds.iter_mut().enumerate().find_map(|(i, f)| {
            let why = collector::launch::ended(&mut f.child, Some(&f.log))?;
            Some(if n > 1 { format!("forwarder {}: {why}", i + 1) } else { why })
        })
    }

    /// Stop them all (through their segments).
    pub fn stop(&mut self) {
        for (f, s) in self.fwds.iter_mut().zip(&self.segs) {
            f.stop(Some(s));
        }
    }
}

/// Whether the forwarder flags choose where the synthetic device runs; if not, live mode
/// runs it inline in each worker (no pacing feedback between two threads to settle after
/// every switch; the other cores stay free for the controller).
pub(crate) fn device_given(flags: &[String]) -> bool {
    let named = |f: &str, flag: &str| f == flag || f.strip_prefix(flag).is_some_and(|r| r.starts_with('='));
    flags.iter().any(|f| named(f, "--device") || named(f, "--driver") || named(f, "--in"))
}

/// The worker threads, once all `n` have their names.
pub fn wait_threads(pid: u32, n: usize) -> Result<Vec<WorkerThread>> {
    let t0 = Instant::now();
    loop {
        let t = contention::worker_threads(pid)?;
        if t.len() >= n || t0.elapsed() > Duration::from_secs(5) {
            return Ok(t);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a thread is stopped (state `T`, or `t` under a tracer; gone counts as stopped).
fn stopped(t: &WorkerThread) -> bool {
    t.state().is_none_or(|s| s == 'T' || s == 't')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_an_executable_file_and_fwdscope_runs_as_forward() {
        let dir = std::env::temp_dir().join(format!("fwdscope-procs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("fwdscope")).unwrap();
        let plain = dir.join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        let e = Program::from_path(plain.clone()).unwrap_err().to_string();
        assert!(e.contains("plain") && e.contains("executable"), "{e}");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(Program::from_path(plain.clone()).unwrap().args, Vec::<String>::new());
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::copy(&plain, bin.join("fwdscope")).unwrap();
        assert_eq!(Program::from_path(bin.join("fwdscope")).unwrap().args, vec!["forward".to_string()]);
        // A directory named fwdscope is not a program; nor is a missing path.
        assert!(Program::from_path(dir.join("fwdscope")).is_err());
        assert!(Program::from_path(dir.join("missing")).unwrap_err().to_string().contains("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
