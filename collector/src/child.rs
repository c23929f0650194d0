//! Starting a target program held at a gate: the child is forked and waits on a pipe before
//! exec, so perf events can be attached to its pid (with enable_on_exec and inherit) before
//! it runs a single instruction of the program, and every thread it later starts is
//! followed. This is what `perf record -- COMMAND` does. The child is bound to its parent
//! (PR_SET_PDEATHSIG): if the collector dies, even by SIGKILL, the target gets SIGTERM.
//! The signal comes when the thread that forked exits, so a GatedChild is kept by the
//! thread that waits for it. A child meant to outlive its starter (the lab's forwarder) is
//! spawned unbound ([`SpawnOptions::die_with_parent`]) and [`GatedChild::detach`]ed.
//! Every forwarder fwdscope starts is started here; [`crate::launch`] waits until it runs.

use crate::{Error, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A forked child waiting at its gate (or running, once released).
pub struct GatedChild {
    pub pid: i32,
    gate: libc::c_int,
    /// Read end of the exec-error pipe: closed by a successful exec (close-on-exec), or
    /// given the errno of a failed one.
    exec_error: libc::c_int,
    program: std::path::PathBuf,
    reaped: Option<i32>,
    /// Left running when dropped ([`GatedChild::detach`]).
    detached: bool,
}

/// How a child is started.
#[derive(Debug, Clone, Copy)]
pub struct SpawnOptions<'a> {
    /// Where its stdout and stderr go (default none: this process's).
    pub output: Option<&'a std::fs::File>,
    /// SIGTERM to the child when the thread that started it exits, even by SIGKILL
    /// (default true). False for a child that outlives its starter (the lab's forwarder).
    pub die_with_parent: bool,
    /// The signal it gets then (default SIGTERM, which a forwarder handles as Ctrl-C: it
    /// stops and removes its stats segment). SIGKILL for a child that may be stopped
    /// (SIGSTOP) when its starter dies: a stopped process only holds a SIGTERM pending.
    pub death_signal: libc::c_int,
    /// Pinned to this CPU before it runs an instruction of its program, its threads
    /// inheriting the mask (default none: unpinned).
    pub cpu: Option<usize>,
}

impl Default for SpawnOptions<'_> {
    fn default() -> Self {
        SpawnOptions { output: None, die_with_parent: true, death_signal: libc::SIGTERM, cpu: None }
    }
}

/// The CPU mask that pins the child to `cpu` (none: unpinned). Made before the fork: the
/// child only makes system calls.
fn cpu_mask(cpu: Option<usize>) -> Result<Option<libc::cpu_set_t>> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write within it.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    match cpu {
        Some(c) if c < libc::CPU_SETSIZE as usize => {
            unsafe { libc::CPU_SET(c, &mut mask) };
            Ok(Some(mask))
        }
        Some(c) => Err(Error::Config(format!("CPU {c}: beyond the {} CPUs a mask holds", libc::CPU_SETSIZE))),
        None => Ok(None),
    }
}

/// `program`'s path for execv, once it is known to be a file this user may execute.
fn executable(program: &Path) -> Result<CString> {
    let meta = std::fs::metadata(program).map_err(|e| Error::io(program, e))?;
    if !meta.is_file() {
        return Err(Error::Config(format!("{}: not an executable file", program.display())));
    }
    let prog = CString::new(program.as_os_str().as_bytes())
        .map_err(|_| Error::Config(format!("{}: path contains a NUL byte", program.display())))?;
    // A file this user may not execute would fail only in the child, after the fork:
    // an exit status 127 and an empty recording. Said here instead.
    // SAFETY: access reads the NUL-terminated path it is given.
    if unsafe { libc::access(prog.as_ptr(), libc::X_OK) } != 0 {
        return Err(Error::Config(format!(
            "{}: not executable by this user ({}); give a program, or chmod +x it",
            program.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(prog)
}

/// The start gate's pipe and the exec-error pipe (both close-on-exec): (read, write) each.
fn gate_pipes() -> Result<([libc::c_int; 2], [libc::c_int; 2])> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::Perf { what: "creating the start gate".into(), source: std::io::Error::last_os_error() });
    }
    let mut errp = [0 as libc::c_int; 2];
    // SAFETY: errp is a valid array of two ints.
    if unsafe { libc::pipe2(errp.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let source = std::io::Error::last_os_error();
        // SAFETY: closing the gate pipe made above.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        return Err(Error::Perf { what: "creating the exec-error pipe".into(), source });
    }
    Ok((fds, errp))
}

/// Everything the forked child needs, prepared before the fork (the child allocates nothing).
struct ChildPlan<'a> {
    parent: libc::pid_t,
    die_with_parent: bool,
    death_signal: libc::c_int,
    mask: Option<libc::cpu_set_t>,
    gate: [libc::c_int; 2],
    exec_error: [libc::c_int; 2],
    out_fd: libc::c_int,
    prog: &'a CString,
    argv: &'a [*const libc::c_char],
}

impl ChildPlan<'_> {
    /// The child's side of the fork: bind to the parent, pin, redirect output, wait at the
    /// gate, then exec the program (its errno goes to the exec-error pipe if that fails).
    ///
    /// # Safety
    /// Only in a child just forked: it calls only async-signal-safe functions.
    unsafe fn run_child(&self) -> ! {
        let (fds, errp) = (self.gate, self.exec_error);
        // SAFETY: see above.
        unsafe {
            // The target dies with us, however we end (SIGKILL included): SIGTERM by
            // default, which a forwarder handles as Ctrl-C (it stops and removes its stats
            // segment). If we died before this line, exit now rather than run orphaned.
            if self.die_with_parent {
                libc::prctl(libc::PR_SET_PDEATHSIG, self.death_signal);
                if libc::getppid() != self.parent {
                    libc::_exit(127);
                }
            }
            if let Some(mask) = &self.mask {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), mask) != 0 {
                    let errno = *libc::__errno_location();
                    libc::write(errp[1], &errno as *const i32 as *const libc::c_void, 4);
                    libc::_exit(127);
                }
            }
            libc::close(fds[1]);
            libc::close(errp[0]);
            if self.out_fd >= 0 {
                libc::dup2(self.out_fd, 1);
                libc::dup2(self.out_fd, 2);
            }
            let mut b = 0u8;
            let r = libc::read(fds[0], &mut b as *mut u8 as *mut libc::c_void, 1);
            if r == 1 {
                libc::execv(self.prog.as_ptr(), self.argv.as_ptr());
                // Only reached when exec failed: tell the parent why.
                let errno = *libc::__errno_location();
                libc::write(errp[1], &errno as *const i32 as *const libc::c_void, 4);
            }
            libc::_exit(127);
        }
    }
}

