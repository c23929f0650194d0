//! The lab's `--mode dpdk`: DPDK's l3fwd example forwarding in the forwarding namespace on
//! the lab's veths, through the af_packet or af_xdp poll-mode driver (`--pmd`).
//!
//! l3fwd comes from a `dpdk-l3fwd` on PATH or is built here at first use from the
//! distribution's example source (Debian's `dpdk-doc`, under
//! `$(pkg-config --variable=prefix libdpdk)/share/dpdk/examples`) and libdpdk
//! (`libdpdk-dev`): the source is copied into a cache directory keyed by DPDK's version and
//! this file's changes ([`PATCHES`], each explained there), changed, and compiled with `cc`
//! and `pkg-config --cflags --libs libdpdk`; the build log stays beside the binary. DPDK's
//! code is never shipped with fwdscope.
//!
//! l3fwd runs with `--no-huge -m 512` (no hugepages; `--hugepages` uses reserved ones
//! instead, unlinked once mapped), `--no-pci`, a file prefix of the lab's own (its runtime
//! directory /var/run/dpdk/fwdscope-lab-NAME is removed by `lab down`), one lcore polling
//! both ports, LPM lookup over the lab's routes written in l3fwd's rule-file format, and the
//! sink's MAC (or the discard MAC) as port 1's next hop. Its PID and start time are recorded
//! like the fwdscope forwarder's, so `lab down` stops it also after the `fwdscope` that
//! started it was killed. Port counters come from DPDK's telemetry socket; frames the
//! af_packet PMD's kernel ring dropped (which DPDK 22.11's af_packet PMD does not count)
//! are read from the kernel (PACKET_STATISTICS on a duplicate of the PMD's socket).

use crate::error::{bail, Context};
use crate::process::{same_process, start_time};
use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where l3fwd runs: the lab's name, state directory and forwarding namespace (the lab
/// gives them; this module knows nothing else of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    pub name: String,
    pub state_dir: PathBuf,
    pub fwd_ns: String,
}

/// The poll-mode driver l3fwd opens the lab's veths with.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pmd {
    /// `net_af_packet`: AF_PACKET sockets with mmap'ed rings (the kernel copies each frame).
    #[default]
    #[value(name = "af_packet")]
    AfPacket,
    /// `net_af_xdp`: an AF_XDP socket per port, queue 0 (copy mode on veth).
    #[value(name = "af_xdp")]
    AfXdp,
}

impl Pmd {
    pub fn name(self) -> &'static str {
        match self {
            Pmd::AfPacket => "af_packet",
            Pmd::AfXdp => "af_xdp",
        }
    }
}

/// `lab up`'s DPDK flags (used with `--mode dpdk` only).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DpdkOptions {
    /// dpdk mode: the poll-mode driver l3fwd opens the veths with [default: af_packet].
    #[arg(long, value_enum)]
    pub pmd: Option<Pmd>,
    /// dpdk mode: back DPDK's memory with hugepages reserved beforehand (e.g.
    /// `echo 256 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages`, and hugetlbfs
    /// mounted) instead of `--no-huge -m 512` [default: no hugepages].
    #[arg(long)]
    pub hugepages: bool,
}

impl DpdkOptions {
    pub fn pmd(&self) -> Pmd {
        self.pmd.unwrap_or_default()
    }
}

/// The Debian packages the mode needs, for messages.
pub const PACKAGES: &str = "dpdk dpdk-dev libdpdk-dev dpdk-doc";

/// One change fwdscope makes to l3fwd's source before building it: `find` must occur
/// exactly once in `file`, and becomes `replace`.
pub struct Patch {
    pub file: &'static str,
    pub find: &'static str,
    pub replace: &'static str,
    /// Why the change is needed.
    pub why: &'static str,
}

