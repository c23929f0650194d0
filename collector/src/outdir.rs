//! Output directories fwdscope owns: a recording, a sweep, a live comparison. Every one
//! fwdscope makes carries a marker file ([`MARKER`]); `--force` replaces only a directory
//! that carries it, and never one another fwdscope is writing: the marker is also the
//! directory's lock (an exclusive `flock` held by [`OutputDir`] for the whole run), so a
//! second writer is refused instead of wiping the first one's results.
//!
//! Run as root, a directory owned by another user is refused unless the output is shared
//! (`--share`): its owner could plant symlinks in it that root would write through.
//! Files inside are created with [`create_new`] (O_EXCL|O_NOFOLLOW: a planted symlink is
//! an error, never followed) or through random temporary names renamed into place
//! ([`write_atomic`]).
//!
//! A claimed directory is also held open (a directory descriptor, checked to be the one
//! holding the locked marker), and every file or directory created under its path is
//! created relative to that descriptor with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`: a user who owns the parent and renames the directory away, or
//! swaps a subdirectory for a symlink between two writes, redirects nothing. Paths under
//! no claimed directory (an `export -o FILE`) are created by path, O_EXCL|O_NOFOLLOW.

use crate::{Error, Result};
use std::fs::File;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The marker every output directory fwdscope makes carries (and its lock).
pub const MARKER: &str = ".fwdscope-output";

/// What fwdscope made before output directories were marked: a recording, a sweep, a
/// live comparison.
const OLD_OUTPUTS: [&str; 4] = ["meta.json", "results.parquet", "live.json", "samples.parquet"];

/// An output directory claimed for one run: its marker is locked until this is dropped,
/// and files created under its path are created relative to its descriptor.
#[derive(Debug)]
pub struct OutputDir {
    path: PathBuf,
    fd: Arc<OwnedFd>,
    _lock: File,
}

/// The directories this process has claimed, by the path they were claimed as, each with
/// its directory descriptor ([`OutputDir`] adds and removes its own entry).
static CLAIMED: Mutex<Vec<(PathBuf, Arc<OwnedFd>)>> = Mutex::new(Vec::new());

impl Drop for OutputDir {
    fn drop(&mut self) {
        if let Ok(mut c) = CLAIMED.lock() {
            c.retain(|(_, fd)| !Arc::ptr_eq(fd, &self.fd));
        }
    }
}

/// The claimed directory `path` lies under (the deepest), and the rest of the path below
/// it; None for a path under no claimed directory.
fn anchor(path: &Path) -> Option<(Arc<OwnedFd>, PathBuf)> {
    let claimed = CLAIMED.lock().ok()?;
    claimed
        .iter()
        .filter_map(|(root, fd)| {
            let rest = path.strip_prefix(root).ok().filter(|r| !r.as_os_str().is_empty())?;
            Some((root.components().count(), fd.clone(), rest.to_path_buf()))
        })
        .max_by_key(|x| x.0)
        .map(|(_, fd, rest)| (fd, rest))
}

/// Resolution below a claimed directory: never above it, never through a symlink.
fn beneath() -> rustix::fs::ResolveFlags {
    rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_SYMLINKS
}

/// Open `rest` (a directory below `fd`, or `fd` itself when empty) to create in.
fn open_dir_beneath(fd: &OwnedFd, rest: &Path, path: &Path) -> Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let rest = if rest.as_os_str().is_empty() { Path::new(".") } else { rest };
    rustix::fs::openat2(fd, rest, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty(), beneath())
        .map_err(|e| Error::io(path, symlink_said(e)))
}

/// ELOOP / EXDEV from RESOLVE_NO_SYMLINKS / RESOLVE_BENEATH, in words.
fn symlink_said(e: rustix::io::Errno) -> std::io::Error {
    match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => std::io::Error::other(format!(
            "a symlink or a path leading out of the output directory where fwdscope creates a file ({e}); not \
             followed"
        )),
        e => e.into(),
    }
}

/// A file under a directory this process claimed, opened to read relative to the claimed
/// directory's descriptor (never above it, never through a symlink: a user who owns a
/// piece of a shared output's path cannot point a read at another file of root's);
/// None for a path under no claimed directory. Opened O_NONBLOCK, as the checked opener
/// wants it.
pub(crate) fn open_beneath_to_read(path: &Path) -> Option<Result<File>> {
    use rustix::fs::{Mode, OFlags};
    let (fd, rest) = anchor(path)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    Some(rustix::fs::openat2(&*fd, &rest, flags, Mode::empty(), beneath()).map(File::from).map_err(|e| {
        let e = match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => std::io::Error::other(format!(
                "reached through a symlink, or a path leading out of the output directory fwdscope is writing \
                 ({e}); not followed"
            )),
            e => e.into(),
        };
        Error::io(path, e)
    }))
}

