//! The one checked opener for files read out of a recording, a dataset, a sweep or an
//! experiment: each is opened without blocking (a FIFO planted where a file was expected
//! would hang a plain open or read), refused unless `fstat` says it is a regular file (a
//! symlink to `/dev/zero` or a socket names itself in the error), refused when larger
//! than its [`Kind`] allows, then read with that cap (a file that grows while it is read
//! stops at the cap too). Every reader of these files goes through [`read`] or
//! [`open`]. A file under an output directory this process has claimed (a sweep reading
//! its runs back) is opened relative to that directory's descriptor, through no symlink.

use crate::{Error, Result};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// What a file is, and so how large it may be (each bound well above what fwdscope
/// writes, far below what would exhaust memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// meta.json (a few kB written): 16 MiB.
    Meta,
    /// maps.json (one entry per file mapping): 256 MiB.
    Maps,
    /// tasks.json (one entry per COMM, FORK or EXIT): 256 MiB.
    Tasks,
    /// A kallsyms copy (about 6-12 MB on a distribution kernel), plain or gzipped: 256 MiB.
    Kallsyms,
    /// One Parquet part of samples or counters (a chunk of --chunk-ms), a dataset's
    /// stacks.parquet or a sweep's results.parquet: 1 GiB.
    Part,
    /// A small description: run.json, _dataset.json, live.json, an experiment TOML, a
    /// rules file: 64 MiB.
    Description,
    /// A symbol map (`symbols/BUILDID.map`, one line per function): 512 MiB.
    SymbolMap,
    /// A log or a table kept beside results (target.log, table.txt): 256 MiB.
    Text,
    /// A program or library a process maps, read for its unwind tables (a DPDK library
    /// with debug information is tens of MB): 1 GiB.
    Binary,
}

impl Kind {
    /// The largest size accepted, in bytes.
    pub fn max_bytes(self) -> u64 {
        match self {
            Kind::Meta => 16 * MIB,
            Kind::Maps | Kind::Tasks | Kind::Kallsyms | Kind::Text => 256 * MIB,
            Kind::Part | Kind::Binary => 1024 * MIB,
            Kind::Description => 64 * MIB,
            Kind::SymbolMap => 512 * MIB,
        }
    }

    /// The file kind in words, for errors.
    pub fn what(self) -> &'static str {
        match self {
            Kind::Meta => "a recording's meta.json",
            Kind::Maps => "a recording's maps.json",
            Kind::Tasks => "a recording's tasks.json",
            Kind::Kallsyms => "a kallsyms copy",
            Kind::Part => "a Parquet file",
            Kind::Description => "a description file",
            Kind::SymbolMap => "a symbol map",
            Kind::Text => "a text file",
            Kind::Binary => "a mapped binary",
        }
    }
}

fn refuse(path: &Path, msg: String) -> Error {
    Error::File { path: path.to_path_buf(), msg }
}

pub use fwd_abi::file_kind::not_regular;
use fwd_abi::file_kind::pseudo_filesystem as kernel_filesystem;

/// Open `path` for reading as a file of `kind`: without blocking and then checked by
/// `fstat` to be a regular file no larger than the kind allows; the returned file reads
/// blocking again. Returns the file and its size.
pub fn open(path: &Path, kind: Kind) -> Result<(std::fs::File, u64)> {
    // What the path names is looked at first, so a device is never even opened; the
    // open below is still non-blocking, for what is swapped in between.
    if let Ok(md) = std::fs::metadata(path) {
        if let Some(what) = not_regular(md.file_type()) {
            return Err(refuse(path, format!("is {what}, expected {} (a regular file); not read", kind.what())));
        }
    }
    // Under an output directory this process is writing, relative to it and through no
    // symlink (see `outdir`); elsewhere by path.
    let f = match crate::outdir::open_beneath_to_read(path) {
        Some(f) => f?,
        None => std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| Error::io(path, e))?,
    };
    let md = f.metadata().map_err(|e| Error::io(path, e))?;
    if let Some(what) = not_regular(md.file_type()) {
        return Err(refuse(path, format!("is {what}, expected {} (a regular file); not read", kind.what())));
    }
    if let Some(fs) = kernel_filesystem(&f) {
        // Its size (0) says nothing of what a read gives, and a read may block or consume
        // (/proc/kmsg drains the kernel's log). Only /proc/kallsyms itself is read there.
        let is_kallsyms = kind == Kind::Kallsyms && {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata("/proc/kallsyms").is_ok_and(|k| k.dev() == md.dev() && k.ino() == md.ino())
        };
        if !is_kallsyms {
            return Err(refuse(
                path,
                format!(
                    "is a file of the kernel's {fs} (its size says nothing of what reading it gives, and a read may \
                     block or consume it), expected {} (a regular file); not read",
                    kind.what()
                ),
            ));
        }
    }
    let max = kind.max_bytes();
    if md.len() > max {
        return Err(refuse(
            path,
            format!("is {} bytes, more than {} allows ({max} bytes); not read", md.len(), kind.what()),
        ));
    }
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(Error::io(path, std::io::Error::last_os_error()));
    }
    Ok((f, md.len()))
}

