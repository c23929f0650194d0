//! Command-line flags of the forwarder, shared by `fwdscope forward` and the standalone
//! `fwdscope-forwarder` binary, and the `forward` run loop both of them use.

use crate::config::{CacheMode, Config, DriverKind, RtParams, TableSource};
use crate::fib::FibKind;
use crate::nic::synthetic::{DmaModel, GenMode};
use crate::report::Summary;
use crate::run::{Forwarder, RunInfo};
use crate::traffic::{DstPattern, TrafficProfile};
use crate::{Error, Result};
use fwd_abi::rtstat::IntervalRow;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// Routes in a generated table unless --routes says (the 2005 test's table size).
pub const DEFAULT_ROUTES: usize = 123_000;

/// Highest offered rate accepted, packets per second (10G: beyond any port).
pub const MAX_RATE: f64 = 1e10;

/// The seconds flags' parsers and limits, shared with the verbs that start forwarders.
pub use fwd_abi::seconds::{parse_run_seconds, parse_seconds, parse_speed, seconds_text, MAX_SECONDS, MIN_DURATION};

/// Parse a packet rate: `250000`, `250k`, `1.5M`, `2G` (packets per second).
pub fn parse_rate(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim().trim_end_matches("pps");
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}`: expected packets per second such as 250000, 250k or 1.5M"))?;
    if !v.is_finite() {
        return Err(format!("`{s}`: expected a finite number of packets per second (at most 10G)"));
    }
    if v <= 0.0 {
        return Err(format!("`{s}`: the rate must be positive"));
    }
    let pps = v * mul;
    if pps > MAX_RATE {
        return Err(format!("`{s}`: expected at most 10G packets per second"));
    }
    Ok(pps)
}

/// Flags that configure a forwarder.
#[derive(clap::Args, Debug, Clone)]
pub struct ForwarderArgs {
    /// Concurrent flows of the synthetic traffic.
    #[arg(help_heading = "Traffic", long, default_value_t = 32768)]
    pub flows: usize,
    /// Packets per flow before a new flow (new destination) replaces it.
    #[arg(help_heading = "Traffic", long, default_value_t = 10)]
    pub pkts_per_flow: u32,
    /// Destination pattern over the table.
    #[arg(help_heading = "Traffic", long, value_enum, default_value_t = DstPattern::Random)]
    pub dst: DstPattern,
    /// Packet size on the wire, with FCS (64..1518).
    #[arg(help_heading = "Traffic", long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(64..=1518))]
    pub size: u16,
    /// Seed of the traffic and the generated table.
    #[arg(help_heading = "Traffic", long, default_value_t = 1)]
    pub seed: u64,
    /// Offered rate over all queues (e.g. 500k, 2M); frames finding no rx buffer count as rx_missed.
    /// Without it the device keeps pace with the forwarder.
    #[arg(help_heading = "Traffic", long, value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// FIB engine.
    #[arg(help_heading = "Table and FIB", long, value_enum, default_value_t = FibKind::Lctrie)]
    pub fib: FibKind,
    /// Route table file (`P/L NEXTHOP`, `P/L ASN`, or `ip route` lines; .gz accepted).
    /// Without it a table of --routes routes is generated.
    #[arg(help_heading = "Table and FIB", long)]
    pub table: Option<PathBuf>,
    /// Add a default route and covering /8 and /16 aggregates to a --table.
    #[arg(help_heading = "Table and FIB", long)]
    pub aggregates: bool,
    /// Routes in the generated table (prefix-length mix of a real table, nested, default
    /// route) [default: 123000]; not with --table.
    #[arg(help_heading = "Table and FIB", long, conflicts_with = "table")]
    pub routes: Option<usize>,
    /// Next hops a generated or ASN table is spread over.
    #[arg(help_heading = "Table and FIB", long, default_value_t = 16)]
    pub nexthops: usize,
    /// Lookup path: the 2.4/2.6 route cache, no cache, or the next-hop cache. Switchable
    /// while running (top's `c`, sweep --live).
    #[arg(help_heading = "Route cache", long, value_enum, default_value_t = CacheMode::Rtcache)]
    pub cache: CacheMode,
    /// Route-cache hash buckets (power of two, at most 16777216).
    #[arg(help_heading = "Route cache", long, default_value_t = 4096)]
    pub rt_hash_buckets: usize,
    /// GC starts past this many cache entries; must be below --max-size [default: the
    /// number of hash buckets, as Linux set it]. Switchable while running (sweep --live).
    #[arg(help_heading = "Route cache", long)]
    pub gc_thresh: Option<usize>,
    /// Cache entries at most; beyond it packets drop as dst-cache overflow [default: 16 x
    /// the hash buckets, as Linux set ip_rt_max_size, at most 67108864].
    #[arg(help_heading = "Route cache", long)]
    pub max_size: Option<usize>,
    /// Chain length beyond which an insert evicts; GC's target average chain length.
    /// Switchable while running (sweep --live).
    #[arg(help_heading = "Route cache", long, default_value_t = 8)]
    pub gc_elasticity: usize,
    /// Minimum interval between GC runs below max_size, in milliseconds. Switchable while
    /// running (sweep --live).
    #[arg(help_heading = "Route cache", long, default_value_t = 500)]
    pub gc_min_interval_ms: u64,
    /// Idle time after which a cache entry expires, in seconds. Switchable while running
    /// (sweep --live).
    #[arg(help_heading = "Route cache", long, default_value_t = 300)]
    pub gc_timeout: u64,
    /// Whose route cache: 2.6 evicts from a chain longer than --gc-elasticity at insert;
    /// 2.4 (2.4.21) does not, and fills to --max-size under a flood.
    #[arg(help_heading = "Route cache", long, value_enum, default_value_t = crate::config::RtVersion::V2_6)]
    pub rtcache_version: crate::config::RtVersion,
    /// Jiffies per second of the route cache's clock (its GC ages and intervals count in
    /// them): 2.4 kernels on x86 ran HZ=100, 2.6 mostly 1000.
    #[arg(help_heading = "Route cache", long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub rt_hz: u64,
    /// Worker threads (one rx/tx queue pair each, RSS by flow hash).
    #[arg(help_heading = "Workers", long, default_value_t = 1)]
    pub workers: usize,
    /// Prefetch depth 0..8 (headers and route-cache bucket / FIB node of the next k packets).
    /// Switchable while running (top's `+`/`-`, sweep --live).
    #[arg(help_heading = "Workers", long, default_value_t = fwd_abi::Prefetch::DEFAULT)]
    pub prefetch: fwd_abi::Prefetch,
    /// Packets per burst (1..64).
    #[arg(help_heading = "Workers", long, default_value_t = 32)]
    pub burst: usize,
    /// Do not pin threads to cores.
    #[arg(help_heading = "Workers", long)]
    pub no_pin: bool,
    /// A known extra cost per forwarded packet, in ns, in a stage of its own (calib), to
    /// plant a difference of known size. Switchable while running (sweep --live).
    #[arg(help_heading = "Workers", long, default_value_t = 0)]
    pub spin_ns: u32,
    /// Packet I/O.
    #[arg(help_heading = "Device and drivers", long, value_enum, default_value_t = DriverKind::Synthetic)]
    pub driver: DriverKind,
    /// Where the synthetic device runs: its own thread, inline in the workers, or auto.
    #[arg(help_heading = "Device and drivers", long, value_enum, default_value_t = GenMode::Auto)]
    pub device: GenMode,
    /// How the device thread's frame writes reach memory: ddio (cldemote to the LLC), nt
    /// (non-temporal, to DRAM) or cached (left in the device core's cache).
    #[arg(help_heading = "Device and drivers", long, value_enum, default_value_t = DmaModel::Ddio)]
    pub dma: DmaModel,
    /// Descriptors per rx ring.
    #[arg(help_heading = "Device and drivers", long, default_value_t = 1024)]
    pub rx_ring: usize,
    /// Descriptors per tx ring.
    #[arg(help_heading = "Device and drivers", long, default_value_t = 1024)]
    pub tx_ring: usize,
    /// afpacket and afxdp: the interface packets arrive on.
    #[arg(help_heading = "Device and drivers", long = "in", value_name = "IF")]
    pub in_if: Option<String>,
    /// afpacket and afxdp: the interface packets leave by (next hops' MACs come from its
    /// neighbour table, /proc/net/arp).
    #[arg(help_heading = "Device and drivers", long = "out", value_name = "IF")]
    pub out_if: Option<String>,
    /// afxdp: how the XDP program attaches to the input interface.
    #[arg(help_heading = "Device and drivers", long, value_enum, default_value_t = crate::nic::afxdp::XdpMode::Auto)]
    pub xdp_mode: crate::nic::afxdp::XdpMode,
    /// afxdp: require zero-copy (an error where the driver cannot) [default: the kernel
    /// picks zero-copy where the driver offers it, copy otherwise].
    #[arg(help_heading = "Device and drivers", long)]
    pub xdp_zero_copy: bool,
    /// afxdp: busy-poll the sockets (SO_PREFER_BUSY_POLL) [default: off].
    #[arg(help_heading = "Device and drivers", long)]
    pub xdp_busy_poll: bool,
    /// afxdp: rx coalescing: once a frame waits, wait up to US microseconds for a burst's
    /// worth before taking them, as a NIC's interrupt moderation (0: take what is there).
    #[arg(help_heading = "Device and drivers", long, value_name = "US", default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=10000))]
    pub xdp_coalesce_us: u32,
    /// Turn the per-burst stage clocks off (they are on by default: one TSC read at each
    /// stage boundary of a burst).
    #[arg(help_heading = "Stats and output", long)]
    pub no_stage_clock: bool,
    /// Clock one poll in N, chosen at random, scaled up (1: every poll).
    #[arg(help_heading = "Stats and output", long, default_value_t = 8)]
    pub clock_one_in: u32,
    /// Stage clocks on (the default; kept for scripts that ask for them).
    #[arg(help_heading = "Stats and output", long, hide = true, conflicts_with = "no_stage_clock")]
    pub stage_clock: bool,
    /// Stats segment path [default: /dev/shm/fwdscope-PID-RANDOM.stats]; readers find it by PID
    /// when it ends in .stats or lies in /dev/shm.
    #[arg(help_heading = "Stats and output", long)]
    pub stats: Option<PathBuf>,
}

impl ForwarderArgs {
    /// The configuration these flags describe (validated).
    pub fn to_config(&self) -> Result<Config> {
        let table = match &self.table {
            Some(p) => TableSource::File { path: p.clone(), aggregates: self.aggregates },
            None => {
                if self.aggregates {
                    return Err(Error::Config("--aggregates needs --table".into()));
                }
                TableSource::Generated { routes: self.routes.unwrap_or(DEFAULT_ROUTES), seed: self.seed }
            }
        };
        let cfg = Config {
            driver: self.driver,
            workers: self.workers,
            cache: self.cache,
            fib: self.fib,
            prefetch: self.prefetch,
            table,
            nexthops: self.nexthops,
            rt: RtParams {
                hash_buckets: self.rt_hash_buckets,
                gc_thresh: self.gc_thresh.unwrap_or(self.rt_hash_buckets),
                max_size: self
                    .max_size
                    .unwrap_or(self.rt_hash_buckets.saturating_mul(16).min(crate::config::MAX_CACHE_ENTRIES)),
                gc_elasticity: self.gc_elasticity,
                gc_min_interval_ms: self.gc_min_interval_ms,
                gc_timeout_s: self.gc_timeout,
                version: self.rtcache_version,
                hz: self.rt_hz,
                ..RtParams::default()
            },
            traffic: TrafficProfile {
                flows: self.flows,
                pkts_per_flow: self.pkts_per_flow,
                dst: self.dst,
                size: usize::from(self.size),
                seed: self.seed,
                rate: self.rate,
                ttl: 64,
            },
            rx_ring: self.rx_ring,
            tx_ring: self.tx_ring,
            burst: self.burst,
            stage_clock: !self.no_stage_clock,
            clock_one_in: self.clock_one_in,
            spin_ns: self.spin_ns,
            gen_mode: self.device,
            dma: self.dma,
            pin: !self.no_pin,
            stats_path: self.stats.clone(),
            in_if: self.in_if.clone(),
            out_if: self.out_if.clone(),
            xdp: crate::nic::afxdp::XskOptions {
                mode: self.xdp_mode,
                zero_copy: self.xdp_zero_copy,
                busy_poll: self.xdp_busy_poll,
                coalesce_us: self.xdp_coalesce_us,
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// Flags of the `forward` command.
#[derive(clap::Args, Debug, Clone)]
pub struct ForwardArgs {
    #[command(flatten)]
    pub fwd: ForwarderArgs,
    /// Run this many seconds; 0 runs until interrupted.
    #[arg(help_heading = "Stats and output", long, default_value_t = 3.0, value_parser = parse_seconds)]
    pub duration: f64,
    /// Seconds between rtstat lines.
    #[arg(help_heading = "Stats and output", short = 'i', long, default_value_t = 1.0, value_parser = parse_seconds)]
    pub interval: f64,
    /// Print JSON lines (one per interval, then the summary) instead of text.
    #[arg(help_heading = "Stats and output", long)]
    pub json: bool,
}

/// Run a forwarder as `forward` does, writing interval lines and the summary to `out`.
/// Stops at `--duration`, on `interrupted`, or when a controller asks through the segment.
pub fn run_forward(args: &ForwardArgs, out: &mut dyn Write, interrupted: &AtomicBool) -> Result<Summary> {
    run_forward_with(args, out, interrupted, &mut |_| Ok(Box::new(())))
}

/// Something started beside a running forwarder (an exporter reading its stats segment):
/// called once the forwarder runs, with what was set up; what it returns is kept until the
/// forwarder has stopped, then dropped. An error stops the forwarder and ends the run.
pub type OnStart<'a> = &'a mut dyn FnMut(&RunInfo) -> std::result::Result<Box<dyn std::any::Any>, String>;

/// [`run_forward`], with `on_start` run once the forwarder is up.
pub fn run_forward_with(
    args: &ForwardArgs,
    out: &mut dyn Write,
    interrupted: &AtomicBool,
    on_start: OnStart,
) -> Result<Summary> {
    check_timing(args)?;
    let cfg = args.fwd.to_config()?;
    let fwd = Forwarder::start(&cfg)?;
    let beside = match on_start(&fwd.info) {
        Ok(b) => b,
        Err(msg) => {
            fwd.stop()?;
            return Err(Error::Config(msg));
        }
    };
    // Output errors (a closed pipe) end the run, but only after the forwarder is stopped
    // cleanly below: its workers joined and its stats segment removed.
    let written =
        write_start(out, args.json, &cfg, &fwd.info).and_then(|()| write_intervals(out, args, &fwd, interrupted));
    let info = fwd.info.clone();
    let seg = fwd.stop()?;
    drop(beside);
    let first = written?;
    let last = seg.snapshot();
    let summary = Summary::new(&first, &last, &cfg, &info);
    write_summary(out, args.json, &summary)?;
    Ok(summary)
}

/// Refuse an interval or a duration `forward` cannot run with.
fn check_timing(args: &ForwardArgs) -> Result<()> {
    if !(args.interval.is_finite() && args.interval > 0.0) {
        return Err(Error::Config(format!("-i {}: expected a positive number of seconds", args.interval)));
    }
    if !(args.duration.is_finite() && args.duration >= 0.0) {
        return Err(Error::Config(format!("--duration {}: expected seconds >= 0", seconds_text(args.duration))));
    }
    if args.duration > 0.0 && args.duration < MIN_DURATION {
        return Err(Error::Config(format!(
            "--duration {}: expected 0 (run until stopped) or at least {MIN_DURATION} s: a shorter run forwards too \
             few packets for any figure it prints (the workers take longer than that to start)",
            seconds_text(args.duration)
        )));
    }
    Ok(())
}

/// The error for a failed write to the output.
fn stdout_error(e: std::io::Error) -> Error {
    Error::io("<stdout>", e)
}

/// Write what the forwarder started with: a `start` JSON line, or the text head line (and
/// the afxdp line) and the interval table's header.
fn write_start(out: &mut dyn Write, json: bool, cfg: &Config, info: &RunInfo) -> Result<()> {
    let io = stdout_error;
    if json {
        let head = serde_json::json!({ "type": "start", "config": cfg, "info": info });
        writeln!(out, "{head}").map_err(io)?;
    } else {
        writeln!(
            out,
            "fwdscope forward: {} driver, {} worker(s), cache {}, fib {} ({} routes, built in {:.0} ms), prefetch {}, device {}, stats {}",
            cfg.driver, cfg.workers, cfg.cache, cfg.fib, info.routes, info.fib_build_ms, cfg.prefetch, info.device, info.stats_path
        )
        .map_err(io)?;
        if let (Some(x), Some(i)) = (&info.xdp, &cfg.in_if) {
            writeln!(out, "{}", x.line(i)).map_err(io)?;
        }
        writeln!(out, "{}", IntervalRow::header()).map_err(io)?;
    }
    Ok(())
}

/// Write an interval row every `--interval` until `--duration`, an interrupt or a stop
/// request (rows closer than 50 ms to the last are skipped, except the final one).
/// Returns the segment's snapshot from the start.
fn write_intervals(
    out: &mut dyn Write,
    args: &ForwardArgs,
    fwd: &Forwarder,
    interrupted: &AtomicBool,
) -> Result<fwd_abi::Snapshot> {
    let io = stdout_error;
    let seg = fwd.segment().clone();
    let first = seg.snapshot();
    let mut prev = first.clone();
    let start = Instant::now();
    let interval = Duration::from_secs_f64(args.interval);
    let end = (args.duration > 0.0).then(|| Duration::from_secs_f64(args.duration));
    let mut tick = 1u32;
    loop {
        let due = interval * tick;
        let next = end.map_or(due, |e| due.min(e));
        let completed = fwd.wait_until(start, next, interrupted);
        let cur = seg.snapshot();
        if cur.at.duration_since(prev.at) >= Duration::from_millis(50) || !completed {
            let row = IntervalRow::between(&prev, &cur, start.elapsed().as_secs_f64());
            if args.json {
                let mut v = serde_json::to_value(&row).map_err(|e| Error::Config(e.to_string()))?;
                v["type"] = "interval".into();
                writeln!(out, "{v}").map_err(io)?;
            } else {
                writeln!(out, "{}", row.line()).map_err(io)?;
            }
            prev = cur;
        }
        if !completed || end.is_some_and(|e| start.elapsed() >= e) {
            break;
        }
        tick += 1;
    }
    Ok(first)
}

/// Write the run's summary: a `summary` JSON line, or the summary's text.
fn write_summary(out: &mut dyn Write, json: bool, summary: &Summary) -> Result<()> {
    if json {
        let mut v = serde_json::to_value(summary).map_err(|e| Error::Config(e.to_string()))?;
        v["type"] = "summary".into();
        writeln!(out, "{v}").map_err(stdout_error)?;
    } else {
        write!(out, "{}", summary.text()).map_err(stdout_error)?;
    }
    Ok(())
}

/// The forwarder a verb starts: `explicit` (`--forwarder PATH`, e.g. the standalone
/// fwdscope-forwarder), or by default the running executable (fwdscope) with `forward`.
pub fn forwarder_command(explicit: Option<&std::path::Path>) -> Result<(PathBuf, Vec<String>)> {
    if let Some(p) = explicit {
        if !p.exists() {
            return Err(Error::Config(format!("--forwarder {}: no such file", p.display())));
        }
        return Ok((p.to_path_buf(), Vec::new()));
    }
    let exe = std::env::current_exe().map_err(|e| Error::Io { path: "/proc/self/exe".into(), source: e })?;
    Ok((exe, vec!["forward".to_string()]))
}

/// Forwarder flags parsed as `forward` parses them and turned into the configuration they
/// describe (its ranges and combinations checked), without starting anything: what the
/// verbs that start forwarders check before they create or replace anything; `what` says
/// where the flags came from in the error.
pub fn check_forwarder_flags(flags: &[String], what: &str) -> Result<()> {
    use clap::Parser;
    #[derive(clap::Parser)]
    #[command(name = "forwarder flags", args_override_self = true)]
    struct Check {
        #[command(flatten)]
        a: ForwardArgs,
    }
    let mut argv = vec!["forwarder flags".to_string()];
    argv.extend(flags.iter().cloned());
    let c = Check::try_parse_from(&argv).map_err(|e| Error::Config(format!("{what}: {}", e.to_string().trim_end())))?;
    c.a.fwd.to_config().map_err(|e| Error::Config(format!("{what}: {e}")))?;
    Ok(())
}

/// A forwarder flag given before `--` to a verb that starts the forwarder (`record -o y
/// --prefetch 4`): clap would suggest a look-alike among the verb's own flags (`--exec`);
/// the hint that helps is where the flag goes, with the command rewritten. `usage` renders
/// the verb's usage line.
pub fn forwarder_flag_hint(e: &clap::Error, argv: &[String], usage: impl FnOnce(&str) -> String) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let verb = argv.get(1)?;
    if !["record", "stat", "top", "sweep"].contains(&verb.as_str()) {
        return None;
    }
    let long = arg.split('=').next()?.strip_prefix("--")?;
    let fwd = <ForwardArgs as clap::Args>::augment_args(clap::Command::new("forward"));
    let flag = fwd.get_arguments().find(|a| a.get_long() == Some(long))?;
    // clap names the flag without an inline value (`--cache` for `--cache=nocache`).
    let takes_value = flag.get_action().takes_values();
    // The command as it should have been: the flag (and its value) moved after `--`.
    let (mut before, mut moved, mut after) = (Vec::new(), Vec::new(), Vec::new());
    let mut words = argv[1..].iter();
    while let Some(w) = words.next() {
        if w == "--" {
            after.extend(words.by_ref().cloned());
        } else if (w == arg || w.starts_with(&format!("{arg}="))) && moved.is_empty() {
            moved.push(w.clone());
            if takes_value && !w.contains('=') {
                moved.extend(words.next().cloned());
            }
        } else {
            before.push(w.clone());
        }
    }
    let program = std::path::Path::new(&argv[0]).file_name().map_or("fwdscope".into(), |n| n.to_string_lossy());
    let fixed: Vec<String> = std::iter::once(program.into_owned())
        .chain(before)
        .chain(std::iter::once("--".to_string()))
        .chain(moved)
        .chain(after)
        .collect();
    Some(format!(
        "error: unexpected argument '{arg}' found: it is a forwarder flag, and forwarder flags go after `--`:\n\n  {}\n\n{}\n\nFor more information, try '--help'.\n",
        fixed.join(" "),
        usage(verb)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_bounded_and_printed_as_a_person_reads_them() {
        assert_eq!(parse_seconds("0"), Ok(0.0));
        assert!(parse_seconds("inf").is_err() && parse_seconds("-1").is_err() && parse_seconds("1e308").is_err());
        assert_eq!(parse_run_seconds("0.01"), Ok(0.01));
        let e = parse_run_seconds("1e-300").unwrap_err();
        assert!(e.starts_with("`1e-300`: expected at least 0.01 s"), "{e}");
        assert!(parse_run_seconds("0").is_err());
        assert_eq!(seconds_text(1e-300), "1e-300");
        assert_eq!(seconds_text(2.5), "2.5");
        assert_eq!(seconds_text(1e308), "1e308");
    }
}