/// Directory `name` in `parent`, opened without following a symlink at its name.
fn open_dir_at(parent: &OwnedFd, name: &std::ffi::OsStr, path: &Path) -> Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io(path, e.into()))
}

/// The parent directory of `path`, opened to create in, and the name in it: under a
/// claimed directory, relative to it; as root with a shared output (whose path another
/// user may own pieces of), resolved through no symlink at all (RESOLVE_NO_SYMLINKS),
/// so a piece swapped for a symlink after the checks redirects nothing; otherwise by path
/// (as root unshared, every piece was checked to be root's).
fn parent_fd(path: &Path, shared: bool) -> Result<(OwnedFd, std::ffi::OsString)> {
    use rustix::fs::{Mode, OFlags};
    if let Some(found) = anchored_parent(path)? {
        return Ok(found);
    }
    let name = path
        .file_name()
        .map(|n| n.to_os_string())
        .ok_or_else(|| refuse(path, "names no directory entry (a root or `..`); give a directory name"))?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // O_PATH: a directory this user may write and search but not list is a parent too.
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = if running_as_root() && shared {
        rustix::fs::openat2(rustix::fs::CWD, parent, flags, Mode::empty(), rustix::fs::ResolveFlags::NO_SYMLINKS)
            .map_err(|e| match e {
                rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => refuse(
                    path,
                    format!(
                        "its directory {} is reached through a symlink: as root with --share, an output's path must \
                         have none (a user could swap one in); give the path it leads to",
                        parent.display()
                    ),
                ),
                e => Error::io(parent, e.into()),
            })?
    } else {
        rustix::fs::open(parent, flags, Mode::empty()).map_err(|e| Error::io(parent, e.into()))?
    };
    Ok((fd, name))
}

/// Rename `from` to `to`, both relative to the directory `root`, with every directory on
/// the way opened through no symlink and never above `root`, and `root` itself resolved
/// as [`parent_fd`] does (through no symlink at all as root with `shared`): a dataset's
/// run moved into its partition lands there, or nowhere.
pub fn rename_beneath(root: &Path, shared: bool, from: &Path, to: &Path) -> Result<()> {
    let (parent, name) = parent_fd(root, shared)?;
    let dir = open_dir_at(&parent, &name, root)?;
    let side = |rel: &Path| -> Result<(OwnedFd, std::ffi::OsString)> {
        let name = rel.file_name().ok_or_else(|| refuse(&root.join(rel), "names no directory entry"))?;
        Ok((open_dir_beneath(&dir, rel.parent().unwrap_or(Path::new("")), &root.join(rel))?, name.to_os_string()))
    };
    let ((fp, fname), (tp, tname)) = (side(from)?, side(to)?);
    rustix::fs::renameat(&fp, fname.as_os_str(), &tp, tname.as_os_str()).map_err(|e| Error::io(root.join(to), e.into()))
}

/// `path` split into (directory descriptor of its parent, file name) when it lies under
/// a claimed directory.
fn anchored_parent(path: &Path) -> Result<Option<(OwnedFd, std::ffi::OsString)>> {
    let Some((fd, rest)) = anchor(path) else { return Ok(None) };
    let Some(name) = rest.file_name().map(|n| n.to_os_string()) else { return Ok(None) };
    let parent = rest.parent().unwrap_or(Path::new(""));
    Ok(Some((open_dir_beneath(&fd, parent, path)?, name)))
}

/// How a directory is claimed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Claim {
    /// Replace a directory fwdscope made before (default false: refused).
    pub force: bool,
    /// Readable by others (0755) and, as root, allowed in another user's directory
    /// (default false: 0700, refused).
    pub shared: bool,
}

fn refuse(path: &Path, msg: impl Into<String>) -> Error {
    Error::Output { path: path.to_path_buf(), msg: msg.into() }
}

fn running_as_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Refuse, as root and unless `shared`, a directory another user owns.
pub fn check_owner(path: &Path, md: &std::fs::Metadata, shared: bool) -> Result<()> {
    check_owner_uid(path, md.uid(), shared)
}

