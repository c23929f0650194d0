//! `lab up --mode xdp`: fwdscope's XDP forwarder (bpf/xdp_fwd.c, through [`crate::xdp`])
//! on the lab, and the process that holds it: `fwdscope lab xdp-forward` (hidden), which the
//! lab starts inside the forwarding namespace and records as its forwarder (PID and start
//! time), as it does the bundled forwarder. The lab's names and paths come in a [`Site`]
//! (`netns` uses this module, not the other way round).
//!
//! That process loads the object, puts NAME-f1 in the program's devmap, attaches the
//! program to NAME-f0 and then publishes the program's per-CPU counters every 20 ms into a
//! stats segment at the lab's segment path (one worker block per CPU, [`xdp::COUNTERS`]
//! naming the counter each one becomes), so `lab status`, `stat -p`, `top -p` and the
//! exporter read the XDP forwarder like any other. Native XDP on the veth is tried first:
//! redirecting into a veth natively needs an XDP program on the egress veth's peer
//! (NAME-k0, in the sink namespace; it gives the peer the NAPI context that takes
//! redirected frames), so `fwd_xdp_pass` goes there. Where either native attach is refused,
//! generic XDP on NAME-f0 alone is the fallback, and the line the process prints (kept in
//! the state directory's `xdp-attach`, shown by `lab up` and `lab status`) says which mode
//! and why. A stop request (the segment's control block, SIGTERM, SIGINT, SIGHUP) detaches
//! both programs; after a SIGKILL they stay attached until `lab down` turns XDP off on both
//! interfaces.
//!
//! The forwarding namespace keeps the lab's routes and static neighbours in its FIB with
//! forwarding on (`bpf_fib_lookup` refuses to look up for an interface that does not
//! forward); frames the program passes to the stack are dropped at NAME-f0's ingress by the
//! lab's nft rule where nft exists, so only the program forwards, and every frame it does
//! not forward is counted once, by reason.

use crate::error::Context;
use crate::xdp::{self, Object, COUNTERS, XDP_FLAGS_DRV_MODE, XDP_FLAGS_SKB_MODE};
use crate::{Error, Result};
use std::ffi::{c_int, CString};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

/// How the XDP forwarder attaches to the lab's input interface.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpAttach {
    /// Native where the veths take it, generic otherwise (the output says why).
    #[default]
    Auto,
    /// Native XDP only: a refusal is an error.
    Native,
    /// Generic (skb) XDP.
    Generic,
}

impl XdpAttach {
    pub fn name(self) -> &'static str {
        match self {
            XdpAttach::Auto => "auto",
            XdpAttach::Native => "native",
            XdpAttach::Generic => "generic",
        }
    }
}

/// Flags of `fwdscope lab xdp-forward`, the process `lab up --mode xdp` starts in the
/// forwarding namespace (defaults as shown).
#[derive(Debug, Clone, clap::Args)]
pub struct XdpForwardArgs {
    /// Lab name.
    #[arg(long, default_value = "fsl")]
    pub name: String,
    /// How to attach.
    #[arg(long, value_enum, default_value_t = XdpAttach::Auto)]
    pub xdp_mode: XdpAttach,
    /// Milliseconds between publications of the counters (1 to 10000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub interval_ms: u64,
}

/// Where a lab keeps what its XDP forwarder uses (`netns::Lab::xdp_site`; this module
/// knows the lab only through it).
#[derive(Debug, Clone)]
pub struct Site {
    /// The lab's name: its interfaces are NAME-f0, NAME-f1, NAME-k0.
    pub name: String,
    /// The forwarding and sink namespaces.
    pub fwd_ns: String,
    pub sink_ns: String,
    /// The lab's state directory (the attach note goes there) and stats segment path.
    pub state_dir: std::path::PathBuf,
    pub segment: std::path::PathBuf,
}

/// The command `lab up --mode xdp` runs: `ip netns exec NAME-fwd FWDSCOPE lab xdp-forward ...`.
pub fn command(site: &Site, fwdscope: &std::path::Path, mode: XdpAttach) -> Vec<String> {
    let mut v: Vec<String> = ["ip", "netns", "exec", &site.fwd_ns].map(String::from).to_vec();
    v.push(fwdscope.display().to_string());
    v.extend(["lab", "xdp-forward", "--name", &site.name, "--xdp-mode", mode.name()].map(String::from));
    v
}

/// Why `--mode xdp` cannot run here, if it cannot: no program in this build, or no
/// libbpf. Checked by `lab up` before it builds anything.
pub fn unavailable() -> Option<String> {
    if let Err(why) = xdp::forwarder_object() {
        return Some(format!("--mode xdp is not available: {why}"));
    }
    xdp::libbpf().err().map(|e| format!("--mode xdp is not available: {e}"))
}

