//! `fwdscope`: the command-line front end. Thin: each verb in [`cmd`] is its clap flags and
//! one call into a library (forwarder, collector, analyzer, compare, lab, tui).

mod cmd;

use cmd::{annotate, diff, export, forward, lab, metrics, record, report, stat, sweep, top};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "fwdscope", version, about = "Where do each forwarded packet's cycles go?")]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the bundled forwarder and print rtstat-like lines every -i seconds.
    // A flag given twice takes its last value: a sweep's or an experiment's flags come
    // first and the user's after `--` override them.
    #[command(args_override_self = true)]
    Forward(forward::ForwardCmd),
    /// Sample the forwarder (flags after `--`), a PID (-p) or every CPU (-a) into a recording.
    Record(record::RecordArgs),
    /// Count events per interval: Mpps, cycles or ns per packet, IPC, misses per packet.
    Stat(stat::StatArgs),
    /// The stage table and top symbols of a recording.
    Report(report::ReportArgs),
    /// A function's instructions and source lines with their samples and stages.
    Annotate(annotate::AnnotateArgs),
    /// Compare stage tables and symbols of several inputs, the first as baseline.
    Diff(diff::DiffArgs),
    /// Write a recording's stacks as folded, SVG flame graph, pprof, speedscope, CSV, JSON or Parquet.
    Export(export::ExportArgs),
    /// Compare settings: runs of every combination, repeated and interleaved, with statistics.
    Sweep(sweep::SweepArgs),
    /// The live, top-like view: stages, symbols, rtstat; keys change prefetch and cache mode.
    // `--exec` comes with the shared target flags; top does not watch an arbitrary program.
    #[command(mut_arg("exec", |a| a.hide(true)))]
    Top(top::TopArgs),
    /// Serve a running forwarder's counters to Prometheus (OpenMetrics over HTTP).
    Metrics(metrics::MetricsArgs),
    /// Network namespaces and veth pairs for real-interface runs (198.18.0.0/15 only).
    #[command(subcommand)]
    Lab(lab::LabCmd),
}

/// The usage line of `verb`, as clap renders it.
fn usage_of(verb: &str) -> String {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    cmd.build();
    cmd.find_subcommand_mut(verb).map(|c| c.render_usage().to_string()).unwrap_or_default()
}

fn main() {
    // args_os: an argument that is not UTF-8 is clap's to refuse, not a panic here.
    let argv_os: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&argv_os) {
        Ok(c) => c,
        Err(e) => {
            let argv: Vec<String> = argv_os.iter().map(|a| a.to_string_lossy().into_owned()).collect();
            if let Some(hint) = forwarder::cli::forwarder_flag_hint(&e, &argv, usage_of) {
                use std::io::Write;
                let _ = std::io::stderr().write_all(hint.as_bytes());
                std::process::exit(2);
            }
            e.exit()
        }
    };
    let res = match cli.cmd {
        Some(Cmd::Forward(a)) => forward::run(&a),
        Some(Cmd::Record(a)) => record::run(&a),
        Some(Cmd::Stat(a)) => stat::run(&a),
        Some(Cmd::Report(a)) => report::run(&a),
        Some(Cmd::Annotate(a)) => annotate::run(&a),
        Some(Cmd::Diff(a)) => diff::run(&a),
        Some(Cmd::Export(a)) => export::run(&a),
        Some(Cmd::Top(a)) => top::run(&a),
        Some(Cmd::Sweep(a)) => sweep::run(&a),
        Some(Cmd::Lab(c)) => lab::run(&c),
        Some(Cmd::Metrics(a)) => metrics::run(&a),
        None => {
            // The embedded default: a few seconds of the bundled forwarder on its synthetic NIC.
            use clap::FromArgMatches;
            let m = <forward::ForwardCmd as clap::Args>::augment_args(clap::Command::new("forward"))
                .get_matches_from(["forward"]);
            match forward::ForwardCmd::from_arg_matches(&m) {
                Ok(a) => forward::run(&a),
                Err(e) => Err(e.into()),
            }
        }
    };
    if let Err(e) = res {
        // A reader that closed our output (`| head`) ends us quietly, as other Unix tools
        // end: the command has already stopped what it started.
        let closed = e
            .chain()
            .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe));
        if closed {
            std::process::exit(0);
        }
        // Library errors already carry their cause in their message: print each cause of
        // the chain only if it adds something.
        let mut msg = e.to_string();
        for cause in e.chain().skip(1) {
            let c = cause.to_string();
            if !msg.contains(&c) {
                msg = format!("{msg}: {c}");
            }
        }
        // Not eprintln!: a closed stderr must not turn an error into a panic.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "fwdscope: {msg}");
        std::process::exit(1);
    }
}
