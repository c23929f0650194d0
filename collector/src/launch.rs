//! Waiting until a started forwarder runs: the one wait every starter uses (`sweep
//! --live`, the lab, `stat`), after [`crate::child::GatedChild`] started it. A forwarder
//! runs once its stats segment says [`State::Running`] (every worker started); a peer that
//! publishes no segment (DPDK's l3fwd in the lab) once its log says so
//! ([`running_when_log_says`]). One that exits first is an error at once, with its exit
//! status and its log's last lines, and so is one that does not run within the starter's
//! timeout.

use crate::child::GatedChild;
use crate::{Error, Result};
use fwd_abi::{Segment, State};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Lines of the forwarder's log quoted when it did not start.
const TAIL_LINES: usize = 10;

/// Where a started forwarder's stats segment is found.
#[derive(Debug, Clone)]
pub enum SegmentAt {
    /// Among the files its process maps ([`Segment::find_for`]): a segment at a
    /// predictable name someone else left is never taken for it.
    Pid,
    /// At a path the starter gave it (`--stats PATH`).
    Path(PathBuf),
}

/// How long to wait, where the segment is, and the log to quote.
#[derive(Debug, Clone)]
pub struct Wait<'a> {
    /// Where its segment is (default [`SegmentAt::Pid`]).
    pub at: SegmentAt,
    /// Its stdout and stderr, quoted when it fails (default none).
    pub log: Option<&'a Path>,
    /// The longest wait (default 60 s: a large table takes seconds to load and build).
    pub timeout: Duration,
}

impl Default for Wait<'_> {
    fn default() -> Self {
        Wait { at: SegmentAt::Pid, log: None, timeout: Duration::from_secs(60) }
    }
}

/// What the child's log ends with, for an error.
fn tail(log: Option<&Path>) -> String {
    match log {
        None => String::new(),
        Some(p) => match crate::files::log_tail(p, TAIL_LINES) {
            t if t.is_empty() => format!("; nothing in {}", p.display()),
            t => format!("; {} ends: {t}", p.display()),
        },
    }
}

/// Why `child` is no longer running, if it is not: its exit status and log.
pub fn ended(child: &mut GatedChild, log: Option<&Path>) -> Option<String> {
    child.try_wait().map(|code| format!("the forwarder exited with status {code} (pid {}){}", child.pid, tail(log)))
}