/// The interface index of `name` in the calling thread's network namespace.
fn ifindex(name: &str) -> Result<u32> {
    let c = CString::new(name).map_err(|_| Error::Config(format!("interface name {name:?}")))?;
    // SAFETY: a NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(Error::Config(format!("no interface {name}: {}", std::io::Error::last_os_error())));
    }
    Ok(i)
}

/// Run `f` with the calling thread in the network namespace named `ns` (iproute2's
/// /run/netns/NS), then back in its own.
fn in_netns<T>(ns: &str, f: impl FnOnce() -> T) -> Result<T> {
    let own = std::fs::File::open("/proc/thread-self/ns/net").context("opening this thread's network namespace")?;
    let path = format!("/run/netns/{ns}");
    let target = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
    // SAFETY: setns on descriptors of network namespaces, for this thread only.
    if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("entering {ns}"));
    }
    let r = f();
    // SAFETY: as above, back to the thread's own namespace.
    if unsafe { libc::setns(own.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("returning to the forwarding namespace");
    }
    Ok(r)
}

/// The programs this process attached; detached (if still theirs) when dropped.
struct Attached {
    lib: &'static xdp::Libbpf,
    /// (ifindex, program, flags) on NAME-f0.
    input: Option<(u32, c_int, u32)>,
    /// (namespace, ifindex, program) of the XDP_PASS program on the egress veth's peer.
    peer: Option<(String, u32, c_int)>,
}

