//! Recording real targets: a program with a known 70/30 split of CPU time, a tiny ring at a
//! high rate (LOST records counted), and the bundled forwarder (samples in its stage
//! symbols, packet counts in counters.parquet). Skips with a reason where perf is not usable.

mod common;

use collector::events::EventId;
use collector::recording::Recording;
use collector::records::TaskEvent;
use collector::session::{record, RecordOptions, Target};
use common::*;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn tmpdir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("fwdscope-rec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A process's user and system CPU time so far, all threads, seconds (/proc/PID/stat).
fn process_cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the process's stat");
    // After the command's `)`: state is field 3, utime 14 and stime 15.
    let rest = &stat[stat.rfind(')').expect("stat's command") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks as f64 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

#[test]
fn samples_split_seventy_thirty() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("7030");
    let prog = example("split_70_30");
    let mut opts = RecordOptions::new(out.clone(), Target::Command { program: prog.clone(), args: vec!["2".into()] });
    opts.freq = Some(2000);
    let mut notes = Vec::new();
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |n| notes.push(n.to_string())).unwrap();
    assert_eq!(meta.status, "complete");
    // The event actually used is named, and a fallback is explained.
    assert!(meta.sampling.used == "cycles" || meta.sampling.used == "cpu-clock");
    if meta.sampling.used == "cpu-clock" {
        assert!(meta.sampling.fallback.as_deref().is_some_and(|f| f.contains("cycles")), "{:?}", meta.sampling);
        assert!(notes.iter().any(|n| n.contains("cpu-clock")));
    }
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    assert_eq!(samples.len() as u64, meta.samples);
    let maps = rec.maps().unwrap();
    let m = maps.iter().find(|m| m.path.ends_with("split_70_30")).expect("mapping of the program");
    assert!(m.build_id.as_deref().is_some_and(|b| b.len() >= 16), "build-id in maps.json");
    let elf = Elf::load(&prog);
    let (mut a, mut b) = (0u64, 0u64);
    for s in &samples {
        match symbolize(s, &maps, "split_70_30", &elf) {
            Some("burn_seventy") => a += s.period,
            Some("burn_thirty") => b += s.period,
            _ => {}
        }
    }
    let share = a as f64 / (a + b) as f64;
    println!("70/30 program: {a} vs {b} ({:.1}%) of {} samples", share * 100.0, samples.len());
    assert!(samples.len() > 1000, "too few samples: {}", samples.len());
    assert!((0.65..=0.75).contains(&share), "burn_seventy share {share}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_tiny_ring_at_a_high_rate_loses_records_and_says_so() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("lost");
    let mut opts =
        RecordOptions::new(out.clone(), Target::Command { program: example("split_70_30"), args: vec!["1".into()] });
    opts.event = Some(EventId::CpuClock);
    opts.period = Some(20_000); // one sample per 20 us of CPU
    opts.ring_pages = 1;
    opts.call_graph = collector::perf_abi::CallGraph::FramePointer;
    opts.poll_interval = Duration::from_millis(300);
    let mut notes = Vec::new();
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |n| notes.push(n.to_string())).unwrap();
    println!("lost {} throttled {} samples {}", meta.lost, meta.throttled, meta.samples);
    assert!(meta.lost > 0, "no LOST records with a one-page ring");
    assert!(notes.iter().any(|n| n.contains("lost")), "{notes:?}");
    let again = Recording::open(&out).unwrap();
    assert_eq!(again.meta.lost, meta.lost);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn recording_the_forwarder() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("fwd");
    let bin = forwarder_bin();
    let args = ["--duration", "2", "--routes", "5000", "--flows", "4096", "--no-pin"].map(String::from).to_vec();
    let mut opts = RecordOptions::new(out.clone(), Target::Forwarder { program: bin.clone(), args });
    opts.freq = Some(1000);
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |_| {}).unwrap();
    assert!(meta.ended_by.as_deref().unwrap_or("").contains("exited"), "{:?}", meta.ended_by);
    let cfg = meta.forwarder.as_ref().expect("forwarder config from its stats segment");
    assert_eq!(cfg["config"]["cache"], "rtcache");
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    let maps = rec.maps().unwrap();
    let elf = Elf::load(&bin);
    // Samples of the worker thread fall in the forwarder's stage symbols.
    let tasks: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("tasks.json")).unwrap()).unwrap();
    let worker_tids: Vec<u64> = tasks
        .iter()
        .filter(|t| t["type"] == "comm" && t["comm"] == "fwd-worker-0")
        .filter_map(|t| t["tid"].as_u64())
        .collect();
    assert!(!worker_tids.is_empty(), "COMM record of the worker thread");
    let worker: Vec<_> = samples.iter().filter(|s| worker_tids.contains(&u64::from(s.tid))).collect();
    let in_stages = worker
        .iter()
        .filter(|s| symbolize(s, &maps, "fwdscope-forwarder", &elf).is_some_and(|n| n.starts_with("fwd_")))
        .count();
    println!("worker samples {} in fwd_* {}", worker.len(), in_stages);
    assert!(worker.len() > 500, "worker samples {}", worker.len());
    assert!(in_stages as f64 > 0.5 * worker.len() as f64, "{in_stages} of {} in stage symbols", worker.len());
    // counters.parquet holds the forwarder's packet counts, rising.
    let tx: Vec<u64> = rec
        .counters()
        .unwrap()
        .iter()
        .filter(|r| r.source == "forwarder" && r.name == "tx_packets")
        .map(|r| r.value)
        .collect();
    assert!(tx.len() >= 5, "{} tx_packets rows", tx.len());
    assert!(
        tx.windows(2).all(|w| w[0] <= w[1]) && *tx.last().unwrap() > 100_000,
        "{:?}",
        &tx[tx.len().saturating_sub(3)..]
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn callchains_walk_through_frame_pointers() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("callchain");
    let prog = example("split_70_30");
    let mut opts = RecordOptions::new(out.clone(), Target::Command { program: prog.clone(), args: vec!["1".into()] });
    opts.freq = Some(1000);
    opts.call_graph = collector::perf_abi::CallGraph::FramePointer;
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |_| {}).unwrap();
    assert!(meta.sampling.callchain);
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    let maps = rec.maps().unwrap();
    let elf = Elf::load(&prog);
    // Samples in a burn function have main (the caller) in their callchain.
    let mut burn = 0;
    let mut with_main = 0;
    for s in &samples {
        if !matches!(symbolize(s, &maps, "split_70_30", &elf), Some("burn_seventy" | "burn_thirty")) {
            continue;
        }
        burn += 1;
        let callers = s.callchain.iter().skip(1).filter_map(|&ip| {
            let mut t = s.clone();
            t.ip = ip - 1; // a return address points after the call
            symbolize(&t, &maps, "split_70_30", &elf).map(str::to_string)
        });
        if callers.into_iter().any(|n| n.contains("split_70_304main")) {
            with_main += 1;
        }
    }
    println!("{with_main} of {burn} burn samples reach main");
    assert!(burn > 300);
    assert!(with_main as f64 > 0.9 * burn as f64, "{with_main} of {burn}");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn attaching_to_a_running_forwarder_by_pid() {
    if !perf_available() {
        return;
    }
    let mut fwd = std::process::Command::new(forwarder_bin())
        .args(["--duration", "0", "--routes", "3000", "--no-pin"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = fwd.id() as i32;
    // Wait for its stats segment: the workers are running then.
    let t0 = std::time::Instant::now();
    while fwd_abi::Segment::find_for(pid as u32).is_none() && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = tmpdir("pid");
    let mut opts = RecordOptions::new(out.clone(), Target::Pid(pid));
    opts.freq = Some(1000);
    opts.duration = Some(Duration::from_secs(1));
    let cpu_before = process_cpu_seconds(pid);
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |_| {}).unwrap();
    let cpu = process_cpu_seconds(pid) - cpu_before;
    fwd_abi::Segment::find_for(pid as u32).expect("segment").request_stop();
    fwd.wait().unwrap();
    assert_eq!(meta.target_pid, Some(pid));
    assert!(meta.ended_by.as_deref().unwrap_or("").starts_with("duration"));
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    let tids: std::collections::HashSet<u32> = samples.iter().filter(|s| s.pid == pid as u32).map(|s| s.tid).collect();
    println!("-p: {} samples over {} threads in {cpu:.2} s of the forwarder's CPU time", samples.len(), tids.len());
    // Worker and device threads both sampled; samples in proportion to the CPU time the
    // forwarder had while recorded (1000 Hz of its CPU time, less on a loaded machine where
    // it waited; /proc's tick resolution and the recording's start and end allow half).
    assert!(tids.len() >= 2, "threads {tids:?}");
    assert!(cpu > 0.2, "the forwarder had {cpu:.2} s of CPU time in the recording's second");
    assert!(samples.len() as f64 >= 500.0 * cpu, "{} samples for {cpu:.2} s of CPU time", samples.len());
    assert!(rec.counters().unwrap().iter().any(|r| r.source == "forwarder" && r.name == "rx_packets" && r.value > 0));
    // A process that was already running: its mappings and thread names come from /proc,
    // with build-ids, so its samples symbolize.
    let bin = forwarder_bin().canonicalize().unwrap();
    let maps = rec.maps().unwrap();
    let own = maps.iter().find(|m| m.pid == pid as u32 && std::path::Path::new(&m.path) == bin);
    assert!(own.is_some_and(|m| m.build_id.is_some()), "{maps:?}");
    let workers = rec
        .tasks()
        .unwrap()
        .iter()
        .filter(|t| matches!(t, TaskEvent::Comm { comm, .. } if comm.starts_with("fwd-worker-")))
        .count();
    assert!(workers >= 1);
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn system_wide_includes_the_kernel() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("all");
    let mut opts = RecordOptions::new(out.clone(), Target::All);
    opts.freq = Some(1000);
    opts.duration = Some(Duration::from_millis(800));
    // Something to sample in the kernel meanwhile: a busy loop of small reads.
    let busy = std::thread::spawn(|| {
        let t0 = std::time::Instant::now();
        let mut buf = [0u8; 64];
        let f = std::fs::File::open("/dev/zero").unwrap();
        use std::io::Read;
        let mut f = f;
        while t0.elapsed() < Duration::from_millis(900) {
            let _ = f.read(&mut buf);
        }
    });
    let meta = record(&opts, &AtomicBool::new(false), None, &mut |_| {}).unwrap();
    busy.join().unwrap();
    assert_eq!(meta.target, "system-wide");
    let rec = Recording::open(&out).unwrap();
    let samples = rec.samples().unwrap();
    let kernel = samples.iter().filter(|s| s.kernel).count();
    let cpus: std::collections::HashSet<u32> = samples.iter().map(|s| s.cpu).collect();
    println!("-a: {} samples, {kernel} in the kernel, cpus {cpus:?}", samples.len());
    assert!(kernel > 50, "kernel samples {kernel}");
    assert_eq!(cpus.len(), collector::perf_abi::online_cpus().len());
    // Kernel addresses resolve through the kallsyms snapshot.
    let ks = std::fs::read_to_string(out.join("kallsyms")).unwrap();
    assert!(ks.lines().any(|l| l.ends_with(" _text") || l.contains(" T _text")));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn the_live_stream_delivers_samples_counters_and_the_end() {
    if !perf_available() {
        return;
    }
    let out = tmpdir("stream");
    let args = ["--duration", "1", "--routes", "3000", "--no-pin"].map(String::from).to_vec();
    let opts = RecordOptions::new(out.clone(), Target::Forwarder { program: forwarder_bin(), args });
    let (tx, rx) = collector::stream::channel(64);
    let consumer = std::thread::spawn(move || {
        let (mut samples, mut counter_batches, mut tx_packets, mut ended) = (0usize, 0usize, 0u64, None);
        let (mut started, mut maps_before_samples) = (None, 0usize);
        for b in rx {
            match b {
                collector::stream::Batch::Started { sampling, target_pid, .. } => {
                    started = Some((sampling.used, target_pid))
                }
                collector::stream::Batch::Maps(m) => {
                    if samples == 0 {
                        maps_before_samples += m.len()
                    }
                }
                collector::stream::Batch::Samples(v) => samples += v.len(),
                collector::stream::Batch::Tasks(_) => {}
                collector::stream::Batch::Counters { rows, .. } => {
                    counter_batches += 1;
                    for r in rows {
                        if r.name == "tx_packets" {
                            tx_packets = tx_packets.max(r.value);
                        }
                    }
                }
                collector::stream::Batch::Ended(why) => ended = Some(why),
                collector::stream::Batch::Lost(_) => {}
            }
        }
        (samples, counter_batches, tx_packets, ended, started, maps_before_samples)
    });
    let meta = record(&opts, &AtomicBool::new(false), Some(&tx), &mut |_| {}).unwrap();
    drop(tx);
    let (samples, counter_batches, tx_packets, ended, started, maps_before_samples) = consumer.join().unwrap();
    assert_eq!(meta.stream_dropped, 0);
    // The events actually used come first; the forwarder's mappings before its samples.
    assert_eq!(started, Some((meta.sampling.used.clone(), meta.target_pid)));
    assert!(maps_before_samples >= 1);
    assert!(samples > 500 && samples as u64 <= meta.samples, "{samples} of {}", meta.samples);
    assert!(counter_batches >= 5 && tx_packets > 10_000, "{counter_batches} batches, tx {tx_packets}");
    assert!(ended.is_some_and(|w| w.contains("exited")));
    std::fs::remove_dir_all(&out).unwrap();
}

/// A tmpfs of `size` mounted at a fresh directory, or None (printed: SKIP) where this
/// user cannot mount one.
fn small_tmpfs(name: &str, size: &str) -> Option<std::path::PathBuf> {
    let mnt = tmpdir(name);
    std::fs::create_dir_all(&mnt).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "fwdscope-test", mnt.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        println!("SKIP: cannot mount a small tmpfs here (needs root)");
        return None;
    }
    Some(mnt)
}

#[test]
fn a_full_disk_is_an_error_naming_the_file() {
    if !perf_available() {
        return;
    }
    // A small tmpfs, filled up before recording starts.
    let Some(mnt) = small_tmpfs("full", "256k") else { return };
    {
        use std::io::Write;
        let mut f = std::fs::File::create(mnt.join("filler")).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
    }
    let out = mnt.join("rec");
    let mut opts =
        RecordOptions::new(out.clone(), Target::Command { program: example("split_70_30"), args: vec!["0.5".into()] });
    opts.freq = Some(1000);
    let err = record(&opts, &AtomicBool::new(false), None, &mut |_| {});
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    let _ = std::fs::remove_dir_all(&mnt);
    let msg = match err {
        Ok(m) => format!("no error: {:?}", m.notes),
        Err(e) => e.to_string(),
    };
    assert!(msg.contains("No space left on device") && msg.contains(&out.display().to_string()), "{msg}");
}

/// A disk too small for the kallsyms snapshot but not for the rest: the recording goes on,
/// and record says at once that the snapshot is missing and why (not only in the notes).
#[test]
fn a_kallsyms_snapshot_the_disk_cannot_hold_is_said_at_once() {
    if !perf_available() {
        return;
    }
    let Some(mnt) = small_tmpfs("small", "1m") else { return };
    let kallsyms = std::fs::read("/proc/kallsyms").map_or(0, |b| b.len());
    let out = mnt.join("rec");
    let mut opts =
        RecordOptions::new(out.clone(), Target::Command { program: example("split_70_30"), args: vec!["0.3".into()] });
    opts.freq = Some(200);
    let mut said = Vec::new();
    let r = record(&opts, &AtomicBool::new(false), None, &mut |m| said.push(m.to_string()));
    let _ = std::process::Command::new("umount").arg(&mnt).status();
    let _ = std::fs::remove_dir_all(&mnt);
    if kallsyms < (1 << 20) {
        println!("SKIP: /proc/kallsyms ({kallsyms} bytes) fits the 1 MiB tmpfs");
        return;
    }
    let meta = r.expect("the recording itself fits");
    assert!(meta.notes.iter().any(|n| n.starts_with("no kallsyms snapshot")), "{:?}", meta.notes);
    assert!(
        said.iter().any(|m| m.starts_with("no kallsyms snapshot") && m.contains("No space left on device")),
        "{said:?}"
    );
}