/// The changes to DPDK 22.11's l3fwd, in order.
pub const PATCHES: &[Patch] = &[
    // l3fwd asks every port for rx checksum offload (RTE_ETH_RX_OFFLOAD_CHECKSUM) and
    // rte_eth_dev_configure refuses an offload the port lacks; af_packet offers none.
    // Later DPDK releases mask the request by the port's capabilities; so does this.
    Patch {
        file: "main.c",
        find: "\t\tlocal_port_conf.rx_adv_conf.rss_conf.rss_hf &=\n\t\t\tdev_info.flow_type_rss_offloads;\n",
        replace: "\t\tlocal_port_conf.rx_adv_conf.rss_conf.rss_hf &=\n\t\t\tdev_info.flow_type_rss_offloads;\n\
                  \t\t/* fwdscope: request only the offloads this port offers */\n\
                  \t\tlocal_port_conf.rxmode.offloads &= dev_info.rx_offload_capa;\n\
                  \t\tlocal_port_conf.txmode.offloads &= dev_info.tx_offload_capa;\n",
        why: "mask the port's requested rx/tx offloads by its capabilities (af_packet offers no rx checksum offload)",
    },
    // The rx queues are set up with the unmasked request again (port_conf, not the masked
    // local copy): the same mask there.
    Patch {
        file: "main.c",
        find: "\t\t\trxq_conf.offloads = port_conf.rxmode.offloads;\n",
        replace: "\t\t\trxq_conf.offloads = port_conf.rxmode.offloads & dev_info.rx_offload_capa; /* fwdscope */\n",
        why: "mask each rx queue's offloads by the port's capabilities too",
    },
    // l3fwd frees the packets a tx burst did not take without counting them anywhere (the
    // PMD counts only what it took or failed on). A per-port counter, declared here...
    Patch {
        file: "l3fwd.h",
        find: "extern uint32_t max_pkt_len;\n",
        replace: "extern uint32_t max_pkt_len;\n\n/* fwdscope: packets a tx burst did not take, freed by l3fwd, per port */\n\
                  extern uint64_t fwdscope_tx_dropped[RTE_MAX_ETHPORTS];\n",
        why: "declare a per-port count of packets l3fwd frees when a tx burst falls short",
    },
    // ...counted where send_burst frees them...
    Patch {
        file: "l3fwd.h",
        find: "\tret = rte_eth_tx_burst(port, queueid, m_table, n);\n\tif (unlikely(ret < n)) {\n",
        replace: "\tret = rte_eth_tx_burst(port, queueid, m_table, n);\n\tif (unlikely(ret < n)) {\n\
                  \t\t__atomic_fetch_add(&fwdscope_tx_dropped[port], n - ret, __ATOMIC_RELAXED); /* fwdscope */\n",
        why: "count the packets send_burst frees",
    },
    // ...and where send_packetsx4 sends a full burst directly...
    Patch {
        file: "l3fwd_common.h",
        find: "\t\tn = rte_eth_tx_burst(port, qconf->tx_queue_id[port], m, num);\n\t\tif (unlikely(n < num)) {\n",
        replace: "\t\tn = rte_eth_tx_burst(port, qconf->tx_queue_id[port], m, num);\n\t\tif (unlikely(n < num)) {\n\
                  \t\t\t__atomic_fetch_add(&fwdscope_tx_dropped[port], num - n, __ATOMIC_RELAXED); /* fwdscope */\n",
        why: "count the packets send_packetsx4 frees",
    },
    // ...and published on DPDK's telemetry socket as /fwdscope/tx_dropped (a list by port),
    // registered before the EAL starts the telemetry thread.
    Patch {
        file: "main.c",
        find: "\t/* init EAL */\n\tret = rte_eal_init(argc, argv);\n",
        replace: "\t/* fwdscope: publish the tx drops on the telemetry socket */\n\
                  \trte_telemetry_register_cmd(\"/fwdscope/tx_dropped\", fwdscope_tx_dropped_cmd,\n\
                  \t\t\"Packets l3fwd freed because a tx burst fell short, by port\");\n\
                  \t/* init EAL */\n\tret = rte_eal_init(argc, argv);\n",
        why: "register the telemetry command /fwdscope/tx_dropped",
    },
    // l3fwd's printf output is block-buffered when it goes to a file, so the lab's
    // l3fwd.log would show rte_exit's cause before the lines that led to it, and the end of
    // the log, which a failed start reports, would not say why.
    Patch {
        file: "main.c",
        find: "\t/* init EAL */\n\tret = rte_eal_init(argc, argv);\n",
        replace: "\tsetvbuf(stdout, NULL, _IOLBF, 0); /* fwdscope: the log in order */\n\
                  \t/* init EAL */\n\tret = rte_eal_init(argc, argv);\n",
        why: "line-buffer stdout, so l3fwd's log is in order when it goes to a file",
    },
    // l3fwd's IPv4 LPM table holds 1024 rules; the lab has up to 65536 routes, all inside
    // 198.19.0.0/16, so the 256 tbl8 groups it has (one per /24 with longer prefixes) do.
    Patch {
        file: "l3fwd_lpm.c",
        find: "#define IPV4_L3FWD_LPM_MAX_RULES         1024\n",
        replace: "#define IPV4_L3FWD_LPM_MAX_RULES         65536 /* fwdscope: the lab's route count */\n",
        why: "hold up to 65536 IPv4 rules (the lab's largest route set) instead of 1024",
    },
    Patch {
        file: "main.c",
        find: "int\nmain(int argc, char **argv)\n{\n",
        replace: "/* fwdscope: the tx drop counters and their telemetry command */\n\
                  #include <rte_telemetry.h>\n\
                  uint64_t fwdscope_tx_dropped[RTE_MAX_ETHPORTS];\n\
                  static int\nfwdscope_tx_dropped_cmd(const char *cmd __rte_unused, const char *params __rte_unused,\n\
                  \t\tstruct rte_tel_data *d)\n{\n\tuint16_t p;\n\n\trte_tel_data_start_array(d, RTE_TEL_U64_VAL);\n\
                  \tfor (p = 0; p < rte_eth_dev_count_avail(); p++)\n\
                  \t\trte_tel_data_add_array_u64(d, __atomic_load_n(&fwdscope_tx_dropped[p], __ATOMIC_RELAXED));\n\
                  \treturn 0;\n}\n\nint\nmain(int argc, char **argv)\n{\n",
        why: "define the tx drop counters and the telemetry command's handler",
    },
];