/// Read all of `path`, a file of `kind` (see [`open`]); a file that grows past the cap
/// while it is read is refused.
pub fn read(path: &Path, kind: Kind) -> Result<Vec<u8>> {
    let (f, len) = open(path, kind)?;
    let max = kind.max_bytes();
    // /proc files say 0 and hold more: read up to the cap whatever the size said.
    let mut out = Vec::with_capacity(len as usize);
    f.take(max + 1).read_to_end(&mut out).map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > max {
        return Err(refuse(path, format!("grew past {max} bytes while read, more than {} allows", kind.what())));
    }
    Ok(out)
}

/// [`read`] as UTF-8 text (an error names the file otherwise).
pub fn read_to_string(path: &Path, kind: Kind) -> Result<String> {
    String::from_utf8(read(path, kind)?).map_err(|e| {
        refuse(path, format!("is not UTF-8 text (byte {}), expected {}", e.utf8_error().valid_up_to(), kind.what()))
    })
}

/// Decompress gzip `bytes` read from `path`, refusing output past `kind`'s cap (a small
/// file that inflates to gigabytes).
pub fn gunzip(path: &Path, bytes: &[u8], kind: Kind) -> Result<Vec<u8>> {
    let max = kind.max_bytes();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).take(max + 1).read_to_end(&mut out).map_err(|e| Error::io(path, e))?;
    if out.len() as u64 > max {
        return Err(refuse(path, format!("decompresses past {max} bytes, more than {} allows", kind.what())));
    }
    Ok(out)
}

