//! `fwdscope forward` as a user runs it: JSON output that adds up, rtstat text columns,
//! and clear errors (never a panic) for bad flags and bad table files.

mod common;
use common::run as fwdscope;

/// A flag given twice takes its last value (a sweep's or an experiment's flags first, the
/// user's after `--` override them).
#[test]
fn a_forwarder_flag_given_twice_takes_the_last_value() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "0.2",
        "--json",
        "--routes",
        "1000",
        "--no-pin",
        "--device",
        "thread",
        "--dma",
        "nt",
        "--device",
        "inline",
        "--dma",
        "ddio",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let first = String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string).unwrap_or_default();
    let start: serde_json::Value = serde_json::from_str(&first).expect("a JSON start line");
    assert_eq!((start["config"]["gen_mode"].as_str(), start["config"]["dma"].as_str()), (Some("inline"), Some("ddio")));
}

#[test]
fn forward_json_lines_add_up() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "1.2",
        "-i",
        "0.4",
        "--json",
        "--routes",
        "4000",
        "--flows",
        "2048",
        "--stage-clock",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    assert_eq!(lines[0]["type"], "start");
    assert_eq!(lines[0]["config"]["cache"], "rtcache");
    let intervals = lines.iter().filter(|l| l["type"] == "interval").count();
    assert!((2..=4).contains(&intervals), "{intervals} intervals");
    let s = lines.last().unwrap();
    assert_eq!(s["type"], "summary");
    let rx = s["rx_packets"].as_u64().unwrap();
    let tx = s["tx_packets"].as_u64().unwrap();
    let dropped = s["dropped"].as_u64().unwrap();
    assert!(tx > 10_000, "tx {tx}");
    assert_eq!(rx, tx + dropped, "every packet forwarded or counted as dropped");
    let by_reason: u64 = s["drops"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(by_reason, dropped);
    let clocks = s["stage_ns_per_packet"].as_object().expect("stage clocks on");
    assert!(clocks["lookup"].as_f64().unwrap() > 0.0);
    assert!(s["rtstat"]["in_slow_tot"].as_u64().unwrap() > 0);
}

#[test]
fn forward_text_has_rtstat_columns() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "0.6",
        "-i",
        "0.3",
        "--routes",
        "2000",
        "--cache",
        "nhcache",
        "--fib",
        "dir24",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().nth(1).unwrap();
    for col in [
        "size",
        "IN: hit",
        "tot",
        "mc",
        "no_rt",
        "bcast",
        "madst",
        "masrc",
        "OUT: hit",
        "GC: tot",
        "ignored",
        "goal_miss",
        "ovrf",
        "Mpps",
    ] {
        assert!(header.contains(col), "missing column {col}: {header}");
    }
    assert!(text.contains("summary:") && text.contains("cache nhcache, fib dir24"), "{text}");
}