fn check_owner_uid(path: &Path, uid: u32, shared: bool) -> Result<()> {
    if running_as_root() && uid != 0 && !shared {
        return Err(refuse(
            path,
            format!(
                "is owned by user {}, and fwdscope runs as root: root writes only into directories root owns \
                 (their owner could plant symlinks root would write through); pass --share to write there \
                 anyway, or choose another output (-o, --dataset)",
                uid
            ),
        ));
    }
    Ok(())
}

/// Refuse, as root and unless `shared`, an output directory whose parent another user
/// owns: that user could rename fwdscope's directory away and put a symlink in its place
/// between two of root's writes. See [`check_path`].
fn check_parent(path: &Path, shared: bool) -> Result<()> {
    let parent = match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from("."),
    };
    check_path(&parent, shared).map_err(|why| {
        refuse(
            path,
            format!(
                "would be made in {}: {why}, and fwdscope runs as root: that user could rename the directory \
                 and put a symlink in its place between two of root's writes; {}",
                parent.display(),
                why.advice("choose an -o in a directory root owns")
            ),
        )
    })
}

/// Why [`check_path`] refused a path, and what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRefusal {
    /// What is another user's, in words.
    pub why: String,
    /// A symlink another user owns is on the path: `--share` does not waive that.
    pub symlink: bool,
}

impl std::fmt::Display for PathRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

impl PathRefusal {
    /// The advice that ends a refusal's message.
    pub fn advice(&self, flag_hint: &str) -> String {
        if self.symlink {
            "give the path it leads to instead (root never follows another user's symlink, --share or not)".into()
        } else {
            format!("pass --share to write there anyway, or {flag_hint}")
        }
    }
}

/// As root: `dir` (the directory a file or directory is made in) must be root's all the
/// way, or the user who owns a piece of it could redirect root's writes. No component of
/// the path as given may be a symlink another user owns (their own link to root's
/// directory), and the directory it resolves to and every directory above it must be
/// root's. `shared` (`--share`) waives who owns the directories, never the symlinks: a
/// user's symlink on the path is refused either way, and with `shared` root's own too (the
/// output is then opened through no symlink at all, so a path with one would fail later,
/// after the dataset or directory had been started).
pub fn check_path(dir: &Path, shared: bool) -> std::result::Result<(), PathRefusal> {
    if !running_as_root() {
        return Ok(());
    }
    let owned = |why: String| PathRefusal { why, symlink: false };
    let abs = if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir().map_err(|e| owned(format!("the current directory: {e}")))?.join(dir)
    };
    // The path as written, component by component (`..` included, as the kernel walks
    // it): every existing piece must be root's, a symlink or a directory alike.
    let mut p = PathBuf::new();
    for c in abs.components() {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(md) if md.file_type().is_symlink() && md.uid() != 0 => {
                return Err(PathRefusal {
                    why: format!("{} is a symlink user {} owns", p.display(), md.uid()),
                    symlink: true,
                });
            }
            // As root with --share, the output is later reached through no symlink at all
            // (RESOLVE_NO_SYMLINKS, see parent_fd): refused here, before anything is made.
            Ok(md) if md.file_type().is_symlink() && shared => {
                return Err(PathRefusal {
                    why: format!(
                        "{} is a symlink, and with --share root reaches an output through none (a user could swap \
                         one in)",
                        p.display()
                    ),
                    symlink: true,
                });
            }
            Ok(md) if md.uid() != 0 && !shared => {
                return Err(owned(format!("{} is owned by user {}", p.display(), md.uid())))
            }
            Ok(_) => {}
            // What does not exist yet is made by root.
            Err(_) => break,
        }
    }
    if shared {
        return Ok(());
    }
    let mut existing = abs.as_path();
    while std::fs::symlink_metadata(existing).is_err() {
        match existing.parent() {
            Some(p) => existing = p,
            None => return Ok(()),
        }
    }
    let real = std::fs::canonicalize(existing).map_err(|e| owned(format!("{}: {e}", existing.display())))?;
    for a in real.ancestors() {
        if let Ok(md) = std::fs::metadata(a) {
            if md.uid() != 0 {
                return Err(owned(format!("{} is owned by user {}", a.display(), md.uid())));
            }
        }
    }
    Ok(())
}