/// The last `n` non-empty lines of the log at `path`, joined with ` | `; empty when there
/// are none (or the log cannot be read). What a failed forwarder said last.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = read_to_string(path, Kind::Text).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_under_a_claimed_directory_never_follow_a_link() {
        let d = tempfile::tempdir().expect("tempdir");
        let secret = d.path().join("secret");
        std::fs::create_dir(&secret).expect("mkdir");
        std::fs::write(secret.join("meta.json"), b"root's").expect("write");
        let out = d.path().join("out");
        let o = crate::outdir::OutputDir::claim(&out, crate::outdir::Claim::default()).expect("made");
        std::fs::create_dir(out.join("runs")).expect("mkdir");
        std::fs::write(out.join("runs/own.json"), b"ours").expect("write");
        // What the directory's owner could swap in: a run that is a link, a file that is one.
        std::os::unix::fs::symlink(&secret, out.join("runs/001")).expect("symlink");
        std::os::unix::fs::symlink(secret.join("meta.json"), out.join("runs/002.json")).expect("symlink");
        assert_eq!(read(&out.join("runs/own.json"), Kind::Meta).expect("read"), b"ours");
        for p in [out.join("runs/001/meta.json"), out.join("runs/002.json"), out.join("runs/../../secret/meta.json")] {
            let e = read(&p, Kind::Meta).expect_err("followed");
            assert!(e.to_string().contains("not followed"), "{e}");
        }
        drop(o);
        // Unclaimed, the same path is read by path (a recording a user gives to `report`).
        assert_eq!(read(&out.join("runs/001/meta.json"), Kind::Meta).expect("read"), b"root's");
    }

    #[test]
    fn a_held_directory_swapped_for_another_is_still_the_one_used() {
        let d = tempfile::tempdir().expect("tempdir");
        let out = d.path().join("out");
        let o = crate::outdir::OutputDir::claim(&out, crate::outdir::Claim::default()).expect("made");
        let runs = out.join("runs");
        let held = crate::outdir::create_dir_held(&runs, 0o700).expect("held");
        std::io::Write::write_all(
            &mut crate::outdir::create_new(&runs.join("meta.json"), 0o600).expect("create"),
            b"real",
        )
        .expect("write");
        // The directory's owner renames it away and puts one of their own at its name.
        std::fs::rename(&runs, out.join("runs.real")).expect("rename");
        std::fs::create_dir(&runs).expect("mkdir");
        std::fs::write(runs.join("meta.json"), b"forged").expect("write");
        assert_eq!(read(&runs.join("meta.json"), Kind::Meta).expect("read"), b"real");
        crate::outdir::create_new(&runs.join("new.json"), 0o600).expect("create");
        assert!(out.join("runs.real/new.json").exists() && !runs.join("new.json").exists());
        drop(held);
        drop(o);
    }

    fn fifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    }

    #[test]
    fn a_fifo_is_refused_naming_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("kallsyms");
        fifo(&p);
        let e = read(&p, Kind::Kallsyms).expect_err("a FIFO is no kallsyms");
        let msg = e.to_string();
        assert!(msg.contains(&p.display().to_string()) && msg.contains("FIFO"), "{msg}");
    }

    #[test]
    fn a_symlink_to_a_device_is_refused() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("meta.json");
        std::os::unix::fs::symlink("/dev/zero", &p).expect("symlink");
        let msg = read(&p, Kind::Meta).expect_err("/dev/zero is no meta.json").to_string();
        assert!(msg.contains("meta.json") && msg.contains("character device"), "{msg}");
    }

    #[test]
    fn a_file_over_its_kind_is_refused_and_one_under_it_read() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("meta.json");
        let f = std::fs::File::create(&p).expect("create");
        f.set_len(Kind::Meta.max_bytes() + 1).expect("sparse file");
        let msg = read(&p, Kind::Meta).expect_err("too large").to_string();
        assert!(msg.contains("more than") && msg.contains("meta.json"), "{msg}");
        std::fs::write(&p, b"{}").expect("write");
        assert_eq!(read(&p, Kind::Meta).expect("small file"), b"{}");
    }

    #[test]
    fn kernel_files_are_refused_but_proc_kallsyms_is_read_whole() {
        // /proc/kmsg (a read drains the kernel's log, or blocks) and its kin are refused by
        // what they are, whatever name a recording gives them.
        let d = tempfile::tempdir().expect("tempdir");
        let p = d.path().join("meta.json");
        std::os::unix::fs::symlink("/proc/self/status", &p).expect("symlink");
        let msg = read(&p, Kind::Meta).expect_err("a procfs file is no meta.json").to_string();
        assert!(msg.contains("meta.json") && msg.contains("procfs"), "{msg}");
        let msg =
            read(Path::new("/sys/kernel/notes"), Kind::Text).map(|_| String::new()).unwrap_or_else(|e| e.to_string());
        assert!(msg.contains("sysfs"), "{msg}");
        // /proc/kallsyms says size 0 and is read whole, as kernel symbols only.
        let text = read_to_string(Path::new("/proc/kallsyms"), Kind::Kallsyms).expect("kallsyms");
        assert!(text.lines().count() > 1000, "{} lines", text.lines().count());
        let msg = read(Path::new("/proc/kallsyms"), Kind::Text).expect_err("as another kind").to_string();
        assert!(msg.contains("procfs"), "{msg}");
    }

    #[test]
    fn gzip_past_the_cap_is_refused() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&vec![b'0'; (Kind::Meta.max_bytes() + 10) as usize]).expect("gzip");
        let gz = enc.finish().expect("gzip");
        let msg = gunzip(Path::new("x.gz"), &gz, Kind::Meta).expect_err("too large").to_string();
        assert!(msg.contains("decompresses past"), "{msg}");
    }
}
