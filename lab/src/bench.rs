//! `lab bench`: packets per second forwarded by the kernel and by the bundled forwarder on
//! the same lab and routes, the sender at full speed on one CPU and the device under test
//! on another, a discarding sink, in interleaved rounds; the ratio with Welch's test, CPU
//! per packet, and each one's stage split from a recording. Everything runs in this
//! process (the sender on a thread that enters the sender namespace, the recorder on
//! another) except the lab's forwarder, which is a process of its own.

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
    /// Routes inside 198.19.0.0/16, the same table for both.
    #[arg(long, default_value_t = 8000)]
    pub routes: u32,
    /// Concurrent flows of the sender.
    #[arg(long, default_value_t = 32768)]
    pub flows: usize,
    /// Seconds of traffic per measurement.
    #[arg(long, default_value_t = 3.0, value_parser = forwarder::cli::parse_seconds)]
    pub seconds: f64,
    /// Measurements per setup (interleaved rounds), 1 to 1000.
    #[arg(long, default_value_t = 3, value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u64).range(1..=1000), |v| v as usize))]
    pub repeat: usize,
    /// Frame size in bytes.
    #[arg(long, default_value_t = 64)]
    pub size: u16,
    /// How the sender's frames leave it (`lab send --via`) [default: afxdp where it works,
    /// else afpacket].
    #[arg(long, value_enum)]
    pub via: Option<Via>,
    /// Forwarder flags for the fwdscope run (after `--`) [default: `--cache nocache`, like
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

/// What `lab bench` measures: the kernel forwarding as it does by default (in the receive
/// softirq, on the CPU that delivered the frame: the sender's), the kernel with its
/// receive processing steered (RPS) to the device-under-test CPU, and the bundled
/// forwarder over AF_PACKET and over AF_XDP on that CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    Kernel,
    KernelRps,
    Fwdscope,
    FwdscopeXdp,
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
            Setup::FwdscopeXdp => format!("fwdscope afxdp (forwarder on {cpu})"),
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

/// A stage split for the report: its title and the stage table.
type StageSplit = (String, String);

/// One measurement of `lab bench`.
struct Measured {
    setup: Setup,
    sent: u64,
    arrived: u64,
    seconds: f64,
    /// Was the machine busy: the sender thread's and (fwdscope) the forwarder workers'
    /// run-queue wait, the host's steal. A flagged run is left out of the comparison.
    contention: collector::contention::Contention,
    /// fwdscope: its stage clocks over the measured interval: forwarding stages' ns per
    /// forwarded packet (idle and run-queue waits excluded) and the idle share of its time.
    clock: Option<(f64, f64)>,
}

impl Measured {
    fn pps(&self) -> f64 {
        self.arrived as f64 / self.seconds.max(1e-9)
    }
    fn offered(&self) -> f64 {
        self.sent as f64 / self.seconds.max(1e-9)
    }
}

