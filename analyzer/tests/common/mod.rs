//! Test helpers: the mapping of this test binary's own code, as the kernel reports it, so
//! hand-made recordings can point samples at real forwarder functions.

#![allow(dead_code)]

use collector::records::Mapping;

/// The executable mapping of this test binary that holds `addr`.
pub fn own_mapping(addr: u64, pid: u32) -> Mapping {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let (a, b) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        if addr >= a && addr < b {
            return Mapping {
                time: 0,
                pid,
                tid: pid,
                start: a,
                len: b - a,
                pgoff: u64::from_str_radix(f[2], 16).unwrap(),
                path: f[5].to_string(),
                build_id: None,
            };
        }
    }
    panic!("no mapping for {addr:#x}");
}

/// Add the mappings of this binary that hold `funcs` (each once) to the writer.
pub fn map_functions(w: &mut collector::recording::RecordingWriter, funcs: &[u64], pid: u32) {
    for &a in funcs {
        let m = own_mapping(a, pid);
        if !w.maps.contains(&m) {
            w.maps.push(m);
        }
    }
}

/// Finish a hand-made recording: flush, maps and tasks, and a complete meta.json saying
/// `used` was sampled (when `requested` was asked for, with `fallback` as the reason).
pub fn finish(
    mut w: collector::recording::RecordingWriter,
    requested: &str,
    used: &str,
    fallback: Option<&str>,
) -> collector::recording::Recording {
    use collector::recording::{Meta, Recording, SamplingInfo, FORMAT_VERSION};
    w.flush().unwrap();
    w.write_maps_and_tasks().unwrap();
    let sampling = SamplingInfo {
        requested: requested.into(),
        used: used.into(),
        fallback: fallback.map(str::to_string),
        ..Default::default()
    };
    let meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        sampling,
        status: "complete".into(),
        ..Default::default()
    };
    w.write_meta(&meta).unwrap();
    Recording::open(w.dir()).unwrap()
}

/// The callchain scenario shared by the stage-table and export tests, in process `pid`
/// (threads `pid` and `pid + 1`), every sample of `period`: 4 samples in a helper no rule
/// matches (forwarder::packet::checksum) called from fwd_lookup_fib_dir24, 2 in the helper
/// without a callchain, 1 in fwd_slab_alloc on the second thread. Addresses are entry + 1
/// (the prologue, no inlined frames); the caller's return address is its entry + 1, so the
/// call site looked up is the entry itself. Maps the functions; names the two threads
/// fwd-worker-0 and fwd-worker-1.
pub fn push_helper_scenario(w: &mut collector::recording::RecordingWriter, pid: u32, period: u64) {
    use collector::records::{Sample, TaskEvent};
    let lookup = forwarder::fib::dir24::fwd_lookup_fib_dir24 as *const () as usize as u64;
    let slab = forwarder::slab::fwd_slab_alloc as *const () as usize as u64;
    let helper = forwarder::packet::checksum as *const () as usize as u64;
    let sample = |tid: u32, ip: u64, callchain: Vec<u64>| Sample {
        time: 0,
        pid,
        tid,
        cpu: 0,
        ip,
        period,
        kernel: false,
        callchain,
    };
    for _ in 0..4 {
        // perf's chain starts with the IP itself, then return addresses.
        w.push_sample(sample(pid, helper + 1, vec![helper + 1, lookup + 1]));
    }
    for _ in 0..2 {
        w.push_sample(sample(pid, helper + 1, vec![helper + 1]));
    }
    w.push_sample(sample(pid + 1, slab + 1, vec![slab + 1]));
    map_functions(w, &[lookup, slab, helper], pid);
    for (tid, comm) in [(pid, "fwd-worker-0"), (pid + 1, "fwd-worker-1")] {
        w.tasks.push(TaskEvent::Comm { time: 0, pid, tid, comm: comm.into(), exec: false });
    }
}