/// Apply `patches` to the source directory `dir` (each `find` exactly once in its file).
pub fn apply_patches(dir: &Path, patches: &[Patch]) -> Result<()> {
    for p in patches {
        let path = dir.join(p.file);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::Io { path: path.clone(), source: e })?;
        let n = text.matches(p.find).count();
        if n != 1 {
            bail!(
                "{}: fwdscope's change `{}` expects its anchor text once, found it {n} times: this l3fwd source is not \
                 DPDK 22.11's (put a `dpdk-l3fwd` that runs on af_packet on PATH instead)",
                path.display(),
                p.why
            );
        }
        std::fs::write(&path, text.replacen(p.find, p.replace, 1)).map_err(|e| Error::Io { path, source: e })?;
    }
    Ok(())
}

/// A short key of the changes, so a cached build made with other changes is not reused.
fn patches_key(patches: &[Patch]) -> String {
    // FNV-1a over every file, anchor and replacement.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in patches {
        for b in p.file.bytes().chain(p.find.bytes()).chain(p.replace.bytes()).chain([0]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{:08x}", h as u32)
}

/// The lab's route set in l3fwd's LPM rule-file format (DPDK 22.11's lpm_route_parse.c):
/// `R<addr>/<len> <port>` per line, every route to port 1 (NAME-f1, towards the sink).
pub fn rules_v4(routes: &[(u32, u8)]) -> String {
    let mut s = String::from("# the lab's routes, all via port 1 (towards the sink)\n");
    for (a, l) in routes {
        s.push_str(&format!("R{}/{l} 1\n", std::net::Ipv4Addr::from(*a)));
    }
    s
}

/// l3fwd insists on at least one IPv6 rule; the lab has IPv6 off, so this one (inside the
/// 2001:2::/48 benchmarking range) never matches a frame.
pub const RULES_V6: &str = "# l3fwd needs one IPv6 rule; the lab has IPv6 off\nR2001:2::/48 1\n";

/// Run a command to the end; its stdout, or an error with its stderr.
fn output(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        return Err(Error::Command {
            what: what.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// An executable `name` on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// Where builds are cached: /var/cache/fwdscope for root, else $XDG_CACHE_HOME/fwdscope or
/// ~/.cache/fwdscope. Root's directory must be root's own and writable by nobody else.
fn cache_root() -> Result<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let dir = if root {
        PathBuf::from("/var/cache/fwdscope")
    } else if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        PathBuf::from(x).join("fwdscope")
    } else {
        PathBuf::from(std::env::var_os("HOME").context("no HOME for the l3fwd build cache")?).join(".cache/fwdscope")
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let meta = std::fs::symlink_metadata(&dir).with_context(|| format!("{}", dir.display()))?;
    // SAFETY: as above.
    if !meta.is_dir() || meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o022 != 0 {
        bail!("{}: the l3fwd build cache must be a directory of this user's, writable by nobody else", dir.display());
    }
    Ok(dir)
}

/// Copy the directory tree `from` into `to` (regular files and directories only).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for e in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let e = e?;
        let t = e.file_type()?;
        let dest = to.join(e.file_name());
        if t.is_dir() {
            copy_tree(&e.path(), &dest)?;
        } else if t.is_file() {
            std::fs::copy(e.path(), &dest).with_context(|| format!("copying {}", e.path().display()))?;
        }
    }
    Ok(())
}

/// The l3fwd binary the lab runs, and how it was found or built (for the `up` line).
pub fn l3fwd() -> Result<(PathBuf, String)> {
    if let Some(p) = on_path("dpdk-l3fwd") {
        let how = format!("{} (found on PATH)", p.display());
        return Ok((p, how));
    }
    let need = |what: &str, pkg: &str, e: &dyn std::fmt::Display| {
        Error::Config(format!(
            "--mode dpdk: {what}: install {pkg} (Debian: apt-get install {PACKAGES}), or put a dpdk-l3fwd on PATH ({e})"
        ))
    };
    let version =
        output(Command::new("pkg-config").args(["--modversion", "libdpdk"]), "`pkg-config --modversion libdpdk`")
            .map_err(|e| need("DPDK's development files (libdpdk.pc) are missing", "libdpdk-dev", &e))?;
    let prefix =
        output(Command::new("pkg-config").args(["--variable=prefix", "libdpdk"]), "`pkg-config --variable=prefix`")?;
    let examples = Path::new(&prefix).join("share/dpdk/examples");
    if !examples.join("l3fwd/main.c").is_file() || !examples.join("common").is_dir() {
        return Err(need(
            &format!("DPDK's example source is missing ({} has no l3fwd)", examples.display()),
            "dpdk-doc",
            &"not found",
        ));
    }
    if on_path("cc").is_none() {
        return Err(need("no C compiler (`cc`) to build l3fwd with", "gcc", &"cc not on PATH"));
    }
    let dir = cache_root()?.join(format!("l3fwd-{version}-{}", patches_key(PATCHES)));
    let bin = dir.join("dpdk-l3fwd");
    // One build at a time (a second `lab up` waits for the first's result).
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let lock = std::fs::File::create(dir.join("lock")).with_context(|| format!("{}", dir.display()))?;
    // SAFETY: flock on a file we hold open; released when it closes.
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    let how =
        format!("{} (built from DPDK {version}'s example; log {})", bin.display(), dir.join("build.log").display());
    if bin.is_file() {
        return Ok((bin, how));
    }
    build(&examples, &dir, &version)?;
    Ok((bin, how))
}

/// Copy l3fwd's source and the examples' `common` into `dir/src`, change it, compile it to
/// `dir/dpdk-l3fwd`; the command and the compiler's output go to `dir/build.log`.
fn build(examples: &Path, dir: &Path, version: &str) -> Result<()> {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    copy_tree(&examples.join("l3fwd"), &src.join("l3fwd"))?;
    copy_tree(&examples.join("common"), &src.join("common"))?;
    let l3 = src.join("l3fwd");
    apply_patches(&l3, PATCHES)?;
    let changes: String = PATCHES.iter().map(|p| format!("{}: {}\n", p.file, p.why)).collect();
    std::fs::write(src.join("FWDSCOPE-CHANGES"), &changes).with_context(|| format!("{}", src.display()))?;
    let cflags = output(Command::new("pkg-config").args(["--cflags", "libdpdk"]), "`pkg-config --cflags libdpdk`")?;
    let libs = output(Command::new("pkg-config").args(["--libs", "libdpdk"]), "`pkg-config --libs libdpdk`")?;
    // The sources the example's Makefile lists (lpm_route_parse.c and em_route_parse.c
    // are #included by l3fwd_lpm.c and l3fwd_em.c).
    let sources = [
        "main.c",
        "l3fwd_acl.c",
        "l3fwd_lpm.c",
        "l3fwd_fib.c",
        "l3fwd_em.c",
        "l3fwd_event.c",
        "l3fwd_event_generic.c",
        "l3fwd_event_internal_port.c",
    ];
    let tmp = dir.join(format!("dpdk-l3fwd.tmp{}", std::process::id()));
    let mut args: Vec<String> = ["-O3", "-g", "-DALLOW_EXPERIMENTAL_API", "-I../common"].map(String::from).to_vec();
    args.extend(cflags.split_whitespace().map(String::from));
    args.extend(sources.map(String::from));
    args.extend(["-o".to_string(), tmp.display().to_string()]);
    args.extend(libs.split_whitespace().map(String::from));
    let log_path = dir.join("build.log");
    let out = Command::new("cc").args(&args).current_dir(&l3).stdin(Stdio::null()).output().context("running cc")?;
    let log = format!(
        "DPDK {version}; source {} with fwdscope's changes:\n{changes}\ncd {} && cc {}\n{}{}",
        examples.display(),
        l3.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&log_path, &log).with_context(|| format!("writing {}", log_path.display()))?;
    if !out.status.success() {
        let tail = collector::files::log_tail(&log_path, 8);
        bail!("building l3fwd failed ({}); the end of {}:\n{tail}", out.status, log_path.display());
    }
    std::fs::rename(&tmp, dir.join("dpdk-l3fwd")).with_context(|| format!("installing {}", tmp.display()))?;
    Ok(())
}

/// The DPDK file prefix of a lab's l3fwd, and its runtime directory.
pub fn file_prefix(site: &Site) -> String {
    format!("fwdscope-lab-{}", site.name)
}

pub fn runtime_dir(site: &Site) -> PathBuf {
    Path::new("/var/run/dpdk").join(file_prefix(site))
}

/// l3fwd's command line on the lab (without `ip netns exec`).
pub fn command(site: &Site, bin: &Path, o: &DpdkOptions, lcore: usize, next_hop: &str) -> Vec<String> {
    let n = &site.name;
    let c = lcore;
    let mut v = vec![bin.display().to_string(), "-l".into(), c.to_string()];
    if !o.hugepages {
        v.extend(["--no-huge", "-m", "512"].map(String::from));
    } else {
        v.push("--huge-unlink".into());
    }
    v.extend(["--no-pci", "--file-prefix", &file_prefix(site)].map(String::from));
    for (port, ifname) in [(0, "f0"), (1, "f1")] {
        v.push("--vdev".into());
        v.push(match o.pmd() {
            // A deep ring (8192 frames of 2 KiB): l3fwd shares its CPU here, and a frame
            // that finds the ring full is lost (counted by the kernel only).
            Pmd::AfPacket => format!("net_af_packet{port},iface={n}-{ifname},framecnt=8192"),
            Pmd::AfXdp => format!("net_af_xdp{port},iface={n}-{ifname},start_queue=0,queue_count=1"),
        });
    }
    let state = &site.state_dir;
    v.extend(
        [
            "--",
            "-p",
            "0x3",
            "-P",
            "--parse-ptype",
            "--lookup",
            "lpm",
            &format!("--config=(0,0,{c}),(1,0,{c})"),
            &format!("--rule_ipv4={}", state.join("l3fwd-v4.cfg").display()),
            &format!("--rule_ipv6={}", state.join("l3fwd-v6.cfg").display()),
            &format!("--eth-dest=1,{next_hop}"),
        ]
        .map(String::from),
    );
    v
}

fn write_state(site: &Site, file: &str, text: &str) -> Result<()> {
    let p = site.state_dir.join(file);
    std::fs::write(&p, text).map_err(|e| Error::Io { path: p, source: e })
}

/// What `up` says about memory: no hugepages, or which.
pub fn memory_note(o: &DpdkOptions) -> String {
    if o.hugepages {
        "DPDK memory: hugepages (reserved ones, unlinked once mapped)".into()
    } else {
        "DPDK memory: no hugepages (--no-huge -m 512: 512 MiB of ordinary memory); where hugepages are reserved \
         (echo 256 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) and hugetlbfs is mounted \
         (mount -t hugetlbfs nodev /dev/hugepages), `lab up --mode dpdk --hugepages` uses them"
            .into()
    }
}

/// Free hugepages (HugePages_Free of /proc/meminfo).
fn free_hugepages() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("HugePages_Free:").and_then(|v| v.trim().parse().ok())))
        .unwrap_or(0)
}

