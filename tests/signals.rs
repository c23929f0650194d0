//! Signals and process hygiene: SIGTERM and SIGHUP stop `forward`, `record` and `stat` as
//! Ctrl-C does (summary printed, recording finished with how it ended, stats segment
//! removed), and a recorder killed outright takes its forwarder with it: no orphan keeps
//! running, no segment is left in /dev/shm. Orphans are looked for by PID.

mod common;
use common::{children, fwdscope, perf_allows, running, wait_until, Need};
use std::process::{Child, Stdio};
use std::time::Duration;

fn signal(pid: u32, sig: i32) {
    // SAFETY: sending a signal to a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0, "kill {pid}");
}

/// The forwarder `parent` started, once its stats segment is up.
fn forwarder_of(parent: u32) -> u32 {
    let mut found = None;
    assert!(
        wait_until(30, || {
            found = children(parent).into_iter().find(|c| fwd_abi::Segment::find_for(*c).is_some());
            found.is_some()
        }),
        "no forwarder with a stats segment under {parent}"
    );
    found.unwrap_or_default()
}

/// `record` of a forwarder that runs until stopped, into a fresh directory tagged `tag`;
/// the directory, the recorder and the forwarder's PID once its segment is up.
fn record_a_forwarder(tag: &str) -> (std::path::PathBuf, Child, u32) {
    let out = std::env::temp_dir().join(format!("fwdscope-sig-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let c = fwdscope()
        .args(["record", "-F", "200", "-o"])
        .arg(&out)
        .args(["--", "--duration", "0", "--routes", "3000", "--no-pin"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("record");
    let fwd = forwarder_of(c.id());
    (out, c, fwd)
}

fn wait_exit(child: &mut Child, secs: u64) -> std::process::ExitStatus {
    let mut status = None;
    let ended = wait_until(secs, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    if !ended {
        let _ = child.kill();
        panic!("pid {} did not end within {secs} s", child.id());
    }
    status.unwrap_or_else(|| child.wait().expect("wait"))
}

#[test]
fn sigterm_and_sighup_stop_forward_as_ctrl_c_does() {
    for sig in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT] {
        let mut c = fwdscope()
            .args(["forward", "--duration", "0", "--routes", "3000", "--no-pin"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("forward");
        let pid = c.id();
        assert!(wait_until(20, || fwd_abi::Segment::find_for(pid).is_some()), "no segment");
        std::thread::sleep(Duration::from_millis(300));
        signal(pid, sig);
        let status = wait_exit(&mut c, 10);
        let out = c.wait_with_output().expect("output");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(status.success(), "signal {sig}: {status:?} {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("summary:"), "signal {sig}: no summary:\n{text}");
        assert!(fwd_abi::segment::named_for(pid).is_empty(), "signal {sig}: segment left behind");
    }
}

#[test]
fn sigterm_to_record_stops_the_forwarder_and_says_how_it_ended() {
    if !perf_allows(Need::Sample) {
        return;
    }
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")] {
        let (out, mut c, fwd) = record_a_forwarder(name);
        std::thread::sleep(Duration::from_millis(500));
        signal(c.id(), sig);
        let status = wait_exit(&mut c, 20);
        assert!(status.success(), "{name}: {status:?}");
        assert!(wait_until(5, || !running(fwd)), "{name}: forwarder {fwd} still running");
        assert!(fwd_abi::segment::named_for(fwd).is_empty(), "{name}: segment of {fwd} left behind");
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).expect("meta.json")).expect("json");
        assert_eq!(meta["ended_by"], format!("interrupted ({name})"), "{name}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn a_killed_recorder_takes_its_forwarder_with_it() {
    if !perf_allows(Need::Sample) {
        return;
    }
    let (out, mut c, fwd) = record_a_forwarder("SIGKILL");
    signal(c.id(), libc::SIGKILL);
    let _ = c.wait();
    // The forwarder gets SIGTERM from the kernel (PR_SET_PDEATHSIG) and stops cleanly.
    assert!(wait_until(10, || !running(fwd)), "forwarder {fwd} orphaned and still running");
    assert!(fwd_abi::segment::named_for(fwd).is_empty(), "segment of {fwd} left behind");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_stale_segment_of_a_killed_forwarder_is_removed_by_the_next_one() {
    // A forwarder killed outright cannot remove its segment; the next one started removes
    // such leftovers of this user whose owner is gone.
    let mut c = fwdscope()
        .args(["forward", "--duration", "0", "--routes", "3000", "--no-pin"])
        .stdout(Stdio::null())
        .spawn()
        .expect("forward");
    let pid = c.id();
    assert!(wait_until(20, || fwd_abi::Segment::find_for(pid).is_some()), "no segment");
    signal(pid, libc::SIGKILL);
    let _ = c.wait();
    // SIGKILL leaves the segment (unless a forwarder of a test running alongside has
    // already removed it, which is what is tested here too).
    let r = common::run(&["forward", "--duration", "0.1", "--routes", "3000", "--no-pin"]);
    assert!(r.status.success());
    assert!(fwd_abi::segment::named_for(pid).is_empty(), "the stale segment of {pid} was not removed");
}
