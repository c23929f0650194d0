//! `fwdscope top` end to end in tmux: start it, read the screen (Mpps, stage names,
//! symbols), press keys and see them reach the forwarder's stats segment, press `q` and see
//! the shell back; plus the other targets (a forwarder that exits, --replay, -p, -a, a
//! lab's forwarder by the lab's name), a
//! small terminal, and the counters-only source used when perf is refused.
//! Skips, saying why, where tmux (or, for -a, perf) is missing.

mod common;
use common::{have, perf_allows, Need, BIN};
use fwd_abi::{Ctr, Segment};
use std::process::Command;
use std::time::{Duration, Instant};

fn have_tmux() -> bool {
    let ok = have("tmux", &["-V"]);
    if !ok {
        println!("skipped: tmux is not installed");
    }
    ok
}

/// Whether system-wide sampling is allowed (top -a).
fn can_sample_all() -> bool {
    perf_allows(Need::SystemWide)
}

/// A tmux session running one command; killed when dropped (also when a test fails).
struct Tmux(String);

/// A tmux command on the session's own server (socket [`socket`]): tests run in
/// parallel, and a shared server exits when its last session is killed, under another
/// test's `new-session` ("server exited unexpectedly").
fn tmux(session: &str) -> Command {
    let mut c = Command::new("tmux");
    c.arg("-S").arg(socket(session));
    c
}

/// The socket of session `session`'s server (removed with the session).
fn socket(session: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{session}.tmux"))
}

impl Tmux {
    fn start(tag: &str, cmd: &str, w: u16, h: u16) -> Tmux {
        let name = format!("fwdscope-{tag}-{}", std::process::id());
        let _ = tmux(&name).args(["kill-session", "-t", &name]).output();
        // After the command: its exit status on the normal screen, and a pause to read it.
        // The terminal's mode after it: `icanon` when restored, `-icanon` left raw.
        let shell = format!(
            "{cmd} 2>/tmp/{name}.err; echo TOP-EXITED $?; echo TTY $(stty -a | grep -o -- '-\\?icanon' | head -1); sleep 300"
        );
        let st = tmux(&name)
            .args(["new-session", "-d", "-s", &name, "-x", &w.to_string(), "-y", &h.to_string(), &shell])
            .status()
            .expect("tmux");
        assert!(st.success());
        Tmux(name)
    }

    /// `cmd` in a session whose shell writes its exit status to [`Tmux::status_path`]
    /// and, `keep_shell`, outlives the session's hang-up (it ignores SIGHUP); else the
    /// shell dies with the session as a login shell would.
    fn detached(tag: &str, cmd: &str, keep_shell: bool) -> Tmux {
        let t = Tmux(format!("fwdscope-{tag}-{}", std::process::id()));
        let _ = tmux(&t.0).args(["kill-session", "-t", &t.0]).output();
        let _ = std::fs::remove_file(t.status_path());
        let trap = if keep_shell { "trap '' HUP; " } else { "" };
        let shell = format!("{trap}{cmd} 2>/tmp/{}.err; echo $? >{}", t.0, t.status_path().display());
        let st =
            tmux(&t.0).args(["new-session", "-d", "-s", &t.0, "-x", "120", "-y", "36", &shell]).status().expect("tmux");
        assert!(st.success());
        t
    }

    fn status_path(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/tmp/{}.status", self.0))
    }

