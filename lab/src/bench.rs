//! `lab bench`: packets per second forwarded by every forwarder the lab can run (the
//! kernel, the kernel with RPS, fwdscope's XDP program, DPDK's l3fwd through its af_packet
//! and af_xdp PMDs, the bundled forwarder over AF_PACKET and AF_XDP: [`Forwarder`]) on the
//! same lab and routes, the sender at full speed on one CPU and the device under test on
//! another, a discarding sink, in interleaved rounds with the sender alone as a baseline;
//! runs the contention rules flag left out; CPU per packet on the forwarder's own core and
//! on the sender's; the ratios with Welch's test; each forwarder's stage split from a
//! recording, and the [`crate::bench_page`] page of it all (`--html`). Everything runs in
//! this process (the sender on a thread that enters the sender namespace, the recorder on
//! another) except the lab's forwarders, which are processes of their own.

use crate::error::{bail, Context};
use crate::netns::{cpu_count, default_driver, up, ForwarderProgram, Lab, LabDriver, Mode, Sink, UpOptions};
use crate::sender::{send, SendOptions, Via};
use crate::{Error, Result};

/// What to measure: the `lab bench` flags, defaults as shown there.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchOptions {
    /// Lab name (built and removed by the benchmark).
    #[arg(long, default_value = "fsb")]
    pub name: String,
    /// Routes inside 198.19.0.0/16, the same table for every forwarder.
    #[arg(long, default_value_t = 8000)]
    pub routes: u32,
    /// Concurrent flows of the sender.
    #[arg(long, default_value_t = 32768)]
    pub flows: usize,
    /// Seconds of traffic per measurement.
    #[arg(long, default_value_t = 3.0, value_parser = forwarder::cli::parse_seconds)]
    pub seconds: f64,
    /// Measurements per forwarder (interleaved rounds), 1 to 1000.
    #[arg(long, default_value_t = 3, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..=1000), |v| v as usize))]
    pub repeat: usize,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 64)]
    pub size: u16,
    /// How the sender's frames leave it (`lab send --via`) [default: afxdp where it works,
    /// else afpacket].
    #[arg(long, value_enum)]
    pub via: Option<Via>,
    /// Forwarders to measure, comma-separated [default: every one that can run here; the
    /// others are named in the report's notes with the reason]. A forwarder named here that
    /// cannot run is an error saying why. The sender alone is always measured.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub forwarders: Option<Vec<Forwarder>>,
    /// Also write a self-contained HTML page to FILE: a stacked bar per forwarder (ns of CPU
    /// per packet by stage), the table, where the figures come from [default: none].
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Forwarder flags for the fwdscope runs (after `--`) [default: `--cache nocache`, like
    /// the kernel, which has had no route cache since Linux 3.6].
    #[arg(last = true)]
    pub forwarder_flags: Vec<String>,
    /// The forwarder program (not a flag: the caller's choice).
    #[arg(skip)]
    pub forwarder: ForwarderProgram,
    /// Set (by a signal handler) to end the bench early (default none): the run in progress
    /// ends, and the lab is taken down as on every other exit.
    #[arg(skip)]
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// A forwarder `lab bench` can measure (`--forwarders`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Forwarder {
    /// The kernel, as it forwards by default: in the receive softirq of the CPU that
    /// delivered the frame (on a veth, the sender's).
    Kernel,
    /// The kernel with the input's receive processing steered (RPS) to the device-under-test
    /// CPU (needs two CPUs).
    KernelRps,
    /// fwdscope's XDP forwarder (`lab up --mode xdp`): bpf_fib_lookup and a devmap
    /// redirect, in the softirq of the CPU that receives (on a veth, the sender's).
    Xdp,
    /// DPDK's l3fwd through the af_packet PMD (`lab up --mode dpdk --pmd af_packet`),
    /// polling on the device-under-test CPU.
    DpdkAfpacket,
    /// DPDK's l3fwd through the af_xdp PMD, polling on the device-under-test CPU.
    DpdkAfxdp,
    /// The bundled forwarder over AF_PACKET on the device-under-test CPU.
    FwdscopeAfpacket,
    /// The bundled forwarder over AF_XDP on the device-under-test CPU.
    FwdscopeAfxdp,
}

/// Every forwarder, in the report's order.
pub const FORWARDERS: [Forwarder; 7] = [
    Forwarder::Kernel,
    Forwarder::KernelRps,
    Forwarder::Xdp,
    Forwarder::DpdkAfpacket,
    Forwarder::DpdkAfxdp,
    Forwarder::FwdscopeAfpacket,
    Forwarder::FwdscopeAfxdp,
];

impl Forwarder {
    /// Its `--forwarders` name.
    pub fn name(self) -> &'static str {
        match self {
            Forwarder::Kernel => "kernel",
            Forwarder::KernelRps => "kernel-rps",
            Forwarder::Xdp => "xdp",
            Forwarder::DpdkAfpacket => "dpdk-afpacket",
            Forwarder::DpdkAfxdp => "dpdk-afxdp",
            Forwarder::FwdscopeAfpacket => "fwdscope-afpacket",
            Forwarder::FwdscopeAfxdp => "fwdscope-afxdp",
        }
    }

    /// The kernel's own forwarding (the comparisons' baseline).
    fn is_kernel(self) -> bool {
        matches!(self, Forwarder::Kernel | Forwarder::KernelRps)
    }

    /// A process of its own that forwards (its CPU time is read from the process).
    fn is_process(self) -> bool {
        matches!(
            self,
            Forwarder::DpdkAfpacket | Forwarder::DpdkAfxdp | Forwarder::FwdscopeAfpacket | Forwarder::FwdscopeAfxdp
        )
    }

    fn is_fwdscope(self) -> bool {
        matches!(self, Forwarder::FwdscopeAfpacket | Forwarder::FwdscopeAfxdp)
    }

    fn is_dpdk(self) -> bool {
        matches!(self, Forwarder::DpdkAfpacket | Forwarder::DpdkAfxdp)
    }

    /// Whether its forwarding work runs on a core of its own (the device-under-test CPU),
    /// rather than in the softirq of the CPU that sent the frame.
    fn own_core(self) -> bool {
        self.is_process() || self == Forwarder::KernelRps
    }

    /// The forwarder it is compared with besides the best kernel setup: its other packet
    /// I/O (afxdp against afpacket).
    fn sibling(self) -> Option<Forwarder> {
        match self {
            Forwarder::DpdkAfxdp => Some(Forwarder::DpdkAfpacket),
            Forwarder::FwdscopeAfxdp => Some(Forwarder::FwdscopeAfpacket),
            _ => None,
        }
    }

    /// The stage rules its split is named by, and how it is recorded.
    fn rules(self) -> (analyzer::rules::Rules, &'static str) {
        use analyzer::rules::Rules;
        match self {
            Forwarder::Kernel | Forwarder::KernelRps => (Rules::linux(), "record -a with callchains"),
            // The XDP program's rules first: its helpers are also kernel functions.
            Forwarder::Xdp => (Rules::linux().prepend(Rules::xdp()), "record -a with callchains"),
            // As the built-in set orders them: the kernel's, then DPDK's.
            Forwarder::DpdkAfpacket | Forwarder::DpdkAfxdp => {
                (Rules::dpdk().prepend(Rules::linux()), "record -a with callchains")
            }
            Forwarder::FwdscopeAfpacket | Forwarder::FwdscopeAfxdp => {
                (Rules::builtin(), "record -p on the lab's forwarder, with callchains")
            }
        }
    }
}

/// Why `f` cannot run on this machine, if it cannot: what a check finds without building a
/// lab (an attach the kernel refuses is found when the lab is brought up).
fn cannot_run(f: Forwarder, two_cpus: bool) -> Option<String> {
    let afxdp = || {
        let (d, why) = default_driver();
        (d != LabDriver::Afxdp).then(|| why.trim_start_matches("afpacket: ").to_string())
    };
    match f {
        Forwarder::Kernel => None,
        Forwarder::KernelRps => (!two_cpus).then(|| "one CPU: RPS needs a second CPU to steer to".to_string()),
        Forwarder::Xdp => crate::xdp_forwarder::unavailable(),
        Forwarder::DpdkAfpacket => crate::dpdk::l3fwd().err().map(|e| e.to_string()),
        Forwarder::DpdkAfxdp => {
            crate::dpdk::l3fwd().err().map(|e| e.to_string()).or_else(|| afxdp().map(|w| format!("af_xdp PMD: {w}")))
        }
        Forwarder::FwdscopeAfpacket => None,
        Forwarder::FwdscopeAfxdp => afxdp(),
    }
}