impl GatedChild {
    /// Fork a child that will exec `program` with `args` once [`GatedChild::release`] is called.
    pub fn spawn(program: &Path, args: &[String]) -> Result<GatedChild> {
        Self::spawn_with_output(program, args, None)
    }

    /// As [`GatedChild::spawn`], with the child's stdout and stderr sent to `output`.
    pub fn spawn_with_output(program: &Path, args: &[String], output: Option<&std::fs::File>) -> Result<GatedChild> {
        Self::spawn_with(program, args, &SpawnOptions { output, ..Default::default() })
    }

    /// As [`GatedChild::spawn`], started as `opts` say.
    pub fn spawn_with(program: &Path, args: &[String], opts: &SpawnOptions) -> Result<GatedChild> {
        use std::os::fd::AsRawFd;
        let found = in_path(program)?;
        let program = found.as_path();
        let out_fd = opts.output.map_or(-1, |f| f.as_raw_fd());
        let mask = cpu_mask(opts.cpu)?;
        let prog = executable(program)?;
        let mut argv: Vec<CString> = vec![prog.clone()];
        for a in args {
            argv.push(
                CString::new(a.as_bytes()).map_err(|_| Error::Config(format!("argument `{a}` contains a NUL byte")))?,
            );
        }
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|c| c.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let (fds, errp) = gate_pipes()?;
        let plan = ChildPlan {
            // SAFETY: getpid cannot fail.
            parent: unsafe { libc::getpid() },
            die_with_parent: opts.die_with_parent,
            death_signal: opts.death_signal,
            mask,
            gate: fds,
            exec_error: errp,
            out_fd,
            prog: &prog,
            argv: &argv_ptrs,
        };
        // SAFETY: after fork the child only calls async-signal-safe functions (prctl,
        // getppid, read, write, close, dup2, execv, _exit, errno) on memory prepared before
        // the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            let source = std::io::Error::last_os_error();
            // SAFETY: closing both pipes made above.
            unsafe {
                for fd in fds.iter().chain(errp.iter()) {
                    libc::close(*fd);
                }
            }
            return Err(Error::Perf { what: "fork".into(), source });
        }
        if pid == 0 {
            // SAFETY: in the child just forked; see above.
            unsafe { plan.run_child() }
        }
        // SAFETY: closing our copies of the child's ends.
        unsafe {
            libc::close(fds[0]);
            libc::close(errp[1]);
        }
        Ok(GatedChild {
            pid,
            gate: fds[1],
            exec_error: errp[0],
            program: program.to_path_buf(),
            reaped: None,
            detached: false,
        })
    }

    /// Let the child exec its program, and wait until it has: an exec that fails (a
    /// script whose interpreter is missing passes every check made before the fork) is
    /// [`Error::Exec`] here, not a run that exits 127 having done nothing.
    pub fn release(&mut self) -> Result<()> {
        if self.gate < 0 {
            return Ok(());
        }
        let b = 1u8;
        // SAFETY: writing one byte to our pipe end, then closing it.
        let r = unsafe { libc::write(self.gate, &b as *const u8 as *const libc::c_void, 1) };
        unsafe { libc::close(self.gate) };
        self.gate = -1;
        if r != 1 {
            return Err(Error::Perf {
                what: "releasing the start gate".into(),
                source: std::io::Error::last_os_error(),
            });
        }
        self.exec_outcome()
    }

    /// Read the exec-error pipe: end of file once the program runs (or the child ended
    /// without trying), an errno when exec failed.
    fn exec_outcome(&mut self) -> Result<()> {
        if self.exec_error < 0 {
            return Ok(());
        }
        let mut errno = 0i32;
        let mut got = 0usize;
        while got < 4 {
            // SAFETY: reading into the remaining bytes of a local i32.
            let r = unsafe {
                libc::read(self.exec_error, (&mut errno as *mut i32 as *mut u8).add(got) as *mut libc::c_void, 4 - got)
            };
            if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if r <= 0 {
                break;
            }
            got += r as usize;
        }
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(self.exec_error) };
        self.exec_error = -1;
        if got == 4 {
            self.wait();
            return Err(Error::Exec {
                program: self.program.clone(),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        Ok(())
    }

    /// The exit status if the child has exited (reaps it), without blocking.
    pub fn try_wait(&mut self) -> Option<i32> {
        if self.reaped.is_some() {
            return self.reaped;
        }
        let mut status = 0;
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
        if r == self.pid {
            self.reaped = Some(decode(status));
        }
        self.reaped
    }

    /// Wait for the child to exit; returns its exit code (128 + signal if killed).
    pub fn wait(&mut self) -> i32 {
        if let Some(s) = self.reaped {
            return s;
        }
        let mut status = 0;
        // SAFETY: waiting on our own child.
        let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
        let s = if r == self.pid { decode(status) } else { -1 };
        self.reaped = Some(s);
        s
    }

    /// Stop a child the collector started: ask a forwarder through its stats segment
    /// (`segment`), otherwise send SIGINT; SIGKILL after `grace`. Returns its exit code.
    pub fn stop(&mut self, segment: Option<&fwd_abi::Segment>, grace: std::time::Duration) -> i32 {
        if let Some(code) = self.try_wait() {
            return code;
        }
        match segment {
            Some(seg) => seg.request_stop(),
            None => self.signal(libc::SIGINT),
        }
        let t0 = std::time::Instant::now();
        while self.try_wait().is_none() && t0.elapsed() < grace {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if self.try_wait().is_none() {
            self.signal(libc::SIGKILL);
        }
        self.wait()
    }

    /// Leave the (released) child running when this is dropped: it outlives its starter,
    /// and whoever stops it finds it by PID. Returns the PID.
    pub fn detach(mut self) -> i32 {
        self.detached = true;
        self.pid
    }

    /// Send a signal to the child.
    pub fn signal(&self, sig: libc::c_int) {
        if self.reaped.is_none() {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(self.pid, sig) };
        }
    }
}

/// `program` as given when it names a path; a bare name (`ip`) is looked up in PATH, as a
/// shell would.
fn in_path(program: &Path) -> Result<std::path::PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
        .ok_or_else(|| Error::Config(format!("{}: no such program in PATH", program.display())))
}