    fn screen(&self) -> String {
        let o = tmux(&self.0).args(["capture-pane", "-p", "-t", &self.0]).output().expect("capture");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn keys(&self, k: &str) {
        tmux(&self.0).args(["send-keys", "-t", &self.0, k]).status().expect("send-keys");
    }

    /// Several keys in one tmux command: they reach the terminal together.
    fn keys_at_once(&self, keys: &[&str]) {
        tmux(&self.0).args(["send-keys", "-t", &self.0]).args(keys).status().expect("send-keys");
    }

    /// Wait until every needle is on the screen; the screen on success, a panic showing
    /// it on timeout.
    fn wait_for(&self, needles: &[&str], secs: u64) -> String {
        let t0 = Instant::now();
        loop {
            let s = self.screen();
            if needles.iter().all(|n| s.contains(n)) {
                return s;
            }
            if t0.elapsed() > Duration::from_secs(secs) {
                let err = std::fs::read_to_string(format!("/tmp/{}.err", self.0)).unwrap_or_default();
                panic!("waited {secs} s for {needles:?}; screen:\n{s}\nstderr:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The PID of the command the pane runs (the shell's child), once it runs.
    fn command_pid(&self) -> u32 {
        let o = tmux(&self.0).args(["display", "-p", "-t", &self.0, "#{pane_pid}"]).output().expect("tmux");
        let shell: u32 = String::from_utf8_lossy(&o.stdout).trim().parse().expect("pane pid");
        let mut pid = None;
        assert!(wait_until(10, || {
            pid = common::children(shell).into_iter().next();
            pid.is_some()
        }));
        pid.unwrap_or_default()
    }

    /// Whether the pane shows the alternate screen.
    fn alternate_on(&self) -> bool {
        let o = tmux(&self.0).args(["display", "-p", "-t", &self.0, "#{alternate_on}"]).output().expect("tmux");
        String::from_utf8_lossy(&o.stdout).trim() == "1"
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(format!("/tmp/{}.err", self.0)).unwrap_or_default()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = tmux(&self.0).args(["kill-session", "-t", &self.0]).output();
        let _ = std::fs::remove_file(socket(&self.0));
        let _ = std::fs::remove_file(format!("/tmp/{}.err", self.0));
        let _ = std::fs::remove_file(self.status_path());
    }
}

/// The forwarder PID the header shows (`forwarder pid N`).
fn forwarder_pid(screen: &str) -> u32 {
    let at = screen.find("forwarder pid ").expect("pid in header") + "forwarder pid ".len();
    screen[at..].split(|c: char| !c.is_ascii_digit()).next().and_then(|p| p.parse().ok()).expect("pid")
}

fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

fn wait_until(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(secs) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn top_shows_the_forwarder_and_its_keys_reach_the_control_block() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("live", &format!("{BIN} top -F 500 -- --routes 3000 --no-pin"), 110, 36);
    let s = t.wait_for(&["Mpps", "lookup", "driver", "fwd_", "forwarder pid "], 30);
    let pid = forwarder_pid(&s);
    let seg = Segment::find_for(pid).expect("the forwarder's stats segment");
    let depth = || seg.read_worker(0)[Ctr::PrefetchDepth as usize];
    let start = depth();
    assert!(s.contains(&format!("prefetch {start}")), "header shows the depth {start}:\n{s}");
    // `+`: the forwarder takes the new depth (its own counter), and the next frame shows it.
    t.keys("+");
    assert!(wait_until(10, || depth() == start + 1), "prefetch stayed {}", depth());
    t.wait_for(&[&format!("prefetch {}", start + 1)], 10);
    t.keys("-");
    assert!(wait_until(10, || depth() == start), "prefetch stayed {}", depth());
    // Three presses at once (one write to the terminal): each counts from the depth last
    // requested, none is lost while the forwarder has not yet confirmed the first.
    t.keys_at_once(&["+", "+", "+"]);
    assert!(wait_until(10, || depth() == start + 3), "three + from {start} gave {}", depth());
    t.wait_for(&[&format!("prefetch {}", start + 3)], 10);
    let header_settled = || !t.screen().lines().next().unwrap_or_default().contains("requested");
    assert!(wait_until(10, header_settled), "the request stays shown:\n{}", t.screen());
    t.keys_at_once(&["-", "-", "-"]);
    assert!(wait_until(10, || depth() == start), "three - from {} gave {}", start + 3, depth());
    // `c`: the next cache mode.
    let mode = || seg.read_worker(0)[Ctr::CacheMode as usize];
    let m0 = mode();
    t.keys("c");
    assert!(wait_until(10, || mode() != m0), "cache mode stayed {m0}");
    // `h` help, then `q`: the shell is back, the forwarder is stopped.
    t.keys("h");
    t.wait_for(&["keys act through the forwarder's control block"], 10);
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
    assert!(wait_until(10, || !alive(pid)), "forwarder {pid} still running after q");
    let summary = t.stderr();
    println!("{summary}");
    assert!(summary.contains("fwdscope top:") && summary.contains("first frame after"), "{summary}");
}

#[test]
fn the_ab_key_alternates_the_previous_and_current_setting_and_shows_the_ratio() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("ab", &format!("{BIN} top -F 200 -- --routes 3000 --no-pin --prefetch 0"), 150, 36);
    let s = t.wait_for(&["Mpps", "forwarder pid "], 30);
    let pid = forwarder_pid(&s);
    let seg = Segment::find_for(pid).expect("the forwarder's stats segment");
    // Without a change before it, `b` says what it needs.
    t.keys("b");
    t.wait_for(&["change a setting first"], 10);
    t.keys("+");
    let depth = || seg.read_worker(0)[Ctr::PrefetchDepth as usize];
    assert!(wait_until(10, || depth() == 1), "prefetch stayed {}", depth());
    t.wait_for(&["prefetch 1"], 10);
    // `b`: the forwarder alternates depths 0 and 1, and the status line shows the ratio.
    t.keys("b");
    let mut seen = std::collections::BTreeSet::new();
    assert!(wait_until(10, || {
        seen.insert(depth());
        seen.len() == 2
    }));
    // The A/B panel: the figures first (the running ratio, or, as top's own threads share
    // the two cores with the forwarder's, that every unit so far had a block with
    // contention), then what is compared.
    let shown = |s: &str| {
        (s.contains("A/B ratio 0.") || s.contains("A/B ratio 1.") || s.contains("A/B: no clean unit yet, "))
            && s.contains("B prefetch 1 rtcache against A prefetch 0 rtcache")
    };
    assert!(wait_until(20, || shown(&t.screen())), "a ratio with its figure, or why there is none: {}", t.screen());
    // Keys that would fight the A/B are refused while it runs.
    t.keys("+");
    t.wait_for(&["an A/B is running"], 10);
    t.keys("b");
    t.wait_for(&["A/B stopped: prefetch 1 rtcache left in force"], 10);
    // The current setting (depth 1) is left in force.
    assert!(wait_until(10, || depth() == 1), "prefetch {}", depth());
    // `b` right after a cache switch compares the new mode, though the forwarder may not
    // run it yet, with the one before.
    let settled = |s: &str| !s.lines().next().unwrap_or_default().contains("requested");
    t.keys_at_once(&["c", "b"]);
    t.wait_for(&["B prefetch 1 nocache against A prefetch 1 rtcache"], 10);
    t.keys("b");
    t.wait_for(&["A/B stopped: prefetch 1 nocache left in force"], 10);
    assert!(wait_until(10, || settled(&t.screen())), "{}", t.screen());
    // A change and its undoing, then `b`: the panel says it is an A/A.
    t.keys_at_once(&["-", "+", "b"]);
    t.wait_for(&["A/A, prefetch 1 nocache against itself"], 10);
    t.keys("b");
    t.wait_for(&["A/B stopped"], 10);
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
}

#[test]
fn a_forwarder_that_exits_leaves_its_last_data_on_screen() {
    if !have_tmux() {
        return;
    }
    let t = Tmux::start("exits", &format!("{BIN} top -F 500 -- --duration 2 --routes 3000 --no-pin"), 100, 32);
    let s = t.wait_for(&["exited", "showing the last data"], 30);
    assert!(s.contains("fwd_") && s.contains("lookup"), "{s}");
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
}

#[test]
fn replay_plays_a_recording_at_its_own_pace() {
    if !have_tmux() {
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data/forwarder-recording");
    let t = Tmux::start("replay", &format!("{BIN} top -d 0.5 --replay {dir}"), 160, 32);
    let s = t.wait_for(&["replay finished", "fwd_lookup_fib_dir24", "cache nocache", "fib dir24"], 30);
    assert!(s.contains("cpu-clock"), "{s}");
    // No control over a recording.
    t.keys("+");
    t.wait_for(&["no control here"], 10);
    // Esc closes the help and quits nothing, also pressed again with the help closed.
    t.keys("h");
    t.wait_for(&["close help; back out of a stage or symbol"], 10);
    t.keys("Escape");
    assert!(wait_until(10, || !t.screen().contains("back out of a stage")), "help still open:\n{}", t.screen());
    // Drill down after the replay's end: tab to the stage panel, Enter on its first row
    // (lookup) lists lookup's symbols, Enter on the first goes inside it (its source lines),
    // Esc comes back out, twice to every symbol.
    t.keys("Tab");
    t.keys("Enter");
    let s = t.wait_for(&["symbols of lookup", "fwd_lookup_fib_dir24"], 10);
    assert!(!s.contains("fwd_nic_generate"), "another stage's symbol in lookup's list:\n{s}");
    t.keys("Enter");
    t.wait_for(&["inside fwd_lookup_fib_dir24", "hottest source lines", "source line"], 10);
    t.keys("Escape");
    t.wait_for(&["symbols of lookup"], 10);
    t.keys("Escape");
    t.wait_for(&["top symbols (", "fwd_nic_generate"], 10);
    // With the help closed, Esc (like any key) clears the last message, and top runs on.
    t.keys("+");
    t.wait_for(&["no control here"], 10);
    t.keys("Escape");
    let running_without_message = |s: &str| s.contains("fwdscope top") && !s.contains("no control here");
    assert!(wait_until(10, || running_without_message(&t.screen())), "after Esc:\n{}", t.screen());
    assert!(!t.screen().contains("TOP-EXITED"), "Esc quit top:\n{}", t.screen());
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
}

#[test]
fn pid_observes_without_control() {
    if !have_tmux() {
        return;
    }
    let mut fwd = common::KillOnDrop(
        Command::new(BIN)
            .args(["forward", "--duration", "0", "--routes", "3000", "--no-pin"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("forwarder"),
    );
    let pid = fwd.id();
    assert!(wait_until(20, || Segment::find_for(pid).is_some()), "no stats segment");
    let t = Tmux::start("pid", &format!("{BIN} top -p {pid}"), 100, 32);
    t.wait_for(&[&format!("pid {pid}"), "Mpps", "fwd_"], 30);
    let seg = Segment::find_for(pid).expect("segment");
    let before = seg.read_worker(0)[Ctr::PrefetchDepth as usize];
    t.keys("+");
    t.wait_for(&["no control here"], 10);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(seg.read_worker(0)[Ctr::PrefetchDepth as usize], before);
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
    assert!(alive(pid), "-p must not stop the process it watches");
    seg.request_stop();
    let _ = fwd.wait();
}

/// A PID no process can have: PIDs are below /proc/sys/kernel/pid_max.
fn absent_pid() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(4_194_304)
}

/// `top --lab NAME` finds the lab's forwarder by the lab's name and watches it as `-p`
/// does (its PID on the header, its stages, no control); a lab that is down is an error
/// before the screen opens.
#[test]
fn top_watches_a_labs_forwarder_by_the_labs_name() {
    let name = format!("tl{}", std::process::id() % 100_000);
    let r = common::run(&["top", "--lab", &name]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.code() == Some(1) && err.contains(&format!("lab {name}: not up")), "{err}");
    if !have_tmux() {
        return;
    }
    let up = common::run(&["lab", "up", "--name", &name, "--routes", "50", "--mode", "fwdscope"]);
    if !up.status.success() {
        println!("SKIP: lab up failed (namespaces?): {}", String::from_utf8_lossy(&up.stderr).trim());
        return;
    }
    struct Down(String);
    impl Drop for Down {
        fn drop(&mut self) {
            let _ = common::run(&["lab", "down", "--name", &self.0]);
        }
    }
    let _down = Down(name.clone());
    let text = std::fs::read_to_string(format!("/run/fwdscope-lab/{name}/forwarder.pid")).expect("forwarder.pid");
    let pid: u32 = text.split_whitespace().next().and_then(|p| p.parse().ok()).expect("a pid");
    let t = Tmux::start("lab", &format!("{BIN} top --lab {name}"), 100, 32);
    t.wait_for(&[&format!("pid {pid}"), "Mpps"], 30);
    t.keys("+");
    t.wait_for(&["no control here"], 10);
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
    assert!(alive(pid), "--lab must not stop the lab's forwarder");
}

#[test]
fn a_pid_that_does_not_exist_is_an_error_before_the_screen_opens() {
    let pid = absent_pid();
    let want = format!("top -p {pid}: process {pid} does not exist");
    // Without a terminal: the target is checked first.
    let r = common::run(&["top", "-p", &pid.to_string()]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains(&want), "{err}");
    if !have_tmux() {
        return;
    }
    // On a terminal: the error and a non-zero status, the terminal never switched to top's
    // screen (the shell's next lines follow on the normal screen, still cooked).
    let t = Tmux::start("nopid", &format!("{BIN} top -p {pid}"), 100, 30);
    let s = t.wait_for(&["TOP-EXITED 1", "TTY icanon"], 20);
    assert!(!t.alternate_on(), "{s}");
    assert!(t.stderr().contains(&want), "{}", t.stderr());
}

#[test]
fn sigterm_and_sighup_end_top_with_the_terminal_restored_and_no_orphan() {
    if !have_tmux() {
        return;
    }
    for (sig, name, status) in [(libc::SIGTERM, "SIGTERM", 143), (libc::SIGHUP, "SIGHUP", 129)] {
        let t = Tmux::start(&format!("sig{sig}"), &format!("{BIN} top -F 200 -- --routes 3000 --no-pin"), 110, 36);
        let s = t.wait_for(&["Mpps", "forwarder pid "], 30);
        let fwd = forwarder_pid(&s);
        assert!(t.alternate_on(), "top draws on the alternate screen");
        let top = t.command_pid();
        // SAFETY: signalling the top this test started.
        assert_eq!(unsafe { libc::kill(top as i32, sig) }, 0);
        // Ended as a process ended by the signal reports it: 128 + its number.
        let s = t.wait_for(&[&format!("TOP-EXITED {status}"), "TTY "], 20);
        assert!(s.contains("TTY icanon"), "{name}: terminal left in raw mode:\n{s}");
        assert!(!t.alternate_on(), "{name}: still on the alternate screen");
        assert!(t.stderr().contains(&format!("stopped by {name}")), "{name}: {}", t.stderr());
        assert!(wait_until(10, || !common::running(fwd)), "{name}: forwarder {fwd} still running");
        assert!(fwd_abi::segment::named_for(fwd).is_empty(), "{name}: segment of {fwd} left behind");
    }
}

#[test]
fn top_and_its_forwarder_end_when_the_terminal_goes_away() {
    if !have_tmux() {
        return;
    }
    let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data/forwarder-recording");
    let live = format!("{BIN} top -F 200 -- --routes 3000 --no-pin");
    // A replay slowed down so it is still playing when the session goes.
    let replay = format!("{BIN} top --speed 0.05 --replay {golden}");
    for (tag, cmd, keep_shell) in
        [("gone-live", &live, true), ("gone-replay", &replay, true), ("gone-live-sh", &live, false)]
    {
        let t = Tmux::detached(tag, cmd, keep_shell);
        let is_live = cmd == &live;
        let s = t.wait_for(&["Mpps", if is_live { "forwarder pid " } else { "replay " }], 30);
        let fwd = is_live.then(|| forwarder_pid(&s));
        let top = t.command_pid();
        let t0 = Instant::now();
        let st = tmux(&t.0).args(["kill-session", "-t", &t.0]).status().expect("tmux");
        assert!(st.success());
        // Gone, not spinning in a read of the dead terminal; the forwarder with it.
        assert!(wait_until(20, || !common::running(top)), "{tag}: top {top} still running after kill-session");
        let gone = t0.elapsed();
        if let Some(fwd) = fwd {
            assert!(wait_until(20, || !common::running(fwd)), "{tag}: forwarder {fwd} still running");
            assert!(fwd_abi::segment::named_for(fwd).is_empty(), "{tag}: segment of {fwd} left behind");
        }
        println!("{tag}: top gone {:.2} s after kill-session", gone.as_secs_f64());
        if keep_shell {
            // The status as a hang-up gives it, and why on stderr.
            let path = t.status_path();
            assert!(wait_until(10, || path.exists()), "{tag}: no status written");
            let status = std::fs::read_to_string(&path).unwrap_or_default();
            let err = t.stderr();
            assert_eq!(status.trim(), "129", "{tag}: stderr:\n{err}");
            assert!(
                err.contains("the terminal went away") || err.contains("stopped by SIGHUP"),
                "{tag}: stderr:\n{err}"
            );
        }
    }
}

#[test]
fn system_wide_shows_kernel_symbols() {
    if !have_tmux() || !can_sample_all() {
        return;
    }
    let t = Tmux::start("all", &format!("{BIN} top -a"), 100, 32);
    t.wait_for(&["system-wide", "[kernel.kallsyms]"], 30);
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
}

#[test]
fn n_updates_then_quit() {
    if !have_tmux() {
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data/forwarder-recording");
    let t = Tmux::start("n", &format!("{BIN} top -d 0.2 -n 3 --replay {dir}"), 100, 32);
    t.wait_for(&["TOP-EXITED 0"], 20);
    assert!(t.stderr().contains("fwdscope top: "), "{}", t.stderr());
}

#[test]
fn a_small_terminal_says_so() {
    if !have_tmux() {
        return;
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/analyzer/tests/data/forwarder-recording");
    let t = Tmux::start("small", &format!("{BIN} top --replay {dir}"), 36, 10);
    t.wait_for(&["terminal too small"], 20);
    t.keys("q");
    t.wait_for(&["TOP-EXITED 0"], 20);
}

/// What `top` falls back to when perf refuses: the forwarder still runs and its counters
/// arrive; finishing the source stops it.
#[test]
fn counters_only_source_runs_and_stops_the_forwarder() {
    let dir = std::env::temp_dir().join(format!("fwdscope-top-counters-{}", std::process::id()));
    let args = ["forward", "--duration", "0", "--routes", "3000", "--no-pin"].map(String::from).to_vec();
    let src = tui::source::counters_only(BIN.into(), args, dir.clone());
    let (mut pid, mut tx) = (None, 0u64);
    let t0 = Instant::now();
    while (pid.is_none() || tx == 0) && t0.elapsed() < Duration::from_secs(30) {
        while let Ok(n) = src.notices.try_recv() {
            if let tui::source::Notice::ForwarderPid(p) = n {
                pid = Some(p as u32);
            }
        }
        if let Ok(collector::stream::Batch::Counters { rows, .. }) =
            src.batches.recv_timeout(Duration::from_millis(200))
        {
            tx = tx.max(rows.iter().filter(|r| r.name == "tx_packets").map(|r| r.value).sum());
        }
    }
    let pid = pid.expect("the forwarder's pid");
    assert!(tx > 0, "no forwarded packets in the counters");
    src.finish();
    assert!(!alive(pid), "forwarder {pid} still running");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Live `top` at the size a terminal opens at (80x24) and at 160x48, as a person sees it
/// in tmux: the header keeps the prefetch depth, the stage rows keep their figures, the
/// rtstat header keeps whole column names, the symbols panel has rows, the workers panel
/// shows where there is room. Each capture is written to CARGO_TARGET_TMPDIR
/// (`top-80x24.txt`, `top-160x48.txt`): docs/top.md's screens are copied from them.
#[test]
fn live_top_at_80x24_and_160x48() {
    if !have_tmux() {
        return;
    }
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let t = Tmux::start(&format!("size{w}"), &format!("{BIN} top -F 500 -- --routes 3000 --no-pin"), w, h);
        t.wait_for(&["Mpps", "│lookup", "top symbols", "fwd_"], 60);
        // A second frame, so the symbols panel has filled.
        std::thread::sleep(Duration::from_secs(3));
        let s = t.screen();
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("top-{w}x{h}.txt"));
        std::fs::write(&path, &s).expect("capture");
        println!("{w}x{h} capture in {}:\n{s}", path.display());
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() <= w as usize), "a line wider than {w}:\n{s}");
        let head = lines.first().copied().unwrap_or_default();
        let depth = head.split("prefetch ").nth(1).and_then(|r| r.chars().next());
        assert!(depth.is_some_and(|c| c.is_ascii_digit()), "the header lost the prefetch depth:\n{s}");
        let lookup = lines.iter().find(|l| l.starts_with("│lookup")).copied().unwrap_or_default();
        assert!(lookup.contains('%') && lookup.contains('.'), "the lookup row lost its figures: {lookup}");
        if let Some(rt) = lines.iter().find(|l| l.contains("│size ")) {
            for col in ["hit/s", "tot/s", "gc/s"] {
                assert!(rt.split_whitespace().any(|c| c.trim_matches('│') == col), "rtstat header cut: {rt}");
            }
        }
        let sym_head = lines.iter().position(|l| l.contains("│samples ")).unwrap_or_else(|| panic!("{s}"));
        let row = lines.get(sym_head + 1).copied().unwrap_or_default();
        assert!(row.contains('%'), "the symbols panel has no rows:\n{s}");
        if h >= 48 {
            assert!(s.contains("┌ workers"), "no workers panel at {w}x{h}:\n{s}");
        }
        t.keys("q");
        t.wait_for(&["TOP-EXITED 0"], 20);
    }
}