#[test]
fn bad_input_gets_clear_errors() {
    let dir = std::env::temp_dir().join(format!("fwdscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "198.18.0.0/16 198.19.0.1\n198.18.1.0/24 via nowhere\n").unwrap();
    let nul = dir.join("nul.txt");
    std::fs::write(&nul, "198.18.0.0/16 198.19.0.1\n198.\x0018.1.0/24 198.19.0.1\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["forward".into(), "--prefetch".into(), "9".into()], "--prefetch"),
        (vec!["forward".into(), "--size".into(), "40".into()], "--size"),
        (vec!["forward".into(), "--table".into(), dir.join("missing.txt").display().to_string()], "missing.txt"),
        (
            vec!["forward".into(), "--table".into(), bad.display().to_string(), "--duration".into(), "0.2".into()],
            "bad.txt:2: `via nowhere`: expected an IPv4 gateway address",
        ),
        (vec!["forward".into(), "--rate".into(), "fast".into()], "expected packets per second"),
        (
            vec!["forward".into(), "--rt-hash-buckets".into(), "1000".into(), "--duration".into(), "0.1".into()],
            "power of two",
        ),
        (vec!["forward".into(), "--aggregates".into()], "--aggregates needs --table"),
        (
            vec!["forward".into(), "--table".into(), nul.display().to_string(), "--duration".into(), "0.2".into()],
            "nul.txt:2: a NUL byte at column 5: expected text lines",
        ),
        (
            vec!["forward".into(), "--duration".into(), "0.0000001".into()],
            "--duration 1e-7: expected 0 (run until stopped) or at least 0.01 s",
        ),
    ];
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = fwdscope(&a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: stderr was {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(!err.contains('\0'), "{args:?}: a raw NUL in the message: {err:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_workers_share_the_flows_by_rss() {
    let out = fwdscope(&[
        "forward",
        "--duration",
        "0.8",
        "--json",
        "--routes",
        "3000",
        "--workers",
        "2",
        "--cache",
        "nhcache",
        "--no-pin",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let s: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let w = s["workers"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    let (a, b) = (w[0]["tx_packets"].as_u64().unwrap(), w[1]["tx_packets"].as_u64().unwrap());
    assert!(a > 1000 && b > 1000, "per-worker packets {a} {b}");
    // Two workers on two cores leave none for a device thread: it runs inline.
    assert_eq!(s["info"]["gen_mode"], "inline");
    assert_eq!(s["rx_packets"].as_u64().unwrap(), s["tx_packets"].as_u64().unwrap() + s["dropped"].as_u64().unwrap());
}

/// `diff`, `export` and `report --format csv` through the CLI on the golden inputs, and
/// clear errors (file and offset or line, never a panic) for corrupt analyzer inputs.
#[test]
fn analyzer_commands_on_golden_inputs_and_bad_files() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data");
    let op = format!("{data}/opreport-2003-forwarding.txt");
    let pr = format!("{data}/perf-report-veth-forwarding.txt");
    let out = fwdscope(&["diff", &op, &pr]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("baseline") && text.contains("# figures: %"), "{text}");
    // The veth profile's lookup share (39.00%) against the 2003 one, from their golden tables.
    let lookup = text.lines().find(|l| l.starts_with("lookup ")).expect("lookup row");
    assert!(lookup.contains("39.00"), "{lookup}");

    let pd = format!("{data}/kernel-forwarding.perf.data");
    let ks = format!("{data}/kernel-forwarding.kallsyms.gz");
    let out = fwdscope(&["export", "-i", &pd, "--kallsyms", &ks, "-f", "folded"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let folded = String::from_utf8_lossy(&out.stdout);
    assert!(folded.lines().any(|l| l.contains(";fib_table_lookup")), "no kernel lookup stack in the folded output");
    let total: u64 = folded.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    let out = fwdscope(&["report", "-i", &pd, "--kallsyms", &ks, "--format", "csv"]);
    let csv = String::from_utf8_lossy(&out.stdout);
    let stage_sum: u64 = csv
        .lines()
        .filter(|l| l.starts_with("stage,"))
        .map(|l| l.split(',').nth(5).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(stage_sum, total, "folded and report disagree on the sample count");
    // The only warning: the recording's vDSO is of another kernel build than this
    // machine's, and no build-id cache holds it, so its samples stay unnamed.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.lines().all(|l| l.starts_with("fwdscope report: WARNING: [vdso]: no file of the recorded build-id")
            && l.contains("(stage binary-unknown)")),
        "{err}"
    );

    let dir = std::env::temp_dir().join(format!("fwdscope-cli-an-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let whole = std::fs::read(&pd).unwrap();
    let trunc = dir.join("truncated.data");
    std::fs::write(&trunc, &whole[..whole.len() / 2]).unwrap();
    let bad_text = dir.join("bad-opreport.txt");
    std::fs::write(&bad_text, "vma samples % symbol name\nc02c0ea0 many 9.07 fn_hash_lookup\n").unwrap();
    let bad_rec = dir.join("rec");
    std::fs::create_dir_all(bad_rec.join("samples.parquet")).unwrap();
    std::fs::write(bad_rec.join("meta.json"), "{\"format\": \"fwdscope-recording\",").unwrap();
    let t = trunc.display().to_string();
    let b = bad_text.display().to_string();
    let r = bad_rec.display().to_string();
    for (args, want) in [
        (vec!["report", "-i", &t, "--kallsyms", &ks], "truncated.data: perf.data"),
        (vec!["report", "-i", &b], "bad-opreport.txt:2"),
        (vec!["report", "-i", &r], "meta.json"),
        (vec!["report", "-i", &pd, "--kallsyms", &b], "bad-opreport.txt: no text symbols"),
        (vec!["diff", &op], "required"),
        (vec!["export", "-i", &pd, "-f", "pprof"], "-o"),
    ] {
        let out = fwdscope(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: stderr was {err}");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(!err.contains('\0'), "{args:?}: a raw NUL in the message: {err:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `fwdscope forward | head -2`: the reader closes the pipe; the forwarder stops cleanly
/// (no panic, no message, exit 0) and removes its stats segment.
#[test]
fn a_closed_stdout_ends_forward_quietly_and_cleanly() {
    use std::io::BufRead;
    let mut child = common::fwdscope()
        .args(["forward", "--duration", "5", "-i", "0.1", "--routes", "1000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("forward");
    let pid = child.id();
    {
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        for _ in 0..3 {
            lines.next().expect("a line").expect("text");
        }
        // Dropping the reader closes the pipe.
    }
    let t0 = std::time::Instant::now();
    let status = child.wait().expect("wait");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut err).expect("stderr");
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(err.is_empty(), "nothing said on a closed pipe: {err}");
    assert!(t0.elapsed().as_secs() < 4, "it stopped at the closed pipe, not at --duration");
    assert!(fwd_abi::segment::named_for(pid).is_empty(), "segment left behind");
}

/// Every size, count and time flag has a checked bound: a huge value is refused at once,
/// naming the flag, before anything is allocated or written (no stats segment, no output
/// directory), and nothing panics or aborts.
#[test]
fn every_size_and_time_flag_is_bounded_before_anything_is_allocated() {
    let dir = std::env::temp_dir().join(format!("fwdscope-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seg = dir.join("seg.stats");
    let out = dir.join("out");
    let s = |v: &str| v.to_string();
    let forward = |flags: &[&str]| -> Vec<String> {
        let mut v = vec![s("forward"), s("--duration"), s("0.2"), s("--stats"), seg.display().to_string()];
        v.extend(flags.iter().map(|f| f.to_string()));
        v
    };
    let o = out.display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (forward(&["--rt-hash-buckets", "1099511627776"]), "--rt-hash-buckets"),
        (forward(&["--flows", "10000000000"]), "--flows"),
        (forward(&["--routes", "10000000000"]), "--routes"),
        (forward(&["--nexthops", "100000000000"]), "--nexthops"),
        (forward(&["--gc-elasticity", "0"]), "--gc-elasticity"),
        (forward(&["--gc-timeout", "18446744073709551615"]), "--gc-timeout"),
        (forward(&["--gc-min-interval-ms", "18446744073709551615"]), "--gc-min-interval-ms"),
        (forward(&["--max-size", "1000000000"]), "--max-size"),
        (forward(&["--spin-ns", "4294967295"]), "--spin-ns"),
        (forward(&["--rate", "1e300"]), "--rate"),
        (forward(&["--rx-ring", "1000000"]), "ring sizes"),
        (forward(&["--workers", "100000"]), "--workers"),
        (forward(&["--max-size", "67108864", "--workers", "64"]), "MemAvailable"),
        (forward(&["--gc-thresh", "100000", "--max-size", "1000"]), "gc_thresh must be below max_size"),
        (vec![s("forward"), s("--duration"), s("1e300")], "--duration"),
        (vec![s("forward"), s("-i"), s("1e300")], "--interval"),
        (vec![s("record"), s("-o"), o.clone(), s("--duration"), s("1e300")], "--duration"),
        (vec![s("record"), s("-o"), o.clone(), s("--mmap-pages"), s("1099511627776")], "--mmap-pages"),
        (vec![s("record"), s("-o"), o.clone(), s("--mmap-pages"), s("3")], "power of two"),
        (vec![s("record"), s("-o"), o.clone(), s("--chunk-ms"), s("0")], "--chunk-ms"),
        (vec![s("stat"), s("--duration"), s("1e300")], "--duration"),
        (vec![s("stat"), s("-I"), s("18446744073709551615")], "--interval-ms"),
        (vec![s("top"), s("--delay"), s("1e300")], "--delay"),
        (vec![s("top"), s("--replay"), o.clone(), s("--speed"), s("1e-300")], "--speed"),
        (vec![s("sweep"), s("-o"), o.clone(), s("--repeat"), s("1000000000000")], "--repeat"),
        (vec![s("sweep"), s("-o"), o.clone(), s("--duration"), s("1e300")], "--duration"),
        (vec![s("sweep"), s("-o"), o.clone(), s("--live"), s("--block-ms"), s("18446744073709551615")], "--block-ms"),
        (vec![s("sweep"), s("-o"), o.clone(), s("--live"), s("--keep-contended")], "--keep-contended"),
        (vec![s("report"), s("-i"), o.clone(), s("--keep-contended")], "--html"),
        (vec![s("lab"), s("bench"), s("--repeat"), s("1000000000000")], "--repeat"),
        (vec![s("lab"), s("bench"), s("--seconds"), s("1e300")], "--seconds"),
        (vec![s("lab"), s("send"), s("--duration"), s("1e300")], "--duration"),
    ];
    for (args, want) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let t0 = std::time::Instant::now();
        let r = fwdscope(&a);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(matches!(r.status.code(), Some(1 | 2)), "{args:?}: status {:?}, stderr {err}", r.status);
        assert!(err.contains(want), "{args:?}: stderr does not name {want}: {err}");
        assert!(!err.contains("panicked") && !err.contains("memory allocation"), "{args:?}: {err}");
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{args:?} took {:?} to refuse", t0.elapsed());
        assert!(!seg.exists(), "{args:?} left a stats segment");
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn duplicate_and_conflicting_table_lines_are_said_in_the_text_summary() {
    let dir = std::env::temp_dir().join(format!("fwdscope-dup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = dir.join("t.txt");
    // 10/8 three times (one naming another next hop), 11/8 once.
    std::fs::write(
        &table,
        "10.0.0.0/8 198.18.0.1\n10.0.0.0/8 198.18.0.2\n10.0.0.0/8 198.18.0.1\n11.0.0.0/8 198.18.0.1\n",
    )
    .unwrap();
    let t = table.display().to_string();
    let r = fwdscope(&["forward", "--table", &t, "--duration", "0.2", "--no-pin"]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(text.contains(", 2 routes ("), "{text}");
    assert!(
        text.contains(
            "table: 2 duplicate prefix line(s) dropped, the first of each kept; 1 of them named another next hop"
        ),
        "{text}"
    );
    let r = fwdscope(&["forward", "--table", &t, "--routes", "5"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("--routes") && err.contains("--table"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_names_the_kind_of_input_it_was_given() {
    let dir = std::env::temp_dir().join(format!("fwdscope-kind-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("empty-dir")).unwrap();
    std::fs::write(dir.join("empty"), b"").unwrap();
    // Bytes of no text encoding, from a fixed pattern (no randomness in a test).
    let junk: Vec<u8> = (0..3000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 0x80).collect();
    std::fs::write(dir.join("junk"), &junk).unwrap();
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: creating a FIFO at a path of our own.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let cases = [
        ("/dev/null".to_string(), "a character device"),
        (dir.join("empty").display().to_string(), "an empty file"),
        (dir.join("junk").display().to_string(), "binary data that is not perf.data"),
        (dir.join("empty-dir").display().to_string(), "a directory without meta.json"),
        (fifo.display().to_string(), "a FIFO"),
    ];
    for (input, want) in cases {
        let t0 = std::time::Instant::now();
        let r = fwdscope(&["report", "-i", &input]);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{input}");
        assert!(err.contains(&format!("{input}: {want}")), "{input}: {err}");
        assert!(err.contains("expected a recording directory"), "{input}: {err}");
        assert!(t0.elapsed().as_secs() < 10, "{input}: blocked");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `top` does not watch an arbitrary program, so its help does not offer `--exec` (the
/// target flags it shares with `record` do).
#[test]
fn top_help_offers_only_what_top_watches() {
    let help = |verb: &str| String::from_utf8_lossy(&common::run(&[verb, "--help"]).stdout).into_owned();
    assert!(help("record").contains("--exec <EXEC>"));
    let top = help("top");
    assert!(!top.contains("--exec <EXEC>") && top.contains("--replay"), "{top}");
}

#[test]
fn forward_help_groups_its_flags_and_says_which_switch_live() {
    let r = common::run(&["forward", "--help"]);
    assert!(r.status.success());
    let help = String::from_utf8_lossy(&r.stdout).into_owned();
    // The headings, in this order, each with the flags that belong to it.
    let groups: [(&str, &[&str]); 7] = [
        ("Options:", &["--help"]),
        ("Traffic:", &["--flows", "--pkts-per-flow", "--dst", "--size", "--seed", "--rate"]),
        ("Table and FIB:", &["--fib", "--table", "--aggregates", "--routes", "--nexthops"]),
        (
            "Route cache:",
            &[
                "--cache",
                "--rt-hash-buckets",
                "--gc-thresh",
                "--max-size",
                "--gc-elasticity",
                "--gc-min-interval-ms",
                "--gc-timeout",
                "--rtcache-version",
                "--rt-hz",
            ],
        ),
        ("Workers:", &["--workers", "--prefetch", "--burst", "--no-pin", "--spin-ns"]),
        (
            "Device and drivers:",
            &[
                "--driver",
                "--device",
                "--dma",
                "--rx-ring",
                "--tx-ring",
                "--in",
                "--out",
                "--xdp-mode",
                "--xdp-coalesce-us",
            ],
        ),
        (
            "Stats and output:",
            &["--no-stage-clock", "--clock-one-in", "--stats", "--duration", "--interval", "--json", "--metrics"],
        ),
    ];
    let at =
        |needle: &str| help.lines().position(|l| l == needle).unwrap_or_else(|| panic!("no heading {needle}:\n{help}"));
    let starts: Vec<usize> = groups.iter().map(|(h, _)| at(h)).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "headings out of order: {starts:?}");
    let lines: Vec<&str> = help.lines().collect();
    for (i, (heading, flags)) in groups.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(lines.len());
        let section = &lines[starts[i]..end];
        for flag in *flags {
            // A flag's own line: `-i, --interval <INTERVAL>`, `--json`.
            let named = |l: &&str| {
                let l = l.trim_start();
                l.starts_with('-') && l.split([' ', ',']).any(|w| w == *flag)
            };
            assert!(section.iter().any(named), "{flag} not under {heading}:\n{}", section.join("\n"));
        }
    }
    // What switches while the forwarder runs says so, and only that.
    let entry = |flag: &str| -> String {
        let i = lines.iter().position(|l| l.trim_start().starts_with(&format!("{flag} "))).expect(flag);
        lines[i..].iter().take_while(|l| !l.is_empty()).copied().collect::<Vec<_>>().join(" ")
    };
    for flag in
        ["--cache", "--prefetch", "--spin-ns", "--gc-thresh", "--gc-elasticity", "--gc-min-interval-ms", "--gc-timeout"]
    {
        assert!(entry(flag).contains("Switchable while running"), "{flag}: {}", entry(flag));
    }
    for flag in ["--fib", "--workers", "--routes", "--max-size", "--driver"] {
        assert!(!entry(flag).contains("Switchable"), "{flag}: {}", entry(flag));
    }
    // --in and --out serve both socket drivers.
    assert!(entry("--in").contains("afpacket and afxdp"), "{}", entry("--in"));
    assert!(entry("--out").contains("afpacket and afxdp"), "{}", entry("--out"));
}

#[test]
fn a_forwarder_flag_before_the_dashes_is_shown_where_it_goes() {
    let out = common::tmpdir("fwdflag");
    let o = out.display().to_string();
    for (args, fixed) in [
        (vec!["record", "-o", &o, "--prefetch", "4"], format!("fwdscope record -o {o} -- --prefetch 4")),
        (
            vec!["record", "-o", &o, "--cache=nocache", "--", "--workers", "2"],
            format!("fwdscope record -o {o} -- --cache=nocache --workers 2"),
        ),
        (vec!["top", "--fib", "dir24"], "fwdscope top -- --fib dir24".to_string()),
    ] {
        let r = fwdscope(&args);
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{args:?}: {err}");
        // The hint first, with the command rewritten; no look-alike of record's own flags.
        let first = err.lines().next().unwrap_or_default();
        assert!(first.contains("it is a forwarder flag, and forwarder flags go after `--`"), "{args:?}: {err}");
        assert!(err.contains(&format!("  {fixed}\n")), "{args:?}: want {fixed}:\n{err}");
        assert!(!err.contains("--exec"), "{args:?}: {err}");
        assert!(err.contains("Usage: fwdscope ") && err.contains("[-- <FORWARDER FLAGS>...]"), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: output created before the flags were checked");
    }
    // A flag of neither: clap's own error, unchanged.
    let r = fwdscope(&["record", "-o", &o, "--bogus"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2));
    assert!(err.contains("unexpected argument '--bogus'") && !err.contains("forwarder flag"), "{err}");
}

#[test]
fn metrics_export_and_report_say_what_they_need_in_plain_words() {
    // metrics without a source: the usage names both ways to give one.
    let r = fwdscope(&["metrics"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("--pid <PID>") && err.contains("--segment <PATH>"), "{err}");
    let r = fwdscope(&["metrics", "-p", "1", "--segment", "/nonexistent"]);
    assert_eq!(r.status.code(), Some(2), "-p and --segment together are refused");
    // export of a binary format to a terminal: the format as typed.
    let rec = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data/forwarder-recording");
    let r = fwdscope(&["export", "-i", rec, "-f", "pprof"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success());
    assert!(err.contains("-f pprof is binary, not for a terminal: name a file with -o"), "{err}");
    // report of a live comparison's directory says what it is and where its page comes from.
    let dir = common::tmpdir("livedir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("live.json"), "{}").unwrap();
    let r = fwdscope(&["report", "-i", &dir.display().to_string()]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success());
    assert!(err.contains("a live comparison's directory") && err.contains("report --html FILE -i DIR"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