/// A reason on one line, cut to `max` characters (a build or start-up failure quotes logs).
fn one_line(why: &str, max: usize) -> String {
    let s = why.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// Forwarders to measure, and those skipped with the reason.
type Selection = (Vec<Forwarder>, Vec<(Forwarder, String)>);

/// What `--forwarders` asks for (`None`: every forwarder) split into those to measure and
/// those skipped with their reasons (one not asked for: `not in --forwarders`); a forwarder
/// named explicitly that cannot run is an error. `why` says why one cannot run (None: it
/// can). Duplicates count once.
fn select(asked: Option<&[Forwarder]>, why: &mut dyn FnMut(Forwarder) -> Option<String>) -> Result<Selection> {
    let mut wanted: Vec<Forwarder> = asked.map_or(FORWARDERS.to_vec(), <[Forwarder]>::to_vec);
    wanted.sort();
    wanted.dedup();
    let (mut run, mut skipped) = (Vec::new(), Vec::new());
    for f in FORWARDERS.iter().filter(|f| !wanted.contains(f)) {
        skipped.push((*f, "not in --forwarders".to_string()));
    }
    for f in wanted {
        match why(f) {
            None => run.push(f),
            Some(w) if asked.is_some() => bail!("--forwarders {}: cannot run here: {}", f.name(), one_line(&w, 600)),
            Some(w) => skipped.push((f, one_line(&w, 300))),
        }
    }
    if run.is_empty() {
        bail!("--forwarders: none of them can run here");
    }
    Ok((run, skipped))
}

/// A measurement's subject: a forwarder, or the sender alone (no forwarder: the forwarding
/// namespace drops every frame at ingress; the sender's own ceiling, from which each
/// forwarder's cost on the sender's CPU follows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    Fwd(Forwarder),
    SenderOnly,
}

impl Setup {
    fn label(self, dut: Option<usize>) -> String {
        let cpu = dut.map_or("any CPU".to_string(), |c| format!("CPU {c}"));
        match self {
            Setup::Fwd(f) => match f {
                Forwarder::Kernel => "kernel (softirq on the sender's CPU)".into(),
                Forwarder::KernelRps => format!("kernel-rps (receive on {cpu})"),
                Forwarder::Xdp => "xdp (softirq on the sender's CPU)".into(),
                Forwarder::DpdkAfpacket | Forwarder::DpdkAfxdp => format!("{} (l3fwd polling {cpu})", f.name()),
                Forwarder::FwdscopeAfpacket | Forwarder::FwdscopeAfxdp => {
                    format!("{} (forwarder on {cpu})", f.name())
                }
            },
            Setup::SenderOnly => "sender alone (frames dropped at the forwarding namespace's ingress)".into(),
        }
    }