/// Prepare l3fwd for the lab (build or find it, write its rule files and command) and,
/// unless `no_start`, start it detached, polling on CPU `lcore` and sending to `next_hop`
/// (a MAC), and wait until it polls. Returns its PID (none with `no_start`) and a line
/// saying what runs.
pub fn start(
    site: &Site,
    o: &DpdkOptions,
    routes: &[(u32, u8)],
    lcore: usize,
    next_hop: &str,
    no_start: bool,
) -> Result<(Option<i32>, String)> {
    let (bin, how) = l3fwd()?;
    if o.hugepages && free_hugepages() == 0 {
        bail!(
            "--hugepages: no free hugepages (HugePages_Free is 0 in /proc/meminfo); reserve some first, e.g. \
             echo 256 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        );
    }
    let hugetlbfs = std::fs::read_to_string("/proc/mounts").is_ok_and(|m| m.lines().any(|l| l.contains(" hugetlbfs ")));
    if o.hugepages && !hugetlbfs {
        bail!("--hugepages: no hugetlbfs is mounted for DPDK to map them from; mount one, e.g. mount -t hugetlbfs nodev /dev/hugepages");
    }
    write_state(site, "l3fwd-v4.cfg", &rules_v4(routes))?;
    write_state(site, "l3fwd-v6.cfg", RULES_V6)?;
    write_state(site, "pmd", o.pmd().name())?;
    let args = command(site, &bin, o, lcore, next_hop);
    let mut full: Vec<String> = ["ip", "netns", "exec", &site.fwd_ns].map(String::from).to_vec();
    full.extend(args.iter().cloned());
    write_state(site, "l3fwd.cmd", &(full.join(" ") + "\n"))?;
    let said = format!("l3fwd: {how}, {} PMD, lcore {lcore}", o.pmd().name());
    if no_start {
        write_state(site, "no-start", "")?;
        return Ok((None, said));
    }
    let log_path = site.state_dir.join("l3fwd.log");
    let log = std::fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    // Unbound: l3fwd outlives `lab up`; `lab down` finds it by PID and start time.
    let opts =
        collector::child::SpawnOptions { output: Some(&log), die_with_parent: false, cpu: None, ..Default::default() };
    let mut child = collector::child::GatedChild::spawn_with(Path::new(&full[0]), &full[1..], &opts)
        .context("starting l3fwd (`ip netns exec`)")?;
    child.release().context("starting l3fwd (`ip netns exec`)")?;
    let pid = child.pid;
    // `ip netns exec` execs l3fwd in this very process: PID and start time name it.
    let started = start_time(pid).map_or(String::new(), |t| format!(" {t}"));
    write_state(site, "l3fwd.pid", &format!("{pid}{started}"))?;
    let how = collector::launch::Wait {
        log: Some(&log_path),
        timeout: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    if let Err(e) = collector::launch::running_when_log_says(&mut child, "L3FWD: entering main loop", &how) {
        // An l3fwd that never came up may hang in EAL's start-up: killed, then reaped.
        child.signal(libc::SIGKILL);
        drop(child);
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let pmd = pmd_failure(&text, site, o.pmd()).map_or(String::new(), |p| format!("{p}; "));
        bail!("l3fwd: {pmd}{e}");
    }
    child.detach();
    Ok((Some(pid), said))
}

/// The PMD's complaint about one of the lab's interfaces in l3fwd's log, with the
/// interface named: the failing line names the device (`net_af_packet0` is NAME-f0) or the
/// interface, or the device that failed to initialise does, or l3fwd's cause (`port=N`).
pub fn pmd_failure(log: &str, site: &Site, pmd: Pmd) -> Option<String> {
    let driver = pmd.name();
    let iface = |i: usize| format!("{}-f{i}", site.name);
    let dev = |i: usize| format!("net_{driver}{i}");
    if log.contains("failed to parse device") {
        return Some(format!(
            "the net_{driver} PMD is not installed (Debian: librte-net-{}23, which `dpdk` pulls in)",
            driver.replace('_', "-")
        ));
    }
    let failing = |l: &str| {
        let l = l.to_ascii_lowercase();
        l.contains("fail") || l.contains("error") || l.contains("cannot") || l.contains("could not")
    };
    let about = |l: &str| {
        l.contains(&format!("net_{driver}"))
            || l.contains("xsk")
            || l.contains("xdp socket")
            || (0..2).any(|i| l.contains(&iface(i)))
    };
    let line = log.lines().find(|l| failing(l) && about(l))?.trim();
    let port = (0..2)
        .find(|&i| line.contains(&dev(i)) || line.contains(&iface(i)))
        .or_else(|| (0..2).find(|&i| log.contains(&format!("failed to initialize {} device", dev(i)))))
        .or_else(|| {
            let cause = log.lines().find(|l| l.contains("Cause:"))?;
            cause.split("port=").nth(1)?.trim().parse::<usize>().ok().filter(|&p| p < 2)
        });
    Some(match port {
        Some(i) => format!("the {driver} PMD could not open {}: {line}", iface(i)),
        None => format!("the {driver} PMD failed: {line}"),
    })
}

/// `l3fwd.pid`: the recorded PID and start time.
fn recorded(site: &Site) -> Option<(i32, Option<u64>)> {
    let text = std::fs::read_to_string(site.state_dir.join("l3fwd.pid")).ok()?;
    let mut it = text.split_whitespace();
    let pid: i32 = it.next()?.parse().ok().filter(|&p: &i32| p > 0)?;
    Some((pid, it.next().and_then(|t| t.parse().ok())))
}

/// Whether the recorded process still runs l3fwd: alive, not a zombie, the same start time,
/// this user's, and its program an l3fwd.
fn l3fwd_runs(pid: i32, started: Option<u64>) -> bool {
    if !fwd_abi::segment::process_runs(pid as u32) || !same_process(pid, started) {
        return false;
    }
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.file_name().is_some_and(|f| f.to_string_lossy().contains("l3fwd")))
        .unwrap_or(false)
}

/// The lab's l3fwd, if it runs.
pub fn pid(site: &Site) -> Option<i32> {
    recorded(site).filter(|&(p, t)| l3fwd_runs(p, t)).map(|(p, _)| p)
}

/// When the lab started an l3fwd that no longer runs: a message saying so.
pub fn dead(site: &Site) -> Option<String> {
    if site.state_dir.join("no-start").exists() {
        return None;
    }
    let (p, t) = recorded(site)?;
    if l3fwd_runs(p, t) {
        return None;
    }
    let tail = collector::files::log_tail(&site.state_dir.join("l3fwd.log"), 3);
    Some(format!(
        "the lab's l3fwd (pid {p}) is dead{}; `fwdscope lab up --name {} --mode dpdk` starts it again",
        if tail.is_empty() { String::new() } else { format!(" (its log ends: {tail})") },
        site.name
    ))
}

/// Whether `pid` has exited with all its threads: gone, or a zombie whose every thread is
/// (l3fwd's main thread shows Z while its other threads still tear down its ports).
fn exited(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    tasks.flatten().all(|t| {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        matches!(stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()), Some("Z" | "X") | None)
    })
}