impl OutputDir {
    /// Claim `path` for writing: create it (with its marker), or take an empty directory,
    /// or (with `force`) empty a directory fwdscope made that no other fwdscope is
    /// writing. Everything else is refused, naming why.
    pub fn claim(path: &Path, how: Claim) -> Result<OutputDir> {
        // `out/` names what `out` points to when `out` is a symlink: the components alone
        // (no trailing slash), so a symlink is seen as one and never followed.
        let path = &path.components().collect::<PathBuf>();
        // Once more if another claimer created the directory between our look and mkdir.
        for _ in 0..2 {
            match std::fs::symlink_metadata(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Checked before anything is made: the parents created below are
                    // made where the path leads.
                    check_parent(path, how.shared)?;
                    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
                    }
                    let (parent, name) = parent_fd(path, how.shared)?;
                    let mode = rustix::fs::Mode::from_raw_mode(dir_mode(how.shared));
                    match rustix::fs::mkdirat(&parent, name.as_os_str(), mode) {
                        Ok(()) => {
                            // The directory just made, opened without following a symlink
                            // swapped in since, and this user's; its mode set through
                            // that descriptor, never by path.
                            let dir = open_dir_at(&parent, &name, path)?;
                            let st = rustix::fs::fstat(&dir).map_err(|e| Error::io(path, e.into()))?;
                            // SAFETY: geteuid cannot fail.
                            if st.st_uid != unsafe { libc::geteuid() } {
                                return Err(refuse(
                                    path,
                                    "was replaced by another user's directory while fwdscope made it; not written",
                                ));
                            }
                            rustix::fs::fchmod(&dir, mode).map_err(|e| Error::io(path, e.into()))?;
                            return Self::mark(path, dir, how);
                        }
                        Err(rustix::io::Errno::EXIST) => continue,
                        Err(e) => return Err(Error::io(path, e.into())),
                    }
                }
                Err(e) => return Err(Error::io(path, e)),
                Ok(md) if !md.is_dir() => {
                    return Err(refuse(
                        path,
                        "exists and is not a directory (a file, a device or a symlink, which is not followed); \
                         give a new name",
                    ))
                }
                Ok(md) => {
                    check_owner(path, &md, how.shared)?;
                    check_parent(path, how.shared)?;
                    // From here on the directory is used through its descriptor: the one
                    // whose owner was just checked, not whatever the name leads to later.
                    let (parent, name) = parent_fd(path, how.shared)?;
                    let dir = open_dir_at(&parent, &name, path)?;
                    let st = rustix::fs::fstat(&dir).map_err(|e| Error::io(path, e.into()))?;
                    if (st.st_dev, st.st_ino) != (md.dev(), md.ino()) {
                        return Err(refuse(path, "was replaced while fwdscope claimed it; not touched"));
                    }
                    return Self::existing(path, dir, how);
                }
            }
        }
        Err(refuse(path, "was created and removed again while claimed; try again"))
    }

    /// A directory that exists (`dir`, its descriptor): marked, empty, or refused. Its
    /// marker is opened, its content removed and its mode set through `dir`.
    fn existing(path: &Path, dir: OwnedFd, how: Claim) -> Result<OutputDir> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let mode = Mode::from_raw_mode(dir_mode(how.shared));
        let marker = rustix::fs::openat(
            &dir,
            MARKER,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map(File::from);
        match marker {
            Ok(f) => {
                if !f.metadata().map_err(|e| Error::io(path.join(MARKER), e))?.is_file() {
                    return Err(refuse(
                        &path.join(MARKER),
                        "cannot be opened as fwdscope's marker (not a regular file); not touched",
                    ));
                }
                lock(&f, path)?;
                if !how.force {
                    return Err(Error::OutputExists(path.to_path_buf()));
                }
                clear_at(&dir, path)?;
                rustix::fs::fchmod(&dir, mode).map_err(|e| Error::io(path, e.into()))?;
                Self::hold(path, dir, f, how)
            }
            Err(rustix::io::Errno::NOENT) => {
                if entries_at(&dir, path)?.is_empty() {
                    rustix::fs::fchmod(&dir, mode).map_err(|e| Error::io(path, e.into()))?;
                    return Self::mark(path, dir, how);
                }
                if OLD_OUTPUTS.iter().any(|f| rustix::fs::statat(&dir, *f, AtFlags::SYMLINK_NOFOLLOW).is_ok()) {
                    return Err(refuse(
                        path,
                        format!(
                            "holds output of an older fwdscope, made before output directories carried a {MARKER} \
                             marker: fwdscope will not remove it; remove it yourself (rm -r {}) or choose another -o",
                            path.display()
                        ),
                    ));
                }
                Err(refuse(
                    path,
                    format!(
                        "holds files fwdscope did not make (no {MARKER} marker): --force replaces only directories \
                         fwdscope made; choose a new or empty directory"
                    ),
                ))
            }
            Err(e) => Err(refuse(
                &path.join(MARKER),
                format!("cannot be opened as fwdscope's marker ({}); not touched", std::io::Error::from(e)),
            )),
        }
    }

    /// Write and lock the marker of a directory just made (or found empty), `dir` its
    /// descriptor: a temporary file, locked, then linked into place, so it is never seen
    /// unlocked.
    fn mark(path: &Path, dir: OwnedFd, how: Claim) -> Result<OutputDir> {
        use rustix::fs::{AtFlags, Mode, OFlags};
        let tmp = format!(".fwdscope-output.{}.tmp", std::process::id());
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )
        .map_err(|e| Error::io(path.join(&tmp), e.into()))?;
        let mut f = File::from(fd);
        let written = f
            .write_all(b"This directory was made by fwdscope; `--force` may replace it.\n")
            .map_err(|e| Error::io(path.join(&tmp), e))
            .and_then(|()| lock(&f, path))
            .and_then(|()| {
                // No-clobber: a marker already there means another claimer won.
                rustix::fs::linkat(&dir, tmp.as_str(), &dir, MARKER, AtFlags::empty()).map_err(|e| match e {
                    rustix::io::Errno::EXIST => refuse(path, "another fwdscope claimed it at the same moment"),
                    e => Error::io(path.join(MARKER), e.into()),
                })
            });
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        written?;
        let _ = f.set_permissions(std::fs::Permissions::from_mode(0o644));
        Self::hold(path, dir, f, how)
    }

    /// Keep the directory `fd`: it must hold the locked marker `lock`, and, as root and
    /// unless shared, be root's own.
    fn hold(path: &Path, fd: OwnedFd, lock: File, how: Claim) -> Result<OutputDir> {
        use rustix::fs::AtFlags;
        let here = rustix::fs::statat(&fd, MARKER, AtFlags::SYMLINK_NOFOLLOW).map_err(|e| Error::io(path, e.into()))?;
        let held = lock.metadata().map_err(|e| Error::io(path.join(MARKER), e))?;
        if (here.st_dev, here.st_ino) != (held.dev(), held.ino()) {
            return Err(refuse(path, "was replaced while fwdscope claimed it (its marker is not the one locked)"));
        }
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io(path, e.into()))?;
        check_owner_uid(path, st.st_uid, how.shared)?;
        let fd = Arc::new(fd);
        if let Ok(mut c) = CLAIMED.lock() {
            c.push((path.to_path_buf(), fd.clone()));
        }
        Ok(OutputDir { path: path.to_path_buf(), fd, _lock: lock })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn lock(f: &File, dir: &Path) -> Result<()> {
    match f.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(refuse(
            dir,
            "another fwdscope is writing it now (its marker is locked): wait for it, or choose another -o",
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(dir.join(MARKER), e)),
    }
}