    fn forwarder(self) -> Option<Forwarder> {
        match self {
            Setup::Fwd(f) => Some(f),
            Setup::SenderOnly => None,
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

/// A forwarder's stage split from its recorded run.
#[derive(Debug, Clone, Default)]
struct StageSplit {
    forwarder: Option<Forwarder>,
    /// The report's heading and stage table.
    title: String,
    table: String,
    /// How it was recorded (`record -a with callchains`).
    how: String,
    /// Sum of sample periods per stage (the bars' shares), and the samples they are from
    /// (with `record -a`, the forwarding threads' only: [`forwarding_threads_stages`]).
    stages: Vec<(String, u64)>,
    kept: u64,
    /// The event sampled, samples, and the rule files (with their rule counts).
    event: String,
    samples: u64,
    rule_files: String,
}

/// One measurement of `lab bench`.
struct Measured {
    setup: Setup,
    sent: u64,
    arrived: u64,
    seconds: f64,
    /// Was the machine busy: the sender thread's and (fwdscope, l3fwd) the forwarder's
    /// threads' run-queue wait, the host's steal. A flagged run is left out of the figures.
    contention: collector::contention::Contention,
    /// fwdscope: its stage clocks over the measured interval: forwarding stages' ns per
    /// forwarded packet (idle and run-queue waits excluded) and the idle share of its time.
    clock: Option<(f64, f64)>,
    /// ns of CPU on the forwarder's own core over the measured interval: its process's
    /// on-CPU time (fwdscope, l3fwd: every thread's /proc/PID/task/TID/schedstat), or the
    /// device-under-test CPU's kernel time (kernel-rps: /proc/stat); None without a core of
    /// its own.
    own_cpu_ns: Option<f64>,
    /// ns of softirq time /proc/stat counted on the sender's CPU over the interval.
    sender_softirq_ns: Option<f64>,
}

impl Measured {
    fn pps(&self) -> f64 {
        self.arrived as f64 / self.seconds.max(1e-9)
    }
    fn offered(&self) -> f64 {
        self.sent as f64 / self.seconds.max(1e-9)
    }
}

/// ns per USER_HZ tick of /proc/stat.
fn tick_ns() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1e9 / if hz > 0 { hz as f64 } else { 100.0 }
}

/// Per CPU (index: CPU number) from /proc/stat's `cpuN` lines: (kernel ticks, softirq
/// ticks), kernel being system, irq and softirq time: a forwarding softirq's, whether it
/// ran at an interrupt's end or in ksoftirqd, and not the user time of other programs.
fn parse_cpu_ticks(text: &str) -> Vec<Option<(u64, u64)>> {
    let mut out: Vec<Option<(u64, u64)>> = Vec::new();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("cpu") else { continue };
        let Some((n, values)) = rest.split_once(' ') else { continue };
        let Ok(n) = n.parse::<usize>() else { continue };
        let v: Vec<u64> = values.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if v.len() < 8 {
            continue;
        }
        if n >= out.len() {
            out.resize(n + 1, None);
        }
        out[n] = Some((v[2] + v[5] + v[6], v[6]));
    }
    out
}

fn cpu_ticks() -> Vec<Option<(u64, u64)>> {
    std::fs::read_to_string("/proc/stat").map(|t| parse_cpu_ticks(&t)).unwrap_or_default()
}

/// On-CPU ns of every thread of process `pid` so far (schedstat's first field).
fn process_run_ns(pid: i32) -> Option<u64> {
    let dir = format!("/proc/{pid}/task");
    let mut total = 0u64;
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let s = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        total += s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    Some(total)
}

/// The PID of the process forwarding for `f` on the lab, if it is one.
fn forwarder_process(lab: &Lab, f: Forwarder) -> Option<i32> {
    if f.is_fwdscope() {
        lab.forwarder_pid()
    } else if f.is_dpdk() {
        crate::dpdk::pid(&lab.dpdk())
    } else {
        None
    }
}

/// (Re)build the lab for `setup`, the sink discarding at its interface.
fn bench_up(a: &BenchOptions, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<()> {
    let f = setup.forwarder();
    let mode = match f {
        None => Mode::Fwdscope,
        Some(Forwarder::Kernel | Forwarder::KernelRps) => Mode::Kernel,
        Some(Forwarder::Xdp) => Mode::Xdp,
        Some(Forwarder::DpdkAfpacket | Forwarder::DpdkAfxdp) => Mode::Dpdk,
        Some(Forwarder::FwdscopeAfpacket | Forwarder::FwdscopeAfxdp) => Mode::Fwdscope,
    };
    let fwdscope = f.is_some_and(Forwarder::is_fwdscope);
    let o = UpOptions {
        name: a.name.clone(),
        routes: Some(a.routes),
        table: None,
        mode,
        no_start: setup == Setup::SenderOnly,
        sink: Sink::Discard,
        rps_cpu: at.dut.filter(|_| f == Some(Forwarder::KernelRps)),
        // The forwarder (fwdscope), l3fwd's lcore (dpdk), the process that publishes the
        // XDP program's counters (xdp: it only wakes every 20 ms) on the device-under-test CPU.
        forwarder_cpu: at.dut.filter(|_| f.is_some_and(|f| f.is_process() || f == Forwarder::Xdp)),
        forwarder_flags: if fwdscope { flags.to_vec() } else { Vec::new() },
        forwarder: a.forwarder.clone(),
        driver: Some(if f == Some(Forwarder::FwdscopeAfxdp) { LabDriver::Afxdp } else { LabDriver::Afpacket }),
        queues: None,
        dpdk: crate::dpdk::DpdkOptions {
            pmd: Some(if f == Some(Forwarder::DpdkAfxdp) {
                crate::dpdk::Pmd::AfXdp
            } else {
                crate::dpdk::Pmd::AfPacket
            }),
            hugepages: false,
        },
        xdp_mode: Default::default(),
    };
    lab.down()?;
    up(&o)?;
    Ok(())
}

/// The sender at full speed for `seconds`, on a thread of its own (it enters the sender
/// namespace): (packets sent, seconds, the sender thread's scheduler figures before and
/// after: its waiting on a run queue means another process took its CPU).
fn bench_send(a: &BenchOptions, at: Placement, seconds: f64) -> Result<(u64, f64, SenderSched)> {
    let o = SendOptions {
        name: a.name.clone(),
        flows: a.flows,
        pkts_per_flow: 10,
        dst: forwarder::traffic::DstPattern::Random,
        size: a.size,
        rate: None,
        count: None,
        duration: Some(seconds),
        seed: 1,
        cpu: at.sender,
        via: a.via,
        stop: a.stop.clone(),
    };
    let (sent, sched) = std::thread::Builder::new()
        .name("lab-sender".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let me = collector::contention::WorkerThread::of(std::process::id(), unsafe { libc::gettid() } as u32, 0);
            let before = me.read();
            let sent = send(&o);
            (sent, (before, me.read()))
        })
        .context("starting the sender thread")?
        .join()
        .map_err(|_| Error::Config("the sender thread panicked".into()))?;
    let sent = sent?;
    if let Some(why) = &sent.ended {
        return Err(Error::Config(format!("the sender ended early after {} packets: {why}", sent.packets)));
    }
    Ok((sent.packets, sent.seconds, sched))
}

/// The sender thread's scheduler figures before and after sending.
type SenderSched = (Option<collector::contention::ThreadReading>, Option<collector::contention::ThreadReading>);

fn bench_measure(a: &BenchOptions, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<Measured> {
    bench_up(a, lab, setup, at, flags)?;
    // Warm-up (not measured): first-touch page faults of the rings, caches, the flows.
    bench_send(a, at, 0.5)?;
    std::thread::sleep(std::time::Duration::from_millis(100));
    let r0 = lab.sink_received()?;
    let f = setup.forwarder();
    let process = f.and_then(|f| forwarder_process(lab, f));
    // The forwarder's threads (fwdscope's workers, l3fwd's main lcore), watched over the
    // measured interval like the sender thread and the host.
    let workers = match (f, process) {
        (Some(f), Some(pid)) if f.is_fwdscope() => {
            collector::contention::worker_threads(pid as u32).unwrap_or_default()
        }
        (Some(f), Some(pid)) if f.is_dpdk() => vec![collector::contention::WorkerThread::of(pid as u32, pid as u32, 0)],
        _ => Vec::new(),
    };
    let seg = match f {
        Some(f) if f.is_fwdscope() => fwd_abi::Segment::open(&lab.segment_path()).ok(),
        _ => None,
    };
    let snap0 = seg.as_ref().map(|s| s.snapshot());
    let before = collector::contention::read(&workers);
    let (ticks0, run0) = (cpu_ticks(), process.and_then(process_run_ns));
    let t0 = std::time::Instant::now();
    let (sent, seconds, (s0, s1)) = bench_send(a, at, a.seconds)?;
    let elapsed = t0.elapsed().as_nanos() as u64;
    let (ticks1, run1) = (cpu_ticks(), process.and_then(process_run_ns));
    let after = collector::contention::read(&workers);
    let clock = match (&seg, &snap0) {
        (Some(seg), Some(s0)) => {
            let s1 = seg.snapshot();
            let d = |c: fwd_abi::Ctr| s1.total(c).saturating_sub(s0.total(c));
            fwd_abi::clocks::ClockReport::new(d, seg.tsc_hz(), d(fwd_abi::Ctr::TxPackets))
                .and_then(|r| Some((r.forwarding_ns_per_packet?, r.idle_share)))
        }
        _ => None,
    };
    let tick = tick_ns();
    let cpu_delta = |cpu: usize, pick: fn((u64, u64)) -> u64| -> Option<f64> {
        let (b, e) = (ticks0.get(cpu).copied().flatten()?, ticks1.get(cpu).copied().flatten()?);
        Some(pick(e).saturating_sub(pick(b)) as f64 * tick)
    };
    let own_cpu_ns = match f {
        Some(f) if f.is_process() => match (run0, run1) {
            (Some(b), Some(e)) => Some(e.saturating_sub(b) as f64),
            _ => None,
        },
        Some(Forwarder::KernelRps) => at.dut.and_then(|c| cpu_delta(c, |t| t.0)),
        _ => None,
    };
    let sender_softirq_ns = at.sender.and_then(|c| cpu_delta(c, |t| t.1));
    // Frames still in flight (rings, backlogs) arrive within milliseconds.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let arrived = lab.sink_received()?.saturating_sub(r0);
    let with_sender = |r: collector::contention::Reading, s| {
        let mut threads = r.threads;
        threads.push(s);
        collector::contention::Reading { threads, host: r.host }
    };
    let contention = collector::contention::between(&with_sender(before, s0), &with_sender(after, s1), elapsed);
    Ok(Measured { setup, sent, arrived, seconds, contention, clock, own_cpu_ns, sender_softirq_ns })
}

/// The stage rules of the bench itself, tried first: the sender thread's own code (the
/// traffic generator in this process) is the machine's own traffic, apart from forwarding
/// work, when nothing else names a sample of it.
const SENDER_RULES: &str = "[[rule]]\nstage = \"local\"\nprocess = [\"lab-sender\"]\n";

/// The same load once more while recording (every CPU for the kernel, XDP and l3fwd; the
/// lab's forwarder by its PID), then the stage table by `f`'s rules.
fn bench_stages(a: &BenchOptions, lab: &Lab, f: Forwarder, at: Placement, flags: &[String]) -> Result<StageSplit> {
    use collector::session::{record, RecordOptions, Target};
    bench_up(a, lab, Setup::Fwd(f), at, flags)?;
    let dir = lab.state_dir().join("recording");
    // The lab's own state directory: its last recording (of an older fwdscope too, which
    // carries no output marker) is replaced.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let target = match (f.is_fwdscope(), lab.forwarder_pid()) {
        (true, Some(pid)) => Target::Pid(pid),
        (true, None) => bail!("{}: the lab's forwarder is not running to record", f.name()),
        _ => Target::All,
    };
    let mut o = RecordOptions::new(dir.clone(), target);
    o.force = true;
    o.call_graph = collector::perf_abi::CallGraph::FramePointer;
    o.freq = Some(999);
    o.duration = Some(std::time::Duration::from_secs_f64(a.seconds + 1.0));
    let recorder = std::thread::Builder::new()
        .name("lab-recorder".into())
        .spawn(move || record(&o, &std::sync::atomic::AtomicBool::new(false), None, &mut |_| {}))
        .context("starting the recorder thread")?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sent = bench_send(a, at, a.seconds).map(|_| ());
    let recorded = recorder.join().map_err(|_| Error::Config("the recorder thread panicked".into()))?;
    sent?;
    recorded?;
    let rec = collector::recording::Recording::open(&dir)?;
    let (rules, how) = f.rules();
    let rules = rules.prepend(analyzer::rules::Rules::parse(SENDER_RULES, "lab bench (the sender thread)")?);
    let t = analyzer::stages::stage_table(&rec, &rules)?;
    // Every CPU was sampled: the bars' shares count only the threads the forwarding runs
    // in, not whatever else the machine ran meanwhile (a compiler's samples would be
    // `other`, a forwarding stage).
    let (stages, kept) = if f.is_fwdscope() {
        (t.stages.iter().map(|r| (r.stage.clone(), r.period)).collect(), t.samples)
    } else {
        forwarding_threads_stages(&t.workers)
    };
    Ok(StageSplit {
        forwarder: Some(f),
        title: format!("{}: stage split ({how}; {})", f.name(), rules.sources_text()),
        how: how.to_string(),
        table: t.text(8),
        stages,
        kept,
        event: format!("{}{}", t.event, t.fallback.as_ref().map_or(String::new(), |f| format!(" ({f})"))),
        samples: t.samples,
        rule_files: t.rule_sources.iter().map(|(f, n)| format!("{f} ({n} rules)")).collect::<Vec<_>>().join(", "),
    })
}

/// Whether thread `name` of an every-CPU recording is one the lab's forwarding runs in: the
/// sender thread (veth delivers, and the kernel and XDP forward, in its softirq), the
/// softirq threads, the idle task (a softirq run at an idle CPU's interrupt), l3fwd.
fn forwarding_thread(name: &str) -> bool {
    ["lab-sender", "ksoftirqd/", "swapper", "dpdk-l3fwd", "l3fwd"].iter().any(|p| name.starts_with(p))
        || name == "tid 0"
}

/// Period per stage summed over the forwarding threads' tables, and their samples.
fn forwarding_threads_stages(threads: &[analyzer::stages::WorkerTable]) -> (Vec<(String, u64)>, u64) {
    let mut stages: Vec<(String, u64)> = Vec::new();
    let mut kept = 0u64;
    for w in threads.iter().filter(|w| forwarding_thread(&w.thread)) {
        kept += w.samples;
        for r in &w.stages {
            match stages.iter_mut().find(|s| s.0 == r.stage) {
                Some(s) => s.1 += r.period,
                None => stages.push((r.stage.clone(), r.period)),
            }
        }
    }
    (stages, kept)
}

/// What `lab bench` found: the text report and the page's content.
#[derive(Debug, Clone)]
pub struct BenchReport {
    pub text: String,
    pub page: crate::bench_page::BenchPage,
}

/// Run the benchmark; returns its report (the table, ratios, CPU per packet, the stage
/// splits) and the page. Progress goes to stderr. Builds and removes the lab `a.name`.
pub fn bench(a: &BenchOptions) -> Result<BenchReport> {
    if a.repeat == 0 || !a.seconds.is_finite() || a.seconds <= 0.0 {
        bail!("--repeat must be at least 1 and --seconds positive");
    }
    let lab = Lab::new(&a.name)?;
    let at = if cpu_count() >= 2 {
        Placement { sender: Some(0), dut: Some(1) }
    } else {
        Placement { sender: None, dut: None }
    };
    // Like for like: Linux since 3.6 looks every packet up in its FIB (no route cache).
    let flags = if a.forwarder_flags.is_empty() {
        vec!["--cache".to_string(), "nocache".to_string()]
    } else {
        a.forwarder_flags.clone()
    };
    let two_cpus = at.dut.is_some();
    let (chosen, mut skipped) = select(a.forwarders.as_deref(), &mut |f| cannot_run(f, two_cpus))?;
    // Bring each one up once: an attach or a start the kernel or DPDK refuses shows here,
    // before any measurement (l3fwd is built here at its first use, too).
    let mut forwarders = Vec::new();
    let mut attach_notes = Vec::new();
    for f in chosen {
        if a.stop.as_ref().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed)) {
            break;
        }
        match bench_up(a, &lab, Setup::Fwd(f), at, &flags) {
            Ok(()) => {
                if f == Forwarder::Xdp {
                    if let Some(n) = crate::xdp_forwarder::attach_note(&lab.state_dir()) {
                        attach_notes.push(format!("xdp attach: {n}"));
                    }
                }
                forwarders.push(f);
            }
            Err(e) if a.forwarders.is_some() => {
                let _ = lab.down_and_unlock();
                bail!("--forwarders {}: cannot run here: {}", f.name(), one_line(&e.to_string(), 600));
            }
            Err(e) => skipped.push((f, one_line(&e.to_string(), 300))),
        }
    }
    let mut setups: Vec<Setup> = forwarders.iter().map(|f| Setup::Fwd(*f)).collect();
    setups.push(Setup::SenderOnly);
    let result = if forwarders.is_empty() {
        Err(Error::Config(format!(
            "no forwarder could be brought up here: {}",
            skipped.iter().map(|(f, w)| format!("{}: {w}", f.name())).collect::<Vec<_>>().join("; ")
        )))
    } else {
        measure_all(a, &lab, &setups, &forwarders, at, &flags)
    };
    // The last lab's note says whether nft was there for the AF_PACKET setups' ingress drop.
    let last = std::fs::read_to_string(lab.state_dir().join("ingress")).unwrap_or_default();
    let mut notes = vec![if last.contains("nft") && !last.contains("not installed") {
        format!(
            "input frames: afpacket setups drop them at {0}-f0 ingress after the forwarder's tap (nft); afxdp and \
             xdp take them by XDP before the stack",
            a.name
        )
    } else {
        "no nft: in afpacket setups the forwarding namespace's IP stack also receives every frame".to_string()
    }];
    notes.extend(attach_notes);
    skipped.sort();
    for (f, why) in &skipped {
        notes.push(format!("skipped {}: {why}", f.name()));
    }
    let _ = lab.down_and_unlock();
    let (runs, splits) = result?;
    Ok(report(a, at, &setups, &flags, &notes, &runs, &splits))
}

