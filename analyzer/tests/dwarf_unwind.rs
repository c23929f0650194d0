//! DWARF unwinding of user stacks checked against perf's own: a small C program built
//! here without frame pointers (`-fomit-frame-pointer`, a call chain main -> top -> mid ->
//! leaf), recorded with `perf record --call-graph dwarf`, then read by the analyzer (which
//! unwinds each sample's stack copy with framehop) and by `perf script` (which unwinds it
//! with its own unwinder). Sample by sample (matched by thread and time), the user frames
//! must name the same functions. Needs `cc` and a `perf` that can record; skips, saying
//! why, without them.
//!
//! fwdscope's own `record --call-graph dwarf` is checked on the same program: the collector
//! unwinds each sample as it arrives, so the recording's callchains must follow the
//! program's one call path (leaf called only by mid, mid by top, top by main) to main, and
//! the stage table must charge the unstaged helpers to their staged caller (the program's
//! `top` is then named `fwd_lookup_top`, a lookup-stage name), which a frame-pointer
//! recording of the same program cannot (its chains stop in leaf).

use analyzer::perfdata::read_perf_data;
use analyzer::symbolize::Symbolizer;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const PROGRAM: &str = r#"
#include <stdint.h>
#include <stdlib.h>
volatile uint64_t sink;
__attribute__((noinline)) uint64_t leaf(uint64_t x) {
    uint64_t a = x;
    for (int i = 0; i < 200; i++) a = a * 6364136223846793005ULL + 1442695040888963407ULL;
    return a;
}
__attribute__((noinline)) uint64_t mid(uint64_t x) {
    uint64_t b[8];
    for (int i = 0; i < 8; i++) b[i] = leaf(x + i);
    return b[x & 7] ^ b[3];
}
__attribute__((noinline)) uint64_t top(uint64_t x) {
    uint64_t c[4];
    for (int i = 0; i < 4; i++) c[i] = mid(x + i);
    return c[0] + c[(x >> 3) & 3];
}
int main(int argc, char **argv) {
    uint64_t n = argc > 1 ? strtoull(argv[1], 0, 10) : 20000, s = 0;
    for (uint64_t i = 0; i < n; i++) s += top(i);
    sink = s;
    return 0;
}
"#;

/// A function name as both sides print it: perf adds symbol versions (`@@GLIBC_2.34`).
fn plain(name: &str) -> String {
    name.split('@').next().unwrap_or(name).to_string()
}

/// One frame: its function's name and its object's file name (`libc.so.6`).
type Frame = (String, String);

/// Whether our frame names the same place as perf's: the same function, or the same
/// object where one side has no name for it (a local function named only by a debug file
/// that one side found and the other did not: `__libc_start_call_main` without libc6-dbg).
fn same_frame(ours: &Frame, theirs: &Frame) -> bool {
    let unnamed = |f: &Frame| f.0.starts_with(&format!("{}+0x", f.1)) || f.0.starts_with("[unknown]");
    ours.0 == theirs.0 || (ours.1 == theirs.1 && (unnamed(ours) || unnamed(theirs)))
}