/// The names in directory `dir` (descriptor), `.` and `..` left out.
fn entries_at(dir: &OwnedFd, path: &Path) -> Result<Vec<std::ffi::CString>> {
    let mut d = rustix::fs::Dir::read_from(dir).map_err(|e| Error::io(path, e.into()))?;
    let mut out = Vec::new();
    while let Some(e) = d.read() {
        let e = e.map_err(|e| Error::io(path, e.into()))?;
        let name = e.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

/// Remove everything in directory `dir` (a descriptor) but its marker: subdirectories
/// opened relative to it without following, symlinks removed, never followed; nothing
/// is reached by path, so a directory swapped for a symlink mid-way leads nowhere.
fn clear_at(dir: &OwnedFd, path: &Path) -> Result<()> {
    fn remove_all(dir: &OwnedFd, path: &Path, keep_marker: bool) -> Result<()> {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags};
        use std::os::unix::ffi::OsStrExt;
        for name in entries_at(dir, path)? {
            if keep_marker && name.to_bytes() == MARKER.as_bytes() {
                continue;
            }
            let p = path.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
            let st = rustix::fs::statat(dir, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| Error::io(&p, e.into()))?;
            if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                let sub = rustix::fs::openat(
                    dir,
                    name.as_c_str(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(|e| Error::io(&p, e.into()))?;
                remove_all(&sub, &p, false)?;
                rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::REMOVEDIR)
            } else {
                rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::empty())
            }
            .map_err(|e| Error::io(&p, e.into()))?;
        }
        Ok(())
    }
    remove_all(dir, path, true)
}

/// Mode of output directories: private (0700) unless shared (0755).
pub fn dir_mode(shared: bool) -> u32 {
    if shared {
        0o755
    } else {
        0o700
    }
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(path, e))
}