/// Every setup `a.repeat` times in interleaved rounds (each round in another order, so
/// drift on a shared machine spreads over every setup), then one recorded run of each
/// forwarder for its stage split.
fn measure_all(
    a: &BenchOptions,
    lab: &Lab,
    setups: &[Setup],
    forwarders: &[Forwarder],
    at: Placement,
    flags: &[String],
) -> Result<(Vec<Measured>, Vec<StageSplit>)> {
    let bar = indicatif::ProgressBar::new((setups.len() * a.repeat + forwarders.len()) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs  {eta} left  {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let stopped = || {
        if a.stop.as_ref().is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed)) {
            Err(Error::Config("stopped by a signal: the lab is taken down, nothing is reported".into()))
        } else {
            Ok(())
        }
    };
    let result = (|| {
        let mut runs = Vec::new();
        for r in 0..a.repeat {
            for i in 0..setups.len() {
                stopped()?;
                let s = setups[(i + r) % setups.len()];
                bar.set_message(s.label(at.dut));
                runs.push(bench_measure(a, lab, s, at, flags)?);
                bar.inc(1);
            }
        }
        let mut splits = Vec::new();
        for f in forwarders {
            stopped()?;
            bar.set_message(format!("stage split: {}", f.name()));
            splits.push(bench_stages(a, lab, *f, at, flags)?);
            bar.inc(1);
        }
        Ok((runs, splits))
    })();
    bar.finish_and_clear();
    result
}

/// One forwarder's figures from its clean runs.
struct Figures {
    f: Forwarder,
    label: String,
    counted: usize,
    left_out: usize,
    /// Median forwarded pps and every clean run's.
    med: f64,
    pps: Vec<f64>,
    offered: f64,
    lost_pct: f64,
    /// It lost frames: limited by itself, not by the sender.
    itself: bool,
    /// ns of CPU per forwarded packet on its own core, and extra on the sender's (medians).
    own_ns: Option<f64>,
    sender_ns: Option<f64>,
    /// /proc/stat's softirq time on the sender's CPU per forwarded packet (median).
    softirq_ns: Option<f64>,
}

impl Figures {
    /// The bar's length: CPU per packet on the core its forwarding runs on.
    fn bar_ns(&self) -> Option<f64> {
        if self.f.own_core() {
            self.own_ns
        } else {
            self.sender_ns
        }
    }
}

fn fmt_ns(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.0}"))
}

/// The sender-core figure: a difference of two measured rates, so below zero it says only
/// that the cost is under what the runs resolve (`<0`), never a negative cost.
fn fmt_sender_ns(v: Option<f64>) -> String {
    match v {
        Some(v) if v < 0.0 => "<0".to_string(),
        v => fmt_ns(v),
    }
}

/// The median of `v`, None when it is empty.
fn median_of(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| analyzer::stats::median(&v))
}

/// The text table's column names (the page's table leaves out the offered load, column 5).
const TABLE_HEADER: [&str; 10] = [
    "forwarder",
    "runs",
    "left out",
    "forwarded pps",
    "[min .. max]",
    "offered pps",
    "lost",
    "own core ns",
    "sender ns",
    "limited by",
];

/// One line of the text table: its ten cells, each padded to its column.
fn table_line<S: AsRef<str>>(c: &[S]) -> String {
    format!(
        "{:<40} {:>4} {:>8} {:>14} {:>25} {:>14} {:>8} {:>11} {:>10}  {}",
        c[0].as_ref(),
        c[1].as_ref(),
        c[2].as_ref(),
        c[3].as_ref(),
        c[4].as_ref(),
        c[5].as_ref(),
        c[6].as_ref(),
        c[7].as_ref(),
        c[8].as_ref(),
        c[9].as_ref()
    )
}

/// A bench's runs, asked about by setup: a run the contention detector flagged is left out
/// of every figure.
struct RunSet<'a> {
    all: &'a [Measured],
    /// The device-under-test CPU, for the setups' labels.
    dut: Option<usize>,
}

impl<'a> RunSet<'a> {
    /// The setup's clean runs: those no contention was flagged in.
    fn clean(&self, s: Setup) -> Vec<&'a Measured> {
        self.all.iter().filter(|m| m.setup == s && m.contention.flags.is_empty()).collect()
    }

    /// How many of the setup's runs were left out for contention.
    fn left_out(&self, s: Setup) -> usize {
        self.all.iter().filter(|m| m.setup == s && !m.contention.flags.is_empty()).count()
    }

    /// Why the setup allows no confident comparison, if it does not: too many of its runs
    /// left out (the sweep's rule: over a quarter).
    fn busy(&self, s: Setup) -> Option<String> {
        let all = self.all.iter().filter(|m| m.setup == s).count();
        let out = self.left_out(s);
        (out * 4 > all || out == all).then(|| format!("{out} of {all} runs of {} left out", s.label(self.dut)))
    }
}

