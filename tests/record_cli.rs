//! `fwdscope record` and `fwdscope stat` as a user runs them: a recorder killed with
//! SIGKILL leaves every finished chunk readable; stat prints per-worker rows naming the
//! events it could count; errors a user can act on. Skips where perf is not usable.

use std::process::Stdio;
use std::time::{Duration, Instant};

mod common;
use common::{fwdscope, perf_allows, tmpdir, Need};

/// The tests here each run a forwarder (a worker and a device thread) and a recorder on a
/// 2-core machine: run them one at a time, or their figures measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `record` and `stat` of the forwarder: sampling it and counting on it.
fn perf_ok() -> bool {
    perf_allows(Need::Sample) && perf_allows(Need::Count)
}

#[test]
fn a_killed_recorder_leaves_every_finished_chunk_readable() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let out = tmpdir("kill");
    let mut child = fwdscope()
        .args(["record", "-F", "1000", "--chunk-ms", "200", "-o"])
        .arg(&out)
        .args(["--", "--duration", "0", "--routes", "3000", "--flows", "2048", "--no-pin"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(30) {
        let parts = std::fs::read_dir(out.join("samples.parquet")).map(|d| d.count()).unwrap_or(0);
        if parts >= 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let rec = collector::recording::Recording::open(&out).expect("meta.json readable after SIGKILL");
    // The forwarder dies with its recorder and removes its stats segment.
    let pid = rec.meta.target_pid.expect("target pid") as u32;
    assert!(common::wait_until(10, || !common::running(pid)), "forwarder {pid} orphaned");
    assert!(fwd_abi::segment::named_for(pid).is_empty(), "segment of {pid} left behind");
    assert_eq!(rec.meta.status, "recording", "the writer never finished");
    let samples = rec.samples().expect("every part readable");
    let counters = rec.counters().expect("every counter part readable");
    println!("after SIGKILL: {} samples, {} counter rows", samples.len(), counters.len());
    assert!(samples.len() > 100);
    assert!(counters.iter().any(|r| r.name == "tx_packets" && r.value > 0));
    // Private whatever the umask: the directory 0700, its files 0600.
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&out), 0o700);
    for f in ["meta.json", "maps.json", "tasks.json", "kallsyms", "target.log"] {
        assert_eq!(mode(&out.join(f)), 0o600, "{f}");
    }
    // Maps were written as they were learned: the report names the forwarder's symbols,
    // and says first what the recording lacks.
    let o = &out.display().to_string();
    let r = common::run(&["report", "-i", o]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(text.contains("# WARNING: the recording is incomplete"), "{text}");
    assert!(text.contains("fwd_lookup") || text.contains("fwd_driver"), "samples unnamed:\n{text}");
    // One corrupt part: skipped and named, the rest reported; --strict refuses.
    let part = out.join("samples.parquet").join("part-000002.parquet");
    std::fs::write(&part, b"PAR1 not really parquet PAR1").unwrap();
    let r = common::run(&["report", "-i", o]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(text.contains("# WARNING: skipped") && text.contains("part-000002.parquet"), "{text}");
    let r = common::run(&["report", "--strict", "-i", o]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success() && err.contains("part-000002.parquet"), "{err}");
    // A read that would pass its memory budget stops, naming the part and the budget (a
    // dense hostile part decoded to 175 times its size); it is not skipped like a corrupt
    // part, which would change the figures without saying why.
    let r = fwdscope().env("FWDSCOPE_MEMORY_BUDGET", "1K").args(["report", "-i", o]).output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains(".parquet/part-0")
            && err.contains("over its memory budget of 1.0 KiB (FWDSCOPE_MEMORY_BUDGET=1K)"),
        "{err}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn stat_prints_per_worker_rows_and_the_events_used() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let out = fwdscope()
        .args([
            "stat",
            "-I",
            "300",
            "--duration",
            "1.3",
            "--json",
            "--",
            "--duration",
            "0",
            "--routes",
            "3000",
            "--no-pin",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines[0]["type"], "header");
    let events = lines[0]["events"].as_array().unwrap();
    let status =
        |name: &str| events.iter().find(|e| e["event"] == name).map(|e| e["status"].as_str().unwrap_or("").to_string());
    assert_eq!(status("task-clock").as_deref(), Some("counted"));
    assert!(status("cycles").is_some(), "cycles is listed, counted or not");
    let rows: Vec<&serde_json::Value> = lines.iter().filter(|l| l["type"] == "interval").collect();
    assert!(rows.len() >= 3, "{} rows", rows.len());
    for r in &rows {
        assert_eq!(r["unit"], "worker 0");
    }
    let mid = rows[1];
    assert!(mid["mpps"].as_f64().unwrap() > 0.1, "{mid}");
    let ns = mid["task_clock_ns_per_packet"].as_f64().unwrap();
    assert!(ns > 10.0 && ns < 100_000.0, "task-clock ns per packet {ns}");
    // The forwarder and its segment are gone afterwards.
    std::thread::sleep(Duration::from_millis(200));
}

#[test]
fn stat_csv_has_a_column_per_counted_event() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let out = fwdscope()
        .args([
            "stat",
            "-I",
            "400",
            "--duration",
            "0.9",
            "-x",
            ",",
            "-e",
            "task-clock,context-switches",
            "--",
            "--duration",
            "0",
            "--routes",
            "2000",
            "--no-pin",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(lines.next().unwrap(), "time,unit,packets,task-clock,context-switches");
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(row.len(), 5);
    assert_eq!(row[1], "worker 0");
    assert!(row[3].parse::<u64>().unwrap() > 1_000_000, "task-clock ns in 0.4 s: {}", row[3]);
}

#[test]
fn errors_a_user_can_act_on() {
    let dir = tmpdir("errs");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("meta.json"), "{}").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["record".into(), "-o".into(), dir.join("x").display().to_string(), "-p".into(), "999999999".into()],
            "process 999999999 does not exist",
        ),
        (
            vec!["record".into(), "-o".into(), "/dev/null".into(), "--".into(), "--duration".into(), "0.1".into()],
            "/dev/null: exists and is not a directory",
        ),
        (
            vec![
                "record".into(),
                "-o".into(),
                dir.join("y").display().to_string(),
                "-e".into(),
                "cycels".into(),
                "-a".into(),
            ],
            "unknown event `cycels`",
        ),
        // A recording of an older fwdscope (no output marker): left for the user to remove.
        (vec!["record".into(), "-o".into(), dir.display().to_string(), "-a".into()], "remove it yourself"),
        (
            vec![
                "record".into(),
                "-o".into(),
                dir.join("z").display().to_string(),
                "--".into(),
                "--prefetch".into(),
                "12".into(),
            ],
            "forwarder flags after `--`",
        ),
        (vec!["stat".into(), "-p".into(), "999999999".into()], "process 999999999 does not exist"),
        // A program that cannot be started: nothing recorded, nothing left behind.
        (
            vec![
                "record".into(),
                "-o".into(),
                dir.join("noexec").display().to_string(),
                "--exec".into(),
                "/nonexistent/program".into(),
            ],
            "/nonexistent/program",
        ),
        // A file without the execute bit: refused before anything runs, not an empty
        // recording of a child that exited 127.
        (
            vec![
                "record".into(),
                "-o".into(),
                dir.join("noexec2").display().to_string(),
                "--exec".into(),
                "/etc/passwd".into(),
            ],
            "/etc/passwd: not executable by this user",
        ),
        // A recording of nothing is refused before it starts.
        (
            vec!["record".into(), "-o".into(), dir.join("f0").display().to_string(), "-F".into(), "0".into()],
            "0 is not in 1..",
        ),
    ];
    let mut cases: Vec<(Vec<String>, String)> = cases.into_iter().map(|(a, w)| (a, w.to_string())).collect();
    // Above the kernel's sampling limit: the limit is named with its value, not "Invalid argument".
    if let (Some(max), true) = (collector::perf_abi::max_sample_rate(), perf_ok()) {
        cases.push((
            vec![
                "record".into(),
                "-o".into(),
                dir.join("fmax").display().to_string(),
                "-F".into(),
                (max + 1).to_string(),
                "-a".into(),
            ],
            format!("above kernel.perf_event_max_sample_rate = {max}"),
        ));
    }
    // A script whose interpreter is missing passes every check before the fork; its exec
    // fails in the child. Said as such, not recorded as a run that exited 127.
    let scripts = tmpdir("record-noint");
    std::fs::create_dir_all(&scripts).unwrap();
    if perf_ok() {
        let script = scripts.join("noint.sh");
        std::fs::write(&script, "#!/nonexistent/interpreter\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        cases.push((
            vec![
                "record".into(),
                "-o".into(),
                dir.join("noint").display().to_string(),
                "--exec".into(),
                script.display().to_string(),
            ],
            "noint.sh: could not be started: No such file or directory (os error 2) (the file exists, so its interpreter"
                .into(),
        ));
    }
    // A script whose `env` finds no interpreter: the exec succeeds (env runs), env exits
    // 127; the recording says what 127 means.
    if perf_ok() {
        let script = scripts.join("envmissing.sh");
        std::fs::write(&script, "#!/usr/bin/env fwdscope-no-such-interpreter\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let o =
            fwdscope().args(["record", "-o"]).arg(dir.join("envmissing")).arg("--exec").arg(&script).output().unwrap();
        let said = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(said.contains("status 127 (127: a command it runs"), "{said}");
        let _ = std::fs::remove_dir_all(dir.join("envmissing"));
    }
    for (args, want) in cases {
        let out = fwdscope().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(&want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // Refused before anything was written.
    for d in ["f0", "fmax", "x", "y", "noexec", "noexec2", "noint"] {
        assert!(!dir.join(d).exists(), "{d} left behind");
    }
    std::fs::remove_dir_all(&scripts).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_attributes_a_forwarder_recording_to_its_stages() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let out = tmpdir("report");
    let rec = fwdscope()
        .args(["record", "-F", "1000", "-o"])
        .arg(&out)
        .args(["--", "--duration", "1.5", "--routes", "5000", "--cache", "nocache", "--fib", "dir24", "--no-pin"])
        .output()
        .unwrap();
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    let rep = fwdscope().args(["report", "--format", "json", "-i"]).arg(&out).output().unwrap();
    assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
    let t: serde_json::Value = serde_json::from_slice(&rep.stdout).unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
    assert_eq!(t["event"], meta["sampling"]["used"], "the report names the event actually used");
    let stage = |name: &str| {
        t["stages"].as_array().unwrap().iter().find(|r| r["stage"] == name).map(|r| r["percent"].as_f64().unwrap())
    };
    let sum: f64 = t["stages"].as_array().unwrap().iter().map(|r| r["percent"].as_f64().unwrap()).sum();
    assert!((sum - 100.0).abs() < 0.01);
    // Worker stages and the device thread's nic stage all show up (by samples, not shares:
    // on a loaded machine the forwarder ran a fraction of the time and the shares of its
    // stages in the whole move with how its two threads shared the CPUs).
    let samples = |name: &str| {
        t["stages"].as_array().unwrap().iter().find(|r| r["stage"] == name).and_then(|r| r["samples"].as_u64())
    };
    for s in ["lookup", "driver", "ip", "nic"] {
        assert!(stage(s).is_some() && samples(s).is_some_and(|n| n >= 1), "stage {s}: {:?}", t["stages"]);
    }
    assert!(t["packets"].as_u64().unwrap() > 100_000);
    let text = fwdscope().args(["report", "-i"]).arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("fwd_lookup_fib_dir24") && text.contains("ns/packet"), "{text}");
    // What was recorded, said in the header: the settings, length, packets and rate.
    let line = text.lines().find(|l| l.starts_with("# recorded: ")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.starts_with("# recorded: cache=nocache fib=dir24 prefetch=2, 1 worker(s)"), "{line}");
    assert!(line.contains(" packets = ") && line.ends_with(" Mpps"), "{line}");
    // Building the table and the FIB is start-up, apart from the per-packet stages: a
    // startup row without a per-packet figure, only in the main thread's table, and no
    // worker's forwarding symbol in it.
    let startup = t["stages"].as_array().unwrap().iter().find(|r| r["stage"] == "startup").cloned();
    let startup = startup.unwrap_or_else(|| panic!("no startup row: {:?}", t["stages"]));
    assert!(startup["samples"].as_u64().unwrap() >= 1 && startup["per_packet"].is_null(), "{startup}");
    for w in t["workers"].as_array().unwrap() {
        let has = w["stages"].as_array().unwrap().iter().any(|r| r["stage"] == "startup");
        let worker = w["thread"].as_str().unwrap().starts_with("fwd-");
        assert!(!(has && worker), "a worker or device thread with start-up samples: {w}");
    }
    let in_startup: Vec<&str> = t["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["stage"] == "startup")
        .map(|r| r["symbol"].as_str().unwrap())
        .collect();
    assert!(!in_startup.iter().any(|s| s.starts_with("fwd_")), "{in_startup:?}");
    assert!(
        text.lines().any(|l| l.starts_with("# startup: ") && l.contains("before its first worker started")),
        "{text}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

/// Both instruments must find a planted cost: the calibration stage spins a known time per
/// forwarded packet (`--spin-ns`), and the sampled profile of the worker threads and the
/// forwarder's own stage clocks each report it, per forwarded packet, in the report's
/// cross-check.
#[test]
fn both_instruments_find_the_planted_calibration_cost() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let out = tmpdir("planted");
    // One recording and its cross-check: (clocked, sampled calib ns/packet, run-queue share).
    let attempt = || {
        let _ = std::fs::remove_dir_all(&out);
        let rec = fwdscope()
            .args(["record", "-F", "2000", "-o"])
            .arg(&out)
            .args(["--", "--duration", "2", "--routes", "5000", "--cache", "nocache", "--fib", "dir24"])
            .args(["--spin-ns", "300", "--no-pin"])
            .output()
            .unwrap();
        assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
        let rep = fwdscope().args(["report", "--format", "json", "-i"]).arg(&out).output().unwrap();
        assert!(rep.status.success(), "{}", String::from_utf8_lossy(&rep.stderr));
        let t: serde_json::Value = serde_json::from_slice(&rep.stdout).unwrap();
        let check = &t["clock_check"];
        assert!(check.is_object(), "no cross-check in the report: {t}");
        let row = check["rows"].as_array().unwrap().iter().find(|r| r["stage"] == "calib").cloned();
        let row = row.unwrap_or_else(|| panic!("no calib row: {check}"));
        let runq = check["clocks"]["runq_share"].as_f64().unwrap_or(0.0);
        (row["clock_ns"].as_f64().unwrap(), row["sampled_ns"].as_f64().unwrap(), runq)
    };
    // The spin is timed by the TSC itself and asks for its own call overhead less; it
    // really lasts longer while it is sampled, by the sampling interrupts that land in it
    // (docs/reporting.md: 20 ns planted reads 21.8 by clocks at 1 kHz, 23.7 at 4 kHz; here at 2 kHz
    // 300 read 330.2 once): -10%..+15%. When other work took the CPU (the run-queue wait the report gives), the clocks leave
    // that time out in proportion, which a TSC-timed spin does not follow: the report
    // says the figures are less sure, and so the test only checks the sampled figure.
    // Time the hypervisor takes from the vCPU mid-spin (steal, which no run-queue figure
    // shows) lengthens the spin too: a CI run read 475 ns once. So up to three recordings,
    // each saying why it did not count; a real error in the clocks fails all three.
    let (mut clock, mut sampled, mut runq) = attempt();
    for n in 2..=3 {
        if runq > 0.05 || (270.0..=345.0).contains(&clock) {
            break;
        }
        println!("recording {}: clocked calib {clock:.1} ns/packet for 300 planted (steal?): recording again", n - 1);
        (clock, sampled, runq) = attempt();
    }
    if runq <= 0.05 {
        assert!((270.0..=345.0).contains(&clock), "clocked calib {clock} ns/packet, three recordings");
    } else {
        println!(
            "clocked calib {clock} ns/packet not checked: the worker waited to run {:.0}% of the time",
            100.0 * runq
        );
    }
    // Sampling at 2 kHz for 2 s leaves a few thousand samples in the spin. In this VM the
    // sampled figure reads a long TSC spin 5-25% high (measured: 330-375 ns for 300; the
    // cross-check then flags calib as more than 5 points apart), more in the unoptimized
    // build the tests run: -20%..+30%.
    assert!((240.0..=390.0).contains(&sampled), "sampled calib {sampled} ns/packet");
    let text = fwdscope().args(["report", "-i"]).arg(&out).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("# two instruments, worker threads only: samples of"), "{text}");
    assert!(text.contains("calib"), "{text}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// A forwarder fed by a slow device waits most of its time: its summary must say the rate
/// is the device's, not the forwarder's capacity.
#[test]
fn a_device_bound_run_says_so() {
    let _serial = serial();
    let out = fwdscope()
        .args(["forward", "--duration", "1", "--routes", "2000", "--rate", "20k", "--json", "--no-pin"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary line: {stdout}"));
    let clocks = &summary["clocks"];
    assert_eq!(clocks["device_bound"], true, "{clocks}");
    assert!(clocks["idle_share"].as_f64().unwrap() > 0.5, "{clocks}");
    let text = fwdscope()
        .args(["forward", "--duration", "0.5", "--routes", "2000", "--rate", "20k", "--no-pin"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("device-bound: the workers waited for packets"), "{text}");
    // With the clocks off nothing can be said, and the summary says they were off.
    let off = fwdscope()
        .args(["forward", "--duration", "0.3", "--routes", "2000", "--no-stage-clock", "--no-pin"])
        .output()
        .unwrap();
    let off = String::from_utf8_lossy(&off.stdout);
    assert!(off.contains("stage clocks: off (--no-stage-clock)") && !off.contains("-bound"), "{off}");
}

/// A user the test creates (root only): what it can read of a recording root made.
fn other_user_reads(path: &std::path::Path) -> Option<bool> {
    const USER: &str = "fwdscope-permtest";
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP: permission tests need root (to create a user)");
        return None;
    }
    let exists = std::process::Command::new("id").arg(USER).output().is_ok_and(|o| o.status.success());
    if !exists {
        let ok = std::process::Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("SKIP: useradd {USER} failed");
            return None;
        }
    }
    let o = std::process::Command::new("runuser").args(["-u", USER, "--", "cat"]).arg(path).output().ok()?;
    Some(o.status.success())
}

#[test]
fn recordings_are_private_unless_shared() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    for share in [false, true] {
        let out = tmpdir(if share { "shared" } else { "private" });
        let mut args = vec!["record", "-F", "200", "-o"];
        let o = out.display().to_string();
        args.push(&o);
        if share {
            args.push("--share");
        }
        args.extend(["--", "--duration", "0.5", "--routes", "3000", "--no-pin"]);
        // A permissive umask must not make a private recording readable.
        let r = std::process::Command::new("sh")
            .arg("-c")
            .arg("umask 000; exec \"$0\" \"$@\"")
            .arg(common::BIN)
            .args(&args)
            .output()
            .expect("record");
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let Some(meta) = other_user_reads(&out.join("meta.json")) else { return };
        assert_eq!(meta, share, "share {share}: meta.json readable by another user: {meta}");
        if !share {
            // The other user asking for a report of it is told the directory is private,
            // not that it is "a directory without meta.json". The binary is copied where
            // that user may run it (root's home is closed to others).
            let bin_dir = tmpdir("bin");
            std::fs::create_dir_all(&bin_dir).expect("bin dir");
            std::fs::set_permissions(&bin_dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
            let bin = bin_dir.join("fwdscope");
            std::fs::copy(common::BIN, &bin).expect("copy the binary");
            let o = std::process::Command::new("runuser")
                .args(["-u", "fwdscope-permtest", "--"])
                .arg(&bin)
                .args(["report", "-i"])
                .arg(&out)
                .output()
                .expect("report as another user");
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "another user read a private recording");
            assert!(
                err.contains("a directory this user may not read") && err.contains("kept private to root"),
                "{err}"
            );
            std::fs::remove_dir_all(&bin_dir).unwrap();
        }
        let rec = collector::recording::Recording::open(&out).expect("recording");
        let real_addresses = !rec.meta.notes.iter().any(|n| n.contains("kptr_restrict"));
        if real_addresses {
            assert_eq!(other_user_reads(&out.join("kallsyms")), Some(false), "share {share}: kallsyms readable");
        }
        std::fs::remove_dir_all(&out).unwrap();
    }
}

/// A finished recording with one sample part unreadable (the wrong schema): `diff` of it
/// against an intact copy gives the same cost per packet (its packets scaled to the
/// samples read) and says why; `export` warns too; `--strict` refuses in both.
#[test]
fn a_skipped_part_is_said_everywhere_and_per_packet_figures_follow_the_parts_read() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let whole = tmpdir("parts-whole");
    let rec = fwdscope()
        .args(["record", "-F", "1000", "--chunk-ms", "200", "-o"])
        .arg(&whole)
        .args(["--", "--duration", "2", "--routes", "5000", "--cache", "nocache", "--fib", "dir24", "--no-pin"])
        .output()
        .unwrap();
    assert!(rec.status.success(), "{}", String::from_utf8_lossy(&rec.stderr));
    let cut = tmpdir("parts-cut");
    assert!(std::process::Command::new("cp").arg("-a").arg(&whole).arg(&cut).status().unwrap().success());
    let parts: Vec<_> = {
        let mut v: Vec<_> =
            std::fs::read_dir(cut.join("samples.parquet")).unwrap().map(|e| e.unwrap().path()).collect();
        v.sort();
        v
    };
    assert!(parts.len() >= 5, "{} sample parts", parts.len());
    // A counters part where a samples part belongs: readable Parquet, the wrong columns.
    let counters = std::fs::read_dir(cut.join("counters.parquet")).unwrap().next().unwrap().unwrap().path();
    std::fs::copy(&counters, &parts[2]).unwrap();
    let (w, c) = (whole.display().to_string(), cut.display().to_string());
    let d = common::run(&["diff", "--format", "json", &w, &c]);
    let err = String::from_utf8_lossy(&d.stderr);
    assert!(d.status.success(), "{err}");
    assert!(err.contains(&format!("warning: {c}: skipped")) && err.contains("per-packet figures use"), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    assert!(j["metric"].as_str().unwrap().ends_with("/packet"), "{j}");
    let total = |i: usize| -> f64 {
        j["stages"].as_array().unwrap().iter().map(|r| r["values"][i].as_f64().unwrap_or(0.0)).sum()
    };
    let ratio = total(1) / total(0);
    println!("all stages, cut / whole: {ratio:.3} ({} parts, one unreadable)", parts.len());
    // Without the scaling it is the share of samples read (about 0.8-0.9 here).
    assert!((0.93..=1.07).contains(&ratio), "cut / whole = {ratio}");
    let d = common::run(&["diff", "--strict", &w, &c]);
    assert!(!d.status.success() && String::from_utf8_lossy(&d.stderr).contains("part-"), "diff --strict accepted");
    let out = cut.with_extension("folded");
    let e = common::run(&["export", "-f", "folded", "-i", &c, "-o", &out.display().to_string()]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(e.status.success() && err.contains(&format!("warning: {c}: skipped")), "{err}");
    let e = common::run(&["export", "--strict", "-f", "folded", "-i", &c, "-o", &out.display().to_string()]);
    assert!(!e.status.success(), "export --strict accepted");
    let _ = std::fs::remove_file(&out);
    std::fs::remove_dir_all(&whole).unwrap();
    std::fs::remove_dir_all(&cut).unwrap();
}

/// A forwarder recording without clock figures says why, in the report: the clocks were
/// off (`--no-stage-clock`), or the run recorded no TSC rate to turn cycles into time.
#[test]
fn a_report_without_clock_figures_says_why() {
    let _serial = serial();
    if !perf_ok() {
        return;
    }
    let report = |dir: &std::path::Path| {
        let o = fwdscope().args(["report", "-i"]).arg(dir).output().expect("report");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout).to_string();
        text.lines().find(|l| l.starts_with("# stage clocks: ")).map(str::to_string).unwrap_or_else(|| panic!("{text}"))
    };
    let record = |dir: &std::path::Path, extra: &[&str]| {
        let o = fwdscope()
            .args(["record", "-F", "200", "-o"])
            .arg(dir)
            .args(["--", "--duration", "0.5", "--routes", "2000", "--no-pin"])
            .args(extra)
            .output()
            .expect("record");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let off = tmpdir("clocks-off");
    record(&off, &["--no-stage-clock"]);
    let line = report(&off);
    assert!(
        line.contains("stage clocks off: --no-stage-clock") && line.ends_with("figures from samples only"),
        "{line}"
    );
    // Clocks on, but the TSC rate lost from meta.json.
    let on = tmpdir("clocks-no-tsc");
    record(&on, &[]);
    let meta_path = on.join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    assert!(meta["forwarder"]["info"]["tsc_hz"].as_u64().unwrap() > 0, "the run recorded its TSC rate");
    meta["forwarder"]["info"]["tsc_hz"] = serde_json::json!(0);
    std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
    let line = report(&on);
    assert!(line.contains("the clocks ran, but the run recorded no TSC rate (tsc_hz 0 in"), "{line}");
    // Damaged to a rate no TSC runs at, or not a count at all: the value is named.
    for bad in [serde_json::json!(1), serde_json::json!(-5), serde_json::json!(1e300)] {
        meta["forwarder"]["info"]["tsc_hz"] = bad.clone();
        std::fs::write(&meta_path, serde_json::to_vec(&meta).unwrap()).unwrap();
        let line = report(&on);
        assert!(line.contains(&format!("no TSC rate (tsc_hz {bad} in meta.json, expected 100 MHz")), "{line}");
    }
    std::fs::remove_dir_all(&off).unwrap();
    std::fs::remove_dir_all(&on).unwrap();
}