/// Create a new file `path` with `mode` (whatever the umask): O_EXCL|O_NOFOLLOW, so
/// whatever is already there, a planted symlink included, is an error and never written
/// through; under a claimed directory, relative to its descriptor and through no symlink.
pub fn create_new(path: &Path, mode: u32) -> Result<File> {
    use rustix::fs::{Mode, OFlags};
    let f = match anchor(path) {
        Some((fd, rest)) => {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            File::from(
                rustix::fs::openat2(&fd, &rest, flags, Mode::from_raw_mode(mode), beneath())
                    .map_err(|e| Error::io(path, symlink_said(e)))?,
            )
        }
        None => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| Error::io(path, e))?,
    };
    f.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(path, e))?;
    Ok(f)
}

/// mkdir `path` (under a claimed directory: relative to its descriptor).
fn mkdir(path: &Path, mode: u32) -> Result<()> {
    match anchored_parent(path)? {
        Some((parent, name)) => rustix::fs::mkdirat(&parent, name.as_os_str(), rustix::fs::Mode::from_raw_mode(mode))
            .map_err(|e| Error::io(path, e.into())),
        None => std::fs::DirBuilder::new().mode(mode).create(path).map_err(|e| Error::io(path, e)),
    }
}

/// Create directory `path` (its parent must exist) with `mode`: refused if anything is
/// there already (a planted symlink to a directory is never written into).
pub fn create_dir_new(path: &Path, mode: u32) -> Result<()> {
    mkdir(path, mode)?;
    match anchored_parent(path)? {
        Some((parent, name)) => {
            let d = open_dir_beneath(&parent, Path::new(&name), path)?;
            rustix::fs::fchmod(&d, rustix::fs::Mode::from_raw_mode(mode)).map_err(|e| Error::io(path, e.into()))
        }
        None => set_mode(path, mode),
    }
}

/// A directory made inside a claimed one, held open like it: paths under it are created
/// and read relative to this descriptor (see [`OutputDir`]), so the owner of a shared
/// output who renames it away and puts a directory of their own at its name (a sweep's
/// `runs/`, with forged runs in it) redirects nothing. Released when dropped.
#[derive(Debug)]
pub struct HeldDir {
    fd: Arc<OwnedFd>,
}

impl Drop for HeldDir {
    fn drop(&mut self) {
        if let Ok(mut c) = CLAIMED.lock() {
            c.retain(|(_, fd)| !Arc::ptr_eq(fd, &self.fd));
        }
    }
}

/// Make directory `path` under a claimed directory ([`create_dir_new`]) and hold it open:
/// opened beneath the claimed directory through no symlink, and checked to be this user's
/// (the one just made, not one swapped in).
pub fn create_dir_held(path: &Path, mode: u32) -> Result<HeldDir> {
    create_dir_new(path, mode)?;
    let Some((parent, name)) = anchored_parent(path)? else {
        return Err(refuse(path, "is under no output directory this process claimed; not held"));
    };
    let d = open_dir_beneath(&parent, Path::new(&name), path)?;
    let st = rustix::fs::fstat(&d).map_err(|e| Error::io(path, e.into()))?;
    // SAFETY: geteuid cannot fail.
    if st.st_uid != unsafe { libc::geteuid() } {
        return Err(refuse(path, "was replaced by another user's directory as it was made; not used"));
    }
    let fd = Arc::new(d);
    if let Ok(mut c) = CLAIMED.lock() {
        c.push((path.to_path_buf(), fd.clone()));
    }
    Ok(HeldDir { fd })
}

/// Write `bytes` as `path`: a temporary file of a random name beside it (created
/// O_EXCL, removed again on any error), then renamed into place (a rename replaces a
/// planted symlink, never follows it).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_atomic_with(path, mode, |f| f.write_all(bytes).map_err(|e| Error::io(path, e)))
}

/// `df` encoded as Parquet in memory (the errors of encoding apart from those of writing:
/// a full disk while polars wrote its footer was reported as a Thrift error).
pub fn parquet_bytes(path: &Path, df: &mut polars::prelude::DataFrame) -> Result<Vec<u8>> {
    use polars::prelude::ParquetWriter;
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf)
        .finish(df)
        .map_err(|e| Error::Parquet { path: path.into(), msg: format!("encoding: {e}") })?;
    Ok(buf)
}