fn decode(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        -1
    }
}

impl Drop for GatedChild {
    fn drop(&mut self) {
        if self.gate >= 0 {
            // SAFETY: closing our pipe end makes a still-gated child exit (read returns 0).
            unsafe { libc::close(self.gate) };
        }
        if self.exec_error >= 0 {
            // SAFETY: our descriptor, closed once.
            unsafe { libc::close(self.exec_error) };
        }
        if self.reaped.is_none() && !self.detached {
            self.signal(libc::SIGTERM);
            self.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An executable script, written by a `sh` child: were this process to open it for
    /// writing, another test's fork taken meanwhile would hold a copy of that descriptor
    /// until its exec, and exec of a file someone holds open for writing fails with ETXTBSY.
    fn script(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        use std::io::Write;
        let p = dir.join(name);
        let mut sh = std::process::Command::new("sh")
            .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
            .arg(&p)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        sh.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        assert!(sh.wait().unwrap().success());
        p
    }

    #[test]
    fn a_script_whose_interpreter_is_missing_fails_at_release_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(dir.path(), "noint.sh", "#!/nonexistent/interpreter\nexit 0\n");
        let mut c = GatedChild::spawn(&p, &[]).unwrap();
        let e = c.release().unwrap_err();
        let text = e.to_string();
        assert!(matches!(&e, Error::Exec { source, .. } if source.raw_os_error() == Some(libc::ENOENT)), "{text}");
        assert!(text.contains("noint.sh: could not be started") && text.contains("interpreter"), "{text}");
        assert_eq!(c.wait(), 127);
    }

    #[test]
    fn a_program_that_runs_is_released_and_keeps_its_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(dir.path(), "ok.sh", "#!/bin/sh\nexit 3\n");
        let mut c = GatedChild::spawn(&p, &[]).unwrap();
        c.release().unwrap();
        assert_eq!(c.wait(), 3);
    }
}