/// `perf script`'s user frames per sample, by (tid, time in ns): the function and object
/// names of the frame lines whose object is not the kernel.
fn perf_frames(data: &Path) -> Option<HashMap<(u32, u64), Vec<Frame>>> {
    let out = Command::new("perf")
        .args(["script", "-i"])
        .arg(data)
        .args(["-F", "tid,time,ip,sym,dso", "--ns", "--no-inline"])
        .output()
        .ok()?;
    if !out.status.success() {
        println!("SKIP: perf script failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut samples = HashMap::new();
    let mut current: Option<((u32, u64), Vec<Frame>)> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with('\t') {
            // " 5921  3229.368546529: "
            let mut f = line.split_whitespace();
            let tid: u32 = f.next()?.parse().ok()?;
            let (s, ns) = f.next()?.trim_end_matches(':').split_once('.')?;
            let time = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
            if let Some((k, v)) = current.take() {
                samples.insert(k, v);
            }
            current = Some(((tid, time), Vec::new()));
            continue;
        }
        // "\t            11c4 leaf (/tmp/prog)"
        let frame = line.trim();
        let Some((_, rest)) = frame.split_once(' ') else { continue };
        let Some((sym, dso)) = rest.rsplit_once(" (") else { continue };
        if dso.starts_with("[kernel") {
            continue;
        }
        if let Some((_, frames)) = current.as_mut() {
            let object = dso.trim_end_matches(')').rsplit('/').next().unwrap_or(dso);
            frames.push((plain(sym), object.to_string()));
        }
    }
    if let Some((k, v)) = current.take() {
        samples.insert(k, v);
    }
    Some(samples)
}

/// Build `source` into DIR/chain; None (said why) where there is no C compiler.
fn build(dir: &Path, source: &str) -> Option<std::path::PathBuf> {
    let src = dir.join("chain.c");
    std::fs::write(&src, source).expect("source");
    let prog = dir.join("chain");
    let cc = Command::new("cc").args(["-O2", "-g", "-fomit-frame-pointer", "-o"]).arg(&prog).arg(&src).output();
    match cc {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!("SKIP: cc failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            return None;
        }
        Err(e) => {
            println!("SKIP: no C compiler (cc: {e})");
            return None;
        }
    }
    Some(prog)
}

/// Build the program and record it; None (said why) where that cannot be done here.
fn record(dir: &Path) -> Option<std::path::PathBuf> {
    let prog = build(dir, PROGRAM)?;
    let data = dir.join("perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "--call-graph", "dwarf,4096", "-e", "cpu-clock", "-F", "999", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&prog)
        .arg("30000")
        .output();
    match rec {
        Ok(o) if o.status.success() && data.exists() => Some(data),
        Ok(o) => {
            println!("SKIP: perf record --call-graph dwarf failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            None
        }
        Err(e) => {
            println!("SKIP: no perf ({e})");
            None
        }
    }
}

#[test]
fn dwarf_unwound_stacks_name_the_same_callers_as_perf() {
    let dir = std::env::temp_dir().join(format!("fwdscope-dwarf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let Some(data) = record(&dir) else { return };
    let Some(theirs) = perf_frames(&data) else { return };
    let pd = read_perf_data(&data).expect("perf.data");
    let stats = pd.unwinding.clone().expect("the file's samples carry user stacks: they were unwound");
    let mut sym = Symbolizer::new(pd.maps.clone(), None);
    let (mut compared, mut same, mut deep) = (0usize, 0usize, 0usize);
    let mut first_difference = None;
    for s in &pd.samples {
        let Some(expected) = theirs.get(&(s.tid, s.time)) else { continue };
        let ours: Vec<Frame> = s
            .callchain
            .iter()
            .filter(|&&a| a < 0x8000_0000_0000_0000)
            .map(|&a| {
                let f = sym.resolve_ip(s.pid, a, false);
                (plain(&f.name), f.dso)
            })
            .collect();
        compared += 1;
        if ours.len() == expected.len() && ours.iter().zip(expected).all(|(a, b)| same_frame(a, b)) {
            same += 1;
        } else if first_difference.is_none() {
            first_difference =
                Some(format!("sample at {} (tid {}): ours {ours:?}\nperf's {expected:?}", s.time, s.tid));
        }
        let names: Vec<&str> = ours.iter().map(|f| f.0.as_str()).collect();
        if names.windows(4).any(|w| w == ["leaf", "mid", "top", "main"]) {
            deep += 1;
        }
    }
    println!(
        "{}; {compared} samples compared with perf script, {same} the same, {deep} through leaf, mid, top, main",
        stats.summary()
    );
    assert!(compared >= 50, "only {compared} samples matched perf script's by thread and time");
    assert!(
        same * 100 >= compared * 95,
        "{same} of {compared} the same; first difference: {}",
        first_difference.unwrap_or_default()
    );
    // Without frame pointers a frame-pointer walk stops in leaf: the callers come from CFI.
    assert!(deep * 2 >= compared, "only {deep} of {compared} stacks reached main through leaf, mid and top");
    assert!(stats.whole * 100 >= stats.stacks * 90, "{}", stats.summary());
    let _ = std::fs::remove_dir_all(&dir);
}

/// fwdscope's own recording of the program (cpu-clock at 999 Hz) with `call_graph`.
fn fwdscope_record(
    dir: &Path,
    prog: &Path,
    name: &str,
    call_graph: collector::perf_abi::CallGraph,
) -> collector::recording::Recording {
    use collector::session::{record, RecordOptions, Target};
    let out = dir.join(name);
    let target = Target::Command { program: prog.to_path_buf(), args: vec!["30000".into()] };
    let mut opts = RecordOptions::new(out.clone(), target);
    opts.event = Some(collector::events::EventId::CpuClock);
    opts.freq = Some(999);
    opts.call_graph = call_graph;
    opts.counting = Vec::new();
    record(&opts, &std::sync::atomic::AtomicBool::new(false), None, &mut |m| println!("{name}: {m}")).expect("record");
    collector::recording::Recording::open(&out).expect("the recording")
}

/// The user functions of each sample of a recording, innermost first.
fn user_names(rec: &collector::recording::Recording) -> Vec<Vec<String>> {
    let samples = rec.samples().expect("samples");
    let mut sym = Symbolizer::new(rec.maps().expect("maps"), None);
    samples
        .iter()
        .filter(|s| !s.kernel)
        .map(|s| {
            let chain: Vec<u64> = if s.callchain.is_empty() { vec![s.ip] } else { s.callchain.clone() };
            chain
                .iter()
                .filter(|&&a| a < 0x8000_0000_0000_0000)
                .enumerate()
                // A return address points after its call: look up the call itself.
                .map(|(i, &a)| plain(&sym.resolve_ip(s.pid, if i == 0 { a } else { a - 1 }, false).name))
                .collect()
        })
        .collect()
}

#[test]
fn fwdscope_record_unwinds_dwarf_stacks_as_it_records() {
    if let Err(e) = collector::perf_abi::probe(collector::perf_abi::Need::Sample) {
        println!("SKIP: perf_event_open cannot sample here: {e}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("fwdscope-dwarf-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    // The program's one call path, with `top` given a lookup-stage name.
    let source = PROGRAM.replace("top(", "fwd_lookup_top(");
    let Some(prog) = build(&dir, &source) else { return };
    let dwarf = collector::perf_abi::CallGraph::Dwarf { stack_bytes: 4096 };
    let rec = fwdscope_record(&dir, &prog, "dwarf", dwarf);
    let m = &rec.meta.sampling;
    assert_eq!(m.call_graph.as_deref(), Some("dwarf,4096"));
    let stats = m.unwinding.clone().expect("meta.json says how the stacks were unwound");
    let names = user_names(&rec);
    let in_leaf: Vec<&Vec<String>> = names.iter().filter(|n| n.first().is_some_and(|f| f == "leaf")).collect();
    let whole = in_leaf.iter().filter(|n| n.len() >= 4 && n[1..4] == ["mid", "fwd_lookup_top", "main"]).count();
    println!("{}; {whole} of {} samples in leaf reach main through mid and top", stats.summary(), in_leaf.len());
    assert!(in_leaf.len() >= 50, "only {} samples in leaf: {names:?}", in_leaf.len());
    assert!(whole * 100 >= in_leaf.len() * 95, "{whole} of {}; e.g. {:?}", in_leaf.len(), in_leaf.first());
    assert!(stats.whole * 100 >= stats.stacks * 90, "{}", stats.summary());
    let all = rec.samples().expect("samples").len() as u64;
    assert_eq!(stats.stacks + stats.kernel_threads, all, "every sample came with its registers, looked at once");

    // The stage table charges leaf and mid (no stage of their own) to fwd_lookup_top's
    // stage through the unwound callchains, and says how they were made.
    let rules = analyzer::rules::Rules::builtin();
    let t = analyzer::stages::stage_table(&rec, &rules).expect("stage table");
    let share = |t: &analyzer::stages::StageTable, stage: &str| {
        t.stages.iter().find(|r| r.stage == stage).map_or(0.0, |r| r.percent)
    };
    let unwinding = t.unwinding.clone().unwrap_or_default();
    assert!(unwinding.starts_with("user callchains unwound while recording from DWARF CFI"), "{unwinding}");
    assert!(
        share(&t, "lookup") >= 90.0,
        "lookup {:.1}% of a program that runs under fwd_lookup_top",
        share(&t, "lookup")
    );

    // The same program recorded with frame pointers: its chains stop in leaf, so the
    // helpers stay unattributed (which is what DWARF unwinding is for).
    let fp = fwdscope_record(&dir, &prog, "fp", collector::perf_abi::CallGraph::FramePointer);
    let tf = analyzer::stages::stage_table(&fp, &rules).expect("stage table");
    println!("lookup: {:.1}% unwound from DWARF, {:.1}% by frame pointers", share(&t, "lookup"), share(&tf, "lookup"));
    assert!(tf.unwinding.is_none(), "a frame-pointer recording claims DWARF unwinding");
    assert!(share(&tf, "lookup") < share(&t, "lookup"));
    let _ = std::fs::remove_dir_all(&dir);
}