/// The report's first line: what ran, how long, through which socket, on which CPUs.
fn heading(a: &BenchOptions, at: Placement) -> String {
    format!(
        "lab bench: {} routes, {} flows, {}-byte frames; {} runs x {:.1} s per setup, interleaved; sender at full speed \
         through {}{}; sink: counts frames at its interface and discards them",
        a.routes,
        a.flows,
        a.size,
        a.repeat,
        a.seconds,
        match a.via.unwrap_or(if default_driver().0 == LabDriver::Afxdp { Via::Afxdp } else { Via::Afpacket }) {
            Via::Afxdp => "AF_XDP",
            Via::Afpacket => "AF_PACKET",
        },
        match (at.sender, at.dut) {
            (Some(s), Some(d)) => format!(" on CPU {s}; device under test on CPU {d}"),
            _ => " (one CPU: nothing pinned)".to_string(),
        }
    )
}

/// Forwarder `f`'s figures from its clean runs `mine` (at least one), `alone_med` being the
/// sender alone's median offered rate (NaN without a clean run of it).
fn figures_of(f: Forwarder, label: String, mine: &[&Measured], left_out: usize, alone_med: f64) -> Figures {
    use analyzer::stats::median;
    let pps: Vec<f64> = mine.iter().map(|m| m.pps()).collect();
    let lost: u64 = mine.iter().map(|m| m.sent.saturating_sub(m.arrived)).sum();
    let sent: u64 = mine.iter().map(|m| m.sent).sum();
    // Under 0.1% lost: everything offered went through, so the sender set the pace.
    let itself = lost as f64 > 0.001 * sent as f64;
    let forwarded = |m: &Measured| m.arrived.max(1) as f64;
    let own_ns = median_of(mine.iter().filter_map(|m| m.own_cpu_ns.map(|ns| ns / forwarded(m))).collect());
    // The sender's CPU runs flat out in every run: whatever of its time did not go to
    // sending (at its alone cost per packet) went to the forwarding path.
    let sender_ns = alone_med
        .is_finite()
        .then(|| median_of(mine.iter().map(|m| (1.0 - m.offered() / alone_med) * 1e9 / m.pps().max(1e-9)).collect()));
    let softirq_ns = median_of(mine.iter().filter_map(|m| m.sender_softirq_ns.map(|ns| ns / forwarded(m))).collect());
    Figures {
        f,
        label,
        counted: mine.len(),
        left_out,
        med: median(&pps),
        pps,
        offered: median(&mine.iter().map(|m| m.offered()).collect::<Vec<_>>()),
        lost_pct: 100.0 * lost as f64 / sent.max(1) as f64,
        itself,
        own_ns: if f.own_core() { own_ns } else { None },
        sender_ns: sender_ns.flatten(),
        softirq_ns,
    }
}

/// A forwarder's cells in the text table: its figures, the range of its runs' rates, and
/// what limited it.
fn table_cells(fig: &Figures) -> Vec<String> {
    let (lo, hi) = fig.pps.iter().fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
    let limited =
        if fig.itself { "itself (it lost frames)" } else { "the sender (nothing lost: its capacity is higher)" };
    vec![
        fig.label.clone(),
        fig.counted.to_string(),
        fig.left_out.to_string(),
        format!("{:.0}", fig.med),
        format!("[{lo:.0} .. {hi:.0}]"),
        format!("{:.0}", fig.offered),
        format!("{:.1}%", fig.lost_pct),
        fmt_ns(fig.own_ns),
        fmt_sender_ns(fig.sender_ns),
        limited.to_string(),
    ]
}

/// The cells of a forwarder every run of which was left out: no figure at all rather than a
/// made-up one.
fn left_out_cells(label: String, left_out: usize) -> Vec<String> {
    let mut cells = vec!["-".to_string(); 10];
    cells[0] = label;
    cells[1] = "0".into();
    cells[2] = left_out.to_string();
    cells
}

/// The page's row from a forwarder's text-table cells: narrower, to sit beside the chart:
/// the forwarder's name, no offered load, and what limited it in a word (`limited`).
fn page_row(mut cells: Vec<String>, f: Forwarder, limited: &str) -> Vec<String> {
    cells[0] = f.name().to_string();
    cells[9] = limited.to_string();
    cells.remove(5);
    cells
}

/// The table's forwarder rows in the setups' order: the text lines, the page's rows, and
/// the figures of each forwarder with a clean run.
fn forwarder_rows(setups: &[Setup], set: &RunSet, alone_med: f64) -> (Vec<String>, Vec<Vec<String>>, Vec<Figures>) {
    let (mut lines, mut rows, mut figures) = (Vec::new(), Vec::new(), Vec::new());
    for s in setups.iter().copied() {
        let Some(f) = s.forwarder() else { continue };
        let mine = set.clean(s);
        if mine.is_empty() {
            let cells = left_out_cells(s.label(set.dut), set.left_out(s));
            lines.push(table_line(&cells));
            rows.push(page_row(cells, f, "-"));
            continue;
        }
        let fig = figures_of(f, s.label(set.dut), &mine, set.left_out(s), alone_med);
        let cells = table_cells(&fig);
        lines.push(table_line(&cells));
        rows.push(page_row(cells, f, if fig.itself { "itself" } else { "the sender" }));
        figures.push(fig);
    }
    (lines, rows, figures)
}

/// The contention line: how many runs were left out, by which thresholds, and why.
fn contention_line(runs: &[Measured]) -> String {
    let flagged: Vec<&Measured> = runs.iter().filter(|m| !m.contention.flags.is_empty()).collect();
    let mut reasons: Vec<&str> = flagged.iter().flat_map(|m| m.contention.flags.iter().map(String::as_str)).collect();
    reasons.sort_unstable();
    reasons.dedup();
    format!(
        "contention: {} of {} runs left out (the sender or a forwarder's thread waiting to run over {:.0}% of a run, \
         or steal over {:.0}%){}",
        flagged.len(),
        runs.len(),
        collector::contention::MAX_RUNQ_SHARE * 100.0,
        collector::contention::MAX_STEAL_SHARE * 100.0,
        if reasons.is_empty() { String::new() } else { format!(": {}", reasons.join("; ")) }
    )
}

/// The comparisons to make, each a forwarder, what it is compared with and that one's
/// name: each forwarder against the best kernel setup (or, with none measured, every kernel
/// setup), and an afxdp forwarder against its afpacket sibling.
fn comparisons(setups: &[Setup], figures: &[Figures]) -> Vec<(Forwarder, Vec<Forwarder>, String)> {
    let best = figures.iter().filter(|m| m.f.is_kernel()).max_by(|x, y| x.med.total_cmp(&y.med));
    let kernels: Vec<Forwarder> = match best {
        Some(b) => vec![b.f],
        None => setups.iter().filter_map(|s| s.forwarder()).filter(|f| f.is_kernel()).collect(),
    };
    let present: Vec<Forwarder> = setups.iter().filter_map(|s| s.forwarder()).collect();
    let mut pairs: Vec<(Forwarder, Vec<Forwarder>, String)> = present
        .iter()
        .filter(|f| !f.is_kernel() && !kernels.is_empty())
        .map(|f| (*f, kernels.clone(), "best kernel setup".to_string()))
        .collect();
    for f in &present {
        if let Some(sib) = f.sibling().filter(|s| present.contains(s)) {
            pairs.push((*f, vec![sib], sib.name().to_string()));
        }
    }
    pairs
}

/// The ratio line of `f` against the first of `against` (named `other`): undecided when the
/// machine was too busy for either side, none when a side has no figures.
fn ratio_line(f: Forwarder, against: &[Forwarder], other: &str, figures: &[Figures], set: &RunSet) -> Option<String> {
    let undecided: Vec<String> =
        std::iter::once(f).chain(against.iter().copied()).map(Setup::Fwd).filter_map(|s| set.busy(s)).collect();
    if !undecided.is_empty() {
        return Some(format!(
            "ratio {} / {other}: undecided: the machine was busy ({})",
            f.name(),
            undecided.join("; ")
        ));
    }
    let fm = figures.iter().find(|m| m.f == f)?;
    let om = against.first().and_then(|o| figures.iter().find(|m| m.f == *o))?;
    // Welch's test needs two runs of each side to estimate a variance.
    let test = if fm.pps.len() < 2 || om.pps.len() < 2 {
        "no test of the difference (one run of a side: --repeat 2 or more gives one)".to_string()
    } else {
        let p = analyzer::stats::welch_p(&fm.pps, &om.pps);
        format!("difference of means {}significant (Welch p = {p:.3})", if p < 0.05 { "" } else { "not " })
    };
    Some(format!("ratio {} / {other} ({}): {:.2} (medians); {test}", f.name(), om.label, fm.med / om.med.max(1e-9),))
}