/// Wait until `child` runs; its segment. `None` when it still had not started after the
/// timeout (a target that is no forwarder never publishes one); an error when it exited.
pub fn wait_running(child: &mut GatedChild, how: &Wait) -> Result<Option<Segment>> {
    let t0 = Instant::now();
    loop {
        let seg = match &how.at {
            SegmentAt::Pid => Segment::find_for(child.pid as u32),
            SegmentAt::Path(p) => Segment::open(p).ok(),
        };
        if let Some(s) = seg.filter(|s| s.state() == State::Running) {
            return Ok(Some(s));
        }
        if let Some(code) = child.try_wait() {
            return Err(Error::Config(format!(
                "the forwarder exited with status {code} (pid {}) before it started forwarding{}",
                child.pid,
                tail(how.log)
            )));
        }
        if t0.elapsed() >= how.timeout {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// [`wait_running`], a timeout being an error too.
pub fn running(child: &mut GatedChild, how: &Wait) -> Result<Segment> {
    wait_running(child, how)?.ok_or_else(|| {
        Error::Config(format!(
            "the forwarder (pid {}) did not start running within {:.0} s{}",
            child.pid,
            how.timeout.as_secs_f64(),
            tail(how.log)
        ))
    })
}

/// Wait until `child`, a peer that publishes no stats segment, runs: until its log
/// (`how.log`; `how.at` is not used) contains `ready` (l3fwd's `L3FWD: entering main loop`).
/// An exit first is an error at once, and so is the timeout, each with the log's last
/// lines; a child that timed out is left to its handle (dropped, an attached one stops).
pub fn running_when_log_says(child: &mut GatedChild, ready: &str, how: &Wait) -> Result<()> {
    let Some(log) = how.log else {
        return Err(Error::Config("waiting for a log line needs the child's log".into()));
    };
    let t0 = Instant::now();
    loop {
        if std::fs::read_to_string(log).is_ok_and(|text| text.contains(ready)) {
            return Ok(());
        }
        if let Some(code) = child.try_wait() {
            return Err(Error::Config(format!(
                "it exited with status {code} (pid {}) before its log said `{ready}`{}",
                child.pid,
                tail(how.log)
            )));
        }
        if t0.elapsed() >= how.timeout {
            return Err(Error::Config(format!(
                "it (pid {}) did not say `{ready}` within {:.0} s{}",
                child.pid,
                how.timeout.as_secs_f64(),
                tail(how.log)
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("fake-forwarder");
        std::fs::write(&p, text).expect("script");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    /// A forwarder that fails at start is reported at once, with its status and the end
    /// of its log; one that never publishes a segment times out, saying how long it waited.
    #[test]
    fn a_start_that_fails_or_hangs_is_said_with_its_log() {
        let dir = std::env::temp_dir().join(format!("fwdscope-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log_path = dir.join("forwarder.log");
        let log = std::fs::File::create(&log_path).expect("log");
        let prog = script(&dir, "#!/bin/sh\necho 'fwdscope forward: --table x: no such file' >&2\nexit 2\n");
        let opts = crate::child::SpawnOptions { output: Some(&log), ..Default::default() };
        let mut child = GatedChild::spawn_with(&prog, &[], &opts).expect("spawn");
        child.release().expect("release");
        let how = Wait { log: Some(&log_path), ..Default::default() };
        let t0 = Instant::now();
        let e = running(&mut child, &how).err().expect("refused").to_string();
        assert!(t0.elapsed() < Duration::from_secs(30), "waited out the timeout");
        assert!(
            e.starts_with("the forwarder exited with status 2 (pid ") && e.contains("before it started forwarding;"),
            "{e}"
        );
        assert!(e.contains("ends: fwdscope forward: --table x: no such file"), "{e}");

        let prog = script(&dir, "#!/bin/sh\nexec sleep 30\n");
        let mut child = GatedChild::spawn_with(&prog, &[], &opts).expect("spawn");
        child.release().expect("release");
        let how = Wait { timeout: Duration::from_millis(200), log: Some(&log_path), ..Default::default() };
        assert!(wait_running(&mut child, &how).expect("no error").is_none());
        let e = running(&mut child, &how).err().expect("timed out").to_string();
        assert!(e.contains("did not start running within 0 s"), "{e}");
        drop(child);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A peer without a segment runs once its log says so; one that exits first, or stays
    /// silent past the timeout, is an error with its log's end.
    #[test]
    fn a_peer_runs_when_its_log_says_so() {
        let dir = std::env::temp_dir().join(format!("fwdscope-launch-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log_path = dir.join("peer.log");
        let start = |text: &str| {
            let log = std::fs::File::create(&log_path).expect("log");
            let prog = script(&dir, text);
            let opts = crate::child::SpawnOptions { output: Some(&log), ..Default::default() };
            let mut child = GatedChild::spawn_with(&prog, &[], &opts).expect("spawn");
            child.release().expect("release");
            child
        };
        let how = Wait { log: Some(&log_path), timeout: Duration::from_secs(20), ..Default::default() };
        let mut up =
            start("#!/bin/sh\necho 'EAL: probing'\nsleep 0.2\necho 'L3FWD: entering main loop'\nexec sleep 30\n");
        running_when_log_says(&mut up, "L3FWD: entering main loop", &how).expect("ran");
        assert!(up.try_wait().is_none(), "the peer stopped");
        drop(up);
        let mut failed = start("#!/bin/sh\necho 'af_packet: could not open iface'\nexit 1\n");
        let e = running_when_log_says(&mut failed, "L3FWD: entering main loop", &how).expect_err("refused");
        let e = e.to_string();
        assert!(
            e.starts_with("it exited with status 1 (pid ") && e.contains("ends: af_packet: could not open iface"),
            "{e}"
        );
        let mut silent = start("#!/bin/sh\nexec sleep 30\n");
        let quick = Wait { timeout: Duration::from_millis(200), ..how };
        let e = running_when_log_says(&mut silent, "L3FWD: entering main loop", &quick).expect_err("timed out");
        assert!(e.to_string().contains("did not say `L3FWD: entering main loop` within 0 s"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A detached child outlives its handle (the lab's forwarder outlives `lab up`); an
    /// attached one is stopped when dropped. Pinned, it runs on the CPU asked for.
    #[test]
    fn a_detached_child_outlives_its_handle_and_a_pinned_one_runs_where_asked() {
        let alive = |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        let sleep = Path::new("/bin/sleep");
        let args = ["30".to_string()];
        let opts = crate::child::SpawnOptions { die_with_parent: false, cpu: Some(0), ..Default::default() };
        let mut c = GatedChild::spawn_with(sleep, &args, &opts).expect("spawn");
        c.release().expect("release");
        let status = std::fs::read_to_string(format!("/proc/{}/status", c.pid)).expect("status");
        assert!(status.lines().any(|l| l.starts_with("Cpus_allowed_list:") && l.ends_with("\t0")), "{status}");
        let pid = c.detach();
        assert!(alive(pid), "a detached child was stopped");
        // SAFETY: our own child; reaped below.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let mut st = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
        let mut c = GatedChild::spawn_with(sleep, &args, &Default::default()).expect("spawn");
        c.release().expect("release");
        let pid = c.pid;
        drop(c);
        assert!(!alive(pid), "an attached child outlived its handle");
    }
}
