//! The lab's namespaces and links: three network namespaces joined by two veth pairs,
//! every address inside 198.18.0.0/15:
//!
//! ```text
//!  NAME-snd                 NAME-fwd                          NAME-sink
//!  NAME-s0 198.18.0.1/30 -- NAME-f0 198.18.0.2/30
//!                           NAME-f1 198.18.0.5/30 -- NAME-k0 198.18.0.6/30
//!                                                             local 198.18.0.0/15 dev lo
//! ```
//!
//! The sender routes the destination range 198.19.0.0/16 to the forwarding namespace. A
//! route table is generated (`--routes N`) or loaded (`--table FILE`), every route inside
//! 198.19.0.0/16 via the sink, which owns the whole lab range. Then, by [`Mode`]:
//! - `kernel`: the forwarding namespace forwards with the kernel (net.ipv4.ip_forward=1)
//!   over those routes;
//! - `fwdscope`: kernel forwarding is off, and the bundled forwarder runs in the forwarding
//!   namespace on NAME-f0 -> NAME-f1 over the same routes, with `--driver afxdp` (the
//!   default where libxdp and AF_XDP work; with N workers every veth gets N queues, one
//!   per worker) or `--driver afpacket` (started detached, or with `no_start` the command is
//!   printed, to run under `top`/`record`);
//! - `xdp`: fwdscope's XDP forwarder (bpf_fib_lookup over the kernel's FIB, as in kernel
//!   mode, with forwarding on) attached to NAME-f0 by a `fwdscope lab xdp-forward` process
//!   that publishes its counters (see [`crate::xdp_forwarder`]).
//!
//! Neighbours are static (nud permanent) both ways, so frames built by the sender and by
//! the forwarder carry the right MACs from the first packet. IPv6 is off in the namespaces.
//! In fwdscope mode an nft netdev ingress rule on NAME-f0 drops each input frame after the
//! forwarder's tap, so the namespace's own IP stack does not process it too. [`Sink::Discard`]
//! counts frames at the sink's interface and discards them at once; `rps_cpu` and
//! `forwarder_cpu` place the work (what the bench uses).
//!
//! [`up`] is idempotent (an incomplete lab, or one built with other settings, is torn down
//! and rebuilt); [`Lab::down`] stops the lab's forwarder and deletes whatever namespaces of
//! that name exist, so it also cleans up after a crash. Namespaces and links go through
//! iproute2 (`ip`); the lab's state (mode, sink, settings, routes, forwarder PID and log)
//! lives in /run/fwdscope-lab/NAME/.

use crate::error::{bail, Context};
use crate::process::same_process;
pub use crate::process::start_time;
use crate::xdp_forwarder::XdpAttach;
use crate::{Error, Result};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The forwarder program the lab starts (fwdscope mode): `fwdscope` with `forward`, or the
/// standalone `fwdscope-forwarder` with no arguments; the lab adds its own flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForwarderProgram {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// How to bring a lab up: the `lab up` flags, defaults as shown there.
#[derive(Debug, Clone, clap::Args)]
pub struct UpOptions {
    /// Lab name: prefix of its namespaces and interfaces (1 to 8 of [a-z0-9]).
    #[arg(long, default_value = "fsl")]
    pub name: String,
    /// Generate this many routes inside 198.19.0.0/16 for the forwarding namespace
    /// [default: one 198.19.0.0/16 route].
    #[arg(long, conflicts_with = "table")]
    pub routes: Option<u32>,
    /// Load the forwarding namespace's routes from FILE (`PREFIX/LEN` per line, each inside
    /// 198.19.0.0/16; `#` comments).
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// Who forwards in the forwarding namespace.
    #[arg(long, value_enum, default_value_t = Mode::Kernel)]
    pub mode: Mode,
    /// fwdscope and xdp modes: do not start the forwarder; print its command instead.
    #[arg(long)]
    pub no_start: bool,
    /// What the sink does with what arrives.
    #[arg(long, value_enum, default_value_t = Sink::Ip)]
    pub sink: Sink,
    /// Steer the forwarding namespace's receive processing (RPS on NAME-f0) to this CPU
    /// [default: none; it runs on the CPU that sent the frame].
    #[arg(long)]
    pub rps_cpu: Option<usize>,
    /// fwdscope and xdp modes: run the forwarder (xdp: the process publishing the XDP
    /// forwarder's counters) on this CPU only [default: any CPU]. dpdk mode: l3fwd's one
    /// lcore [default: the last CPU].
    #[arg(long)]
    pub forwarder_cpu: Option<usize>,
    /// fwdscope mode: flags for the forwarder (after `--`), e.g. `--cache nocache`.
    #[arg(last = true)]
    pub forwarder_flags: Vec<String>,
    /// xdp mode: how the XDP forwarder attaches to NAME-f0.
    #[arg(long, value_enum, default_value_t = XdpAttach::Auto)]
    pub xdp_mode: XdpAttach,
    /// fwdscope and xdp modes: the fwdscope program (not a flag: the caller's choice).
    #[arg(skip)]
    pub forwarder: ForwarderProgram,
    /// fwdscope mode: the forwarder's packet I/O [default: afxdp where libxdp and AF_XDP
    /// work, else afpacket]. With afxdp and `-- --workers N` every veth gets N queues.
    #[arg(long, value_enum)]
    pub driver: Option<LabDriver>,
    /// Rx and tx queues of every veth (1 to 64) [default: with afxdp, the forwarder's
    /// `--workers`; else 1]. `--queues 1 -- --workers N` runs N afxdp workers on one queue,
    /// flows spread over them by fwdscope's XDP program.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub queues: Option<u16>,
    /// dpdk mode's flags (`--pmd`, `--hugepages`).
    #[command(flatten)]
    pub dpdk: crate::dpdk::DpdkOptions,
}

/// The bundled forwarder's packet I/O in the lab.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabDriver {
    /// AF_XDP sockets (libxdp's XSK program on NAME-f0, one shared UMEM).
    Afxdp,
    /// AF_PACKET rings (a tap on NAME-f0, a TPACKET_V2 tx ring on NAME-f1).
    Afpacket,
}

impl LabDriver {
    pub fn name(self) -> &'static str {
        match self {
            LabDriver::Afxdp => "afxdp",
            LabDriver::Afpacket => "afpacket",
        }
    }
}

/// The worker count the forwarder flags ask for (`--workers N` or `--workers=N`; 1).
pub fn workers_flag(forwarder_flags: &[String]) -> usize {
    let mut workers = 1usize;
    for (i, f) in forwarder_flags.iter().enumerate() {
        let v = match f.strip_prefix("--workers=") {
            Some(v) => Some(v),
            None if f == "--workers" => forwarder_flags.get(i + 1).map(String::as_str),
            None => None,
        };
        if let Some(n) = v.and_then(|v| v.parse().ok()) {
            workers = n;
        }
    }
    workers
}

/// The driver `lab up` picks when none is given, and why: afxdp when libxdp loads and this
/// kernel has AF_XDP; afpacket otherwise.
pub fn default_driver() -> (LabDriver, String) {
    if let Err(e) = forwarder::nic::xdp_sys::libxdp() {
        return (LabDriver::Afpacket, format!("afpacket: {e}"));
    }
    // SAFETY: socket(2); closed at once.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return (
            LabDriver::Afpacket,
            format!("afpacket: this kernel refuses AF_XDP sockets ({})", std::io::Error::last_os_error()),
        );
    }
    // SAFETY: our descriptor.
    unsafe { libc::close(fd) };
    (LabDriver::Afxdp, "afxdp: libxdp and AF_XDP available".into())
}

