//! The collector's one error type and its `Result` alias.

use std::path::PathBuf;

/// Everything that can go wrong while collecting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// perf_event_open refused for lack of privilege.
    #[error(
        "perf_event_open {what}: permission denied (kernel.perf_event_paranoid = {paranoid}); \
         run as root, give the binary CAP_PERFMON, or lower it with `sysctl kernel.perf_event_paranoid=1` \
         (-1 for system-wide and kernel samples)"
    )]
    Permission { what: String, paranoid: String },
    /// The process to attach to (-p) belongs to another user: perf_event_paranoid is not
    /// what refuses it.
    #[error(
        "process {pid} belongs to uid {owner}, not to this user (uid {me}): sampling another user's process needs \
         root or CAP_SYS_PTRACE (the kernel checks ptrace access); lowering kernel.perf_event_paranoid does not help"
    )]
    ForeignProcess { pid: i32, owner: u32, me: u32 },
    /// The event exists by name but this machine cannot count it.
    #[error("event `{event}` is not supported on this machine: {source}")]
    Unsupported {
        event: String,
        #[source]
        source: std::io::Error,
    },
    /// An event name perf would not know either.
    #[error("unknown event `{0}`: expected one of {1}")]
    UnknownEvent(String, String),
    /// Any other perf_event_open or ring-buffer failure.
    #[error("perf_event_open {what}: {source}")]
    Perf {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The target process does not exist (or exited before we attached).
    #[error("process {0} does not exist")]
    NoSuchProcess(i32),
    /// A file could not be read or written (disk full shows here, naming the file).
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file a reader was given is not what it should be (not a regular file, too
    /// large): nothing of it was read.
    #[error("{path}: {msg}")]
    File { path: PathBuf, msg: String },
    /// An output directory cannot be claimed (not fwdscope's, in use, another user's).
    #[error("{path}: {msg}")]
    Output { path: PathBuf, msg: String },
    /// The output directory already holds a recording.
    #[error("{0}: output exists; pass --force to replace it, or choose another -o")]
    OutputExists(PathBuf),
    /// A recording is missing parts or has malformed ones.
    #[error("recording {path}: {msg}")]
    Recording { path: PathBuf, msg: String },
    /// Reading would pass the read's memory budget (see
    /// [`crate::recording::decode::DecodeBudget`]): the read stops, nothing is skipped.
    #[error("{path}: {msg}")]
    Memory { path: PathBuf, msg: String },
    /// Parquet writing or reading failed.
    #[error("{path}: parquet: {msg}")]
    Parquet { path: PathBuf, msg: String },
    /// The program to record could not be executed (its exec failed after the fork: a
    /// script whose interpreter is missing, a binary for another machine).
    #[error("{}: could not be started: {source}{}", crate::printable(.program.display().to_string()), exec_hint(.source))]
    Exec {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Bad options.
    #[error("{0}")]
    Config(String),
    /// The forwarder's stats segment could not be read.
    #[error(transparent)]
    Segment(#[from] fwd_abi::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

/// What an exec error most likely means, for the message.
fn exec_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT) => " (the file exists, so its interpreter (#! line) or its loader is missing)",
        Some(libc::ENOEXEC) => " (not a program this machine runs: no #! line, or built for another architecture)",
        Some(libc::EACCES) => " (its interpreter, or a directory on the way, may not be executed by this user)",
        _ => "",
    }
}