/// (Re)build the lab for `setup`, the sink discarding at its interface.
fn bench_up(a: &BenchOptions, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<()> {
    let mode = if matches!(setup, Setup::Fwdscope | Setup::FwdscopeXdp | Setup::SenderOnly) {
        Mode::Fwdscope
    } else {
        Mode::Kernel
    };
    let forwarder_runs = matches!(setup, Setup::Fwdscope | Setup::FwdscopeXdp);
    let o = UpOptions {
        name: a.name.clone(),
        routes: Some(a.routes),
        table: None,
        mode,
        no_start: setup == Setup::SenderOnly,
        sink: Sink::Discard,
        rps_cpu: at.dut.filter(|_| setup == Setup::KernelRps),
        forwarder_cpu: at.dut.filter(|_| forwarder_runs),
        forwarder_flags: if forwarder_runs { flags.to_vec() } else { Vec::new() },
        forwarder: a.forwarder.clone(),
        driver: Some(if setup == Setup::FwdscopeXdp { LabDriver::Afxdp } else { LabDriver::Afpacket }),
        queues: None,
        dpdk: Default::default(),
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
    // The forwarder's workers (fwdscope), watched over the measured interval like the
    // sender thread and the host.
    let workers = match (setup, lab.forwarder_pid()) {
        (Setup::Fwdscope | Setup::FwdscopeXdp, Some(pid)) => {
            collector::contention::worker_threads(pid as u32).unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let seg = match setup {
        Setup::Fwdscope | Setup::FwdscopeXdp => fwd_abi::Segment::open(&lab.segment_path()).ok(),
        _ => None,
    };
    let snap0 = seg.as_ref().map(|s| s.snapshot());
    let before = collector::contention::read(&workers);
    let t0 = std::time::Instant::now();
    let (sent, seconds, (s0, s1)) = bench_send(a, at, a.seconds)?;
    let elapsed = t0.elapsed().as_nanos() as u64;
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
    // Frames still in flight (rings, backlogs) arrive within milliseconds.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let arrived = lab.sink_received()?.saturating_sub(r0);
    let with_sender = |r: collector::contention::Reading, s| {
        let mut threads = r.threads;
        threads.push(s);
        collector::contention::Reading { threads, host: r.host }
    };
    let contention = collector::contention::between(&with_sender(before, s0), &with_sender(after, s1), elapsed);
    Ok(Measured { setup, sent, arrived, seconds, contention, clock })
}

/// The same load once more while recording (every CPU for the kernel, the lab's forwarder
/// by its PID), then the stage table.
fn bench_stages(a: &BenchOptions, lab: &Lab, setup: Setup, at: Placement, flags: &[String]) -> Result<String> {
    use collector::session::{record, RecordOptions, Target};
    bench_up(a, lab, setup, at, flags)?;
    let dir = lab.state_dir().join("recording");
    // The lab's own state directory: its last recording (of an older fwdscope too, which
    // carries no output marker) is replaced.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let target = match (setup, lab.forwarder_pid()) {
        (Setup::Fwdscope | Setup::FwdscopeXdp, Some(pid)) => Target::Pid(pid),
        _ => Target::All,
    };
    let mut o = RecordOptions::new(dir.clone(), target);
    o.force = true;
    o.callchain = true;
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
    Ok(analyzer::stages::stage_table(&rec, &analyzer::rules::Rules::builtin())?.text(8))
}

/// Run the benchmark; returns its report (the table, ratios, CPU per packet, both stage
/// splits). Progress goes to stderr. Builds and removes the lab `a.name`.
pub fn bench(a: &BenchOptions) -> Result<String> {
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
    let mut setups = vec![Setup::Kernel];
    if at.dut.is_some() {
        setups.push(Setup::KernelRps);
    }
    setups.push(Setup::Fwdscope);
    let (xdp, xdp_why) = default_driver();
    if xdp == LabDriver::Afxdp {
        setups.push(Setup::FwdscopeXdp);
    }
    setups.push(Setup::SenderOnly);
    let result = measure_all(a, &lab, &setups, at, &flags);
    // The last lab's note says whether nft was there for the AF_PACKET setups' ingress drop.
    let last = std::fs::read_to_string(lab.state_dir().join("ingress")).unwrap_or_default();
    let mut notes = if last.contains("nft") && !last.contains("not installed") {
        format!(
            "input frames: afpacket setups drop them at {0}-f0 ingress after the forwarder's tap (nft); afxdp takes them by XDP before the stack",
            a.name
        )
    } else {
        "no nft: in afpacket setups the forwarding namespace's IP stack also receives every frame".to_string()
    };
    if xdp != LabDriver::Afxdp {
        notes.push_str(&format!("; no afxdp setup: {xdp_why}"));
    }
    let _ = lab.down();
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
    at: Placement,
    flags: &[String],
) -> Result<(Vec<Measured>, Vec<StageSplit>)> {
    let recorded: Vec<Setup> =
        setups.iter().copied().filter(|s| matches!(s, Setup::Kernel | Setup::Fwdscope | Setup::FwdscopeXdp)).collect();
    let bar = indicatif::ProgressBar::new((setups.len() * a.repeat + recorded.len()) as u64);
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
        for s in recorded {
            stopped()?;
            bar.set_message(format!("stage split: {}", s.label(at.dut)));
            let how = if s == Setup::Kernel { "record -a, Linux rules" } else { "record -p on the lab forwarder" };
            let title = match s {
                Setup::Kernel => "kernel forwarding",
                Setup::Fwdscope => "fwdscope afpacket",
                _ => "fwdscope afxdp",
            };
            splits.push((format!("{title}: stage split ({how})"), bench_stages(a, lab, s, at, flags)?));
            bar.inc(1);
        }
        Ok((runs, splits))
    })();
    bar.finish_and_clear();
    result
}

/// The report: the table of setups (each saying whether the sender or the setup itself
/// limited it), the ratios, CPU per packet, the stage splits.
fn report(
    a: &BenchOptions,
    at: Placement,
    setups: &[Setup],
    flags: &[String],
    notes: &str,
    runs: &[Measured],
    splits: &[(String, String)],
) -> String {
    use analyzer::stats::{median, welch_p};
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
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
    );
    let _ = writeln!(out, "fwdscope forwarder flags: {}; {}", flags.join(" "), notes.trim());
    let _ = writeln!(
        out,
        "{:<42} {:>4} {:>8} {:>14} {:>25} {:>14} {:>8}  limited by",
        "setup", "runs", "left out", "forwarded pps", "[min .. max]", "offered pps", "lost"
    );
    let clean = |s: Setup| -> Vec<&Measured> {
        runs.iter().filter(|m| m.setup == s && m.contention.flags.is_empty()).collect()
    };
    let left_out = |s: Setup| runs.iter().filter(|m| m.setup == s && !m.contention.flags.is_empty()).count();
    // Too many runs left out: no confident comparison (the sweep's rule: over a quarter).
    let busy = |s: Setup| {
        let all = runs.iter().filter(|m| m.setup == s).count();
        let out = left_out(s);
        (out * 4 > all || out == all).then(|| format!("{out} of {all} runs of {} left out", s.label(at.dut)))
    };
    // (setup, median pps, the runs' pps, lost frames: limited by itself).
    let mut medians: Vec<(Setup, f64, Vec<f64>, bool)> = Vec::new();
    for s in setups.iter().filter(|s| **s != Setup::SenderOnly) {
        let mine = clean(*s);
        let pps: Vec<f64> = mine.iter().map(|m| m.pps()).collect();
        let (lo, hi) = pps.iter().fold((f64::MAX, 0f64), |(l, h), &x| (l.min(x), h.max(x)));
        let lost: u64 = mine.iter().map(|m| m.sent.saturating_sub(m.arrived)).sum();
        let sent: u64 = mine.iter().map(|m| m.sent).sum();
        if mine.is_empty() {
            // Every run left out: no figure at all rather than a made-up one.
            let _ = writeln!(
                out,
                "{:<42} {:>4} {:>8} {:>14} {:>25} {:>14} {:>8}  -",
                s.label(at.dut),
                0,
                left_out(*s),
                "-",
                "-",
                "-",
                "-"
            );
            continue;
        }
        let med = median(&pps);
        // Under 0.1% lost: everything offered went through, so the sender set the pace.
        let itself = lost as f64 > 0.001 * sent as f64;
        medians.push((*s, med, pps, itself));
        let _ = writeln!(
            out,
            "{:<42} {:>4} {:>8} {:>14.0} {:>25} {:>14.0} {:>7.1}%  {}",
            s.label(at.dut),
            mine.len(),
            left_out(*s),
            med,
            format!("[{lo:.0} .. {hi:.0}]"),
            median(&mine.iter().map(|m| m.offered()).collect::<Vec<_>>()),
            100.0 * lost as f64 / sent.max(1) as f64,
            if itself { "itself (it lost frames)" } else { "the sender (nothing lost: its capacity is higher)" }
        );
    }
    let alone: Vec<f64> = clean(Setup::SenderOnly).iter().map(|m| m.offered()).collect();
    let alone_med = median(&alone);
    let alone_text = if alone.is_empty() { "-".to_string() } else { format!("{alone_med:.0}") };
    let _ = writeln!(out, "{}: {} runs, {alone_text} pps sent (median)", Setup::SenderOnly.label(at.dut), alone.len());
    let is_fwd = |s: Setup| matches!(s, Setup::Fwdscope | Setup::FwdscopeXdp);
    let best = medians.iter().filter(|m| !is_fwd(m.0)).max_by(|x, y| x.1.total_cmp(&y.1));
    // Contention: which runs were left out and why.
    let flagged: Vec<&Measured> = runs.iter().filter(|m| !m.contention.flags.is_empty()).collect();
    let mut reasons: Vec<&str> = flagged.iter().flat_map(|m| m.contention.flags.iter().map(String::as_str)).collect();
    reasons.sort_unstable();
    reasons.dedup();
    let _ = writeln!(
        out,
        "contention: {} of {} runs left out (the sender or a forwarder worker waiting to run over {:.0}% of a run, \
         or steal over {:.0}%){}",
        flagged.len(),
        runs.len(),
        collector::contention::MAX_RUNQ_SHARE * 100.0,
        collector::contention::MAX_STEAL_SHARE * 100.0,
        if reasons.is_empty() { String::new() } else { format!(": {}", reasons.join("; ")) }
    );
    let name = |s: Setup| if s == Setup::FwdscopeXdp { "fwdscope afxdp" } else { "fwdscope afpacket" };
    // Each forwarder against the best kernel setup (or, with none measured, every kernel
    // setup), and afxdp against afpacket.
    let kernels: Vec<Setup> = match best {
        Some(b) => vec![b.0],
        None => setups.iter().copied().filter(|s| matches!(s, Setup::Kernel | Setup::KernelRps)).collect(),
    };
    let mut pairs: Vec<(Setup, Vec<Setup>)> =
        setups.iter().copied().filter(|s| is_fwd(*s)).map(|f| (f, kernels.clone())).collect();
    if setups.contains(&Setup::FwdscopeXdp) && setups.contains(&Setup::Fwdscope) {
        pairs.push((Setup::FwdscopeXdp, vec![Setup::Fwdscope]));
    }
    for (f, against) in pairs {
        let other = if against == [Setup::Fwdscope] {
            "fwdscope afpacket".to_string()
        } else {
            "best kernel setup".to_string()
        };
        let undecided: Vec<String> = std::iter::once(f).chain(against.iter().copied()).filter_map(busy).collect();
        if !undecided.is_empty() {
            let _ = writeln!(
                out,
                "ratio {} / {other}: undecided: the machine was busy ({})",
                name(f),
                undecided.join("; ")
            );
            continue;
        }
        let fm = medians.iter().find(|m| m.0 == f);
        let om = against.first().and_then(|o| medians.iter().find(|m| m.0 == *o));
        if let (Some((_, fv, fp, _)), Some((o, ov, op, _))) = (fm, om) {
            // Welch's test needs two runs of each side to estimate a variance.
            let test = if fp.len() < 2 || op.len() < 2 {
                "no test of the difference (one run of a side: --repeat 2 or more gives one)".to_string()
            } else {
                let p = welch_p(fp, op);
                format!("difference of means {}significant (Welch p = {p:.3})", if p < 0.05 { "" } else { "not " })
            };
            let _ = writeln!(
                out,
                "ratio {} / {other} ({}): {:.2} (medians); {test}",
                name(f),
                o.label(at.dut),
                fv / ov.max(1e-9),
            );
        }
    }
    let _ = writeln!(out, "(a setup limited by the sender lost nothing: its own capacity is higher than its figure)");
    // CPU per packet, from the medians: the sender's CPU runs flat out in both its runs, so
    // what the kernel's forwarding adds there is the difference of the two periods; a
    // forwarder's CPU, when it lost frames, spent one period per forwarded packet.
    let kernel = medians.iter().find(|m| m.0 == Setup::Kernel);
    if let Some((_, kv, _, _)) = kernel {
        let k_ns = 1e9 / kv - 1e9 / alone_med;
        if k_ns.is_finite() && k_ns > 0.0 {
            let _ = writeln!(
                out,
                "CPU per packet: kernel forwarding about {k_ns:.0} ns on the sender's CPU (1/kernel - 1/sender alone)"
            );
        }
    }
    for (s, f, _, f_lost) in medians.iter().filter(|m| is_fwd(m.0)) {
        // Its own stage clocks say what forwarding cost, idle time left out: the figure to
        // trust when it waited for packets part of the time (then 1/forwarded only bounds it).
        let clocks: Vec<(f64, f64)> = clean(*s).iter().filter_map(|m| m.clock).collect();
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
            Some(i) if *f_lost && i < 0.05 => "it lost frames and hardly waited: at capacity",
            _ if *f_lost => "it lost frames in bursts but waited for packets part of the time: an upper bound",
            _ => "it lost none: an upper bound",
        };
        let _ = writeln!(
            out,
            "CPU per packet: {} {by_clock}; 1/forwarded {:.0} ns on its own CPU ({bound})",
            name(*s),
            1e9 / f
        );
        // Its receive side runs on the sender's CPU (veth hands frames over in the
        // sender's transmit: the tap's copy, or XDP and the copy into the UMEM): what the
        // sender's CPU lost against sending alone, as for the kernel.
        let offered = median(&clean(*s).iter().map(|m| m.offered()).collect::<Vec<_>>());
        let rx_ns = 1e9 / offered - 1e9 / alone_med;
        if rx_ns.is_finite() && rx_ns > 0.0 {
            let _ = writeln!(
                out,
                "CPU per packet: {} receive side about {rx_ns:.0} ns on the sender's CPU (1/offered - 1/sender alone)",
                name(*s)
            );
        }
    }
    for (title, table) in splits {
        let _ = writeln!(out, "\n== {title}\n{table}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use collector::contention::Contention;

    fn run(setup: Setup, arrived: u64, busy: bool) -> Measured {
        let flags = if busy { vec!["a worker waited to run 40% of the time".to_string()] } else { vec![] };
        Measured {
            setup,
            sent: 2_000_000,
            arrived,
            seconds: 1.0,
            contention: Contention { flags, ..Default::default() },
            clock: Some((700.0, 0.2)),
        }
    }

    fn options() -> BenchOptions {
        BenchOptions {
            name: "t".into(),
            routes: 10,
            flows: 10,
            seconds: 1.0,
            repeat: 4,
            size: 64,
            forwarder_flags: vec![],
            forwarder: ForwarderProgram::default(),
            via: Some(Via::Afpacket),
            stop: None,
        }
    }

    /// Runs the contention detector flagged are left out of the medians; when over a
    /// quarter of a compared setup's runs are, the ratio is undecided, saying why.
    #[test]
    fn busy_runs_are_left_out_and_too_many_leave_the_ratio_undecided() {
        let at = Placement { sender: Some(0), dut: Some(1) };
        let setups = [Setup::Kernel, Setup::Fwdscope, Setup::SenderOnly];
        let mut runs: Vec<Measured> = (0..4).map(|_| run(Setup::Kernel, 1_000_000, false)).collect();
        runs.extend((0..4).map(|_| run(Setup::SenderOnly, 2_000_000, false)));
        // One fwdscope run of four was slowed by a neighbour: left out, the rest decide.
        runs.extend([1_500_000, 1_510_000, 1_490_000].map(|n| run(Setup::Fwdscope, n, false)));
        runs.push(run(Setup::Fwdscope, 300_000, true));
        let text = report(&options(), at, &setups, &[], "", &runs, &[]);
        let row = text.lines().find(|l| l.starts_with("fwdscope afpacket")).expect("row");
        assert!(row.contains("   3        1        1500000"), "{row}");
        assert!(row.ends_with("itself (it lost frames)"), "{row}");
        let krow = text.lines().find(|l| l.starts_with("kernel (softirq")).expect("kernel row");
        assert!(krow.ends_with("itself (it lost frames)"), "{krow}");
        assert!(text.contains("contention: 1 of 12 runs left out") && text.contains("waited to run 40%"), "{text}");
        assert!(
            text.contains("ratio fwdscope afpacket / best kernel setup (kernel (softirq on the sender's CPU)): 1.50"),
            "{text}"
        );
        // Two of four: over a quarter, no confident ratio.
        runs[9].contention.flags = vec!["host steal 30% of CPU time".into()];
        let text = report(&options(), at, &setups, &[], "", &runs, &[]);
        assert!(
            text.contains(
                "ratio fwdscope afpacket / best kernel setup: undecided: the machine was busy (2 of 4 runs of fwdscope"
            ),
            "{text}"
        );
    }

    /// Both forwarders against the kernel and against each other; CPU per packet by the
    /// stage clocks and the receive side on the sender's CPU, from hand-computed periods.
    #[test]
    fn afxdp_is_compared_with_afpacket_and_its_cpu_per_packet_is_split() {
        let at = Placement { sender: Some(0), dut: Some(1) };
        let setups = [Setup::Kernel, Setup::Fwdscope, Setup::FwdscopeXdp, Setup::SenderOnly];
        let mut runs: Vec<Measured> = (0..4).map(|_| run(Setup::Kernel, 1_000_000, false)).collect();
        runs.extend((0..4).map(|_| run(Setup::SenderOnly, 2_000_000, false)));
        runs.extend((0..4).map(|_| run(Setup::Fwdscope, 1_000_000, false)));
        // afxdp: offered 1.25 Mpps (the sender's CPU spent 800 ns a packet, 500 alone),
        // all of it forwarded, nothing lost: limited by the sender.
        runs.extend((0..4).map(|k| Measured {
            sent: 1_250_000,
            arrived: 1_250_000 - k,
            clock: Some((400.0, 0.5)),
            ..run(Setup::FwdscopeXdp, 0, false)
        }));
        let text = report(&options(), at, &setups, &[], "", &runs, &[]);
        let row = text.lines().find(|l| l.starts_with("fwdscope afxdp")).expect("afxdp row");
        assert!(row.ends_with("the sender (nothing lost: its capacity is higher)"), "{row}");
        assert!(
            text.contains("ratio fwdscope afxdp / fwdscope afpacket (fwdscope afpacket (forwarder on CPU 1)): 1.25"),
            "{text}"
        );
        assert!(
            text.contains("CPU per packet: fwdscope afxdp 400 ns by its stage clocks (forwarding stages, median of 4 runs; idle 50% of its time left out); 1/forwarded 800 ns"),
            "{text}"
        );
        assert!(
            text.contains("CPU per packet: fwdscope afxdp receive side about 300 ns on the sender's CPU"),
            "{text}"
        );
        // The kernel: 1/1.0M - 1/2.0M.
        assert!(text.contains("kernel forwarding about 500 ns on the sender's CPU"), "{text}");
    }
}