/// How a forwarder's CPU per packet was counted, and on which CPU (`sender_cpu`, `dut_cpu`:
/// the sender's and the device under test's, as the report names them).
fn cpu_line(fig: &Figures, set: &RunSet, sender_cpu: &str, dut_cpu: &str) -> String {
    let softirq = fig.softirq_ns.map_or(String::new(), |s| {
        format!("; /proc/stat counted {s:.0} ns of softirq time on {sender_cpu} per forwarded packet")
    });
    let sender = match fig.sender_ns {
        Some(v) if v < 0.0 => format!(
            "<0 (the sender sent faster beside it than alone: its cost there is below what these runs resolve; \
             computed {v:.0})"
        ),
        v => fmt_ns(v),
    };
    match fig.f {
        Forwarder::Kernel | Forwarder::Xdp => format!(
            "CPU per packet: {}: {sender} ns on the sender's core ({sender_cpu}), where it runs: in the softirq of \
             the CPU that sent the frame (a veth delivers in its sender's transmit); no core of its own{softirq}",
            fig.f.name()
        ),
        Forwarder::KernelRps => format!(
            "CPU per packet: kernel-rps: {} ns on {dut_cpu} ({dut_cpu}'s kernel time, system + irq + softirq, in \
             /proc/stat ticks of {:.0} ms: the backlog softirq, forwarding, and the discard sink's receive, which \
             runs there too; any other kernel work on {dut_cpu} counts as well); {sender} ns on the sender's core \
             (its receive side, the RPS hand-off){softirq}",
            fmt_ns(fig.own_ns),
            tick_ns() / 1e6
        ),
        Forwarder::DpdkAfpacket | Forwarder::DpdkAfxdp => format!(
            "CPU per packet: {}: {} ns of l3fwd's CPU time on {dut_cpu} (every thread's schedstat); l3fwd \
             busy-polls, so this includes polling: {}; {sender} ns on the sender's core (the PMD's receive side: \
             the kernel's copy into its ring or UMEM)",
            fig.f.name(),
            fmt_ns(fig.own_ns),
            if fig.itself { "it lost frames, so it was near capacity" } else { "it lost none: an upper bound" }
        ),
        Forwarder::FwdscopeAfpacket | Forwarder::FwdscopeAfxdp => {
            fwdscope_cpu_line(fig, &set.clean(Setup::Fwd(fig.f)), &sender, dut_cpu)
        }
    }
}

/// fwdscope's CPU-per-packet line: its process's CPU time and, from its clean runs `clean`,
/// its own stage clocks, which say what forwarding cost with idle time left out: the figure
/// to trust when it waited for packets part of the time.
fn fwdscope_cpu_line(fig: &Figures, clean: &[&Measured], sender: &str, dut_cpu: &str) -> String {
    use analyzer::stats::median;
    let clocks: Vec<(f64, f64)> = clean.iter().filter_map(|m| m.clock).collect();
    let idle = (!clocks.is_empty()).then(|| median(&clocks.iter().map(|c| c.1).collect::<Vec<_>>()));
    let by_clock = match idle {
        None => "no stage clocks".to_string(),
        Some(idle) => format!(
            "{:.0} ns by its stage clocks (forwarding stages, median of {} runs; idle {:.0}% of its time left out)",
            median(&clocks.iter().map(|c| c.0).collect::<Vec<_>>()),
            clocks.len(),
            idle * 100.0
        ),
    };
    let bound = match idle {
        Some(i) if fig.itself && i < 0.05 => "it lost frames and hardly waited: at capacity",
        _ if fig.itself => "it lost frames in bursts but waited for packets part of the time: an upper bound",
        _ => "it lost none: an upper bound",
    };
    format!(
        "CPU per packet: {}: {} ns of the forwarder's CPU time on {dut_cpu} (every thread's schedstat; {bound}); \
         {by_clock}; {sender} ns on the sender's core (its receive side: the tap's copy, or XDP and the copy into \
         the UMEM)",
        fig.f.name(),
        fmt_ns(fig.own_ns)
    )
}

/// The page's provenance lines before the bars': how rates and the two CPU-per-packet
/// figures were measured, and the contention line.
fn provenance_head(a: &BenchOptions, sender_cpu: &str, dut_cpu: &str, contention: String) -> Vec<String> {
    vec![
        format!(
            "rates: frames counted at the discard sink's interface (rx_packets) over the sender's own measured seconds \
             (CLOCK_MONOTONIC); offered: frames the sender sent; {} runs of {:.1} s per forwarder, interleaved",
            a.repeat, a.seconds
        ),
        format!(
            "own core ns: the forwarder's CPU time on its own core ({dut_cpu}) per forwarded packet: fwdscope's and \
             l3fwd's process on-CPU time (every thread's /proc/PID/task/TID/schedstat, ns; l3fwd busy-polls, so its \
             figure includes polling), kernel-rps: {dut_cpu}'s kernel time (system + irq + softirq) from /proc/stat \
             (USER_HZ ticks)"
        ),
        format!(
            "sender ns: (1 - offered / sender alone) / forwarded: the time of the sender's core ({sender_cpu}), flat out \
             in every run, that did not go to sending; kernel and xdp forward there (softirq), so it is their bar; a \
             negative figure means the sender sent faster than alone (its own path differs: frames dropped at \
             ingress alone), so that setup's cost there is below what these runs resolve and gets no bar"
        ),
        contention,
    ]
}

/// Why forwarder `f` has no bar, given its figures, its bar's length `ns` and its stage
/// split; `no_alone`: the sender alone has no clean run.
fn missing_bar(
    f: Forwarder,
    fig: Option<&Figures>,
    ns: Option<f64>,
    split: Option<&StageSplit>,
    no_alone: bool,
) -> String {
    if fig.is_none() {
        "no clean run: every run was left out".to_string()
    } else if ns.is_none() && !f.own_core() && no_alone {
        "no sender-alone run counted (left out for contention): the sender's core has no baseline to take its time \
         from"
            .to_string()
    } else if !ns.is_some_and(|v| v > 0.0) {
        "no positive CPU-per-packet figure".to_string()
    } else if split.is_none() {
        "no stage split".to_string()
    } else {
        "no forwarding samples in its stage split".to_string()
    }
}

/// The provenance line of forwarder `f`'s bar (`ns` long): which figure it is, the stage
/// split that cuts it, the runs counted and left out.
fn bar_provenance(f: Forwarder, ns: Option<f64>, split: Option<&StageSplit>, counted: usize, out_n: usize) -> String {
    let which = if f.own_core() { "own core ns" } else { "sender ns (its softirq runs there)" };
    match split {
        Some(sp) => format!(
            "{}: bar {} ns/packet = {which} x the stage shares of {} ({} samples of {}{}; stages named by {}; idle, \
             the machine's own traffic and the sender's program left out); runs counted {counted}, left out {out_n}",
            f.name(),
            fmt_ns(ns),
            sp.how,
            sp.samples,
            sp.event,
            if f.is_fwdscope() {
                String::new()
            } else {
                format!(
                    ", {} of them in the threads forwarding runs in: the sender thread, ksoftirqd, the idle task{}",
                    sp.kept,
                    if f.is_dpdk() { ", l3fwd" } else { "" }
                )
            },
            sp.rule_files
        ),
        None => format!("{}: no stage split; runs counted {counted}, left out {out_n}", f.name()),
    }
}

/// The page's bars, one per forwarder in the setups' order (its core's CPU per packet cut
/// by its stage shares, or why there is none), and their provenance lines; `no_alone`: the
/// sender alone has no clean run.
fn bars(
    setups: &[Setup],
    figures: &[Figures],
    splits: &[StageSplit],
    set: &RunSet,
    no_alone: bool,
) -> (Vec<crate::bench_page::BenchBar>, Vec<String>) {
    let (mut bars, mut provenance) = (Vec::new(), Vec::new());
    for s in setups.iter().copied() {
        let Some(f) = s.forwarder() else { continue };
        let fig = figures.iter().find(|x| x.f == f);
        let split = splits.iter().find(|x| x.forwarder == Some(f));
        let ns = fig.and_then(Figures::bar_ns);
        let segments = match (ns, split) {
            (Some(ns), Some(sp)) => crate::bench_page::stage_ns(ns, &sp.stages),
            _ => Vec::new(),
        };
        let missing = segments.is_empty().then(|| missing_bar(f, fig, ns, split, no_alone));
        let (counted, out_n) = fig.map_or((0, set.left_out(s)), |x| (x.counted, x.left_out));
        provenance.push(bar_provenance(f, ns, split, counted, out_n));
        bars.push(crate::bench_page::BenchBar {
            name: f.name().to_string(),
            label: s.label(set.dut),
            segments,
            missing,
        });
    }
    (bars, provenance)
}

