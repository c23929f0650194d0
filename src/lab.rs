//! `fwdscope lab up|down|status`: the network-namespace lab for real-interface runs.
//!
//! Three namespaces joined by two veth pairs, every address inside 198.18.0.0/15:
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
//! 198.19.0.0/16 via the sink, which owns the whole lab range. Then, by `--mode`:
//! - `kernel`: the forwarding namespace forwards with the kernel (net.ipv4.ip_forward=1)
//!   over those routes;
//! - `fwdscope`: kernel forwarding is off, and the bundled forwarder runs in the forwarding
//!   namespace on NAME-f0 -> NAME-f1 with `--driver afpacket` over the same routes (started
//!   detached, or with `--no-start` the command is printed, to run under `top`/`record`).
//!
//! Neighbours are static (nud permanent) both ways, so frames built by `lab send` and by the
//! forwarder carry the right MACs from the first packet. IPv6 is off in the namespaces. In
//! fwdscope mode an nft netdev ingress rule on NAME-f0 drops each input frame after the
//! forwarder's tap, so the namespace's own IP stack does not process it too. `--sink
//! discard` counts frames at the sink's interface and discards them at once; `--rps-cpu`
//! and `--forwarder-cpu` place the work (what `lab bench` uses).
//!
//! `up` is idempotent (an incomplete lab, or one built with other settings, is torn down
//! and rebuilt); `down` stops the lab's forwarder and deletes whatever namespaces of that
//! name exist, so it also cleans up after a crash. Namespaces and links go through iproute2
//! (`ip`); the lab's state (mode, sink, settings, routes, forwarder PID and log) lives in
//! /run/fwdscope-lab/NAME/.
//!
//! `lab send` is the bundled traffic generator (flows, packets per flow, destination
//! pattern, size, rate) transmitting through an AF_PACKET tx ring from inside the sender
//! namespace; it prints what it sent, and `lab status` what the sink received.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::process::{Command, Stdio};

#[derive(clap::Subcommand, Debug)]
pub enum LabCmd {
    /// Create the lab (or check it is complete).
    Up(UpArgs),
    /// Send traffic from the sender namespace through AF_PACKET.
    Send(SendArgs),
    /// Packets per second forwarded by the kernel and by the bundled forwarder on the same
    /// lab and routes, with each one's stage split from a recording.
    Bench(BenchArgs),
    /// Remove the lab's namespaces (and with them its veth pairs).
    Down(NameArg),
    /// Namespaces, interfaces and their packet counters.
    Status(NameArg),
}

#[derive(clap::Args, Debug)]
pub struct NameArg {
    /// Lab name: prefix of its namespaces and interfaces (1 to 8 of [a-z0-9]).
    #[arg(long, default_value = "fsl")]
    pub name: String,
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Generate this many routes inside 198.19.0.0/16 for the forwarding namespace
    /// [default: one 198.19.0.0/16 route].
    #[arg(long, conflicts_with = "table")]
    pub routes: Option<u32>,
    /// Load the forwarding namespace's routes from FILE (`PREFIX/LEN` per line, each inside
    /// 198.19.0.0/16; `#` comments).
    #[arg(long)]
    pub table: Option<std::path::PathBuf>,
    /// Who forwards in the forwarding namespace.
    #[arg(long, value_enum, default_value_t = Mode::Kernel)]
    pub mode: Mode,
    /// fwdscope mode: do not start the forwarder; print its command instead.
    #[arg(long)]
    pub no_start: bool,
    /// What the sink does with what arrives.
    #[arg(long, value_enum, default_value_t = Sink::Ip)]
    pub sink: Sink,
    /// Steer the forwarding namespace's receive processing (RPS on NAME-f0) to this CPU
    /// [default: none; it runs on the CPU that sent the frame].
    #[arg(long)]
    pub rps_cpu: Option<usize>,
    /// fwdscope mode: run the forwarder on this CPU only [default: any CPU].
    #[arg(long)]
    pub forwarder_cpu: Option<usize>,
    /// fwdscope mode: flags for the forwarder (after `--`), e.g. `--cache nocache`.
    #[arg(last = true)]
    pub forwarder_flags: Vec<String>,
}

/// Who forwards in the forwarding namespace.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The Linux kernel (net.ipv4.ip_forward=1).
    Kernel,
    /// The bundled forwarder over AF_PACKET.
    Fwdscope,
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
const DISCARD_MAC: &str = "02:66:73:00:00:01";

impl Sink {
    fn name(self) -> &'static str {
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
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Kernel => "kernel",
            Mode::Fwdscope => "fwdscope",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Lab name (built and removed by the benchmark).
    #[arg(long, default_value = "fsb")]
    pub name: String,
    /// Routes inside 198.19.0.0/16, the same table for both.
    #[arg(long, default_value_t = 8000)]
    pub routes: u32,
    /// Concurrent flows of the sender.
    #[arg(long, default_value_t = 32768)]
    pub flows: usize,
    /// Seconds of traffic per measurement.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Measurements per setup (interleaved rounds).
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 64)]
    pub size: u16,
    /// Forwarder flags for the fwdscope run (after `--`) [default: `--cache nocache`, like
    /// the kernel, which has had no route cache since Linux 3.6].
    #[arg(last = true)]
    pub forwarder_flags: Vec<String>,
}