/// `df` written as Parquet as `path`, through [`write_atomic_with`]: encoded first, then
/// written, so a full disk is said as one (the file named, "No space left on device").
pub fn write_parquet(path: &Path, mode: u32, df: &mut polars::prelude::DataFrame) -> Result<()> {
    let bytes = parquet_bytes(path, df)?;
    write_atomic_with(path, mode, |f| {
        use std::io::Write;
        f.write_all(&bytes).map_err(|e| Error::io(path, e))
    })
}

/// [`write_atomic`] through a writer: `fill` writes the content into the temporary file.
pub fn write_atomic_with(path: &Path, mode: u32, fill: impl FnOnce(&mut File) -> Result<()>) -> Result<()> {
    let (parent, name) = parent_fd(path, false)?;
    write_atomic_beneath(path, &parent, &name, mode, fill)
}

/// [`write_atomic`] of an output that may be shared (`--share`): as root with `shared`,
/// its directory is resolved through no symlink at all (see [`check_path`]: another
/// user may own pieces of the path), then the file is made and renamed in that very
/// directory, so a piece swapped for a symlink between the checks and the write
/// redirects nothing.
pub fn write_atomic_as(path: &Path, bytes: &[u8], mode: u32, shared: bool) -> Result<()> {
    let (parent, name) = parent_fd(path, shared)?;
    write_atomic_beneath(path, &parent, &name, mode, |f| f.write_all(bytes).map_err(|e| Error::io(path, e)))
}