/// Who forwards in the forwarding namespace.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The Linux kernel (net.ipv4.ip_forward=1).
    Kernel,
    /// The bundled forwarder over AF_PACKET.
    Fwdscope,
    /// DPDK's l3fwd (built from the distribution's example at first use) through the
    /// af_packet or af_xdp PMD (`--pmd`); see the `dpdk` module.
    Dpdk,
    /// fwdscope's XDP forwarder (bpf_fib_lookup over the kernel's FIB, devmap redirect).
    Xdp,
}

/// What the lab's sink does with what arrives.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// Its IP stack receives each packet; counted by its IP InReceives.
    Ip,
    /// The forwarding namespace's neighbour entry for the sink names a MAC the sink does
    /// not own: frames are counted at its interface (rx_packets) and discarded at once
    /// (PACKET_OTHERHOST), so the sink costs next to nothing on whichever CPU delivers
    /// them. `lab bench` uses it, keeping the sink's own IP work out of both forwarders'
    /// figures.
    Discard,
}

/// The MAC `--sink discard` sends to: locally administered, owned by nobody in the lab.
pub const DISCARD_MAC: &str = "02:66:73:00:00:01";

impl Sink {
    pub fn name(self) -> &'static str {
        match self {
            Sink::Ip => "ip",
            Sink::Discard => "discard",
        }
    }
}

/// How the lab is built besides its mode and routes (`lab up` flags; defaults there:
/// `--sink ip`, no RPS).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabOptions {
    pub sink: Sink,
    /// RPS target CPU for the forwarding namespace's input interface.
    pub rps_cpu: Option<usize>,
    /// Queues of every veth (1; an afxdp forwarder with N workers gets N: one input and
    /// one output queue per worker, the sender's frames spread over them by flow hash).
    pub queues: usize,
}

impl Mode {
    /// Whether the forwarding namespace's FIB holds the lab's routes, with forwarding on
    /// (the kernel forwards, or the XDP forwarder's bpf_fib_lookup looks them up).
    pub fn kernel_fib(self) -> bool {
        matches!(self, Mode::Kernel | Mode::Xdp)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Fwdscope => "fwdscope",
            Mode::Dpdk => "dpdk",
            Mode::Xdp => "xdp",
        }
    }
}

/// The lab's names.
pub struct Lab {
    pub name: String,
}

