//! `fwdscope sweep --live`: one forwarder, settings switched in blocks. A planted
//! calibration cost is found in the right direction, every block is assigned to exactly one
//! setting by the workers' own stamps, and a process of the test's own spinning on the
//! worker's core is caught by the contention detector, which then refuses a verdict. Bad
//! settings are refused before anything starts. Runs without perf (counters only), but for
//! the stages per setting (samples recorded alongside: skipped, saying why, without perf);
//! the contention test needs two CPUs and skips, saying so, without them.

mod common;
use common::{children, fwdscope};
use std::process::Command;

/// The live runs share two cores: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn live(args: &[&str], out: &std::path::Path) -> (String, serde_json::Value) {
    let o = fwdscope().args(["sweep", "--live", "--force", "-o"]).arg(out).args(args).output().expect("sweep --live");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "sweep --live {args:?}: {}\n{text}", String::from_utf8_lossy(&o.stderr));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("live.json")).expect("live.json")).expect("json");
    (text, json)
}

const SMALL: [&str; 5] = ["--", "--routes", "5000", "--cache", "nocache"];

/// `fwdscope forward --duration 0 --device inline FLAGS`, once its segment says running.
fn running_forwarder(flags: &[&str]) -> (common::KillOnDrop, fwd_abi::Segment) {
    let mut fwd = fwdscope()
        .args(["forward", "--duration", "0", "--device", "inline"])
        .args(flags)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("forwarder");
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = fwd_abi::Segment::find_for(fwd.id()).filter(|s| s.state() == fwd_abi::State::Running) {
            return (common::KillOnDrop(fwd), s);
        }
        if t0.elapsed().as_secs() >= 60 || matches!(fwd.try_wait(), Ok(Some(_))) {
            // It runs until stopped (--duration 0): never leave it loading the machine.
            let _ = fwd.kill();
            let status = fwd.wait();
            panic!("forwarder did not start within 60 s (exit: {status:?})");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_planted_cost_is_found_and_every_block_has_one_setting() {
    let _g = serial();
    let out = std::env::temp_dir().join(format!("fwdscope-live-{}", std::process::id()));
    let mut args =
        vec!["--spin-ns", "0,60", "--duration", "4", "--block-ms", "100", "--discard-ms", "20", "--seed", "5"];
    args.extend(SMALL);
    // A host whose hypervisor steals from the worker's CPU makes the tool refuse a verdict
    // ("undecided: the machine was busy"), as it must: run again, up to three times, and
    // check the verdict on a run the host left alone.
    let mut attempt = 0;
    let (text, j) = loop {
        attempt += 1;
        let (text, j) = live(&args, &out);
        println!("{text}");
        let busy = j["results"][1]["verdict"]["reason"].as_str().is_some_and(|r| r.contains("machine was busy"));
        if !busy || attempt == 3 {
            break (text, j);
        }
        println!("run {attempt}: the machine was busy (see the contention line); running again");
    };
    let results = j["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    let e = &results[1]["effect"];
    // 60 ns more per packet at ~100-200 ns per packet: a large slowdown, and decided.
    assert!(e["ratio"].as_f64().expect("ratio") < 0.9, "{e}");
    assert!(e["ci"][1].as_f64().expect("ci") < 1.0, "{e}");
    let busy = results[1]["verdict"]["reason"].as_str().is_some_and(|r| r.contains("machine was busy"));
    if busy {
        // Three runs in a row on a host that kept stealing or crowding the worker's core:
        // refusing a verdict is what the tool must do then. The effect above was still
        // found; the refusal must name its cause, counted on the contention line.
        println!("NOTE: the host was busy in all three runs: the verdict was refused, as it must be");
        let line = text.lines().find(|l| l.starts_with("contention: ")).expect("a contention line");
        assert!(!line.starts_with("contention: 0 of"), "busy with no block flagged: {line}");
        assert!(line.contains("waiting to run,") && line.contains("steal,"), "the causes counted: {line}");
    } else {
        assert_eq!(results[1]["verdict"]["kind"], "significant", "{text}");
    }
    // Every block: a generation of its own, in order; each worker ran the block's
    // settings through its measured interval, which began after its switch stamp.
    let blocks = j["blocks"].as_array().expect("blocks");
    assert_eq!(blocks.len(), 40, "4 s of 100 ms blocks");
    let gens: Vec<u64> = blocks.iter().map(|b| b["generation"].as_u64().expect("generation")).collect();
    assert!(gens.windows(2).all(|w| w[1] > w[0]), "{gens:?}");
    for b in blocks {
        for w in b["workers"].as_array().expect("workers") {
            assert_eq!(w["assigned"], true, "{b}");
            let (sw, start, end) = (
                w["switch_mono_ns"].as_u64().unwrap(),
                w["start_mono_ns"].as_u64().unwrap(),
                w["end_mono_ns"].as_u64().unwrap(),
            );
            assert!(sw > 0 && sw <= start && start < end, "{w}");
        }
    }
    // The switch stamps by the worker's two clocks (TSC and CLOCK_MONOTONIC) tell the same
    // block lengths: ticks per ns agree from one block to the next to 0.1%.
    let stamps: Vec<(u64, u64)> = blocks
        .iter()
        .map(|b| &b["workers"][0])
        .map(|w| (w["switch_mono_ns"].as_u64().unwrap(), w["switch_tsc"].as_u64().unwrap()))
        .collect();
    let ghz: Vec<f64> = stamps.windows(2).map(|w| (w[1].1 - w[0].1) as f64 / (w[1].0 - w[0].0) as f64).collect();
    let mid = {
        let mut v = ghz.clone();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    assert!(mid > 0.1 && ghz.iter().all(|g| (g / mid - 1.0).abs() < 1e-3), "TSC ticks per ns by block: {ghz:?}");
    // ABBA quads: each unit holds two blocks of each setting.
    for u in 0..10 {
        for s in 0..2 {
            let n = blocks.iter().filter(|b| b["unit"] == u && b["setting"] == s).count();
            assert_eq!(n, 2, "unit {u} setting {s}");
        }
    }
    assert!(out.join("blocks.parquet").exists() && out.join("table.txt").exists());
    // The page: every block a point coloured by setting, the paired differences, the table.
    let page = out.join("live.html");
    let o = fwdscope().args(["report", "--html"]).arg(&page).arg("-i").arg(&out).output().expect("report --html");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("id=\"blocks\"") && html.contains("id=\"diffs\""));
    assert!(html.contains(if busy { "undecided" } else { "significant" }), "the verdict on the page");
    assert!(html.matches("<circle").count() >= 40, "a point per block");
    let pid = j["pid"].as_u64().expect("pid");
    assert!(fwd_abi::segment::named_for(pid as u32).is_empty(), "segment left behind");
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "forwarder still running");
    let _ = std::fs::remove_dir_all(&out);
}

/// The worker threads' states of process `pid` (`R`, `S`, `T`, ...), from /proc.
fn worker_states(pid: u32) -> Vec<char> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    dir.flatten()
        .filter(|e| std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with("fwd-worker")))
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            stat.rsplit_once(')')?.1.split_whitespace().next()?.chars().next()
        })
        .collect()
}

