//! What the end-to-end tests share: one way to run the `fwdscope` binary, one perf probe
//! (the collector's own), and the checks for what a test needs (tools, namespaces), each
//! printing why it skips.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub use collector::perf_abi::Need;

/// The `fwdscope` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_fwdscope");

/// A command running `fwdscope`.
pub fn fwdscope() -> Command {
    Command::new(BIN)
}

/// Run `fwdscope ARGS` to the end; its output.
pub fn run(args: &[&str]) -> Output {
    fwdscope().args(args).output().expect("run fwdscope")
}

/// Whether perf allows `need` here; prints why not (the test then skips).
pub fn perf_allows(need: Need) -> bool {
    match collector::perf_abi::probe(need) {
        Ok(()) => true,
        Err(e) => {
            println!("SKIP: perf_event_open cannot {need:?} here: {e}");
            false
        }
    }
}

/// Whether `tool --version` (or `args`) runs; prints why not.
pub fn have(tool: &str, args: &[&str]) -> bool {
    let args = if args.is_empty() { &["--version"][..] } else { args };
    let ok = Command::new(tool).args(args).output().is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIP: {tool} is not installed");
    }
    ok
}

/// A fresh temporary directory path for this test process and `tag` (not created).
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fwdscope-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The PIDs whose parent is `pid` (from /proc/PID/stat).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...: the comm may hold spaces, so split after its ')'.
        let ppid = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Whether `pid` runs: it exists and is not a zombie (an orphan's zombie may wait long for
/// a reaper in a container whose init does not reap).
pub fn running(pid: u32) -> bool {
    fwd_abi::segment::process_runs(pid)
}

/// Poll `f` every 50 ms for up to `secs` seconds; whether it became true.
pub fn wait_until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(secs) {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// A child killed (and reaped) when dropped if it still runs: a test that fails never
/// leaves a `--duration 0` forwarder loading the machine (a leaked one flagged every block
/// of the next test run for contention).
pub struct KillOnDrop(pub std::process::Child);

impl KillOnDrop {
    pub fn id(&self) -> u32 {
        self.0.id()
    }
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