pub(crate) fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip").args(args).output().context("running `ip` (iproute2)")?;
    if !out.status.success() {
        return Err(Error::Command {
            what: format!("`ip {}`", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Set sysctls (`name=value`) inside namespace `ns`.
fn sysctl(ns: &str, settings: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw"])
        .args(settings)
        .output()
        .context("running `ip netns exec ... sysctl`")?;
    if !out.status.success() {
        bail!("setting {} in {ns}: {}", settings.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Run `ip -n NS -batch -` with `lines`.
fn ip_batch(ns: &str, lines: &str) -> Result<()> {
    let out = with_stdin(Command::new("ip").args(["-n", ns, "-batch", "-"]), lines, "`ip -batch`")?;
    if !out.status.success() {
        bail!("`ip -n {ns} -batch` failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Run `cmd` with `input` on its standard input; its stderr is captured, stdout dropped.
pub(crate) fn with_stdin(cmd: &mut Command, input: &str, what: &str) -> Result<std::process::Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {what}"))?;
    child.stdin.take().with_context(|| format!("{what}: no stdin"))?.write_all(input.as_bytes())?;
    child.wait_with_output().with_context(|| format!("waiting for {what}"))
}

/// The held lock of a lab (released when dropped: the file closes).
pub struct LabLock(std::fs::File, std::path::PathBuf);

impl LabLock {
    /// Remove the lock file, still holding it (`lab down`: nothing of the lab is left). A
    /// command waiting on the removed file finds, once it holds it, that the name now
    /// leads elsewhere or nowhere, and locks afresh (see [`Lab::lock`]).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.1);
    }

    /// Whether the held file is still the one at the lock's name.
    fn current(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.0.metadata(), std::fs::symlink_metadata(&self.1)) {
            (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
            _ => false,
        }
    }
}

/// Whether `pid` still runs the lab's forwarder: it exists, is not a zombie (a dead child
/// not reaped yet, or an orphan whose init does not reap), it is the process the lab
/// started (see [`same_process`]), and its program is fwdscope's.
fn forwarder_runs(pid: i32, started: Option<u64>) -> bool {
    if pid <= 0 || !fwd_abi::segment::process_runs(pid as u32) || !same_process(pid, started) {
        return false;
    }
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.file_name().is_some_and(|f| f.to_string_lossy().starts_with("fwdscope")))
        .unwrap_or(true)
}

/// The lab's destination range: routes must stay inside it.
pub const DEST: (u32, u8) = (0xC613_0000, 16); // 198.19.0.0/16

pub fn inside_dest(addr: u32, len: u8) -> bool {
    len >= DEST.1 && (addr >> (32 - DEST.1)) == (DEST.0 >> (32 - DEST.1))
}

/// `n` distinct routes inside 198.19.0.0/16: /24s first, then /25../32 splits of what is
/// left, in a fixed order.
pub fn generate_routes(n: u32) -> Result<Vec<(u32, u8)>> {
    if n == 0 || n > 65_536 {
        bail!("--routes {n}: expected 1 to 65536 routes inside 198.19.0.0/16");
    }
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n.min(256) {
        v.push((DEST.0 | (i << 8), 24));
    }
    let mut k = 0u32;
    while (v.len() as u32) < n {
        // Host routes 198.19.X.Y (Y odd) inside the /24s; every route goes to the sink.
        let x = k % 256;
        let y = 1 + 2 * (k / 256);
        v.push((DEST.0 | (x << 8) | y, 32));
        k += 1;
    }
    Ok(v)
}

/// The lab's route table as the forwarder reads it (routes.txt): `PREFIX/LEN via SINK`.
pub fn routes_text(routes: &[(u32, u8)]) -> String {
    let mut table = String::with_capacity(routes.len() * 40);
    for (a, l) in routes {
        table.push_str(&format!("{}/{l} via 198.18.0.6\n", std::net::Ipv4Addr::from(*a)));
    }
    table
}

/// Routes of a table file (`PREFIX/LEN` per line, `#` comments; host bits are cleared),
/// each inside 198.19.0.0/16; a bad line is an error naming the file and line. A prefix
/// listed again is kept once, at its first line, and counted: the second of the pair
/// returned. So at most 131,071 routes (every prefix of length 16 to 32 inside the range)
/// come out, whatever the file's length.
pub fn load_routes(path: &std::path::Path) -> Result<(Vec<(u32, u8)>, usize)> {
    // The checked opener: a FIFO or a device is refused by name, never waited on.
    let text = collector::files::read_to_string(path, collector::files::Kind::Text)?;
    let mut v = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut duplicates = 0usize;
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        // The line as it may be printed: at most 80 characters, control characters escaped.
        let mut shown: String = collector::printable(t.chars().take(80).collect());
        if t.chars().count() > 80 {
            shown.push_str("...");
        }
        let bad = || {
            Error::Config(format!(
                "{}:{}: `{shown}`: expected PREFIX/LEN inside 198.19.0.0/16",
                forwarder::error::shown(path),
                i + 1
            ))
        };
        let (a, len) = forwarder::table::parse_address_and_length(t).map_err(|_| bad())?;
        if !t.contains('/') || !inside_dest(a, len) {
            return Err(bad());
        }
        let route = (a & forwarder::fib::mask(len), len);
        if seen.insert(route) {
            v.push(route);
        } else {
            duplicates += 1;
        }
    }
    if v.is_empty() {
        bail!("{}: no routes", path.display());
    }
    Ok((v, duplicates))
}

impl Lab {
    pub fn new(name: &str) -> Result<Lab> {
        if name.is_empty() || name.len() > 8 || !name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
            bail!("lab name `{name}`: expected 1 to 8 characters of [a-z0-9] (it prefixes interface names)");
        }
        Ok(Lab { name: name.to_string() })
    }

    pub fn ns(&self, role: &str) -> String {
        format!("{}-{role}", self.name)
    }

    fn namespaces(&self) -> [String; 3] {
        [self.ns("snd"), self.ns("fwd"), self.ns("sink")]
    }

    /// Which of the lab's namespaces exist.
    pub fn existing(&self) -> Result<Vec<String>> {
        let list = ip(&["netns", "list"])?;
        let names: Vec<&str> = list.lines().filter_map(|l| l.split_whitespace().next()).collect();
        Ok(self.namespaces().into_iter().filter(|n| names.contains(&n.as_str())).collect())
    }

    /// Where dpdk mode's l3fwd runs (the `dpdk` module's view of the lab).
    pub fn dpdk(&self) -> crate::dpdk::Site {
        crate::dpdk::Site { name: self.name.clone(), state_dir: self.state_dir(), fwd_ns: self.ns("fwd") }
    }

    /// The lab's state directory.
    pub fn state_dir(&self) -> std::path::PathBuf {
        std::path::PathBuf::from("/run/fwdscope-lab").join(&self.name)
    }

    /// Write one file of the lab's state.
    fn write_state(&self, file: &str, text: &str) -> Result<()> {
        let p = self.state_dir().join(file);
        std::fs::write(&p, text).map_err(|e| Error::Io { path: p, source: e })
    }

    /// The stats segment of the lab's forwarder (fwdscope mode).
    pub fn segment_path(&self) -> std::path::PathBuf {
        // In the lab's state directory (root's, under /run): no other user can plant a
        // file at this name.
        self.state_dir().join("forwarder.stats")
    }

    /// What the XDP forwarder (xdp mode) uses of the lab: its names and paths.
    pub fn xdp_site(&self) -> crate::xdp_forwarder::Site {
        crate::xdp_forwarder::Site {
            name: self.name.clone(),
            fwd_ns: self.ns("fwd"),
            sink_ns: self.ns("sink"),
            state_dir: self.state_dir(),
            segment: self.segment_path(),
        }
    }

    /// The mode the lab was built in (none when it is down).
    pub fn mode(&self) -> Option<Mode> {
        match std::fs::read_to_string(self.state_dir().join("mode")).ok()?.trim() {
            "kernel" => Some(Mode::Kernel),
            "fwdscope" => Some(Mode::Fwdscope),
            "dpdk" => Some(Mode::Dpdk),
            "xdp" => Some(Mode::Xdp),
            _ => None,
        }
    }

    /// Hold the lab's lock (`/run/fwdscope-lab/NAME.lock`, flock) until the guard drops.
    /// When another process holds it, this says which one (on stderr) and waits for it.
    /// `lab down` removes the file while it holds it: a waiter that then gets the removed
    /// file locks the one at the name instead.
    pub fn lock(&self) -> Result<LabLock> {
        loop {
            let held = self.lock_once()?;
            if held.current() {
                return Ok(held);
            }
        }
    }

    fn lock_once(&self) -> Result<LabLock> {
        use std::io::{Read, Seek};
        use std::os::fd::AsRawFd;
        let dir = self.state_dir();
        let parent = dir.parent().unwrap_or(&dir).to_path_buf();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&parent)
            .with_context(|| format!("creating {}", parent.display()))?;
        let path = parent.join(format!("{}.lock", self.name));
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a file we hold open.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            let msg = format!(
                "lab {}: waiting for {} (it holds {})\n",
                self.name,
                match holder.trim() {
                    "" => "another fwdscope lab command".to_string(),
                    pid => format!("fwdscope lab pid {pid}"),
                },
                path.display()
            );
            eprint!("{msg}");
            // SAFETY: as above, blocking.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
                return Err(std::io::Error::last_os_error()).with_context(|| format!("locking {}", path.display()));
            }
        }
        let _ = f.set_len(0);
        let _ = f.rewind();
        let _ = write!(f, "{}", std::process::id());
        Ok(LabLock(f, path))
    }

    /// The lab's forwarder, if one was started and still runs (the same process: its PID
    /// and start time as recorded).
    pub fn forwarder_pid(&self) -> Option<i32> {
        self.recorded_forwarder().filter(|&(p, t)| forwarder_runs(p, t)).map(|(p, _)| p)
    }

    /// `forwarder.pid`: `PID START` (start time in clock ticks after boot; older labs
    /// wrote the PID alone).
    fn recorded_forwarder(&self) -> Option<(i32, Option<u64>)> {
        let text = std::fs::read_to_string(self.state_dir().join("forwarder.pid")).ok()?;
        let mut it = text.split_whitespace();
        let pid: i32 = it.next()?.parse().ok().filter(|&p: &i32| p > 0)?;
        let start = it.next().and_then(|t| t.parse().ok());
        Some((pid, start))
    }

    /// When the lab started a forwarder that no longer runs: its PID and the last lines of
    /// its log, for a message that says it is dead.
    pub fn dead_forwarder(&self) -> Option<String> {
        if self.mode() == Some(Mode::Dpdk) {
            return crate::dpdk::dead(&self.dpdk());
        }
        if !matches!(self.mode(), Some(Mode::Fwdscope | Mode::Xdp)) || self.state_dir().join("no-start").exists() {
            return None;
        }
        let (pid, started) = self.recorded_forwarder()?;
        if forwarder_runs(pid, started) {
            return None;
        }
        let tail = collector::files::log_tail(&self.state_dir().join("forwarder.log"), 3);
        Some(format!(
            "the lab's forwarder (pid {pid}) is dead{}; `fwdscope lab up --name {}` starts it again",
            if tail.is_empty() { String::new() } else { format!(" (its log ends: {tail})") },
            self.name
        ))
    }

    /// Stop the lab's forwarder: through its control block, then SIGTERM, then SIGKILL.
    fn stop_forwarder(&self) {
        let Some(pid) = self.forwarder_pid() else { return };
        if let Ok(seg) = fwd_abi::Segment::open(&self.segment_path()) {
            seg.request_stop();
        }
        for (i, sig) in [(40, 0), (20, libc::SIGTERM), (20, libc::SIGKILL)] {
            if sig != 0 {
                // SAFETY: signalling the lab's own forwarder.
                unsafe { libc::kill(pid, sig) };
            }
            for _ in 0..i {
                // SAFETY: signal 0 only checks for existence; reap if it is our child.
                if unsafe { libc::kill(pid, 0) } != 0 {
                    return;
                }
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }

    /// [`Lab::down`] holding the lab's lock, and the lock file removed after it: nothing of
    /// the lab is left (`lab down`, and `lab bench` at its end on every exit path).
    pub fn down_and_unlock(&self) -> Result<usize> {
        let lock = self.lock()?;
        let removed = self.down()?;
        lock.remove();
        Ok(removed)
    }

    /// Delete every namespace of the lab that exists; returns how many.
    pub fn down(&self) -> Result<usize> {
        self.stop_forwarder();
        // dpdk mode: l3fwd, and its runtime directory (also of a lab whose state is gone).
        crate::dpdk::stop(&self.dpdk());
        // A forwarder killed with SIGKILL leaves libxdp's program attached: detach it (the
        // namespace's deletion below would release it too, with the interface).
        let _ = ip(&["-n", &self.ns("fwd"), "link", "set", "dev", &format!("{}-f0", self.name), "xdp", "off"]);
        // The XDP forwarder's pass program on the egress veth's peer (xdp mode), likewise.
        let _ = ip(&["-n", &self.ns("sink"), "link", "set", "dev", &format!("{}-k0", self.name), "xdp", "off"]);
        let _ = std::fs::remove_dir_all(self.state_dir());
        let _ = std::fs::remove_file(self.segment_path());
        let existing = self.existing()?;
        for n in &existing {
            ip(&["netns", "del", n])?;
        }
        Ok(existing.len())
    }

    /// Whether the lab is complete: all namespaces, the forwarding sysctl, both veth pairs up.
    /// (Routes deleted from its FIB by hand are [`Lab::routes_missing`]: the lab still
    /// forwards, dropping their packets as no route.)
    pub fn complete(&self) -> Result<bool> {
        if self.existing()?.len() != 3 {
            return Ok(false);
        }
        let Some(mode) = self.mode() else { return Ok(false) };
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("fwd"), "sysctl", "-n", "net.ipv4.ip_forward"])
            .output()
            .context("running `ip netns exec ... sysctl`")?;
        let want = if mode.kernel_fib() { "1" } else { "0" };
        if String::from_utf8_lossy(&out.stdout).trim() != want {
            return Ok(false);
        }
        if matches!(mode, Mode::Fwdscope | Mode::Xdp)
            && !self.state_dir().join("no-start").exists()
            && self.forwarder_pid().is_none()
        {
            return Ok(false);
        }
        if mode == Mode::Dpdk && !self.state_dir().join("no-start").exists() && crate::dpdk::pid(&self.dpdk()).is_none()
        {
            return Ok(false);
        }
        for (ns, ifname) in [("snd", "s0"), ("fwd", "f0"), ("fwd", "f1"), ("sink", "k0")] {
            let link = ip(&["-n", &self.ns(ns), "-br", "link", "show", &format!("{}-{ifname}", self.name)]);
            if !link.is_ok_and(|l| l.contains("UP")) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Where the kernel's FIB is looked up (kernel and xdp modes): how many of the lab's
    /// routes (routes.txt) its forwarding namespace lacks, and how many it should hold; None
    /// when it holds them all (or the mode keeps its routes elsewhere). A route deleted by
    /// hand leaves its packets to be dropped as no route: `status` and `send` say so, `up`
    /// rebuilds.
    pub fn routes_missing(&self) -> Option<(usize, usize)> {
        if !self.mode()?.kernel_fib() {
            return None;
        }
        let want = std::fs::read_to_string(self.state_dir().join("routes.txt")).map_or(0, |t| t.lines().count());
        let dest = format!("{}/{}", std::net::Ipv4Addr::from(DEST.0), DEST.1);
        let have = ip(&["-n", &self.ns("fwd"), "-4", "route", "show", "root", &dest])
            .map_or(0, |o| o.lines().filter(|l| l.contains(" via ")).count());
        (have < want).then(|| (want - have, want))
    }

    /// [`Lab::routes_missing`] in words, for `status` and `send`.
    pub fn routes_missing_note(&self) -> Option<String> {
        self.routes_missing().map(|(n, of)| {
            format!(
                "{n} of the lab's {of} routes are missing from {}'s FIB (deleted by hand?): their packets are dropped \
                 as no route; `fwdscope lab up --name {}` restores them",
                self.ns("fwd"),
                self.name
            )
        })
    }

    /// The MAC address of `ifname` in namespace `ns`.
    fn mac(&self, ns: &str, ifname: &str) -> Result<String> {
        let json = ip(&["-n", &self.ns(ns), "-j", "link", "show", &format!("{}-{ifname}", self.name)])?;
        let v: serde_json::Value = serde_json::from_str(&json).context("parsing `ip -j link`")?;
        v[0]["address"].as_str().map(str::to_string).context("no MAC address in `ip -j link`")
    }

    /// Build the lab with `routes` in the forwarding namespace, forwarded by `mode`.
    pub fn up(&self, routes: &[(u32, u8)], mode: Mode, opts: &LabOptions) -> Result<()> {
        let (snd, fwd, sink) = (self.ns("snd"), self.ns("fwd"), self.ns("sink"));
        let n = &self.name;
        for ns in [&snd, &fwd, &sink] {
            ip(&["netns", "add", ns])?;
        }
        // Two veth pairs, each end with `opts.queues` rx and tx queues.
        let q = opts.queues.max(1).to_string();
        for (a, a_ns, b, b_ns) in [("s0", &snd, "f0", &fwd), ("f1", &fwd, "k0", &sink)] {
            let (a, b) = (format!("{n}-{a}"), format!("{n}-{b}"));
            ip(&[
                "link",
                "add",
                &a,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                a_ns,
                "type",
                "veth",
                "peer",
                "name",
                &b,
                "numtxqueues",
                &q,
                "numrxqueues",
                &q,
                "netns",
                b_ns,
            ])?;
        }
        // IPv4 only: no IPv6 link-local chatter (router solicitations, MLD) on the lab's
        // links, which would also count as frames at a discard sink.
        for ns in [&snd, &fwd, &sink] {
            sysctl(ns, &["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])?;
        }
        ip_batch(&snd, &format!("addr add 198.18.0.1/30 dev {n}-s0\nlink set lo up\nlink set {n}-s0 up\nroute add 198.19.0.0/16 via 198.18.0.2\n"))?;
        ip_batch(&fwd, &format!("addr add 198.18.0.2/30 dev {n}-f0\naddr add 198.18.0.5/30 dev {n}-f1\nlink set lo up\nlink set {n}-f0 up\nlink set {n}-f1 up\n"))?;
        ip_batch(&sink, &format!("addr add 198.18.0.6/30 dev {n}-k0\nlink set lo up\nlink set {n}-k0 up\nroute add local 198.18.0.0/15 dev lo\n"))?;
        // Static neighbours: the sender's frames go to f0, the forwarder's to k0.
        let f0 = self.mac("fwd", "f0")?;
        let k0 = match opts.sink {
            Sink::Ip => self.mac("sink", "k0")?,
            Sink::Discard => DISCARD_MAC.to_string(),
        };
        ip_batch(&snd, &format!("neigh replace 198.18.0.2 lladdr {f0} dev {n}-s0 nud permanent\n"))?;
        ip_batch(&fwd, &format!("neigh replace 198.18.0.6 lladdr {k0} dev {n}-f1 nud permanent\n"))?;
        sysctl(&fwd, &[&format!("net.ipv4.ip_forward={}", u8::from(mode.kernel_fib()))])?;
        let dir = self.state_dir();
        // Root's own: 0700, whatever the umask (it holds the forwarder's stats segment).
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        for d in [dir.as_path(), dir.parent().unwrap_or(&dir)] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("making {} private", d.display()))?;
        }
        let table = routes_text(routes);
        std::fs::write(dir.join("routes.txt"), &table).with_context(|| format!("writing {}", dir.display()))?;
        if mode.kernel_fib() {
            let batch: String = table.lines().map(|l| format!("route replace {l}\n")).collect();
            ip_batch(&fwd, &batch)?;
        }
        self.write_state("mode", mode.name())?;
        self.write_state("sink", opts.sink.name())?;
        if let Some(cpu) = opts.rps_cpu {
            self.steer_input(cpu)?;
        }
        if mode != Mode::Kernel {
            let note = self.drop_at_ingress()?;
            self.write_state("ingress", &note)?;
        }
        Ok(())
    }

    /// RPS: the forwarding namespace's receive processing of NAME-f0 on `cpu`.
    fn steer_input(&self, cpu: usize) -> Result<()> {
        check_cpu("--rps-cpu", cpu)?;
        let path = format!("/sys/class/net/{}-f0/queues/rx-0/rps_cpus", self.name);
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("fwd"), "sh", "-c", &format!("echo {:x} > {path}", 1u64 << cpu)])
            .output()
            .context("running `ip netns exec ... sh`")?;
        if !out.status.success() {
            bail!("setting {path} in {}: {}", self.ns("fwd"), String::from_utf8_lossy(&out.stderr).trim());
        }
        self.write_state("rps", &cpu.to_string())
    }

    /// fwdscope mode: a netdev ingress rule on NAME-f0 that drops every frame once the
    /// forwarder's AF_PACKET tap has its copy (taps run before ingress hooks), so the
    /// namespace's own IP stack does not process each frame a second time (forwarding is
    /// off there: it would only fail a route lookup). Needs `nft`; without it the lab
    /// works, slower, and says so. Returns that note.
    fn drop_at_ingress(&self) -> Result<String> {
        let ruleset = format!(
            "table netdev fwdscope_lab {{\n  chain ingress_f0 {{\n    type filter hook ingress device \"{}-f0\" priority 0; policy drop;\n  }}\n}}\n",
            self.name
        );
        let mut nft = Command::new("ip");
        nft.args(["netns", "exec", &self.ns("fwd"), "nft", "-f", "-"]);
        let out = with_stdin(&mut nft, &ruleset, "`ip netns exec ... nft`")?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            Ok(format!("frames dropped at {}-f0 ingress after the forwarder's tap (nft)", self.name))
        } else if err.contains("No such file") || err.contains("not found") {
            // `ip netns exec` reports a missing nft on stderr.
            Ok("no ingress drop (nft not installed): the namespace's IP stack also receives every frame".into())
        } else {
            bail!("nft ingress rule in {}: {}", self.ns("fwd"), err.trim())
        }
    }

    /// Record the forwarder's driver; with afxdp the ingress note says that XDP takes the
    /// frames before the stack (the nft rule stays, for frames the program passes).
    fn set_driver(&self, mode: Mode, driver: LabDriver) -> Result<()> {
        self.write_state("driver", driver.name())?;
        if mode == Mode::Fwdscope && driver == LabDriver::Afxdp {
            let nft = std::fs::read_to_string(self.state_dir().join("ingress")).unwrap_or_default().contains("(nft)");
            self.write_state(
                "ingress",
                &format!(
                    "frames redirected to the forwarder by XDP at {}-f0, before the namespace's IP stack{}",
                    self.name,
                    if nft { " (an nft ingress drop takes any it passes)" } else { "" }
                ),
            )?;
        }
        if mode == Mode::Xdp {
            let nft = std::fs::read_to_string(self.state_dir().join("ingress")).unwrap_or_default().contains("(nft)");
            self.write_state(
                "ingress",
                &if nft {
                    format!("frames forwarded by the XDP program at {}-f0; those it passes to the stack are dropped at ingress (nft), so only it forwards", self.name)
                } else {
                    format!("frames forwarded by the XDP program at {}-f0; those it passes go to the namespace's IP stack, which forwards them too (nft not installed)", self.name)
                },
            )?;
        }
        Ok(())
    }

    /// The forwarder's driver (written by `up`; afpacket for labs built before the option).
    pub fn driver(&self) -> LabDriver {
        match std::fs::read_to_string(self.state_dir().join("driver")).ok().as_deref().map(str::trim) {
            Some("afxdp") => LabDriver::Afxdp,
            _ => LabDriver::Afpacket,
        }
    }

    /// How the lab's sink counts (written by `up`; `ip` for labs built before the option).
    pub fn sink(&self) -> Sink {
        match std::fs::read_to_string(self.state_dir().join("sink")).ok().as_deref().map(str::trim) {
            Some("discard") => Sink::Discard,
            _ => Sink::Ip,
        }
    }

    /// The command that runs the bundled forwarder on the lab (fwdscope mode), before its
    /// own flags: `ip netns exec NAME-fwd FWDSCOPE forward --driver DRIVER ...`.
    pub fn forwarder_command(&self, fwd: &ForwarderProgram, extra: &[String]) -> Vec<String> {
        let n = &self.name;
        let mut v: Vec<String> = ["ip", "netns", "exec", &self.ns("fwd")].map(String::from).to_vec();
        v.push(fwd.program.display().to_string());
        v.extend(fwd.args.iter().cloned());
        v.extend(
            [
                "--driver",
                self.driver().name(),
                "--in",
                &format!("{n}-f0"),
                "--out",
                &format!("{n}-f1"),
                "--table",
                &self.state_dir().join("routes.txt").display().to_string(),
                "--stats",
                &self.segment_path().display().to_string(),
                "--duration",
                "0",
                "--no-pin",
            ]
            .map(String::from),
        );
        v.extend(extra.iter().cloned());
        v
    }

    /// Start the lab's forwarder detached (output in the state directory's forwarder.log)
    /// and wait until its stats segment says it runs.
    pub fn start_forwarder(&self, fwd: &ForwarderProgram, extra: &[String], cpu: Option<usize>) -> Result<i32> {
        self.spawn_forwarder(&self.forwarder_command(fwd, extra), cpu)
    }

    /// Start `cmd` as the lab's forwarder (detached: it outlives `lab up`; its output in
    /// forwarder.log, its PID and start time in forwarder.pid, on `cpu` if given) with the
    /// collector's one launcher, and wait until its stats segment says it runs; a
    /// forwarder that exits first is an error at once, with its status and log.
    pub(crate) fn spawn_forwarder(&self, cmd: &[String], cpu: Option<usize>) -> Result<i32> {
        let Some((program, args)) = cmd.split_first() else { bail!("no forwarder command") };
        let log_path = self.state_dir().join("forwarder.log");
        // Replaced, never written through (a symlink planted at the name is removed).
        let _ = std::fs::remove_file(&log_path);
        let log = collector::outdir::create_new(&log_path, 0o644)?;
        let opts =
            collector::child::SpawnOptions { output: Some(&log), die_with_parent: false, cpu, ..Default::default() };
        let mut child = collector::child::GatedChild::spawn_with(std::path::Path::new(program), args, &opts)
            .context("starting the lab's forwarder")?;
        child.release().context("starting the lab's forwarder")?;
        let pid = child.pid;
        // The start time with the PID: the pair names this process and no later one.
        let started = start_time(pid).map_or(String::new(), |t| format!(" {t}"));
        self.write_state("forwarder.pid", &format!("{pid}{started}"))?;
        let how = collector::launch::Wait {
            at: collector::launch::SegmentAt::Path(self.segment_path()),
            log: Some(&log_path),
            timeout: std::time::Duration::from_secs(30),
        };
        collector::launch::running(&mut child, &how).context("the lab's forwarder")?;
        Ok(child.detach())
    }

    /// What arrived at the sink: its IP InReceives, or with `--sink discard` the frames
    /// its interface received.
    pub fn sink_received(&self) -> Result<u64> {
        match self.sink() {
            Sink::Ip => {
                let out = Command::new("ip")
                    .args(["netns", "exec", &self.ns("sink"), "cat", "/proc/net/snmp"])
                    .output()
                    .context("running `ip netns exec ... cat /proc/net/snmp`")?;
                snmp_value(&String::from_utf8_lossy(&out.stdout), "Ip", "InReceives")
                    .context("no Ip InReceives in the sink's /proc/net/snmp")
            }
            Sink::Discard => {
                let k0 = format!("{}-k0", self.name);
                let json = ip(&["-n", &self.ns("sink"), "-s", "-j", "link", "show", &k0])?;
                let v: serde_json::Value = serde_json::from_str(&json).context("parsing `ip -j -s link`")?;
                v[0]["stats64"]["rx"]["packets"].as_u64().with_context(|| format!("no rx packet count for {k0}"))
            }
        }
    }

    /// Namespaces, interfaces, addresses, state and packet counters, and the route count.
    pub fn status(&self) -> Result<String> {
        let existing = self.existing()?;
        let dead = self.dead_forwarder();
        let mut s = format!(
            "lab {}: {}\n",
            self.name,
            if self.complete()? {
                "up"
            } else if dead.is_some() && !existing.is_empty() {
                "up, but its forwarder is DEAD"
            } else if existing.is_empty() {
                "down"
            } else {
                "incomplete (run `fwdscope lab down`)"
            }
        );
        for ns in &existing {
            s.push_str(&link_lines(ns)?);
        }
        if let Some(mode) = self.mode() {
            s.push_str(&self.mode_lines(mode));
        }
        for (file, what) in [("ingress", "input"), ("rps", "receive steered (RPS) to CPU")] {
            if let Ok(t) = std::fs::read_to_string(self.state_dir().join(file)) {
                s.push_str(&format!("{what} {}\n", t.trim()));
            }
        }
        if existing.contains(&self.ns("sink")) {
            match self.sink() {
                Sink::Ip => s.push_str(&format!("sink received {} IP packets\n", self.sink_received()?)),
                Sink::Discard => s.push_str(&format!(
                    "sink received {} frames at its interface (discard sink: counted, then dropped)\n",
                    self.sink_received()?
                )),
            }
        }
        Ok(s)
    }

    /// The status lines of a lab built in `mode`: its routes (and any missing), the XDP
    /// program's attachment, the driver, the forwarder's counters (or that it is dead or
    /// not running), DPDK's status.
    fn mode_lines(&self, mode: Mode) -> String {
        let mut s = String::new();
        let routes = std::fs::read_to_string(self.state_dir().join("routes.txt")).unwrap_or_default();
        s.push_str(&format!(
            "mode {}: {} routes via the sink in {}\n",
            mode.name(),
            routes.lines().count(),
            self.ns("fwd")
        ));
        if let Some(note) = self.routes_missing_note() {
            s.push_str(&format!("WARNING: {note}\n"));
        }
        if mode == Mode::Xdp {
            let note = crate::xdp_forwarder::attach_note(&self.state_dir());
            s.push_str(&format!("xdp forwarder: {}\n", note.as_deref().unwrap_or("not attached")));
        }
        if mode != Mode::Kernel {
            if mode == Mode::Fwdscope {
                s.push_str(&format!("driver {}\n", self.driver().name()));
            }
            s.push_str(&self.forwarder_line());
        }
        if mode == Mode::Dpdk {
            s.push_str(&crate::dpdk::status(&self.dpdk()));
        }
        s
    }

    /// The forwarder's status line: its PID and packet counters from its stats segment, or
    /// that it is dead (why) or not running.
    fn forwarder_line(&self) -> String {
        match (self.forwarder_pid(), fwd_abi::Segment::open(&self.segment_path())) {
            (Some(pid), Ok(seg)) => {
                let snap = seg.snapshot();
                use fwd_abi::Ctr;
                let drops: u64 = fwd_abi::drop_counters()
                    .map(|(i, _)| snap.workers.iter().map(|w| w.get(i).copied().unwrap_or(0)).sum::<u64>())
                    .sum();
                format!(
                    "forwarder pid {pid}: rx {} tx {} dropped {} (segment {})\n",
                    snap.total(Ctr::RxPackets),
                    snap.total(Ctr::TxPackets),
                    drops,
                    self.segment_path().display()
                )
            }
            _ => match self.dead_forwarder() {
                Some(dead) => format!("forwarder: DEAD: {dead}\n"),
                None => "forwarder: not running\n".to_string(),
            },
        }
    }
}

/// A line per interface of namespace `ns` but `lo`: its state and packet counters.
fn link_lines(ns: &str) -> Result<String> {
    let mut s = String::new();
    let json = ip(&["-n", ns, "-s", "-j", "link", "show"])?;
    let links: serde_json::Value = serde_json::from_str(&json).context("parsing `ip -j link`")?;
    for l in links.as_array().into_iter().flatten() {
        let name = l["ifname"].as_str().unwrap_or("?");
        if name == "lo" {
            continue;
        }
        let st = &l["stats64"];
        s.push_str(&format!(
            "{ns:<12} {name:<12} {:<6} rx {:>12} pkts {:>8} dropped   tx {:>12} pkts {:>8} dropped\n",
            l["operstate"].as_str().unwrap_or("?"),
            st["rx"]["packets"].as_u64().unwrap_or(0),
            st["rx"]["dropped"].as_u64().unwrap_or(0),
            st["tx"]["packets"].as_u64().unwrap_or(0),
            st["tx"]["dropped"].as_u64().unwrap_or(0),
        ));
    }
    Ok(s)
}

/// CPUs this process may run on.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `cpu` names one of this machine's CPUs (and fits an RPS mask).
pub fn check_cpu(flag: &str, cpu: usize) -> Result<()> {
    let n = cpu_count();
    if cpu >= n || cpu >= 64 {
        bail!("{flag} {cpu}: expected a CPU number from 0 to {}", n.min(64) - 1);
    }
    Ok(())
}

/// A value of /proc/net/snmp (`Ip: names...` then `Ip: values...`).
pub fn snmp_value(text: &str, group: &str, name: &str) -> Option<u64> {
    let tag = format!("{group}:");
    let mut lines = text.lines().filter(|l| l.split_whitespace().next() == Some(tag.as_str()));
    let names = lines.next()?;
    let values = lines.next()?;
    let i = names.split_whitespace().position(|n| n == name)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// Bring the lab up as `a` asks (idempotent: a complete lab built with the same settings
/// is left as it is; one built otherwise, or incomplete, is rebuilt; a failed build is
/// cleaned up). Returns what it did, in lines for the user.
pub fn up(a: &UpOptions) -> Result<String> {
    let lab = Lab::new(&a.name)?;
    // One `lab up` or `lab down` of a name at a time; a second waits and says for whom.
    let lock = lab.lock()?;
    let r = up_locked(a, &lab);
    // Refused before anything was built (or cleaned up after): no lab, so no lock file
    // left behind either, as after `lab down`.
    if r.is_err() && lab.existing().is_ok_and(|e| e.is_empty()) && !lab.state_dir().exists() {
        lock.remove();
    }
    r
}

fn up_locked(a: &UpOptions, lab: &Lab) -> Result<String> {
    let mut said = String::new();
    check_up_options(a)?;
    let (routes, duplicates) = match (&a.table, a.routes) {
        (Some(p), _) => load_routes(p)?,
        (None, Some(n)) => (generate_routes(n)?, 0),
        (None, None) => (vec![DEST], 0),
    };
    if let (Some(p), d) = (&a.table, duplicates) {
        if d > 0 {
            said.push_str(&format!(
                "lab {}: {}: {d} lines repeat a prefix listed before; each prefix is kept once, at its first line\n",
                lab.name,
                forwarder::error::shown(p)
            ));
        }
    }
    let (driver, driver_why) = match a.driver {
        Some(d) => (d, format!("{}: asked for", d.name())),
        None => default_driver(),
    };
    let spec = up_spec(a, driver);
    if !clear_for_build(a, lab, &spec, &routes, &mut said)? {
        return Ok(format!("lab {}: already up\n", lab.name));
    }
    let (pid, l3fwd_said) = build_and_start(a, lab, &routes, driver, &spec)?;
    let who = who_forwards(a, lab, pid, &driver_why);
    said.push_str(&format!(
        "lab {}: up: {} (198.18.0.1) -> {} (198.18.0.2 | 198.18.0.5, {who}, {} routes) -> {} (owns 198.18.0.0/15)\n",
        lab.name,
        lab.ns("snd"),
        lab.ns("fwd"),
        routes.len(),
        lab.ns("sink")
    ));
    said.push_str(&how_to_start(a, lab, pid, l3fwd_said));
    Ok(said)
}

/// The CPUs `a` names exist, and an XDP lab can attach its program here.
fn check_up_options(a: &UpOptions) -> Result<()> {
    if let Some(c) = a.forwarder_cpu {
        check_cpu("--forwarder-cpu", c)?;
    }
    if let Some(c) = a.rps_cpu {
        check_cpu("--rps-cpu", c)?;
    }
    if a.mode == Mode::Xdp {
        if let Some(why) = crate::xdp_forwarder::unavailable() {
            bail!("{why}");
        }
    }
    Ok(())
}

/// What `a` asks for besides the routes (with `driver`), as the lab's `spec` state file
/// holds it: a lab built otherwise is rebuilt.
fn up_spec(a: &UpOptions, driver: LabDriver) -> String {
    serde_json::json!({
        "mode": a.mode.name(),
        "driver": driver.name(),
        "sink": a.sink.name(),
        "rps_cpu": a.rps_cpu,
        "forwarder_cpu": a.forwarder_cpu,
        "forwarder_flags": a.forwarder_flags,
        "no_start": a.no_start,
        "queues": a.queues,
        "dpdk": (a.mode == Mode::Dpdk).then(|| (a.dpdk.pmd().name(), a.dpdk.hugepages)),
        "xdp_mode": a.xdp_mode.name(),
    })
    .to_string()
}

/// Whether the lab is to be built: not when it is complete and built as `spec` and
/// `routes` ask, with every route in place; otherwise whatever stands of it (built
/// otherwise, routes missing, its forwarder dead, incomplete) is taken down, saying why in
/// `said`.
fn clear_for_build(a: &UpOptions, lab: &Lab, spec: &str, routes: &[(u32, u8)], said: &mut String) -> Result<bool> {
    if lab.complete()? {
        let built = std::fs::read_to_string(lab.state_dir().join("spec")).unwrap_or_default();
        // Routes count only when given: `lab up` alone keeps the table it finds.
        let same_routes = (a.table.is_none() && a.routes.is_none())
            || std::fs::read_to_string(lab.state_dir().join("routes.txt")).is_ok_and(|t| t == routes_text(routes));
        let missing = lab.routes_missing();
        if built == spec && same_routes && missing.is_none() {
            return Ok(false);
        }
        match missing {
            Some((n, of)) if built == spec && same_routes => said.push_str(&format!(
                "lab {}: {n} of its {of} routes are missing from {}'s FIB, rebuilding\n",
                lab.name,
                lab.ns("fwd")
            )),
            _ => said.push_str(&format!("lab {}: up with other settings, rebuilding\n", lab.name)),
        }
        lab.down()?;
    }
    if let Some(dead) = lab.dead_forwarder() {
        said.push_str(&format!("lab {}: {dead}: rebuilding\n", lab.name));
        lab.down()?;
    }
    if !lab.existing()?.is_empty() {
        said.push_str(&format!("lab {}: incomplete, rebuilding\n", lab.name));
        lab.down()?;
    }
    Ok(true)
}

/// Build the lab, start its forwarder as `a` asks and record `spec`; on any failure the
/// lab is taken down again. The forwarder's PID when one was started, and what starting
/// l3fwd said.
fn build_and_start(
    a: &UpOptions,
    lab: &Lab,
    routes: &[(u32, u8)],
    driver: LabDriver,
    spec: &str,
) -> Result<(Option<i32>, Option<String>)> {
    let queues = match a.queues {
        Some(q) => usize::from(q),
        None if a.mode == Mode::Fwdscope && driver == LabDriver::Afxdp => workers_flag(&a.forwarder_flags).clamp(1, 64),
        None => 1,
    };
    let opts = LabOptions { sink: a.sink, rps_cpu: a.rps_cpu, queues };
    let started = lab
        .up(routes, a.mode, &opts)
        .and_then(|_| lab.set_driver(a.mode, driver))
        .and_then(|_| start_for_mode(a, lab, routes))
        .and_then(|p| lab.write_state("spec", spec).map(|_| p));
    match started {
        Ok(p) => Ok(p),
        Err(e) => {
            let _ = lab.down();
            Err(Error::Context {
                what: format!("lab {}: could not be built (cleaned up)", lab.name),
                source: Box::new(e),
            })
        }
    }
}

/// Start the forwarder of `a.mode` on the lab just built (or, with `no_start`, leave it
/// for the user to run): its PID when one was started, and what starting l3fwd said.
fn start_for_mode(a: &UpOptions, lab: &Lab, routes: &[(u32, u8)]) -> Result<(Option<i32>, Option<String>)> {
    match (a.mode, a.no_start) {
        (Mode::Fwdscope, false) => {
            lab.start_forwarder(&a.forwarder, &a.forwarder_flags, a.forwarder_cpu).map(|p| (Some(p), None))
        }
        (Mode::Fwdscope | Mode::Xdp, true) => lab.write_state("no-start", "").map(|_| (None, None)),
        (Mode::Dpdk, no_start) => {
            let lcore = a.forwarder_cpu.unwrap_or(cpu_count().saturating_sub(1));
            let next_hop = match a.sink {
                Sink::Ip => lab.mac("sink", "k0")?,
                Sink::Discard => DISCARD_MAC.to_string(),
            };
            crate::dpdk::start(&lab.dpdk(), &a.dpdk, routes, lcore, &next_hop, no_start)
                .map(|(p, said)| (p, Some(said)))
        }
        (Mode::Xdp, false) => lab
            .spawn_forwarder(
                &crate::xdp_forwarder::command(&lab.xdp_site(), &a.forwarder.program, a.xdp_mode),
                a.forwarder_cpu,
            )
            .map(|p| (Some(p), None)),
        _ => Ok((None, None)),
    }
}

/// Who forwards in the lab just built, for the `up` line: the kernel, or the forwarder
/// process (`pid`, None when not started) and its packet I/O.
fn who_forwards(a: &UpOptions, lab: &Lab, pid: Option<i32>, driver_why: &str) -> String {
    match (a.mode, pid) {
        (Mode::Kernel, _) => "kernel forwarding".to_string(),
        (Mode::Fwdscope, Some(p)) => format!("fwdscope forwarder pid {p}, {driver_why}"),
        (Mode::Fwdscope, None) => format!("fwdscope mode, forwarder not started, {driver_why}"),
        (Mode::Dpdk, Some(p)) => format!("DPDK l3fwd pid {p}, {} PMD", a.dpdk.pmd().name()),
        (Mode::Dpdk, None) => format!("dpdk mode, l3fwd not started, {} PMD", a.dpdk.pmd().name()),
        (Mode::Xdp, Some(p)) => {
            format!(
                "XDP forwarder held by pid {p}: {}",
                crate::xdp_forwarder::attach_note(&lab.state_dir()).unwrap_or_default()
            )
        }
        (Mode::Xdp, None) => "xdp mode, XDP forwarder not started".to_string(),
    }
}

/// The lines after the `up` line: the command that runs a forwarder left unstarted
/// (`pid` None), and what starting l3fwd said with DPDK's memory note.
fn how_to_start(a: &UpOptions, lab: &Lab, pid: Option<i32>, l3fwd_said: Option<String>) -> String {
    let mut said = String::new();
    if a.mode == Mode::Fwdscope && pid.is_none() {
        said.push_str(&format!(
            "run the forwarder with: {}\n",
            lab.forwarder_command(&a.forwarder, &a.forwarder_flags).join(" ")
        ));
    }
    if let Some(l) = l3fwd_said {
        said.push_str(&format!("{l}\n{}\n", crate::dpdk::memory_note(&a.dpdk)));
        if pid.is_none() {
            let cmd = std::fs::read_to_string(lab.state_dir().join("l3fwd.cmd")).unwrap_or_default();
            said.push_str(&format!("run l3fwd with: {cmd}"));
        }
    }
    if a.mode == Mode::Xdp && pid.is_none() {
        said.push_str(&format!(
            "run the XDP forwarder with: {}\n",
            crate::xdp_forwarder::command(&lab.xdp_site(), &a.forwarder.program, a.xdp_mode).join(" ")
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_routes_are_distinct_and_inside_the_destination_range() {
        let r = generate_routes(1000).unwrap();
        assert_eq!(r.len(), 1000);
        let set: std::collections::HashSet<_> = r.iter().collect();
        assert_eq!(set.len(), 1000);
        assert!(r.iter().all(|&(a, l)| inside_dest(a, l)));
        assert_eq!(r[0], (0xC613_0000, 24));
        assert_eq!(r[256], (0xC613_0001, 32));
        assert!(generate_routes(0).is_err() && generate_routes(65_537).is_err());
    }

    #[test]
    fn snmp_values_by_group_and_name() {
        let snmp = "Ip: Forwarding DefaultTTL InReceives\nIp: 1 64 77\nUdp: InDatagrams\nUdp: 3\n";
        assert_eq!(snmp_value(snmp, "Ip", "InReceives"), Some(77));
        assert_eq!(snmp_value(snmp, "Udp", "InDatagrams"), Some(3));
        assert_eq!(snmp_value(snmp, "Ip", "Nope"), None);
    }

    #[test]
    fn table_lines_outside_the_range_are_refused_by_line() {
        let p = std::env::temp_dir().join(format!("fwdscope-lab-table-{}", std::process::id()));
        std::fs::write(&p, "# lab table\n198.19.4.0/24\n198.19.5.7/32 # host\n10.0.0.0/8\n").unwrap();
        let e = load_routes(&p).unwrap_err().to_string();
        assert!(e.ends_with(":4: `10.0.0.0/8`: expected PREFIX/LEN inside 198.19.0.0/16"), "{e}");
        std::fs::write(&p, "198.19.4.9/24\n198.19.5.7/32\n").unwrap();
        assert_eq!(load_routes(&p).unwrap(), (vec![(0xC613_0400, 24), (0xC613_0507, 32)], 0));
        // A prefix listed again (host bits aside) is kept once, at its first line, and counted.
        std::fs::write(&p, "198.19.4.9/24\n198.19.5.7/32\n198.19.4.0/24\n198.19.4.0/25\n198.19.5.7/32\n").unwrap();
        let (routes, dups) = load_routes(&p).unwrap();
        assert_eq!(routes, vec![(0xC613_0400, 24), (0xC613_0507, 32), (0xC613_0400, 25)]);
        assert_eq!(dups, 2);
        // A bad line is printed escaped and cut: never a terminal escape, never megabytes.
        std::fs::write(&p, format!("198.19.1.0/24 \u{1b}]0;pwn\u{7}{}\n", "a".repeat(100_000))).unwrap();
        let e = load_routes(&p).unwrap_err().to_string();
        assert!(!e.contains('\u{1b}') && e.contains("\\u{1b}]0;pwn") && e.len() < 300, "{e}");
        std::fs::remove_file(&p).unwrap();
        assert!(Lab::new("Bad_Name").is_err() && Lab::new("toolongname").is_err() && Lab::new("lab1").is_ok());
    }

    #[test]
    fn a_recorded_forwarder_is_one_process_not_a_pid() {
        let mut child = std::process::Command::new("sleep").arg("20").spawn().expect("sleep");
        let pid = child.id() as i32;
        let t = start_time(pid).expect("start time of a running process");
        assert!(same_process(pid, Some(t)));
        // The same PID with another start time is a later process that reused it.
        assert!(!same_process(pid, Some(t + 1)));
        // Not fwdscope's program: never the lab's forwarder, whatever the record says.
        assert!(!forwarder_runs(pid, Some(t)));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!same_process(pid, Some(t)) || start_time(pid) != Some(t));
        // Another user's process is never ours, with or without a start time (as root only:
        // an unprivileged test cannot start one).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            println!("SKIP (another user's process): needs root to start one");
            return;
        }
        use std::os::unix::process::CommandExt;
        let mut other =
            std::process::Command::new("sleep").arg("20").uid(65534).gid(65534).spawn().expect("sleep as nobody");
        let pid = other.id() as i32;
        let t = start_time(pid).expect("start time");
        assert!(!same_process(pid, None) && !same_process(pid, Some(t)));
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