/// Stop the lab's l3fwd (SIGTERM, then SIGKILL) and remove its DPDK runtime directory.
pub fn stop(site: &Site) {
    if let Some(pid) = pid(site) {
        for (i, sig) in [(100, libc::SIGTERM), (40, libc::SIGKILL)] {
            // SAFETY: signalling the lab's own l3fwd (checked by PID, start time, owner).
            unsafe { libc::kill(pid, sig) };
            let mut gone = false;
            for _ in 0..i {
                // SAFETY: reap it if it is our child; signal 0 checks existence.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
                if exited(pid) {
                    gone = true;
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            if gone {
                break;
            }
        }
    }
    // /var/run/dpdk is root's; the prefix is the lab's own. Never follow a link there.
    let dir = runtime_dir(site);
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// One port's counters from DPDK's telemetry (`/ethdev/stats,PORT`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub ipackets: u64,
    pub opackets: u64,
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    pub rx_nombuf: u64,
}

/// Ask the lab's l3fwd's telemetry socket `cmd`; the value of its answer.
pub fn telemetry(site: &Site, cmd: &str) -> Result<serde_json::Value> {
    let path = runtime_dir(site).join("dpdk_telemetry.v2");
    let what = || format!("DPDK telemetry {}", path.display());
    // SAFETY: socket(2); the descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).with_context(what);
    }
    // SAFETY: a fresh descriptor of ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: zeroed sockaddr_un is valid; the path is copied within its bounds.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    if bytes.len() >= addr.sun_path.len() {
        bail!("{}: path too long for a socket", path.display());
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // A hung l3fwd must not hang `lab status`: 2 s per receive.
    let tv = libc::timeval { tv_sec: 2, tv_usec: 0 };
    // SAFETY: setsockopt and connect with valid pointers and sizes.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
        if libc::connect(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as u32,
        ) != 0
        {
            return Err(std::io::Error::last_os_error()).with_context(what);
        }
    }
    let recv = |buf: &mut Vec<u8>| -> Result<serde_json::Value> {
        // SAFETY: receiving into our buffer, within its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return Err(std::io::Error::last_os_error()).with_context(what);
        }
        serde_json::from_slice(&buf[..n as usize]).with_context(what)
    };
    let mut buf = vec![0u8; 1 << 16];
    let hello = recv(&mut buf)?;
    let max = hello["max_output_len"].as_u64().unwrap_or(16384).clamp(1024, 1 << 20) as usize;
    buf.resize(max, 0);
    // SAFETY: sending our command's bytes.
    if unsafe { libc::send(fd.as_raw_fd(), cmd.as_ptr().cast(), cmd.len(), 0) } < 0 {
        return Err(std::io::Error::last_os_error()).with_context(what);
    }
    let answer = recv(&mut buf)?;
    let key = cmd.split(',').next().unwrap_or(cmd);
    Ok(answer.get(key).cloned().unwrap_or(serde_json::Value::Null))
}

