//! One process, known by its PID and start time (a PID is reused, the pair is not), and
//! whether it is this user's: how the lab recognises the forwarder or l3fwd it started.

/// A process's start time: clock ticks after boot (/proc/PID/stat, field 22). With the PID
/// it names one process while the machine runs: a PID is reused (pid_max is 32768 on many
/// machines), the pair is not.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: field 3 (state) onwards.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is the process the lab recorded: the same start time when one was
/// recorded, and owned by this user (a state file from before start times were recorded
/// is trusted only for this user's own processes, so `lab down` never signals another
/// user's process that reused the PID).
pub fn same_process(pid: i32, started: Option<u64>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(format!("/proc/{pid}")) else { return false };
    // SAFETY: geteuid has no preconditions.
    if meta.uid() != unsafe { libc::geteuid() } {
        return false;
    }
    match started {
        Some(t) => start_time(pid) == Some(t),
        None => true,
    }
}