/// Two programs compared (`--program`, twice): one process each, only one running at a
/// time. The second is a wrapper that starts the same forwarder with 60 ns planted per
/// packet: it is found slower, every block is measured in its own program, and polling the
/// two processes' worker threads while it runs sees each stopped a good share of the time
/// and both running (almost) never.
#[test]
fn two_programs_alternate_alone_and_the_slower_is_found() {
    let _g = serial();
    let out = std::env::temp_dir().join(format!("fwdscope-live-programs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let slow = out.join("slow.sh");
    std::fs::write(&slow, format!("#!/bin/sh\nexec {} forward --spin-ns 60 \"$@\"\n", common::BIN)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&slow, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = out.join("live");
    let mut child = fwdscope()
        .args(["sweep", "--live", "-o"])
        .arg(&dir)
        .arg("--program")
        .arg(format!("fast={}", common::BIN))
        .arg("--program")
        .arg(format!("slow={}", slow.display()))
        .args(["--duration", "4", "--block-ms", "100", "--discard-ms", "20", "--seed", "7"])
        .args(SMALL)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sweep --live --program");
    let me = child.id();
    // Poll the forwarders' worker threads until the sweep ends.
    let (mut polls, mut both, mut stopped) = (0u32, 0u32, [0u32; 2]);
    while matches!(child.try_wait(), Ok(None)) {
        let mut kids = children(me);
        kids.sort();
        if kids.len() == 2 {
            let states: Vec<Vec<char>> = kids.iter().map(|&p| worker_states(p)).collect();
            if states.iter().all(|s| !s.is_empty()) {
                polls += 1;
                let running: Vec<bool> = states.iter().map(|s| s.contains(&'R')).collect();
                both += u32::from(running[0] && running[1]);
                for (i, s) in states.iter().enumerate() {
                    stopped[i] += u32::from(s.iter().all(|&c| c == 'T'));
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    let o = child.wait_with_output().expect("sweep output");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}\n{text}", String::from_utf8_lossy(&o.stderr));
    println!("{text}\npolls {polls}, both running {both}, stopped {stopped:?}");
    assert!(polls > 200, "the two forwarders were seen running {polls} times");
    // Each forwarder stopped in the other's blocks (about half the time each).
    assert!(stopped.iter().all(|&n| n > polls / 5), "stopped {stopped:?} of {polls}");
    // Both running: only when a poll reads one before a switch and the other after it.
    assert!(both * 50 < polls, "both ran at once in {both} of {polls} polls");
    assert!(text.contains("2 forwarder programs, one running at a time"), "{text}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("live.json")).expect("live.json")).expect("json");
    let e = &j["results"][1]["effect"];
    assert!(e["ratio"].as_f64().expect("ratio") < 0.9 && e["ci"][1].as_f64().expect("ci") < 1.0, "{e}");
    let pids: Vec<u64> = j["pids"].as_array().expect("pids").iter().filter_map(|p| p.as_u64()).collect();
    assert_eq!(pids.len(), 2);
    let programs: Vec<&str> = j["programs"].as_array().expect("programs").iter().filter_map(|p| p.as_str()).collect();
    assert_eq!(programs, vec![common::BIN, &*slow.display().to_string()], "which build each label was");
    for b in j["blocks"].as_array().expect("blocks") {
        for w in b["workers"].as_array().expect("workers") {
            assert_eq!(w["assigned"], true, "{b}");
        }
        let changed = b["index"].as_u64() != Some(0) && b["switch"] != "same setting";
        assert!(!changed || b["switch"] == "program", "{b}");
    }
    for pid in pids {
        assert!(!common::running(pid as u32), "forwarder {pid} still running");
        assert!(fwd_abi::segment::named_for(pid as u32).is_empty(), "segment of {pid} left behind");
    }
    assert!(dir.join("forwarder-1.log").exists() && dir.join("forwarder-2.log").exists());
    // The page says what was compared.
    let page = out.join("programs.html");
    let o = fwdscope().args(["report", "--html"]).arg(&page).arg("-i").arg(&dir).output().expect("report --html");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).expect("page");
    assert!(html.contains("2 forwarder programs, one running at a time"), "the page's summary line");
    let _ = std::fs::remove_dir_all(&out);
}

/// A comparison of programs killed outright (SIGKILL: nothing of it runs after) leaves no
/// forwarder behind, not even the one it had stopped: the kernel sends them SIGKILL, which
/// a stopped process cannot hold pending as it would SIGTERM.
#[test]
fn a_killed_comparison_of_programs_leaves_no_forwarder_stopped() {
    let _g = serial();
    let dir = std::env::temp_dir().join(format!("fwdscope-live-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = fwdscope()
        .args(["sweep", "--live", "-o"])
        .arg(&dir)
        .arg("--program")
        .arg(format!("a={}", common::BIN))
        .arg("--program")
        .arg(format!("b={}", common::BIN))
        .args(["--duration", "60"])
        .args(SMALL)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("sweep --live --program");
    let me = child.id();
    // Until both forwarders run and one of them is stopped.
    let mut kids = Vec::new();
    let seen = common::wait_until(30, || {
        kids = children(me);
        kids.len() == 2
            && kids.iter().any(|&p| {
                let s = worker_states(p);
                !s.is_empty() && s.iter().all(|&c| c == 'T')
            })
    });
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen, "two forwarders, one stopped, within 30 s: {kids:?}");
    let gone = common::wait_until(10, || kids.iter().all(|&p| !common::running(p)));
    for &p in &kids {
        if common::running(p) {
            // Never leave one behind, whatever the test found.
            // SAFETY: signalling a process this test saw start.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
    }
    assert!(gone, "forwarders left after their comparison was killed: {kids:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Samples recorded alongside (`--record`) are split into the blocks by the workers' own
/// publish stamps: the planted cost appears in the calibration stage of its setting only,
/// the sampled time over all stages moves by what the counters measured, and every counted
/// sample is in exactly one block.
#[test]
fn stages_per_setting_come_from_the_same_run() {
    if !common::perf_allows(common::Need::Sample) {
        return;
    }
    let _g = serial();
    let out = std::env::temp_dir().join(format!("fwdscope-live-stages-{}", std::process::id()));
    let mut args = vec![
        "--spin-ns",
        "0,300",
        "--duration",
        "6",
        "--block-ms",
        "150",
        "--discard-ms",
        "30",
        "--seed",
        "7",
        "--record",
        "-F",
        "2999",
    ];
    args.extend(SMALL);
    let (text, j) = live(&args, &out);
    println!("{text}");
    let st = &j["stages"];
    assert!(st.is_object(), "no stages per setting: {}", j["stages_error"]);
    assert_eq!(st["unit"], "ns");
    let calib = |setting: usize| -> serde_json::Value {
        st["settings"][setting]["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .find(|f| f["stage"] == "calib")
            .cloned()
            .unwrap_or(serde_json::json!({"per_packet": 0.0, "delta": null}))
    };
    let (base, planted) = (calib(0), calib(1));
    let base_ns = base["per_packet"].as_f64().unwrap_or(0.0);
    let planted_ns = planted["per_packet"].as_f64().expect("calib ns/packet");
    // 300 ns planted per packet: found in its stage, decided, and none where it was not
    // planted. How much of it the samples put in the stage itself varies on this VM: calib
    // read 184 to 326 ns in runs here, the other stages of the same blocks growing by the
    // rest (likely the sampling interrupt reaching the tight TSC loop late), hence the
    // loose lower bound.
    assert!(base_ns < 20.0, "calibration cost sampled where none was planted: {base_ns} ns\n{text}");
    assert!((100.0..=420.0).contains(&planted_ns), "planted 300 ns, sampled {planted_ns} ns\n{text}");
    let d = &planted["delta"];
    assert!(d[1][0].as_f64().expect("low") > 0.0, "difference not decided: {d}\n{text}");
    // Whatever the split, the sampled time per packet over all stages moves by what the
    // workers' own counters say the setting cost (an independent instrument: packets over
    // their publish stamps).
    let sampled: f64 =
        st["settings"][1]["stages"].as_array().expect("stages").iter().filter_map(|f| f["delta"][0].as_f64()).sum();
    let counted = j["results"][1]["delta_ns"][0].as_f64().expect("delta_ns");
    assert!((sampled / counted - 1.0).abs() < 0.15, "sampled {sampled:.1} ns vs counted {counted:.1} ns\n{text}");
    assert!(st["in_blocks"].as_u64().expect("in_blocks") > 1000, "{st}");
    assert!(st["outside"].as_u64().expect("outside") > 0, "the discarded warm-ups hold samples too");
    assert!(out.join("recording").join("meta.json").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_spinning_neighbour_on_the_worker_core_is_caught() {
    let _g = serial();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        println!("SKIP: needs two CPUs (the worker is pinned to CPU 0, the device to the last)");
        return;
    }
    // A busy loop pinned to CPU 0, where worker 0 is pinned: the worker waits to run.
    let mut spinner = Command::new("taskset")
        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
        .spawn()
        .expect("taskset (util-linux)");
    let out = std::env::temp_dir().join(format!("fwdscope-live-busy-{}", std::process::id()));
    let mut args = vec!["--aa", "--duration", "2", "--block-ms", "100", "--discard-ms", "20", "--seed", "9"];
    args.extend(SMALL);
    let result = std::panic::catch_unwind(|| live(&args, &out));
    let _ = spinner.kill();
    let _ = spinner.wait();
    let (text, j) = result.expect("live run");
    println!("{text}");
    let blocks = j["blocks"].as_array().expect("blocks");
    let flagged = blocks.iter().filter(|b| !b["flags"].as_array().expect("flags").is_empty()).count();
    assert!(flagged * 2 > blocks.len(), "{flagged} of {} blocks flagged:\n{text}", blocks.len());
    assert!(
        blocks.iter().any(|b| b["flags"].to_string().contains("waited to run")),
        "the run-queue wait is named: {text}"
    );
    let v = &j["results"][1]["verdict"];
    assert_eq!(v["kind"], "undecided", "{text}");
    assert!(v["reason"].as_str().unwrap_or("").contains("the machine was busy"), "{v}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_forwarder_that_dies_mid_run_leaves_what_was_measured_marked_incomplete() {
    let _g = serial();
    let out = std::env::temp_dir().join(format!("fwdscope-live-dies-{}", std::process::id()));
    let child = fwdscope()
        .args([
            "sweep",
            "--live",
            "--aa",
            "--duration",
            "8",
            "--block-ms",
            "100",
            "--discard-ms",
            "20",
            "--force",
            "-o",
        ])
        .arg(&out)
        .args(SMALL)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sweep --live");
    // Wait for the forwarder to run blocks, then kill it.
    let t0 = std::time::Instant::now();
    let fwd = loop {
        let c = children(child.id());
        if let Some(&p) = c.first() {
            if fwd_abi::Segment::find_for(p).is_some() {
                break p;
            }
        }
        assert!(t0.elapsed().as_secs() < 60, "no forwarder started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(Command::new("kill").args(["-9", &fwd.to_string()]).status().expect("kill").success());
    let o = child.wait_with_output().expect("sweep");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("INCOMPLETE: ended after"), "{text}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("live.json")).expect("live.json")).expect("json");
    let n = j["blocks"].as_array().expect("blocks").len();
    assert!(n > 5 && n < 80, "{n} blocks kept of 80");
    assert!(j["incomplete"].as_str().unwrap_or("").contains("the forwarder exited"), "{}", j["incomplete"]);
    assert!(fwd_abi::segment::named_for(fwd).is_empty(), "segment left behind");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn settings_that_cannot_change_live_are_refused() {
    let out = std::env::temp_dir().join(format!("fwdscope-live-bad-{}", std::process::id()));
    let o = fwdscope().args(["sweep", "--live", "--fib", "hash,dir24", "-o"]).arg(&out).output().expect("run");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--fib cannot change while the forwarder runs") && err.contains("without --live"), "{err}");
    let o = fwdscope()
        .args(["sweep", "--live", "--spin-ns", "0,10", "--block-ms", "40", "--discard-ms", "30", "-o"])
        .arg(&out)
        .output()
        .expect("run");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--block-ms 40 is too short for --discard-ms 30"), "{err}");
    assert!(!out.exists(), "nothing written for refused options");
}

#[test]
fn top_s_ab_loop_finds_the_planted_cost_and_leaves_b_in_force() {
    use compare::live::{ab_loop, AbTiming, LiveChange, LiveSetting};
    use std::sync::atomic::{AtomicBool, Ordering};
    let _g = serial();
    let (mut fwd, seg) = running_forwarder(&SMALL[1..]);
    let pid = fwd.id();
    let threads = compare::live::wait_threads(pid, seg.n_workers()).expect("threads");
    let set = |label: &str, ns| LiveSetting::new(label, LiveChange { spin_ns: Some(ns), ..Default::default() });
    let stop = AtomicBool::new(false);
    let mut last = None;
    let mut updates = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(3));
            stop.store(true, Ordering::Relaxed);
        });
        let ms = std::time::Duration::from_millis;
        let timing = AbTiming { block: ms(60), discard: ms(20), seed: 3 };
        ab_loop(&seg, &threads, [set("spin 0", 0), set("spin 60", 60)], timing, &stop, |st| {
            updates += 1;
            last = Some(st.clone());
        });
    });
    let st = last.expect("at least one unit");
    println!("{}", st.text());
    assert!(updates >= 5, "{updates} units in 3 s of 60 ms blocks");
    assert!(st.effect.ratio < 0.9 && st.effect.ci.1 < 1.0, "{}", st.text());
    // B stays in force: the workers publish spin_ns 60 once they apply it.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(seg.snapshot().get(0, fwd_abi::Ctr::SpinNs), 60);
    seg.request_stop();
    let _ = fwd.wait();
}

/// The route-cache GC tunables change while the forwarder runs: under a flood of new
/// destinations past gc_thresh, GC requests within gc_min_interval of the last run are
/// ignored; set live to 0 ms, no request is ignored any more, and set back they are again.
/// The control block reports the values in force, as the forwarder started them.
#[test]
fn gc_tunables_switch_live() {
    use std::time::Duration;
    let _g = serial();
    let (mut fwd, seg) = running_forwarder(&[
        "--routes",
        "5000",
        "--cache",
        "rtcache",
        "--rt-hash-buckets",
        "1024",
        "--flows",
        "200000",
        "--pkts-per-flow",
        "1",
        "--gc-min-interval-ms",
        "500",
    ]);
    let start = seg.control().gc();
    assert_eq!((start.thresh, start.elasticity, start.min_interval_ms, start.timeout_s), (1024, 8, 500, 300));
    // Ignored GC requests over 300 ms under `g`, after 100 ms to settle.
    let ignored_under = |g: fwd_abi::GcTunables| {
        let want = seg.apply(&fwd_abi::Request { gc: Some(g), ..Default::default() });
        std::thread::sleep(Duration::from_millis(100));
        let snap = seg.snapshot();
        let applied = (0..seg.n_workers()).all(|w| snap.get(w, fwd_abi::Ctr::CtrlGeneration) >= want);
        let a = seg.snapshot().total(fwd_abi::Ctr::RtGcIgnored);
        let runs = seg.snapshot().total(fwd_abi::Ctr::RtGcTotal);
        std::thread::sleep(Duration::from_millis(300));
        (
            applied,
            seg.snapshot().total(fwd_abi::Ctr::RtGcIgnored) - a,
            seg.snapshot().total(fwd_abi::Ctr::RtGcTotal) - runs,
        )
    };
    let (applied, ignored, runs) = ignored_under(start);
    assert!(applied && runs > 100 && ignored * 2 > runs, "default: {ignored} of {runs} GC requests ignored");
    let (applied, ignored, runs) = ignored_under(fwd_abi::GcTunables { min_interval_ms: 0, ..start });
    assert!(applied && runs > 100 && ignored == 0, "gc_min_interval 0: {ignored} of {runs} ignored");
    let (_, ignored, runs) = ignored_under(start);
    assert!(ignored * 2 > runs, "set back: {ignored} of {runs} ignored");
    seg.request_stop();
    let _ = fwd.wait();
}