/// Port `port`'s counters from the lab's l3fwd.
pub fn port_stats(site: &Site, port: u16) -> Result<PortStats> {
    let v = telemetry(site, &format!("/ethdev/stats,{port}"))?;
    let g = |k: &str| v[k].as_u64().with_context(|| format!("no `{k}` in l3fwd's /ethdev/stats,{port}"));
    Ok(PortStats {
        ipackets: g("ipackets")?,
        opackets: g("opackets")?,
        imissed: g("imissed")?,
        ierrors: g("ierrors")?,
        oerrors: g("oerrors")?,
        rx_nombuf: g("rx_nombuf")?,
    })
}

/// Packets l3fwd freed because a tx burst fell short, by port (fwdscope's telemetry
/// command in the l3fwd it builds; None from another l3fwd).
pub fn tx_dropped(site: &Site) -> Option<Vec<u64>> {
    let v = telemetry(site, "/fwdscope/tx_dropped").ok()?;
    v.as_array()?.iter().map(serde_json::Value::as_u64).collect()
}

/// af_packet PMD: frames the kernel dropped because the PMD's rx ring on `ifname` was full,
/// since l3fwd started. DPDK 22.11's af_packet PMD does not count them; the kernel does
/// (PACKET_STATISTICS, which resets as it is read: the PMD never reads it). Each read is
/// added to the lab's `ring-drops` file, under a lock. None where it cannot be read.
pub fn ring_drops(site: &Site, ifname: &str) -> Option<u64> {
    let pid = pid(site)?;
    let index: u32 = std::fs::read_to_string(format!("/proc/{pid}/root/sys/class/net/{ifname}/ifindex"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .or_else(|| {
            let out = Command::new("ip").args(["-n", &site.fwd_ns, "-j", "link", "show", ifname]).output().ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            v[0]["ifindex"].as_u64().map(|i| i as u32)
        })?;
    // The process's packet sockets bound to that interface (/proc/PID/net/packet: inode,
    // interface index), found among its descriptors.
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/packet")).ok()?;
    let inodes: Vec<u64> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(4)?.parse::<u32>().ok()? == index).then(|| f.get(8)?.parse().ok())?
        })
        .collect();
    let path = site.state_dir.join("ring-drops");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path).ok()?;
    // SAFETY: flock on a file we hold open.
    unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    let mut total: u64 = std::fs::read_to_string(&path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
    // SAFETY: pidfd_open(2) on the lab's l3fwd.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return None;
    }
    // SAFETY: the descriptor just returned.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    for e in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        let Ok(link) = std::fs::read_link(e.path()) else { continue };
        let Some(inode) =
            link.to_str().and_then(|l| l.strip_prefix("socket:[")?.strip_suffix(']')?.parse::<u64>().ok())
        else {
            continue;
        };
        if !inodes.contains(&inode) {
            continue;
        }
        let Some(target) = e.file_name().to_str().and_then(|f| f.parse::<i32>().ok()) else { continue };
        // SAFETY: pidfd_getfd(2): a duplicate of l3fwd's socket, owned below.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: the descriptor just returned.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut st = [0u32; 3];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: getsockopt into our buffer of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                st.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if r != 0 {
            return None;
        }
        total += u64::from(st[1]);
    }
    std::fs::write(&path, total.to_string()).ok()?;
    Some(total)
}