/// [`write_atomic_with`] in the directory `parent` (a descriptor): a new file of a random
/// name, filled, then renamed to `name` in the same directory.
fn write_atomic_beneath(
    path: &Path,
    parent: &OwnedFd,
    name: &std::ffi::OsStr,
    mode: u32,
    fill: impl FnOnce(&mut File) -> Result<()>,
) -> Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    use std::hash::{BuildHasher, Hasher};
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut created = None;
    for _ in 0..16 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
        let tmp = format!(".{}.{:016x}.tmp", name.to_string_lossy(), h.finish());
        match rustix::fs::openat(parent, tmp.as_str(), flags, Mode::from_raw_mode(mode)) {
            Ok(fd) => {
                created = Some((File::from(fd), tmp));
                break;
            }
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => return Err(Error::io(path, e.into())),
        }
    }
    let Some((mut f, tmp)) = created else {
        return Err(Error::io(path, std::io::Error::other("no free temporary name after 16 tries")));
    };
    let filled = fill(&mut f).and_then(|()| {
        f.set_permissions(std::fs::Permissions::from_mode(mode)).map_err(|e| Error::io(path, e))?;
        rustix::fs::renameat(parent, tmp.as_str(), parent, name).map_err(|e| Error::io(path, e.into()))
    });
    if filled.is_err() {
        let _ = rustix::fs::unlinkat(parent, tmp.as_str(), AtFlags::empty());
    }
    filled
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_clears_through_descriptors_and_never_follows_a_link() {
        let d = tempfile::tempdir().expect("tempdir");
        let outside = d.path().join("outside");
        std::fs::create_dir(&outside).expect("mkdir");
        std::fs::write(outside.join("keep.txt"), b"keep").expect("write");
        let out = d.path().join("out");
        drop(OutputDir::claim(&out, Claim::default()).expect("made"));
        // Old results: nested directories, a symlink to a directory and to a file.
        std::fs::create_dir_all(out.join("a/b/c")).expect("mkdir");
        std::fs::write(out.join("a/b/c/part.parquet"), b"x").expect("write");
        std::os::unix::fs::symlink(&outside, out.join("a/b/link")).expect("symlink");
        std::os::unix::fs::symlink(outside.join("keep.txt"), out.join("file-link")).expect("symlink");
        let o = OutputDir::claim(&out, Claim { force: true, shared: false }).expect("replaced");
        let left: Vec<_> = std::fs::read_dir(&out).expect("read").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from(MARKER)]);
        assert_eq!(std::fs::read(outside.join("keep.txt")).expect("kept"), b"keep");
        assert_eq!(std::fs::metadata(&out).expect("out").permissions().mode() & 0o777, 0o700);
        drop(o);
    }

    #[test]
    fn a_directory_fwdscope_did_not_make_is_never_replaced() {
        let d = tempfile::tempdir().expect("tempdir");
        let canary = d.path().join("canary");
        std::fs::create_dir(&canary).expect("mkdir");
        std::fs::write(canary.join("precious.txt"), b"keep").expect("write");
        let e = OutputDir::claim(&canary, Claim { force: true, shared: false }).expect_err("not ours");
        assert!(e.to_string().contains("did not make"), "{e}");
        assert_eq!(std::fs::read(canary.join("precious.txt")).expect("kept"), b"keep");
    }

    #[test]
    fn an_old_recording_is_refused_saying_how_to_proceed() {
        let d = tempfile::tempdir().expect("tempdir");
        std::fs::write(d.path().join("meta.json"), b"{}").expect("write");
        let e = OutputDir::claim(d.path(), Claim { force: true, shared: false }).expect_err("unmarked");
        let msg = e.to_string();
        assert!(msg.contains("older fwdscope") && msg.contains("rm -r"), "{msg}");
        assert!(d.path().join("meta.json").exists());
    }

    #[test]
    fn a_marked_directory_is_replaced_with_force_only_and_locked_while_claimed() {
        let d = tempfile::tempdir().expect("tempdir");
        let out = d.path().join("out");
        let first = OutputDir::claim(&out, Claim::default()).expect("new directory");
        std::fs::write(out.join("results.txt"), b"1").expect("write");
        // A second writer is refused while the first holds the directory, force or not.
        let e = OutputDir::claim(&out, Claim { force: true, shared: false }).expect_err("locked");
        assert!(e.to_string().contains("another fwdscope is writing"), "{e}");
        assert!(out.join("results.txt").exists());
        drop(first);
        let e = OutputDir::claim(&out, Claim::default()).expect_err("exists");
        assert!(matches!(e, Error::OutputExists(_)), "{e}");
        let _again = OutputDir::claim(&out, Claim { force: true, shared: false }).expect("ours, unlocked");
        assert!(!out.join("results.txt").exists());
        assert!(out.join(MARKER).is_file());
    }

    /// The user who owns the parent renames the claimed directory away and puts a
    /// symlink to a victim directory in its place: files go on into the claimed
    /// directory where it now is, none into the victim. A subdirectory swapped for a
    /// symlink is refused, for new files and atomic writes alike.
    #[test]
    fn files_are_created_in_the_directory_claimed_not_what_its_path_now_names() {
        let d = tempfile::tempdir().expect("tempdir");
        let victim = d.path().join("victim");
        std::fs::create_dir(&victim).expect("victim");
        let out = d.path().join("out");
        let held = OutputDir::claim(&out, Claim::default()).expect("claim");
        create_dir_new(&out.join("run1"), 0o700).expect("run1");
        create_new(&out.join("run1/a"), 0o600).expect("a");
        let moved = d.path().join("moved");
        std::fs::rename(&out, &moved).expect("rename away");
        std::os::unix::fs::symlink(&victim, &out).expect("symlink in its place");
        create_new(&out.join("meta.json"), 0o600).expect("created beneath the claimed directory");
        write_atomic(&out.join("table.txt"), b"t", 0o600).expect("atomic beneath it");
        create_dir_new(&out.join("run2"), 0o700).expect("run2");
        assert!(moved.join("meta.json").is_file() && moved.join("table.txt").is_file() && moved.join("run2").is_dir());
        assert_eq!(std::fs::read_dir(&victim).expect("victim").count(), 0, "written through the symlink");
        // A subdirectory swapped for a symlink to the victim.
        std::fs::rename(moved.join("run1"), moved.join("run1-away")).expect("rename run1");
        std::os::unix::fs::symlink(&victim, moved.join("run1")).expect("symlink run1");
        let e = create_new(&out.join("run1/b"), 0o600).expect_err("through a symlink");
        assert!(e.to_string().contains("not followed"), "{e}");
        assert!(write_atomic(&out.join("run1/c"), b"c", 0o600).is_err());
        assert!(create_dir_new(&out.join("run1/d"), 0o700).is_err());
        assert_eq!(std::fs::read_dir(&victim).expect("victim").count(), 0, "written through the symlink");
        drop(held);
        // Released: the path is no longer anchored (and the symlink is refused as before).
        assert!(anchor(&out.join("x")).is_none());
    }

    #[test]
    fn create_new_does_not_follow_a_planted_symlink() {
        let d = tempfile::tempdir().expect("tempdir");
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"root's").expect("write");
        let planted = d.path().join("target.log");
        std::os::unix::fs::symlink(&victim, &planted).expect("symlink");
        assert!(create_new(&planted, 0o600).is_err());
        write_atomic(&planted, b"new", 0o600).expect("rename replaces the link");
        assert_eq!(std::fs::read(&victim).expect("victim"), b"root's");
        assert!(std::fs::symlink_metadata(&planted).expect("file").is_file());
    }
}
