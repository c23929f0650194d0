//! `fwdscope export -i IN -f FORMAT -o OUT`: a recording's (or perf.data file's) stacks as
//! folded stacks, a flame graph SVG, pprof, speedscope JSON, CSV, JSON or Parquet.

use analyzer::export::{Format, Profile};
use analyzer::symbolize::Symbolizer;
use anyhow::{Context, Result};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// A recording directory or a perf.data file.
    #[arg(short = 'i', long)]
    pub input: PathBuf,
    /// Output format.
    #[arg(short = 'f', long, value_enum)]
    pub format: Format,
    /// Output file (default: standard output; binary formats need a file).
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub symbols: super::SymbolArgs,
    /// Extra stage rules (TOML), tried before the built-in ones.
    #[arg(long)]
    pub stages: Option<PathBuf>,
    /// Refuse a recording with a part that cannot be read [default: skip the part and warn,
    /// naming it].
    #[arg(long)]
    pub strict: bool,
    /// SVG: keep the thread start-up frames (_start, std::rt::lang_start, start_thread...)
    /// under every stack [default: trimmed].
    #[arg(long)]
    pub keep_startup_frames: bool,
    /// Make the output file readable by others (0644). Without it the file is private
    /// (0600), as recordings are: a root recording's exports carry kernel addresses. Run
    /// as root, also allows writing into a directory (or to a pipe) another user owns;
    /// another user's symlink is never followed, with or without it.
    #[arg(long)]
    pub share: bool,
}

/// Write the export: a regular file is replaced through a random temporary name (mode
/// `mode` whatever the umask, never written through a symlink planted at its name); an
/// existing pipe or device (`/dev/stdout`, a FIFO) is written as it is.
fn write_output(p: &std::path::Path, bytes: &[u8], mode: u32, share: bool) -> Result<()> {
    // Run as root, into a directory (or through a symlink) another user owns: refused
    // unless --share, as for output directories.
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    collector::outdir::check_path(dir, share).map_err(|why| {
        anyhow::anyhow!(
            "{}: {why}, and fwdscope runs as root: that user could redirect the file; {}",
            p.display(),
            why.advice("choose a path in directories root owns")
        )
    })?;
    if std::fs::metadata(p).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        // Written as it is, through a symlink at the name: as root, only root's symlink
        // (another user's could point at any FIFO or device).
        if let Ok(md) = std::fs::symlink_metadata(p) {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid cannot fail.
            let root = unsafe { libc::geteuid() } == 0;
            if root && md.file_type().is_symlink() && md.uid() != 0 {
                anyhow::bail!(
                    "{} is a symlink user {} owns to a pipe or device, and fwdscope runs as root: it would be \
                     written through; give the path it leads to instead (root never follows another user's \
                     symlink, --share or not)",
                    p.display(),
                    md.uid()
                );
            }
        }
        // What the name is is pinned first (O_PATH, which never blocks on a FIFO; with
        // O_NOFOLLOW, so a symlink swapped in after the look above is pinned as a symlink,
        // not followed) and judged on that descriptor, then that very file is opened for
        // writing: as root, another user's FIFO or device (or one swapped in for the name)
        // is not written, except this process's own standard streams (`/dev/stdout`,
        // `/dev/fd/N`), and a symlink is followed only where no other user can swap it.
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let own_stream = ["/dev/stdout", "/dev/stderr", "/dev/null"].iter().any(|s| p == std::path::Path::new(s))
            || p.starts_with("/dev/fd/")
            || p.starts_with("/proc/self/fd/");
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).context("a NUL byte in the path")?;
        let pin = |follow: bool| -> Result<(OwnedFd, libc::stat)> {
            let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
            // SAFETY: open reads the NUL-terminated path; the descriptor is owned below.
            let raw = unsafe { libc::open(c.as_ptr(), flags) };
            if raw < 0 {
                return Err(std::io::Error::last_os_error()).with_context(|| format!("opening {}", p.display()));
            }
            // SAFETY: a descriptor just opened and owned by nothing else.
            let fd = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: fstat fills the struct for our descriptor (O_PATH descriptors allow it).
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
                return Err(std::io::Error::last_os_error()).with_context(|| format!("{}", p.display()));
            }
            Ok((fd, st))
        };
        let (mut pinned, mut st) = pin(own_stream || !root)?;
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            // Root's own symlink, in a path every piece of which is root's (checked above
            // unless --share): nobody else can swap it, so it is followed.
            if st.st_uid != 0 || share {
                anyhow::bail!(
                    "{} is a symlink{} to a pipe or device, and fwdscope runs as root: it is not followed; give the \
                     path it leads to instead",
                    p.display(),
                    if st.st_uid != 0 { format!(" user {} owns", st.st_uid) } else { " in a shared path".into() }
                );
            }
            (pinned, st) = pin(true)?;
        }
        let kind = st.st_mode & libc::S_IFMT;
        if kind == libc::S_IFREG || kind == libc::S_IFDIR {
            anyhow::bail!("{}: replaced by a file or directory while it was being opened; not written", p.display());
        }
        let owner = st.st_uid;
        if root && !share && !own_stream && owner != 0 {
            anyhow::bail!(
                "{}: a pipe or device user {owner} owns, and fwdscope runs as root: not written; pass --share to \
                 write there anyway",
                p.display()
            );
        }
        let via = format!("/proc/self/fd/{}", pinned.as_raw_fd());
        let mut f =
            std::fs::OpenOptions::new().write(true).open(&via).with_context(|| format!("opening {}", p.display()))?;
        return std::io::Write::write_all(&mut f, bytes).with_context(|| format!("writing {}", p.display()));
    }
    collector::outdir::write_atomic_as(p, bytes, mode, share).with_context(|| format!("writing {}", p.display()))
}

pub fn run(a: &ExportArgs) -> Result<()> {
    let rules = analyzer::rules::Rules::builtin_with(a.stages.as_deref())?;
    // One symbolizer: the binaries and kallsyms it loads serve the stacks and pprof.
    let (mut profile, mut sym): (Profile, Symbolizer) =
        analyzer::input::open_with(&a.input, a.strict)?.profile(&rules, &a.symbols.paths())?;
    profile.svg_options.keep_startup = a.keep_startup_frames;
    for w in &profile.warnings {
        eprintln!("warning: {}: {w}", collector::printable(a.input.display().to_string()));
    }
    let title = format!("fwdscope: {} ({})", a.input.display(), profile.event);
    let bytes = profile.encode(a.format, &title, &mut sym)?;
    match &a.output {
        Some(p) => write_output(p, &bytes, if a.share { 0o644 } else { 0o600 }, a.share)?,
        None => {
            if a.format.is_binary() {
                // The format as the user typed it (`pprof`), not the Rust name.
                let name = clap::ValueEnum::to_possible_value(&a.format)
                    .map_or_else(|| format!("{:?}", a.format).to_lowercase(), |v| v.get_name().to_string());
                anyhow::bail!("-f {name} is binary, not for a terminal: name a file with -o");
            }
            std::io::Write::write_all(&mut std::io::stdout().lock(), &bytes)?;
        }
    }
    for w in sym.warnings() {
        eprintln!("# WARNING: {w}");
    }
    eprintln!("# {}", profile.summary());
    Ok(())
}
