//! Recordings with special files planted inside: a FIFO as kallsyms, tasks.json or a
//! samples part, a symlink to /dev/zero as meta.json, maps.json or a samples part, a FIFO
//! named as a binary in maps.json. `report` and `export` must refuse (or skip, saying so)
//! each naming the file, never hang on it or read it into memory. A run that does not end
//! within the guard below is killed and fails the test as hung (a guard, not a timing:
//! the refusals take milliseconds).

mod common;

use collector::recording::{Meta, RecordingWriter, SamplingInfo, FORMAT_VERSION};
use collector::records::{Mapping, Sample, TaskEvent};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A small whole recording: three sample parts of 100 kernel samples, one mapping, one
/// thread name, a two-symbol kallsyms.
fn recording(dir: &Path) {
    let mut w = RecordingWriter::create(dir, false).expect("writer");
    for part in 0..3u64 {
        for i in 0..100u64 {
            w.push_sample(Sample {
                time: part * 1000 + i,
                pid: 4242,
                tid: 4242,
                cpu: 0,
                ip: 0xffff_ffff_8100_0010 + (i % 2) * 0x100,
                period: 1000,
                kernel: true,
                callchain: Vec::new(),
            });
        }
        if part == 2 {
            // One user-space sample in the mapping below, so its binary is looked up.
            w.push_sample(Sample {
                time: 2100,
                pid: 4242,
                tid: 4242,
                cpu: 0,
                ip: 0x40_0010,
                period: 1000,
                kernel: false,
                callchain: Vec::new(),
            });
        }
        w.flush().expect("part");
    }
    w.maps.push(Mapping {
        time: 0,
        pid: 4242,
        tid: 4242,
        start: 0x40_0000,
        len: 0x1000,
        pgoff: 0,
        path: "/usr/bin/true".into(),
        build_id: None,
    });
    w.tasks.push(TaskEvent::Comm { time: 0, pid: 4242, tid: 4242, comm: "fwd-worker-0".into(), exec: false });
    w.write_maps_and_tasks().expect("maps");
    std::fs::write(dir.join("kallsyms"), "ffffffff81000000 T _text\nffffffff81000100 T planted_fn\n")
        .expect("kallsyms");
    let meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        sampling: SamplingInfo { requested: "cycles".into(), used: "cycles".into(), ..Default::default() },
        samples: 300,
        status: "complete".into(),
        ..Default::default()
    };
    w.write_meta(&meta).expect("meta");
}

fn fifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

fn dev_zero(path: &Path) {
    let _ = std::fs::remove_file(path);
    std::os::unix::fs::symlink("/dev/zero", path).expect("symlink");
}

/// Run fwdscope to its end, or kill it after a minute and fail as hung. Returns the exit
/// status and stdout + stderr.
fn run_guarded(args: &[&str]) -> (bool, String) {
    let mut child = common::fwdscope()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fwdscope {args:?} hung (killed after a minute)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().expect("output");
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn special_files_in_a_recording_are_refused_naming_them() {
    let base = common::tmpdir("hostile");
    std::fs::create_dir_all(&base).expect("base");
    type Plant = fn(&Path);
    let cases: [(&str, Plant, &str); 6] = [
        ("kallsyms", fifo, "FIFO"),
        ("tasks.json", fifo, "FIFO"),
        ("samples.parquet/part-000002.parquet", fifo, "FIFO"),
        ("meta.json", dev_zero, "character device"),
        ("maps.json", dev_zero, "character device"),
        ("samples.parquet/part-000002.parquet", dev_zero, "character device"),
    ];
    for (i, (file, plant, what)) in cases.iter().enumerate() {
        let dir = base.join(format!("rec{i}"));
        recording(&dir);
        let planted: PathBuf = dir.join(file);
        plant(&planted);
        let d = dir.display().to_string();
        let names_it = |out: &str| out.contains(&planted.display().to_string()) && out.contains(what);
        let (_, out) = run_guarded(&["report", "-i", &d]);
        assert!(names_it(&out), "report with {file} as {what}: the output does not name it:\n{out}");
        // export ends too; when it refuses, it names the file (a part it skips is
        // reported by `report`).
        let (ok, out) = run_guarded(&["export", "-i", &d, "-f", "folded"]);
        assert!(ok || names_it(&out), "export with {file} as {what}: refused without naming it:\n{out}");
    }
    std::fs::remove_dir_all(&base).expect("cleanup");
}

#[test]
fn a_fifo_named_as_a_binary_is_not_opened_for_symbols() {
    let base = common::tmpdir("hostile-bin");
    let dir = base.join("rec");
    recording(&dir);
    let pipe = base.join("fake-binary");
    fifo(&pipe);
    let maps = vec![Mapping {
        time: 0,
        pid: 4242,
        tid: 4242,
        start: 0x40_0000,
        len: 0x1000,
        pgoff: 0,
        path: pipe.display().to_string(),
        build_id: None,
    }];
    std::fs::write(dir.join("maps.json"), serde_json::to_vec(&maps).expect("json")).expect("maps");
    let d = dir.display().to_string();
    let (ok, out) = run_guarded(&["report", "-i", &d]);
    assert!(ok, "report failed:\n{out}");
    std::fs::remove_dir_all(&base).expect("cleanup");
}

/// A recording that could not keep its kernel snapshot (a full disk) says so in its
/// report, instead of naming the kernel from elsewhere without a word.
#[test]
fn a_recording_without_its_kallsyms_snapshot_says_why() {
    let dir = common::tmpdir("no-kallsyms");
    recording(&dir);
    std::fs::remove_file(dir.join("kallsyms")).expect("rm kallsyms");
    let meta_path = dir.join("meta.json");
    let mut meta: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta_path).expect("meta")).expect("json");
    meta["notes"] = serde_json::json!(["no kallsyms snapshot: kallsyms.tmp: No space left on device (os error 28)"]);
    std::fs::write(&meta_path, serde_json::to_vec(&meta).expect("json")).expect("meta");
    let (ok, out) = run_guarded(&["report", "-i", &dir.display().to_string()]);
    assert!(ok, "{out}");
    assert!(
        out.contains("# WARNING: no kallsyms snapshot: kallsyms.tmp: No space left on device")
            && out.contains("kernel symbols come from elsewhere"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// A file in a recording named with a terminal escape sequence is named escaped in the
/// warnings (it is skipped as no part), never printed raw.
#[test]
fn file_names_in_a_recording_are_printed_escaped() {
    let dir = common::tmpdir("escaped-name");
    recording(&dir);
    std::fs::write(dir.join("samples.parquet/part-000099\u{1b}]0;pwn\u{7}.parquet"), b"junk").expect("planted");
    for args in [vec!["report", "-i"], vec!["export", "-f", "folded", "-i"]] {
        let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        a.push(dir.display().to_string());
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let (_, out) = run_guarded(&a);
        assert!(!out.contains('\u{1b}'), "{args:?}: a raw escape: {out:?}");
        assert!(out.contains("part-000099\\u{1b}]0;pwn\\u{7}.parquet"), "{args:?}: {out}");
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