#[derive(clap::Args, Debug)]
pub struct SendArgs {
    #[command(flatten)]
    pub name: NameArg,
    /// Concurrent flows.
    #[arg(long, default_value_t = 1024)]
    pub flows: usize,
    /// Packets per flow before it is replaced by a new one.
    #[arg(long, default_value_t = 10)]
    pub pkts_per_flow: u32,
    /// Destination pattern over the lab's routes.
    #[arg(long, value_enum, default_value_t = forwarder::traffic::DstPattern::Random)]
    pub dst: forwarder::traffic::DstPattern,
    /// Frame size in bytes (64 to 1514).
    #[arg(long, default_value_t = 64)]
    pub size: u16,
    /// Packets per second (250000, 250k, 1.5M) [default: as fast as the ring takes them].
    #[arg(long, value_parser = forwarder::cli::parse_rate)]
    pub rate: Option<f64>,
    /// Stop after this many packets.
    #[arg(long, default_value_t = 10_000)]
    pub count: u64,
    /// Stop after this many seconds, if earlier.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the result as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Run the sender on this CPU only [default: any CPU].
    #[arg(long)]
    pub cpu: Option<usize>,
}

pub fn run(cmd: &LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Up(a) => up(a),
        LabCmd::Send(a) => send(a),
        LabCmd::Bench(a) => bench(a),
        LabCmd::Down(n) => {
            let lab = Lab::new(&n.name)?;
            let removed = lab.down()?;
            println!("lab {}: down ({} namespaces removed)", lab.name, removed);
            Ok(())
        }
        LabCmd::Status(n) => {
            print!("{}", Lab::new(&n.name)?.status()?);
            Ok(())
        }
    }
}

/// The lab's names.
pub struct Lab {
    pub name: String,
}

fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip").args(args).output().context("running `ip` (iproute2)")?;
    if !out.status.success() {
        bail!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Set sysctls (`name=value`) inside namespace `ns`.
fn sysctl(ns: &str, settings: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(["netns", "exec", ns, "sysctl", "-qw"]).args(settings).output()?;
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
fn with_stdin(cmd: &mut Command, input: &str, what: &str) -> Result<std::process::Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {what}"))?;
    child.stdin.take().with_context(|| format!("{what}: no stdin"))?.write_all(input.as_bytes())?;
    Ok(child.wait_with_output()?)
}

/// The lab's destination range: routes must stay inside it.
const DEST: (u32, u8) = (0xC613_0000, 16); // 198.19.0.0/16

fn inside_dest(addr: u32, len: u8) -> bool {
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
fn routes_text(routes: &[(u32, u8)]) -> String {
    let mut table = String::with_capacity(routes.len() * 40);
    for (a, l) in routes {
        table.push_str(&format!("{}/{l} via 198.18.0.6\n", std::net::Ipv4Addr::from(*a)));
    }
    table
}

/// Routes of a table file (`PREFIX/LEN` per line).
pub fn load_routes(path: &std::path::Path) -> Result<Vec<(u32, u8)>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let bad = || anyhow::anyhow!("{}:{}: `{t}`: expected PREFIX/LEN inside 198.19.0.0/16", path.display(), i + 1);
        let (p, l) = t.split_once('/').ok_or_else(bad)?;
        let addr: std::net::Ipv4Addr = p.parse().map_err(|_| bad())?;
        let len: u8 = l.parse().map_err(|_| bad())?;
        let a = u32::from(addr);
        if len > 32 || !inside_dest(a, len) {
            return Err(bad());
        }
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        v.push((a & mask, len));
    }
    if v.is_empty() {
        bail!("{}: no routes", path.display());
    }
    Ok(v)
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

    /// The lab's state directory.
    pub fn state_dir(&self) -> std::path::PathBuf {
        std::path::PathBuf::from("/run/fwdscope-lab").join(&self.name)
    }

    /// The stats segment of the lab's forwarder (fwdscope mode).
    pub fn segment_path(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/dev/shm/fwdscope-lab-{}.stats", self.name))
    }

    /// The mode the lab was built in (none when it is down).
    pub fn mode(&self) -> Option<Mode> {
        match std::fs::read_to_string(self.state_dir().join("mode")).ok()?.trim() {
            "kernel" => Some(Mode::Kernel),
            "fwdscope" => Some(Mode::Fwdscope),
            _ => None,
        }
    }

    /// The lab's forwarder, if one was started and still runs.
    pub fn forwarder_pid(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.state_dir().join("forwarder.pid")).ok()?.trim().parse().ok()?;
        // SAFETY: signal 0 only checks for existence.
        (pid > 0 && unsafe { libc::kill(pid, 0) } == 0).then_some(pid)
    }

    /// Stop the lab's forwarder: through its control block, then SIGTERM, then SIGKILL.
    fn stop_forwarder(&self) {
        let Some(pid) = self.forwarder_pid() else { return };
        if let Ok(seg) = forwarder::stats::Segment::open(&self.segment_path()) {
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

    /// Delete every namespace of the lab that exists; returns how many.
    pub fn down(&self) -> Result<usize> {
        self.stop_forwarder();
        let _ = std::fs::remove_dir_all(self.state_dir());
        let _ = std::fs::remove_file(self.segment_path());
        let existing = self.existing()?;
        for n in &existing {
            ip(&["netns", "del", n])?;
        }
        Ok(existing.len())
    }

    /// Whether the lab is complete: all namespaces, the forwarding sysctl, both veth pairs up.
    pub fn complete(&self) -> Result<bool> {
        if self.existing()?.len() != 3 {
            return Ok(false);
        }
        let Some(mode) = self.mode() else { return Ok(false) };
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("fwd"), "sysctl", "-n", "net.ipv4.ip_forward"])
            .output()?;
        let want = if mode == Mode::Kernel { "1" } else { "0" };
        if String::from_utf8_lossy(&out.stdout).trim() != want {
            return Ok(false);
        }
        if mode == Mode::Fwdscope && !self.state_dir().join("no-start").exists() && self.forwarder_pid().is_none() {
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
        ip(&[
            "link",
            "add",
            &format!("{n}-s0"),
            "netns",
            &snd,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{n}-f0"),
            "netns",
            &fwd,
        ])?;
        ip(&[
            "link",
            "add",
            &format!("{n}-f1"),
            "netns",
            &fwd,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{n}-k0"),
            "netns",
            &sink,
        ])?;
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
        sysctl(&fwd, &[&format!("net.ipv4.ip_forward={}", u8::from(mode == Mode::Kernel))])?;
        let dir = self.state_dir();
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let table = routes_text(routes);
        std::fs::write(dir.join("routes.txt"), &table).with_context(|| format!("writing {}", dir.display()))?;
        if mode == Mode::Kernel {
            let batch: String = table.lines().map(|l| format!("route replace {l}\n")).collect();
            ip_batch(&fwd, &batch)?;
        }
        std::fs::write(dir.join("mode"), mode.name())?;
        std::fs::write(dir.join("sink"), opts.sink.name())?;
        if let Some(cpu) = opts.rps_cpu {
            self.steer_input(cpu)?;
        }
        if mode == Mode::Fwdscope {
            let note = self.drop_at_ingress()?;
            std::fs::write(dir.join("ingress"), &note)?;
        }
        Ok(())
    }

    /// RPS: the forwarding namespace's receive processing of NAME-f0 on `cpu`.
    fn steer_input(&self, cpu: usize) -> Result<()> {
        check_cpu("--rps-cpu", cpu)?;
        let path = format!("/sys/class/net/{}-f0/queues/rx-0/rps_cpus", self.name);
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns("fwd"), "sh", "-c", &format!("echo {:x} > {path}", 1u64 << cpu)])
            .output()?;
        if !out.status.success() {
            bail!("setting {path} in {}: {}", self.ns("fwd"), String::from_utf8_lossy(&out.stderr).trim());
        }
        std::fs::write(self.state_dir().join("rps"), cpu.to_string())?;
        Ok(())
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

    /// How the lab's sink counts (written by `up`; `ip` for labs built before the option).
    pub fn sink(&self) -> Sink {
        match std::fs::read_to_string(self.state_dir().join("sink")).ok().as_deref().map(str::trim) {
            Some("discard") => Sink::Discard,
            _ => Sink::Ip,
        }
    }

    /// The command that runs the bundled forwarder on the lab (fwdscope mode), before its
    /// own flags: `ip netns exec NAME-fwd FWDSCOPE forward --driver afpacket ...`.
    pub fn forwarder_command(&self, exe: &std::path::Path, extra: &[String]) -> Vec<String> {
        let n = &self.name;
        let mut v: Vec<String> = ["ip", "netns", "exec", &self.ns("fwd")].map(String::from).to_vec();
        v.push(exe.display().to_string());
        v.extend(
            [
                "forward",
                "--driver",
                "afpacket",
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
    pub fn start_forwarder(&self, extra: &[String], cpu: Option<usize>) -> Result<i32> {
        let exe = std::env::current_exe().context("locating fwdscope's own executable")?;
        let cmd = self.forwarder_command(&exe, extra);
        let log_path = self.state_dir().join("forwarder.log");
        let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let mut command = Command::new(&cmd[0]);
        if let Some(c) = cpu {
            use std::os::unix::process::CommandExt;
            // SAFETY: sched_setaffinity is a plain system call, safe between fork and exec;
            // the forwarder (started with --no-pin) and its threads inherit the mask.
            unsafe {
                command.pre_exec(move || {
                    if forwarder::run::pin_to_cpu(c) {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                })
            };
        }
        let child = command
            .args(&cmd[1..])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting the forwarder")?;
        let pid = child.id() as i32;
        std::fs::write(self.state_dir().join("forwarder.pid"), pid.to_string())?;
        let t0 = std::time::Instant::now();
        loop {
            if let Ok(seg) = forwarder::stats::Segment::open(&self.segment_path()) {
                if seg.state() == forwarder::stats::State::Running {
                    return Ok(pid);
                }
            }
            if self.forwarder_pid().is_none() || t0.elapsed() > std::time::Duration::from_secs(30) {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!("the lab's forwarder did not start; its log ({}):\n{log}", log_path.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// What arrived at the sink: its IP InReceives, or with `--sink discard` the frames
    /// its interface received.
    pub fn sink_received(&self) -> Result<u64> {
        match self.sink() {
            Sink::Ip => {
                let out =
                    Command::new("ip").args(["netns", "exec", &self.ns("sink"), "cat", "/proc/net/snmp"]).output()?;
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
        let mut s = format!(
            "lab {}: {}\n",
            self.name,
            if self.complete()? {
                "up"
            } else if existing.is_empty() {
                "down"
            } else {
                "incomplete (run `fwdscope lab down`)"
            }
        );
        for ns in &existing {
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
        }
        if let Some(mode) = self.mode() {
            let routes = std::fs::read_to_string(self.state_dir().join("routes.txt")).unwrap_or_default();
            s.push_str(&format!(
                "mode {}: {} routes via the sink in {}\n",
                mode.name(),
                routes.lines().count(),
                self.ns("fwd")
            ));
            if mode == Mode::Fwdscope {
                match (self.forwarder_pid(), forwarder::stats::Segment::open(&self.segment_path())) {
                    (Some(pid), Ok(seg)) => {
                        let snap = seg.snapshot();
                        use forwarder::stats::Ctr;
                        let drops: u64 = forwarder::stats::drop_counters()
                            .map(|(i, _)| snap.workers.iter().map(|w| w.get(i).copied().unwrap_or(0)).sum::<u64>())
                            .sum();
                        s.push_str(&format!(
                            "forwarder pid {pid}: rx {} tx {} dropped {} (segment {})\n",
                            snap.total(Ctr::RxPackets),
                            snap.total(Ctr::TxPackets),
                            drops,
                            self.segment_path().display()
                        ));
                    }
                    _ => s.push_str("forwarder: not running\n"),
                }
            }
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
}

/// CPUs this process may run on.
fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `cpu` names one of this machine's CPUs (and fits an RPS mask).
fn check_cpu(flag: &str, cpu: usize) -> Result<()> {
    let n = cpu_count();
    if cpu >= n || cpu >= 64 {
        bail!("{flag} {cpu}: expected a CPU number from 0 to {}", n.min(64) - 1);
    }
    Ok(())
}

fn up(a: &UpArgs) -> Result<()> {
    let lab = Lab::new(&a.name.name)?;
    if let Some(c) = a.forwarder_cpu {
        check_cpu("--forwarder-cpu", c)?;
    }
    if let Some(c) = a.rps_cpu {
        check_cpu("--rps-cpu", c)?;
    }
    let routes = match (&a.table, a.routes) {
        (Some(p), _) => load_routes(p)?,
        (None, Some(n)) => generate_routes(n)?,
        (None, None) => vec![DEST],
    };
    // What this command asks for besides the routes; a lab built otherwise is rebuilt.
    let spec = serde_json::json!({
        "mode": a.mode.name(),
        "sink": a.sink.name(),
        "rps_cpu": a.rps_cpu,
        "forwarder_cpu": a.forwarder_cpu,
        "forwarder_flags": a.forwarder_flags,
        "no_start": a.no_start,
    })
    .to_string();
    if lab.complete()? {
        let built = std::fs::read_to_string(lab.state_dir().join("spec")).unwrap_or_default();
        // Routes count only when given: `lab up` alone keeps the table it finds.
        let same_routes = (a.table.is_none() && a.routes.is_none())
            || std::fs::read_to_string(lab.state_dir().join("routes.txt")).is_ok_and(|t| t == routes_text(&routes));
        if built == spec && same_routes {
            println!("lab {}: already up", lab.name);
            return Ok(());
        }
        println!("lab {}: up with other settings, rebuilding", lab.name);
        lab.down()?;
    }
    if !lab.existing()?.is_empty() {
        println!("lab {}: incomplete, rebuilding", lab.name);
        lab.down()?;
    }
    let opts = LabOptions { sink: a.sink, rps_cpu: a.rps_cpu };
    let started = lab.up(&routes, a.mode, &opts).and_then(|_| match (a.mode, a.no_start) {
        (Mode::Fwdscope, false) => lab.start_forwarder(&a.forwarder_flags, a.forwarder_cpu).map(Some),
        (Mode::Fwdscope, true) => {
            std::fs::write(lab.state_dir().join("no-start"), "")?;
            Ok(None)
        }
        _ => Ok(None),
    });
    let started = started.and_then(|p| {
        std::fs::write(lab.state_dir().join("spec"), &spec)?;
        Ok(p)
    });
    let pid = match started {
        Ok(p) => p,
        Err(e) => {
            let _ = lab.down();
            return Err(e.context(format!("lab {}: could not be built (cleaned up)", lab.name)));
        }
    };
    let who = match (a.mode, pid) {
        (Mode::Kernel, _) => "kernel forwarding".to_string(),
        (Mode::Fwdscope, Some(p)) => format!("fwdscope forwarder pid {p}, afpacket"),
        (Mode::Fwdscope, None) => "fwdscope mode, forwarder not started".to_string(),
    };
    println!(
        "lab {}: up: {} (198.18.0.1) -> {} (198.18.0.2 | 198.18.0.5, {who}, {} routes) -> {} (owns 198.18.0.0/15)",
        lab.name,
        lab.ns("snd"),
        lab.ns("fwd"),
        routes.len(),
        lab.ns("sink")
    );
    if a.mode == Mode::Fwdscope && pid.is_none() {
        let exe = std::env::current_exe().context("locating fwdscope's own executable")?;
        println!("run the forwarder with: {}", lab.forwarder_command(&exe, &a.forwarder_flags).join(" "));
    }
    Ok(())
}

/// What `lab bench` measures: the kernel forwarding as it does by default (in the receive
/// softirq, on the CPU that delivered the frame: the sender's), the kernel with its
/// receive processing steered (RPS) to the device-under-test CPU, and the bundled
/// forwarder over AF_PACKET on that CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    Kernel,
    KernelRps,
    Fwdscope,
    /// No forwarder: the forwarding namespace drops every frame at ingress. The sender's
    /// own ceiling, from which the kernel's per-packet cost on the sender's CPU follows.
    SenderOnly,
}

impl Setup {
    fn label(self, dut: Option<usize>) -> String {
        let cpu = dut.map_or("any CPU".to_string(), |c| format!("CPU {c}"));
        match self {
            Setup::Kernel => "kernel (softirq on the sender's CPU)".into(),
            Setup::KernelRps => format!("kernel (RPS: receive on {cpu})"),
            Setup::Fwdscope => format!("fwdscope afpacket (forwarder on {cpu})"),
            Setup::SenderOnly => "sender alone (frames dropped at the forwarding namespace's ingress)".into(),
        }
    }
}

/// Where `lab bench` runs things: the sender on one CPU, the device under test on another
/// (both None on a one-CPU machine: nothing is pinned).
#[derive(Clone, Copy)]
struct Placement {
    sender: Option<usize>,
    dut: Option<usize>,
}

/// One measurement of `lab bench`.
struct Measured {
    setup: Setup,
    sent: u64,
    arrived: u64,
    seconds: f64,
}

impl Measured {
    fn pps(&self) -> f64 {
        self.arrived as f64 / self.seconds.max(1e-9)
    }
    fn offered(&self) -> f64 {
        self.sent as f64 / self.seconds.max(1e-9)
    }
}

/// `fwdscope` itself with `args`; stdout, or an error with its stderr.
fn self_run(args: &[String]) -> Result<String> {
    let exe = std::env::current_exe().context("locating fwdscope's own executable")?;
    let out = Command::new(exe).args(args).output().with_context(|| format!("running fwdscope {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("fwdscope {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// (Re)build the lab for `setup`, the sink discarding at its interface.
fn bench_up(a: &BenchArgs, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<()> {
    let mode = if matches!(setup, Setup::Fwdscope | Setup::SenderOnly) { Mode::Fwdscope } else { Mode::Kernel };
    let mut up = strings(&["lab", "up", "--name", &a.name, "--routes", &a.routes.to_string(), "--sink", "discard"]);
    up.extend(strings(&["--mode", mode.name()]));
    match (setup, at.dut) {
        (Setup::KernelRps, Some(c)) => up.extend(strings(&["--rps-cpu", &c.to_string()])),
        (Setup::Fwdscope, Some(c)) => up.extend(strings(&["--forwarder-cpu", &c.to_string()])),
        _ => {}
    }
    if setup == Setup::Fwdscope {
        up.push("--".into());
        up.extend(flags.iter().cloned());
    }
    if setup == Setup::SenderOnly {
        up.push("--no-start".into());
    }
    lab.down()?;
    self_run(&up)?;
    Ok(())
}

/// The sender at full speed for `seconds`: (packets sent, seconds).
fn bench_send(a: &BenchArgs, at: Placement, seconds: f64) -> Result<(u64, f64)> {
    let mut args = strings(&["lab", "send", "--name", &a.name, "--json", "--count", &u64::MAX.to_string()]);
    args.extend(strings(&["--duration", &seconds.to_string(), "--flows", &a.flows.to_string()]));
    args.extend(strings(&["--size", &a.size.to_string()]));
    if let Some(c) = at.sender {
        args.extend(strings(&["--cpu", &c.to_string()]));
    }
    let sent: serde_json::Value = serde_json::from_str(&self_run(&args)?)?;
    Ok((sent["packets"].as_u64().unwrap_or(0), sent["seconds"].as_f64().unwrap_or(0.0)))
}

fn bench_measure(a: &BenchArgs, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<Measured> {
    bench_up(a, lab, setup, at, flags)?;
    // Warm-up (not measured): first-touch page faults of the rings, caches, the flows.
    bench_send(a, at, 0.5)?;
    std::thread::sleep(std::time::Duration::from_millis(100));
    let r0 = lab.sink_received()?;
    let (sent, seconds) = bench_send(a, at, a.seconds)?;
    // Frames still in flight (rings, backlogs) arrive within milliseconds.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let arrived = lab.sink_received()? - r0;
    Ok(Measured { setup, sent, arrived, seconds })
}

/// The same load once more under `record` (-a for the kernel, -p on the lab's forwarder),
/// then `report`: the stage split.
fn bench_stages(a: &BenchArgs, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<String> {
    bench_up(a, lab, setup, at, flags)?;
    let dir = lab.state_dir().join("recording");
    let mut rec = strings(&["record", "--force", "-g", "-F", "999", "-o", &dir.display().to_string()]);
    rec.extend(["--duration".to_string(), format!("{}", a.seconds + 1.0)]);
    match (setup, lab.forwarder_pid()) {
        (Setup::Fwdscope, Some(pid)) => rec.extend(["-p".to_string(), pid.to_string()]),
        _ => rec.push("-a".into()),
    }
    let exe = std::env::current_exe()?;
    let recorder = Command::new(&exe).args(&rec).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    bench_send(a, at, a.seconds)?;
    let out = recorder.wait_with_output()?;
    if !out.status.success() {
        bail!("fwdscope record failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    self_run(&strings(&["report", "-i", &dir.display().to_string(), "--top", "8"]))
}

fn bench(a: &BenchArgs) -> Result<()> {
    use analyzer::sweep::{median, welch_p};
    if a.repeat == 0 || !a.seconds.is_finite() || a.seconds <= 0.0 {
        bail!("--repeat must be at least 1 and --seconds positive");
    }
    let lab = Lab::new(&a.name)?;
    let at = if cpu_count() >= 2 {
        Placement { sender: Some(0), dut: Some(1) }
    } else {
        Placement { sender: None, dut: None }
    };
    let setups: Vec<Setup> = if at.dut.is_some() {
        vec![Setup::Kernel, Setup::KernelRps, Setup::Fwdscope, Setup::SenderOnly]
    } else {
        vec![Setup::Kernel, Setup::Fwdscope, Setup::SenderOnly]
    };
    // Like for like: Linux since 3.6 looks every packet up in its FIB (no route cache).
    let flags = if a.forwarder_flags.is_empty() { strings(&["--cache", "nocache"]) } else { a.forwarder_flags.clone() };
    let bar = indicatif::ProgressBar::new((setups.len() * a.repeat + 2) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {eta} left  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let result = (|| -> Result<(Vec<Measured>, String, String)> {
        let mut runs = Vec::new();
        // Interleaved rounds, each in another order, so drift on a shared machine spreads
        // over every setup.
        for r in 0..a.repeat {
            for i in 0..setups.len() {
                let s = setups[(i + r) % setups.len()];
                bar.set_message(s.label(at.dut));
                runs.push(bench_measure(a, &lab, s, at, &flags)?);
                bar.inc(1);
            }
        }
        bar.set_message("stage split: kernel");
        let k = bench_stages(a, &lab, Setup::Kernel, at, &flags)?;
        bar.inc(1);
        bar.set_message("stage split: fwdscope");
        let f = bench_stages(a, &lab, Setup::Fwdscope, at, &flags)?;
        bar.inc(1);
        Ok((runs, k, f))
    })();
    bar.finish_and_clear();
    let ingress = std::fs::read_to_string(lab.state_dir().join("ingress")).unwrap_or_default();
    let _ = lab.down();
    let (runs, k_stages, f_stages) = result?;
    println!(
        "lab bench: {} routes, {} flows, {}-byte frames; {} runs x {:.1} s per setup, interleaved; sender at full speed \
         through AF_PACKET{}; sink: counts frames at its interface and discards them",
        a.routes,
        a.flows,
        a.size,
        a.repeat,
        a.seconds,
        match (at.sender, at.dut) {
            (Some(s), Some(d)) => format!(" on CPU {s}; device under test on CPU {d}"),
            _ => " (one CPU: nothing pinned)".to_string(),
        }
    );
    println!("fwdscope forwarder flags: {}; {}", flags.join(" "), ingress.trim());
    println!(
        "{:<42} {:>4} {:>14} {:>25} {:>14} {:>8}",
        "setup", "runs", "forwarded pps", "[min .. max]", "offered pps", "lost"
    );
    let mut medians = Vec::new();
    for s in setups.iter().filter(|s| **s != Setup::SenderOnly) {
        let mine: Vec<&Measured> = runs.iter().filter(|m| m.setup == *s).collect();
        let pps: Vec<f64> = mine.iter().map(|m| m.pps()).collect();
        let (lo, hi) = pps.iter().fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let lost: u64 = mine.iter().map(|m| m.sent.saturating_sub(m.arrived)).sum();
        let sent: u64 = mine.iter().map(|m| m.sent).sum();
        let med = median(&pps);
        medians.push((*s, med, pps, lost > 0));
        println!(
            "{:<42} {:>4} {:>14.0} {:>25} {:>14.0} {:>7.1}%",
            s.label(at.dut),
            mine.len(),
            med,
            format!("[{lo:.0} .. {hi:.0}]"),
            median(&mine.iter().map(|m| m.offered()).collect::<Vec<_>>()),
            100.0 * lost as f64 / sent.max(1) as f64
        );
    }
    let alone: Vec<f64> = runs.iter().filter(|m| m.setup == Setup::SenderOnly).map(|m| m.offered()).collect();
    let alone_med = median(&alone);
    println!("{}: {} runs, {:.0} pps sent (median)", Setup::SenderOnly.label(at.dut), alone.len(), alone_med);
    let fwd = medians.iter().find(|m| m.0 == Setup::Fwdscope);
    let best = medians.iter().filter(|m| m.0 != Setup::Fwdscope).max_by(|x, y| x.1.total_cmp(&y.1));
    if let (Some((_, f, fp, _)), Some((k, kv, kp, _))) = (fwd, best) {
        let p = welch_p(fp, kp);
        println!(
            "ratio fwdscope / best kernel setup ({}): {:.2} (medians); difference of means {}significant (Welch p = {p:.3})",
            k.label(at.dut),
            f / kv.max(1e-9),
            if p < 0.05 { "" } else { "not " },
        );
    }
    println!(
        "(a setup that lost 0% was limited by the sender, not by itself: its own capacity is higher than its figure)"
    );
    // CPU per packet, from the medians: the sender's CPU runs flat out in both its runs, so
    // what the kernel's forwarding adds there is the difference of the two periods; the
    // forwarder's CPU, when it lost frames, spent one period per forwarded packet.
    let kernel = medians.iter().find(|m| m.0 == Setup::Kernel);
    if let (Some((_, kv, _, _)), Some((_, f, _, f_lost))) = (kernel, fwd) {
        let k_ns = 1e9 / kv - 1e9 / alone_med;
        let f_ns = 1e9 / f;
        if k_ns.is_finite() && k_ns > 0.0 {
            println!(
                "CPU per packet: kernel forwarding about {k_ns:.0} ns on the sender's CPU (1/kernel - 1/sender alone); \
                 fwdscope {}{f_ns:.0} ns on its own CPU (1/forwarded{})",
                if *f_lost { "about " } else { "at most " },
                if *f_lost { ", at capacity: it lost frames" } else { "; it lost none, so less" }
            );
        }
    }
    println!("\n== kernel forwarding: stage split (record -a, Linux rules)\n{k_stages}");
    println!("== fwdscope afpacket: stage split (record -p on the lab forwarder)\n{f_stages}");
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

/// What `lab send` did.
#[derive(Debug, serde::Serialize)]
pub struct Sent {
    pub packets: u64,
    pub bytes: u64,
    /// Frames the kernel refused (malformed): not sent.
    pub refused: u64,
    pub seconds: f64,
    pub pps: f64,
    pub flows: usize,
    pub pkts_per_flow: u32,
    pub dst: String,
    pub size: u16,
}

/// The generator draws sources from 198.18.0.0/16; 198.18.0.0/24 holds the lab's own
/// links, where a source would be a martian (the forwarding namespace's own address or a
/// link broadcast) and be dropped. Such a source moves to 198.18.128.0/24 (checksum redone).
fn keep_off_lab_links(frame: &mut [u8]) {
    use forwarder::packet::{checksum, off, put_u16, ETH_HLEN, IP_HLEN};
    if frame[off::SADDR..off::SADDR + 3] == [198, 18, 0] {
        frame[off::SADDR + 2] = 128;
        put_u16(frame, off::CSUM, 0);
        let c = checksum(&frame[ETH_HLEN..ETH_HLEN + IP_HLEN]);
        put_u16(frame, off::CSUM, c);
    }
}

/// Enter the network namespace `ns` (this thread; the process is single-threaded here).
fn enter_netns(ns: &str) -> Result<()> {
    let path = format!("/run/netns/{ns}");
    let f = std::fs::File::open(&path).with_context(|| format!("opening {path} (is the lab up?)"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: setns on a namespace file descriptor we hold open.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("setns into {ns}"));
    }
    Ok(())
}

fn send(a: &SendArgs) -> Result<()> {
    use forwarder::nic::afpacket::{arp_table, if_mac, neighbour_mac, AfpTx};
    use forwarder::traffic::{DstChooser, FlowGen, TrafficProfile};
    let lab = Lab::new(&a.name.name)?;
    let routes_path = lab.state_dir().join("routes.txt");
    let table = forwarder::table::RouteTable::load(&routes_path, &forwarder::table::LoadOptions::default())
        .with_context(|| format!("lab {}: is it up? (no route table)", lab.name))?;
    let profile = TrafficProfile {
        flows: a.flows,
        pkts_per_flow: a.pkts_per_flow,
        dst: a.dst,
        size: usize::from(a.size),
        seed: a.seed,
        rate: None,
        ttl: 64,
    };
    profile.validate()?;
    if let Some(c) = a.cpu {
        check_cpu("--cpu", c)?;
        if !forwarder::run::pin_to_cpu(c) {
            bail!("--cpu {c}: sched_setaffinity failed: {}", std::io::Error::last_os_error());
        }
    }
    let chooser = std::sync::Arc::new(DstChooser::new(&table.routes, a.dst, a.seed)?);
    let mut gen = FlowGen::new(&profile, chooser, 0, 1);
    enter_netns(&lab.ns("snd"))?;
    let s0 = format!("{}-s0", lab.name);
    let src = if_mac(&s0)?;
    let dst = neighbour_mac(&arp_table()?, std::net::Ipv4Addr::new(198, 18, 0, 2), &s0)
        .context("no neighbour entry for 198.18.0.2 in the sender namespace (rebuild the lab)")?;
    let mut tx = AfpTx::open(&s0)?;
    let mut buf = vec![0u8; forwarder::nic::BUF_SIZE];
    let t0 = std::time::Instant::now();
    let limit = a.duration.map(std::time::Duration::from_secs_f64);
    let (mut queued, mut out) = (
        0u64,
        Sent {
            packets: 0,
            bytes: 0,
            refused: 0,
            seconds: 0.0,
            pps: 0.0,
            flows: a.flows,
            pkts_per_flow: a.pkts_per_flow,
            dst: format!("{:?}", a.dst).to_lowercase(),
            size: a.size,
        },
    );
    let account = |d: forwarder::nic::afpacket::TxDone, out: &mut Sent| {
        out.packets += d.sent;
        out.bytes += d.bytes;
        out.refused += d.refused;
    };
    // The clock is read every 64 frames at full speed (reading it per frame cost the
    // sender about 4% of its CPU), every frame when paced.
    let expired = |t0: std::time::Instant| limit.is_some_and(|l| t0.elapsed() >= l);
    let mut done = expired(t0);
    while queued < a.count && !done {
        if let Some(r) = a.rate {
            // Paced: never ahead of rate x elapsed.
            let due = (t0.elapsed().as_secs_f64() * r) as u64;
            if queued >= due {
                tx.kick();
                account(tx.reclaim(), &mut out);
                std::thread::sleep(std::time::Duration::from_micros(50));
                done = expired(t0);
                continue;
            }
        }
        let len = usize::from(gen.next_frame(&mut buf));
        buf[0..6].copy_from_slice(&dst);
        buf[6..12].copy_from_slice(&src);
        keep_off_lab_links(&mut buf);
        while !tx.push(&buf[..len]) {
            // Every slot with the kernel: let it send, then retry (back-pressure, no loss).
            tx.kick();
            account(tx.reclaim(), &mut out);
            std::thread::yield_now();
        }
        queued += 1;
        if queued % 64 == 0 {
            tx.kick();
            account(tx.reclaim(), &mut out);
            done = expired(t0);
        } else if a.rate.is_some() {
            done = expired(t0);
        }
    }
    account(tx.drain(2000), &mut out);
    out.seconds = t0.elapsed().as_secs_f64();
    out.pps = out.packets as f64 / out.seconds.max(1e-9);
    if tx.in_flight() > 0 {
        bail!("{} frames were still with the kernel after 2 s", tx.in_flight());
    }
    if a.json {
        println!("{}", serde_json::to_string(&out)?);
    } else {
        println!(
            "lab {}: sent {} packets ({} bytes) in {:.2} s = {:.0} pps from {s0}: {} flows x {} packets, dst {}, {} bytes{}",
            lab.name,
            out.packets,
            out.bytes,
            out.seconds,
            out.pps,
            out.flows,
            out.pkts_per_flow,
            out.dst,
            out.size,
            if out.refused > 0 { format!("; {} refused by the kernel", out.refused) } else { String::new() }
        );
    }
    Ok(())
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
    fn sources_stay_off_the_lab_links() {
        use forwarder::packet::{build_frame, checksum, ETH_HLEN, IP_HLEN};
        let mut f = vec![0u8; 64];
        let flow = |saddr| forwarder::packet::FlowKey { saddr, daddr: 0xC613_0101, sport: 1, dport: 2, tos: 0 };
        build_frame(&mut f, &flow(0xC612_0005), 64, 64, [0; 6], [0; 6]);
        keep_off_lab_links(&mut f);
        assert_eq!(&f[26..30], &[198, 18, 128, 5]);
        assert_eq!(checksum(&f[ETH_HLEN..ETH_HLEN + IP_HLEN]), 0, "header checksum still valid");
        build_frame(&mut f, &flow(0xC612_0305), 64, 64, [0; 6], [0; 6]);
        keep_off_lab_links(&mut f);
        assert_eq!(&f[26..30], &[198, 18, 3, 5], "other sources untouched");
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
        assert_eq!(load_routes(&p).unwrap(), vec![(0xC613_0400, 24), (0xC613_0507, 32)]);
        std::fs::remove_file(&p).unwrap();
        assert!(Lab::new("Bad_Name").is_err() && Lab::new("toolongname").is_err() && Lab::new("lab1").is_ok());
    }
}