impl Attached {
    fn detach(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some((i, fd, flags)) = self.input.take() {
            if let Err(e) = self.lib.detach(i, fd, flags) {
                problems.push(format!("detaching from ifindex {i}: {e}"));
            }
        }
        if let Some((ns, i, fd)) = self.peer.take() {
            match in_netns(&ns, || self.lib.detach(i, fd, XDP_FLAGS_DRV_MODE)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(format!("detaching from ifindex {i} in {ns}: {e}")),
                Err(e) => problems.push(e.to_string()),
            }
        }
        problems
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

/// Attach as `mode` asks: the program's fd on `input`, and for native the pass program on
/// the peer. Returns the attach flags on NAME-f0 and the line that says what was done.
fn attach(site: &Site, mode: XdpAttach, obj: &Object, att: &mut Attached) -> Result<(u32, String)> {
    let lib = att.lib;
    let (f0, k0, sink) = (format!("{}-f0", site.name), format!("{}-k0", site.name), site.sink_ns.clone());
    let input = ifindex(&f0)?;
    let (fwd, pass) = (obj.program_fd(xdp::FWD_PROGRAM)?, obj.program_fd(xdp::PASS_PROGRAM)?);
    let generic = |att: &mut Attached, why: String| -> Result<(u32, String)> {
        lib.attach(input, fwd, XDP_FLAGS_SKB_MODE)
            .with_context(|| format!("attaching the XDP forwarder to {f0} (generic XDP)"))?;
        att.input = Some((input, fwd, XDP_FLAGS_SKB_MODE));
        Ok((XDP_FLAGS_SKB_MODE, format!("generic XDP on {f0} ({why})")))
    };
    if mode == XdpAttach::Generic {
        return generic(att, "asked for".into());
    }
    let refused = match lib.attach(input, fwd, XDP_FLAGS_DRV_MODE) {
        Ok(()) => {
            att.input = Some((input, fwd, XDP_FLAGS_DRV_MODE));
            let peer = in_netns(&sink, || ifindex(&k0).map(|i| (i, lib.attach(i, pass, XDP_FLAGS_DRV_MODE))))??;
            match peer {
                (i, Ok(())) => {
                    att.peer = Some((sink.clone(), i, pass));
                    return Ok((
                        XDP_FLAGS_DRV_MODE,
                        format!(
                            "native XDP on {f0}, with an XDP_PASS program on {k0} in {sink} (native redirect into a veth needs one on its peer)"
                        ),
                    ));
                }
                (_, Err(e)) => {
                    if let Some((i, fd, flags)) = att.input.take() {
                        lib.detach(i, fd, flags).with_context(|| format!("detaching from {f0}"))?;
                    }
                    format!("{k0}, the egress veth's peer, refused the XDP_PASS program native redirect into a veth needs: {e}")
                }
            }
        }
        Err(e) => format!("native attach refused: {e}"),
    };
    if mode == XdpAttach::Native {
        return Err(Error::Config(format!("--xdp-mode native on {f0}: {refused}")));
    }
    generic(att, format!("{refused}; fell back to generic"))
}

/// Run the XDP forwarder on the lab at `site` until `stop` is set or the segment's control
/// block asks it to stop; then detach. Returns the closing summary.
pub fn run(a: &XdpForwardArgs, site: &Site, stop: &AtomicBool) -> Result<String> {
    if let Some(why) = unavailable() {
        return Err(Error::Config(why));
    }
    let lib = xdp::libbpf()?;
    let bytes = xdp::forwarder_object().map_err(|why| Error::Config(why.to_string()))?;
    let obj = Object::load(lib, bytes, "the XDP forwarder (bpf/xdp_fwd.c)")?;
    let (f0, f1) = (format!("{}-f0", site.name), format!("{}-f1", site.name));
    let out = ifindex(&f1)?;
    obj.map_set(obj.map_fd(xdp::PORTS_MAP)?, out, out).with_context(|| format!("putting {f1} in the devmap"))?;
    let stats = obj.map_fd(xdp::STATS_MAP)?;
    let cpus = lib.possible_cpus()?;
    let mut att = Attached { lib, input: None, peer: None };
    let (flags, said) = attach(site, a.xdp_mode, &obj, &mut att)?;
    let prog_id = lib.attached_id(ifindex(&f0)?).unwrap_or(0);
    let line = format!("xdp on {f0}: {said}; program {} id {prog_id}", xdp::FWD_PROGRAM);
    println!("{line}");
    let _ = std::io::stdout().flush();
    let state = site.state_dir.join("xdp-attach");
    std::fs::write(&state, format!("{said}\n")).map_err(|e| Error::Io { path: state, source: e })?;
    let config = published_config(&f0, &f1, flags, cpus, prog_id, &said);
    let seg = fwd_abi::Segment::create(&site.segment, cpus, &config, 0).context("creating the stats segment")?;
    let publish = |seg: &fwd_abi::Segment| publish_counters(lib, stats, cpus, seg);
    publish(&seg)?;
    seg.set_state(fwd_abi::State::Running);
    let interval = std::time::Duration::from_millis(a.interval_ms);
    let ended = loop {
        if stop.load(Ordering::Relaxed) || seg.control().stop.load(Ordering::Relaxed) != 0 {
            break Ok(());
        }
        std::thread::sleep(interval);
        if let Err(e) = publish(&seg) {
            break Err(e);
        }
    };
    let problems = att.detach();
    // The last figures, after the detach: nothing changes them any more.
    let total = publish(&seg)?;
    seg.set_state(fwd_abi::State::Exited);
    ended?;
    let mut s = format!("xdp forwarder on {f0}: detached; ");
    s.push_str(&COUNTERS.iter().zip(total).map(|((n, _), v)| format!("{n} {v}")).collect::<Vec<_>>().join(", "));
    if !problems.is_empty() {
        return Err(Error::Config(format!("{s}; but: {}", problems.join("; "))));
    }
    Ok(s)
}

/// The configuration the stats segment publishes for the XDP forwarder on `f0` (out
/// `f1`): its attach mode (`flags`) and what `said` about it, a worker block per CPU, the
/// kernel's FIB, no cache, no stage clocks.
fn published_config(f0: &str, f1: &str, flags: u32, cpus: usize, prog_id: u32, said: &str) -> String {
    let driver = if flags == XDP_FLAGS_DRV_MODE { "xdp-native" } else { "xdp-generic" };
    let other = |v: serde_json::Value| v.as_object().cloned().unwrap_or_default();
    fwd_abi::Published {
        config: fwd_abi::published::PublishedConfig {
            driver: Some(driver.into()),
            workers: Some(cpus),
            workers_are_cpus: Some(true),
            fib: Some("kernel (bpf_fib_lookup)".into()),
            cache: Some("none".into()),
            prefetch: Some(fwd_abi::Prefetch::NONE),
            stage_clock: Some(false),
            other: other(serde_json::json!({"in": f0, "out": f1, "program": xdp::FWD_PROGRAM, "prog_id": prog_id})),
            ..Default::default()
        },
        info: fwd_abi::published::PublishedInfo {
            tsc_hz: Some(0),
            other: other(serde_json::json!({ "attach": said })),
            ..Default::default()
        },
    }
    .to_json()
}

/// Publish the program's per-CPU counters (map `stats`, `cpus` of them) into `seg`, one
/// worker block per CPU stamped now; their totals over the CPUs.
fn publish_counters(
    lib: &xdp::Libbpf,
    stats: c_int,
    cpus: usize,
    seg: &fwd_abi::Segment,
) -> Result<[u64; COUNTERS.len()]> {
    let per_cpu = lib.read_counters(stats, cpus).context("reading the XDP forwarder's counters")?;
    let mut values = vec![0u64; fwd_abi::N_COUNTERS];
    let mut total = [0u64; COUNTERS.len()];
    let now = fwd_abi::rows::mono_ns();
    for (cpu, c) in per_cpu.iter().enumerate() {
        for (k, (_, ctr)) in COUNTERS.iter().enumerate() {
            values[*ctr as usize] = c[k];
            total[k] += c[k];
        }
        values[fwd_abi::Ctr::PublishMonoNs as usize] = now;
        seg.publish(cpu, &values);
    }
    Ok(total)
}

/// The lab's XDP attach line (`lab status`, `lab up`), as the forwarder wrote it in the
/// lab's state directory.
pub fn attach_note(state_dir: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(state_dir.join("xdp-attach")).ok().map(|s| s.trim().to_string())
}