/// The report: the table of forwarders (each saying whether the sender or the forwarder
/// itself limited it, and its CPU per packet on its own core and on the sender's), the
/// ratios, how CPU per packet was counted, the stage splits; and the page of the same.
fn report(
    a: &BenchOptions,
    at: Placement,
    setups: &[Setup],
    flags: &[String],
    notes: &[String],
    runs: &[Measured],
    splits: &[StageSplit],
) -> BenchReport {
    use std::fmt::Write;
    let set = RunSet { all: runs, dut: at.dut };
    let heading = heading(a, at);
    let mut out = String::new();
    let _ = writeln!(out, "{heading}");
    let _ = writeln!(out, "fwdscope forwarder flags: {}", flags.join(" "));
    for n in notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(out, "{}", table_line(&TABLE_HEADER));
    let alone: Vec<f64> = set.clean(Setup::SenderOnly).iter().map(|m| m.offered()).collect();
    let alone_med = if alone.is_empty() { f64::NAN } else { analyzer::stats::median(&alone) };
    let (table, rows, figures) = forwarder_rows(setups, &set, alone_med);
    for l in &table {
        let _ = writeln!(out, "{l}");
    }
    let alone_text = if alone.is_empty() { "-".to_string() } else { format!("{alone_med:.0}") };
    let alone_line =
        format!("{}: {} runs, {alone_text} pps sent (median)", Setup::SenderOnly.label(at.dut), alone.len());
    let _ = writeln!(out, "{alone_line}");
    let contention = contention_line(runs);
    let mut lines: Vec<String> = vec![alone_line, contention.clone()];
    for (f, against, other) in comparisons(setups, &figures) {
        lines.extend(ratio_line(f, &against, &other, &figures, &set));
    }
    lines.push("(a forwarder limited by the sender lost nothing: its own capacity is higher than its figure)".into());
    let sender_cpu = at.sender.map_or("the sending CPU".to_string(), |c| format!("CPU {c}"));
    let dut_cpu = at.dut.map_or("its CPU".to_string(), |c| format!("CPU {c}"));
    lines.extend(figures.iter().map(|fig| cpu_line(fig, &set, &sender_cpu, &dut_cpu)));
    for l in &lines[1..] {
        let _ = writeln!(out, "{l}");
    }
    for sp in splits {
        let _ = writeln!(out, "\n== {}\n{}", sp.title, sp.table);
    }
    // The page: a bar per forwarder, the table, where the figures come from.
    let mut provenance = provenance_head(a, &sender_cpu, &dut_cpu, contention);
    let (bars, bar_lines) = bars(setups, &figures, splits, &set, alone.is_empty());
    provenance.extend(bar_lines);
    provenance.push(
        "with record -a every CPU is sampled: the sender's own transmit path (packet_sendmsg, AF_XDP's xmit) counts as \
         driver work too, as the kernel cannot tell it from the forwarder's"
            .to_string(),
    );
    let mut page_notes: Vec<String> = notes.to_vec();
    page_notes.push(format!("fwdscope forwarder flags: {}", flags.join(" ")));
    page_notes.extend(lines);
    let page = crate::bench_page::BenchPage {
        heading,
        bars,
        // The page's table leaves the offered load to the text report: it sits beside the
        // chart.
        header: TABLE_HEADER.iter().enumerate().filter(|(i, _)| *i != 5).map(|(_, h)| h.to_string()).collect(),
        rows,
        provenance,
        notes: page_notes,
    };
    BenchReport { text: out, page }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sender-core figure is a difference of rates: below zero the table says `<0`,
    /// never a negative cost.
    #[test]
    fn a_negative_sender_figure_is_printed_as_below_zero() {
        assert_eq!(fmt_sender_ns(Some(-129.4)), "<0");
        assert_eq!(fmt_sender_ns(Some(281.4)), "281");
        assert_eq!(fmt_sender_ns(None), "-");
    }
    use collector::contention::Contention;

    fn run(f: Forwarder, arrived: u64, busy: bool) -> Measured {
        let flags = if busy { vec!["a worker waited to run 40% of the time".to_string()] } else { vec![] };
        Measured {
            setup: Setup::Fwd(f),
            sent: 2_000_000,
            arrived,
            seconds: 1.0,
            contention: Contention { flags, ..Default::default() },
            clock: Some((700.0, 0.2)),
            own_cpu_ns: None,
            sender_softirq_ns: None,
        }
    }

    fn alone(sent: u64) -> Measured {
        Measured { setup: Setup::SenderOnly, sent, arrived: 0, clock: None, ..run(Forwarder::Kernel, 0, false) }
    }

    fn options() -> BenchOptions {
        BenchOptions {
            name: "t".into(),
            routes: 10,
            flows: 10,
            seconds: 1.0,
            repeat: 4,
            size: 64,
            forwarders: None,
            html: None,
            forwarder_flags: vec![],
            forwarder: ForwarderProgram::default(),
            via: Some(Via::Afpacket),
            stop: None,
        }
    }

    const AT: Placement = Placement { sender: Some(0), dut: Some(1) };

    /// Runs the contention detector flagged are left out of the medians; when over a
    /// quarter of a compared forwarder's runs are, the ratio is undecided, saying why.
    #[test]
    fn busy_runs_are_left_out_and_too_many_leave_the_ratio_undecided() {
        let setups = [Setup::Fwd(Forwarder::Kernel), Setup::Fwd(Forwarder::FwdscopeAfpacket), Setup::SenderOnly];
        let mut runs: Vec<Measured> = (0..4).map(|_| run(Forwarder::Kernel, 1_000_000, false)).collect();
        runs.extend((0..4).map(|_| alone(2_000_000)));
        // One fwdscope run of four was slowed by a neighbour: left out, the rest decide.
        runs.extend([1_500_000, 1_510_000, 1_490_000].map(|n| run(Forwarder::FwdscopeAfpacket, n, false)));
        runs.push(run(Forwarder::FwdscopeAfpacket, 300_000, true));
        let text = report(&options(), AT, &setups, &[], &[], &runs, &[]).text;
        let row = text.lines().find(|l| l.starts_with("fwdscope-afpacket")).expect("row");
        assert!(row.contains("   3        1        1500000"), "{row}");
        assert!(row.ends_with("itself (it lost frames)"), "{row}");
        let krow = text.lines().find(|l| l.starts_with("kernel (softirq")).expect("kernel row");
        assert!(krow.ends_with("itself (it lost frames)"), "{krow}");
        assert!(text.contains("contention: 1 of 12 runs left out") && text.contains("waited to run 40%"), "{text}");
        assert!(
            text.contains("ratio fwdscope-afpacket / best kernel setup (kernel (softirq on the sender's CPU)): 1.50"),
            "{text}"
        );
        // Two of four: over a quarter, no confident ratio.
        runs[9].contention.flags = vec!["host steal 30% of CPU time".into()];
        let text = report(&options(), AT, &setups, &[], &[], &runs, &[]).text;
        assert!(
            text.contains(
                "ratio fwdscope-afpacket / best kernel setup: undecided: the machine was busy (2 of 4 runs of fwdscope"
            ),
            "{text}"
        );
    }

    /// Every forwarder against the kernel, an afxdp one against its afpacket sibling; CPU
    /// per packet on its own core and on the sender's, from hand-computed periods; the bar
    /// of each is its core's figure split by its stage shares.
    #[test]
    fn cpu_per_packet_on_each_core_and_the_bars() {
        let setups = [
            Setup::Fwd(Forwarder::Kernel),
            Setup::Fwd(Forwarder::DpdkAfpacket),
            Setup::Fwd(Forwarder::FwdscopeAfpacket),
            Setup::Fwd(Forwarder::FwdscopeAfxdp),
            Setup::SenderOnly,
        ];
        // The sender alone: 2 Mpps, 500 ns a packet on its CPU.
        let mut runs: Vec<Measured> = (0..4).map(|_| alone(2_000_000)).collect();
        // The kernel: offered 1.25 Mpps (the sender spent 625 ms sending), 1 Mpps forwarded:
        // the other 375 ms of the sender's CPU over 1M packets is 375 ns each.
        runs.extend((0..4).map(|_| Measured { sent: 1_250_000, ..run(Forwarder::Kernel, 1_000_000, false) }));
        runs.extend((0..4).map(|_| run(Forwarder::FwdscopeAfpacket, 1_000_000, false)));
        // afxdp: offered 1.25 Mpps, all of it forwarded (nothing lost: limited by the
        // sender); its process ran 0.5 s over 1.25M packets: 400 ns each.
        runs.extend((0..4).map(|_| Measured {
            sent: 1_250_000,
            arrived: 1_250_000,
            clock: Some((380.0, 0.5)),
            own_cpu_ns: Some(0.5e9),
            ..run(Forwarder::FwdscopeAfxdp, 0, false)
        }));
        // l3fwd polls all the time: 1 s of CPU over 1.6M packets, 625 ns each.
        runs.extend((0..4).map(|_| Measured {
            sent: 1_600_000,
            own_cpu_ns: Some(1e9),
            ..run(Forwarder::DpdkAfpacket, 1_600_000, false)
        }));
        let split = |f: Forwarder, stages: &[(&str, u64)]| StageSplit {
            forwarder: Some(f),
            stages: stages.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            ..Default::default()
        };
        let splits = [
            split(Forwarder::FwdscopeAfxdp, &[("idle", 500), ("lookup", 30), ("driver", 10)]),
            split(Forwarder::Kernel, &[("ip", 1), ("local", 7), ("driver", 2)]),
        ];
        let r = report(&options(), AT, &setups, &[], &["skipped xdp: no libbpf".into()], &runs, &splits);
        let text = r.text;
        let row = text.lines().find(|l| l.starts_with("fwdscope-afxdp")).expect("afxdp row");
        assert!(row.ends_with("the sender (nothing lost: its capacity is higher)"), "{row}");
        // Own core 400 ns, sender's core (1 - 1.25/2) / 1.25M = 300 ns.
        assert!(row.contains("         400        300  the sender"), "{row}");
        let krow = text.lines().find(|l| l.starts_with("kernel (softirq")).expect("kernel row");
        assert!(krow.contains("           -        375  itself"), "{krow}");
        let drow = text.lines().find(|l| l.starts_with("dpdk-afpacket")).expect("dpdk row");
        // (1 - 1.6/2) / 1.6M = 125 ns on the sender's core.
        assert!(drow.contains("         625        125  the sender"), "{drow}");
        assert!(
            text.contains("ratio fwdscope-afxdp / fwdscope-afpacket (fwdscope-afpacket (forwarder on CPU 1)): 1.25"),
            "{text}"
        );
        assert!(text.contains("ratio dpdk-afpacket / best kernel setup (kernel (softirq on the sender's CPU)): 1.60"));
        assert!(text.contains("380 ns by its stage clocks (forwarding stages, median of 4 runs; idle 50%"), "{text}");
        assert!(text.contains("l3fwd busy-polls, so this includes polling"), "{text}");
        assert!(text.contains("note: skipped xdp: no libbpf"), "{text}");
        // Bars: afxdp's 400 ns as lookup 300 + driver 100; the kernel's 375 ns (its sender
        // core) as ip 125 + driver 250; the others have no split and say so.
        let bars = &r.page.bars;
        assert_eq!(
            bars.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(),
            ["kernel", "dpdk-afpacket", "fwdscope-afpacket", "fwdscope-afxdp"]
        );
        assert_eq!(bars[3].segments, vec![("lookup".to_string(), 300.0), ("driver".to_string(), 100.0)]);
        assert_eq!(bars[0].segments, vec![("driver".to_string(), 250.0), ("ip".to_string(), 125.0)]);
        assert_eq!(bars[1].missing.as_deref(), Some("no stage split"));
        // fwdscope-afpacket has no CPU time of its own in these runs.
        assert_eq!(bars[2].missing.as_deref(), Some("no positive CPU-per-packet figure"));
        assert_eq!(r.page.rows.len(), 4);
        assert_eq!((r.page.rows[0][0].as_str(), r.page.rows[0][8].as_str()), ("kernel", "itself"));
        assert!(r.page.rows.iter().all(|row| row.len() == r.page.header.len()));
        assert!(r.page.notes.iter().any(|n| n == "skipped xdp: no libbpf"));
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        o: BenchOptions,
    }

    /// `--forwarders` takes the names, comma-separated; an unknown one is refused by clap.
    #[test]
    fn forwarder_lists_parse() {
        use clap::Parser;
        let c = Cli::try_parse_from(["b", "--forwarders", "kernel,xdp,fwdscope-afpacket"]).unwrap();
        assert_eq!(c.o.forwarders, Some(vec![Forwarder::Kernel, Forwarder::Xdp, Forwarder::FwdscopeAfpacket]));
        let c = Cli::try_parse_from(["b", "--forwarders", "dpdk-afxdp", "--forwarders", "kernel-rps"]).unwrap();
        assert_eq!(c.o.forwarders, Some(vec![Forwarder::DpdkAfxdp, Forwarder::KernelRps]));
        assert_eq!(Cli::try_parse_from(["b"]).unwrap().o.forwarders, None);
        assert!(Cli::try_parse_from(["b", "--forwarders", "kernel,vpp"]).is_err());
        // Every name parses back to its forwarder.
        for f in FORWARDERS {
            let c = Cli::try_parse_from(["b", "--forwarders", f.name()]).unwrap();
            assert_eq!(c.o.forwarders, Some(vec![f]));
        }
    }

    /// By default a forwarder that cannot run is skipped with its reason; named, it is an
    /// error naming why; duplicates count once.
    #[test]
    fn forwarders_that_cannot_run_are_skipped_or_refused() {
        let mut why = |f: Forwarder| (f == Forwarder::DpdkAfxdp).then(|| "no DPDK\n(install dpdk)".to_string());
        let (run, skipped) = select(None, &mut why).unwrap();
        assert_eq!(run.len(), 6);
        assert!(!run.contains(&Forwarder::DpdkAfxdp));
        assert_eq!(skipped, vec![(Forwarder::DpdkAfxdp, "no DPDK; (install dpdk)".to_string())]);
        let (run, skipped) = select(Some(&[Forwarder::Xdp, Forwarder::Kernel, Forwarder::Xdp][..]), &mut why).unwrap();
        assert_eq!(run, vec![Forwarder::Kernel, Forwarder::Xdp]);
        // The others are named, not asked for (dpdk-afxdp too: it was not tried).
        assert_eq!(skipped.len(), 5);
        assert!(skipped.iter().all(|(f, w)| !run.contains(f) && w == "not in --forwarders"), "{skipped:?}");
        let e = select(Some(&[Forwarder::Kernel, Forwarder::DpdkAfxdp][..]), &mut why).unwrap_err().to_string();
        assert!(e.contains("--forwarders dpdk-afxdp: cannot run here: no DPDK; (install dpdk)"), "{e}");
        assert!(select(None, &mut |_| Some("no".into())).is_err());
    }

    #[test]
    fn cpu_ticks_are_kernel_and_softirq_per_cpu() {
        let stat = "cpu  10 0 5 100 0 0 3 0 0 0\ncpu0 4 1 2 50 7 1 2 1 0 0\ncpu2 1 0 0 9 0 0 0 0 0 0\nintr 5\n";
        let t = parse_cpu_ticks(stat);
        assert_eq!(t, vec![Some((5, 2)), None, Some((0, 0))]);
    }

    /// Only the threads forwarding runs in count towards an every-CPU split.
    #[test]
    fn every_cpu_splits_keep_the_forwarding_threads() {
        let row = |stage: &str, period: u64| analyzer::stages::StageRow {
            stage: stage.into(),
            samples: 1,
            percent: 0.0,
            period,
            per_packet: None,
        };
        let w = |thread: &str, samples: u64, stages: Vec<analyzer::stages::StageRow>| analyzer::stages::WorkerTable {
            thread: thread.into(),
            samples,
            packets: None,
            stages,
        };
        let threads = [
            w("rustc", 90, vec![row("other", 900)]),
            w("lab-sender", 5, vec![row("driver", 30), row("local", 20)]),
            w("ksoftirqd/1", 2, vec![row("lookup", 10), row("driver", 5)]),
            w("tid 0", 1, vec![row("idle", 7)]),
        ];
        let (stages, kept) = forwarding_threads_stages(&threads);
        assert_eq!(kept, 8);
        assert_eq!(
            stages,
            vec![
                ("driver".to_string(), 35),
                ("local".to_string(), 20),
                ("lookup".to_string(), 10),
                ("idle".to_string(), 7)
            ]
        );
    }

    #[test]
    fn long_reasons_are_one_line_and_cut() {
        assert_eq!(one_line("a\n\n  b  \n", 100), "a; b");
        assert_eq!(one_line("abcdef", 3), "abc...");
    }
}
