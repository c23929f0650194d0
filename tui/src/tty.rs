//! The terminal's input side, watched before crossterm reads it. crossterm's event reader
//! (0.29) loops without end when its read of the terminal returns end-of-file or an error
//! (EIO), which is what a terminal that went away gives (`tmux kill-session`, an ssh drop,
//! a closed xterm): `top` then spun at full CPU inside the read and never looked at its
//! stop flag again. So `top` waits on the terminal itself with poll(2), and hands it to
//! crossterm only when there are bytes to read; a hang-up, an error, or "readable" with
//! nothing to read (end of file) means the terminal is gone.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// What waiting on the terminal found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Bytes are waiting: crossterm can read them without blocking or spinning.
    Ready,
    /// Nothing within the timeout.
    Timeout,
    /// The terminal went away (why, in words).
    Gone(String),
}

/// The file descriptor crossterm reads keys from: standard input when it is a terminal,
/// else `/dev/tty` (crossterm makes the same choice).
pub struct Tty {
    fd: RawFd,
    /// `/dev/tty` when opened here (closed on drop); none for standard input.
    _owned: Option<OwnedFd>,
}

impl Tty {
    /// The terminal `top` reads keys from.
    pub fn open() -> std::io::Result<Tty> {
        // SAFETY: isatty only inspects the descriptor.
        if unsafe { libc::isatty(libc::STDIN_FILENO) } == 1 {
            return Ok(Tty { fd: libc::STDIN_FILENO, _owned: None });
        }
        let f = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty")?;
        let owned = OwnedFd::from(f);
        Ok(Tty { fd: owned.as_raw_fd(), _owned: Some(owned) })
    }

    /// Over an arbitrary descriptor (tests: a pseudo-terminal or a pipe); not closed on drop.
    pub fn from_raw(fd: RawFd) -> Tty {
        Tty { fd, _owned: None }
    }

    /// Wait up to `timeout` for input; a signal arriving counts as a timeout (the caller
    /// looks at its stop flag and comes back).
    pub fn wait(&self, timeout: Duration) -> Input {
        let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the kernel to fill.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return match e.kind() {
                std::io::ErrorKind::Interrupted => Input::Timeout,
                _ => Input::Gone(format!("poll on the terminal failed: {e}")),
            };
        }
        if n == 0 {
            return Input::Timeout;
        }
        if p.revents & libc::POLLNVAL != 0 {
            return Input::Gone("the terminal's descriptor is closed".into());
        }
        // A hang-up first (a hung-up terminal also reports an error): keys still
        // unread then no longer matter.
        if p.revents & libc::POLLHUP != 0 {
            return Input::Gone("the terminal hung up".into());
        }
        if p.revents & libc::POLLERR != 0 {
            return Input::Gone("the terminal reports an error".into());
        }
        // Readable: with bytes waiting, a read returns them; with none, a read returns end
        // of file (or EIO), and crossterm would spin on it.
        match self.pending() {
            Some(0) => Input::Gone("end of file on the terminal".into()),
            Some(_) => Input::Ready,
            None => Input::Gone(format!("the terminal cannot be read: {}", std::io::Error::last_os_error())),
        }
    }

    /// Bytes waiting to be read (FIONREAD); none when the ioctl fails.
    fn pending(&self) -> Option<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD stores an int at the pointer given.
        let r = unsafe { libc::ioctl(self.fd, libc::FIONREAD, &mut n) };
        (r == 0).then_some(n.max(0) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pseudo-terminal pair: (master, slave), both owned.
    fn pty() -> (OwnedFd, OwnedFd) {
        use std::os::fd::FromRawFd;
        let (mut m, mut s) = (0, 0);
        // SAFETY: openpty fills two descriptors; null name, termios and winsize are allowed.
        let r = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned here alone.
        unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) }
    }

    fn write(fd: &OwnedFd, b: &[u8]) {
        // SAFETY: writing a valid buffer to an open descriptor.
        let n = unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), b.len()) };
        assert_eq!(n, b.len() as isize);
    }

    #[test]
    fn a_key_is_ready_silence_times_out_and_a_closed_master_is_gone() {
        let (master, slave) = pty();
        let t = Tty::from_raw(slave.as_raw_fd());
        assert_eq!(t.wait(Duration::from_millis(20)), Input::Timeout);
        // A line: the pty is in canonical mode (top's is raw, where one byte is enough).
        write(&master, b"q\n");
        assert_eq!(t.wait(Duration::from_secs(5)), Input::Ready);
        // What `tmux kill-session` or an ssh drop does: the other end closes.
        drop(master);
        match t.wait(Duration::from_secs(5)) {
            Input::Gone(why) => assert!(why.contains("hung up") || why.contains("end of file"), "{why}"),
            other => panic!("a closed master reads as {other:?}"),
        }
    }

    #[test]
    fn a_pipe_at_end_of_file_is_gone() {
        let mut fds = [0; 2];
        // SAFETY: pipe fills two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        use std::os::fd::FromRawFd;
        // SAFETY: just opened, owned here.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let t = Tty::from_raw(r.as_raw_fd());
        write(&w, b"x");
        assert_eq!(t.wait(Duration::from_secs(5)), Input::Ready);
        drop(w);
        // The writer gone: a hang-up, though a byte is still unread.
        assert_eq!(t.wait(Duration::from_secs(5)), Input::Gone("the terminal hung up".into()));
    }

    #[test]
    fn readable_without_a_byte_count_is_gone() {
        // /dev/null is always readable and has no FIONREAD: a read would return end of file.
        let f = std::fs::File::open("/dev/null").expect("/dev/null");
        match Tty::from_raw(f.as_raw_fd()).wait(Duration::from_secs(5)) {
            Input::Gone(why) => assert!(why.starts_with("the terminal cannot be read"), "{why}"),
            other => panic!("/dev/null reads as {other:?}"),
        }
    }
}