/// `lab status`'s lines for a dpdk lab.
pub fn status(site: &Site) -> String {
    let pmd = std::fs::read_to_string(site.state_dir.join("pmd")).unwrap_or_default();
    let mut s = format!("PMD {}\n", pmd.trim());
    let Some(p) = pid(site) else {
        return s + &match dead(site) {
            Some(d) => format!("l3fwd: DEAD: {d}\n"),
            None => "l3fwd: not running\n".into(),
        };
    };
    match (port_stats(site, 0), port_stats(site, 1)) {
        (Ok(a), Ok(b)) => {
            s.push_str(&format!(
                "l3fwd pid {p}: port 0 ({n}-f0) rx {} missed {} errors {} no-mbuf {}; port 1 ({n}-f1) tx {} errors {}",
                a.ipackets,
                a.imissed,
                a.ierrors,
                a.rx_nombuf,
                b.opackets,
                b.oerrors,
                n = site.name
            ));
            if let Some(d) = tx_dropped(site) {
                s.push_str(&format!(" tx-dropped {}", d.get(1).copied().unwrap_or(0)));
            }
            if pmd.trim() == "af_packet" {
                if let Some(r) = ring_drops(site, &format!("{}-f0", site.name)) {
                    s.push_str(&format!("; {}-f0 rx ring full (kernel) {r}", site.name));
                }
            }
            s.push_str(&format!(" (telemetry {})\n", runtime_dir(site).join("dpdk_telemetry.v2").display()));
        }
        (Err(e), _) | (_, Err(e)) => s.push_str(&format!("l3fwd pid {p}: no port counters ({e})\n")),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(name: &str) -> Site {
        Site {
            name: name.into(),
            state_dir: PathBuf::from("/run/fwdscope-lab").join(name),
            fwd_ns: format!("{name}-fwd"),
        }
    }

    #[test]
    fn rule_file_lines_are_l3fwd_lpm_routes_to_port_1() {
        let r = rules_v4(&[(0xC613_0000, 16), (0xC613_0507, 32)]);
        let lines: Vec<&str> = r.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines, ["R198.19.0.0/16 1", "R198.19.5.7/32 1"]);
        assert!(RULES_V6.lines().any(|l| l == "R2001:2::/48 1"));
    }

    #[test]
    fn patches_apply_once_and_refuse_other_sources() {
        let d = std::env::temp_dir().join(format!("fwdscope-l3fwd-patch-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.c"), "x = 1;\ny = 2;\n").unwrap();
        let p = [Patch { file: "a.c", find: "y = 2;\n", replace: "y = 3;\n", why: "y" }];
        apply_patches(&d, &p).unwrap();
        assert_eq!(std::fs::read_to_string(d.join("a.c")).unwrap(), "x = 1;\ny = 3;\n");
        // Applied already: the anchor is gone, and the error names the file and the change.
        let e = apply_patches(&d, &p).unwrap_err().to_string();
        assert!(e.contains("a.c") && e.contains("`y`") && e.contains("found it 0 times"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
        // Distinct changes, distinct cache keys.
        assert_ne!(patches_key(PATCHES), patches_key(&PATCHES[1..]));
    }

    #[test]
    fn the_patches_fit_the_installed_l3fwd_source() {
        let src = Path::new("/usr/share/dpdk/examples/l3fwd");
        if !src.join("main.c").is_file() {
            println!("SKIP: no DPDK example source at {} (Debian: dpdk-doc)", src.display());
            return;
        }
        let d = std::env::temp_dir().join(format!("fwdscope-l3fwd-src-{}", std::process::id()));
        copy_tree(src, &d).unwrap();
        apply_patches(&d, PATCHES).unwrap();
        let main = std::fs::read_to_string(d.join("main.c")).unwrap();
        assert!(main.contains("local_port_conf.rxmode.offloads &= dev_info.rx_offload_capa;"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_command_names_the_lab_pmd_prefix_and_memory() {
        let site = site("d1");
        let o = DpdkOptions { pmd: Some(Pmd::AfXdp), hugepages: false };
        let c = command(&site, Path::new("/x/dpdk-l3fwd"), &o, 1, "02:00:00:00:00:09").join(" ");
        assert!(c.starts_with("/x/dpdk-l3fwd -l 1 --no-huge -m 512 --no-pci --file-prefix fwdscope-lab-d1 "), "{c}");
        assert!(
            c.contains("--vdev net_af_xdp0,iface=d1-f0,start_queue=0,queue_count=1 --vdev net_af_xdp1,iface=d1-f1,")
        );
        assert!(c.contains("--config=(0,0,1),(1,0,1)") && c.ends_with("--eth-dest=1,02:00:00:00:00:09"), "{c}");
        let h = DpdkOptions { pmd: None, hugepages: true };
        let c = command(&site, Path::new("l3"), &h, 0, "m").join(" ");
        assert!(!c.contains("--no-huge") && c.contains("--huge-unlink") && c.contains("net_af_packet0,iface=d1-f0"));
    }

    #[test]
    fn a_pmd_that_cannot_open_its_interface_is_named() {
        let site = site("d2");
        // Real logs of DPDK 22.11's l3fwd: af_packet on a missing interface (port 0), and
        // af_xdp on a queue another AF_XDP socket holds (port 0, named by l3fwd's cause).
        let log = "EAL: Selected IOVA mode 'VA'\nrte_pmd_init_internals(): net_af_packet0: ioctl failed \
                   (SIOCGIFINDEX):No such device\nvdev_probe(): failed to initialize net_af_packet0 device\n\
                   EAL: Bus (vdev) probe failed.\n";
        let m = pmd_failure(log, &site, Pmd::AfPacket).unwrap();
        assert!(m.starts_with("the af_packet PMD could not open d2-f0: rte_pmd_init_internals()"), "{m}");
        let log = "Initializing rx queues on lcore 0 ... rxq=0,0,0 xsk_configure(): Failed to create xsk socket.\n\
                   eth_rx_queue_setup(): Failed to configure xdp socket\nEAL: Error - exiting with code: 1\n  \
                   Cause: rte_eth_rx_queue_setup: err=-22, port=1\n";
        let m = pmd_failure(log, &site, Pmd::AfXdp).unwrap();
        assert!(m.starts_with("the af_xdp PMD could not open d2-f1: ") && m.contains("xsk socket"), "{m}");
        assert_eq!(pmd_failure("EAL: Detected CPU lcores: 2\nL3FWD: entering main loop\n", &site, Pmd::AfXdp), None);
    }
}
