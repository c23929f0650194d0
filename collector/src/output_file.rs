//! Writing one output file a user named (an export, an HTML page): never through another
//! user's symlink, never into another user's directory when run as root, a regular file
//! replaced through a random temporary name with the mode asked for, and an existing pipe
//! or device (`/dev/stdout`, a FIFO) written as it is, after checking whose it is.

use crate::outdir::{check_path, write_atomic, write_atomic_as};
use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Whether this process runs as root.
fn root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The directory a file named `p` goes into (`.` for a bare name).
fn parent_of(p: &Path) -> &Path {
    p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Write an output file: a regular file is replaced through a random temporary name (mode
/// `mode` whatever the umask, never written through a symlink planted at its name); an
/// existing pipe or device (`/dev/stdout`, a FIFO) is written as it is.
pub fn write_output(p: &Path, bytes: &[u8], mode: u32, share: bool) -> Result<()> {
    // Run as root, into a directory (or through a symlink) another user owns: refused
    // unless --share, as for output directories.
    check_path(parent_of(p), share).map_err(|why| {
        Error::Config(format!(
            "{}: {why}, and fwdscope runs as root: that user could redirect the file; {}",
            p.display(),
            why.advice("choose a path in directories root owns")
        ))
    })?;
    if std::fs::metadata(p).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return write_special(p, bytes, share);
    }
    write_atomic_as(p, bytes, mode, share)
}

/// Write a pipe or device as it is. What the name is is pinned first (O_PATH, which never
/// blocks on a FIFO; with O_NOFOLLOW, so a symlink swapped in after a look is pinned as a
/// symlink, not followed) and judged on that descriptor, then that very file is opened
/// for writing: as root, another user's FIFO or device (or one swapped in for the name)
/// is not written, except this process's own standard streams (`/dev/stdout`,
/// `/dev/fd/N`), and a symlink is followed only where no other user can swap it.
fn write_special(p: &Path, bytes: &[u8], share: bool) -> Result<()> {
    refuse_foreign_symlink(p)?;
    let root = root();
    let own_stream = ["/dev/stdout", "/dev/stderr", "/dev/null"].iter().any(|s| p == Path::new(s))
        || p.starts_with("/dev/fd/")
        || p.starts_with("/proc/self/fd/");
    let (mut pinned, mut st) = pin(p, own_stream || !root)?;
    if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
        // Root's own symlink, in a path every piece of which is root's (checked above
        // unless --share): nobody else can swap it, so it is followed.
        if st.st_uid != 0 || share {
            return Err(Error::Config(format!(
                "{} is a symlink{} to a pipe or device, and fwdscope runs as root: it is not followed; give the path \
                 it leads to instead",
                p.display(),
                if st.st_uid != 0 { format!(" user {} owns", st.st_uid) } else { " in a shared path".into() }
            )));
        }
        (pinned, st) = pin(p, true)?;
    }
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFREG || kind == libc::S_IFDIR {
        return Err(Error::Config(format!(
            "{}: replaced by a file or directory while it was being opened; not written",
            p.display()
        )));
    }
    let owner = st.st_uid;
    if root && !share && !own_stream && owner != 0 {
        return Err(Error::Config(format!(
            "{}: a pipe or device user {owner} owns, and fwdscope runs as root: not written; pass --share to write \
             there anyway",
            p.display()
        )));
    }
    let via = format!("/proc/self/fd/{}", pinned.as_raw_fd());
    let mut f = std::fs::OpenOptions::new().write(true).open(&via).map_err(|e| Error::io(p, e))?;
    std::io::Write::write_all(&mut f, bytes).map_err(|e| Error::io(p, e))
}

/// Written as it is, through a symlink at the name: as root, only root's symlink
/// (another user's could point at any FIFO or device).
fn refuse_foreign_symlink(p: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(md) = std::fs::symlink_metadata(p) {
        if root() && md.file_type().is_symlink() && md.uid() != 0 {
            return Err(Error::Config(format!(
                "{} is a symlink user {} owns to a pipe or device, and fwdscope runs as root: it would be written \
                 through; give the path it leads to instead (root never follows another user's symlink, --share or \
                 not)",
                p.display(),
                md.uid()
            )));
        }
    }
    Ok(())
}

/// Pin what `p` names with an O_PATH descriptor (following a final symlink only when
/// `follow`) and stat that descriptor.
fn pin(p: &Path, follow: bool) -> Result<(OwnedFd, libc::stat)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::Config(format!("{}: a NUL byte in the path", p.display())))?;
    let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    // SAFETY: open reads the NUL-terminated path; the descriptor is owned below.
    let raw = unsafe { libc::open(c.as_ptr(), flags) };
    if raw < 0 {
        return Err(Error::io(p, std::io::Error::last_os_error()));
    }
    // SAFETY: a descriptor just opened and owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: fstat fills the struct for our descriptor (O_PATH descriptors allow it).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::io(p, std::io::Error::last_os_error()));
    }
    Ok((fd, st))
}

/// Run as root, a page is not written into a directory (or through a symlink) another
/// user owns; `shown` names the page in the message (`--html PATH`). Checked before the
/// work that makes the page.
pub fn check_page_path(out: &Path, shown: &str) -> Result<()> {
    check_path(parent_of(out), false).map_err(|why| {
        Error::Config(format!(
            "{shown}: {why}, and fwdscope runs as root: that user could redirect the page; choose a path in \
             directories root owns"
        ))
    })
}

/// The mode of a page made from `input`: 0644 when others may read the input (its
/// directory, or the file itself), 0600 otherwise.
pub fn page_mode(input: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(input) {
        Ok(md) if md.permissions().mode() & 0o044 == 0 => 0o600,
        Ok(_) => 0o644,
        Err(_) => 0o600,
    }
}

/// Write a page made from `input` to `out`: run as root, not into a directory (or through
/// a symlink) another user owns; a new file renamed into place (a symlink planted at the
/// name is replaced, never written through); as private as the input is (a private
/// recording or sweep, 0700, gives a 0600 page: the page shows what its input holds,
/// kernel symbols and command lines). Returns the mode written.
pub fn write_page(out: &Path, page: &[u8], input: &Path) -> Result<u32> {
    check_page_path(out, &out.display().to_string())?;
    let mode = page_mode(input);
    write_atomic(out, page, mode)?;
    Ok(mode)
}
