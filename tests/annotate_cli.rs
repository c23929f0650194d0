//! `fwdscope annotate` on bad input, end to end: a symbol not found gets the nearest names;
//! a binary or kernel image of another build is refused naming both build-ids; a stripped
//! binary gives addresses only, saying so; a huge function its hottest windows only; a
//! kernel function without --vmlinux says why it is not annotated; a text profile is
//! refused. Inputs: the perf.data fixture of analyzer/tests/data/annotate (see its README)
//! and the kernel-forwarding perf.data.

mod common;

use common::{run, tmpdir};
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("analyzer/tests/data")
}

fn fixture() -> String {
    data().join("annotate/forwarder.perf.data").display().to_string()
}

fn symfs() -> String {
    data().join("annotate/symfs").display().to_string()
}

/// The recorded path of the forwarder binary (the one file under the fixture's symfs).
fn recorded_binary() -> PathBuf {
    let mut p = data().join("annotate/symfs");
    loop {
        let next = std::fs::read_dir(&p).unwrap().flatten().next().expect("a file under symfs").path();
        if next.is_file() {
            return next.strip_prefix(data().join("annotate/symfs")).unwrap().to_path_buf();
        }
        p = next;
    }
}

/// `fwdscope ARGS` with perf's build-id cache pointed at an empty directory, so that only
/// the files a test gives can name the samples.
fn run_isolated(args: &[&str], cache: &Path) -> std::process::Output {
    std::fs::create_dir_all(cache).unwrap();
    common::fwdscope().args(args).env("PERF_BUILDID_DIR", cache).output().expect("run fwdscope")
}

fn text(o: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn a_symbol_not_found_is_answered_with_the_nearest_names() {
    let o = run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), "Dir24::lookup"]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(err.contains("symbol `Dir24::lookup` has no samples in this input"), "{err}");
    // Dir24::lookup was inlined into fwd_lookup_fib_dir24, whose name holds both words.
    assert!(err.contains("nearest names: `fwd_lookup_fib_dir24`"), "{err}");
    // A stage with no samples: the stages that have some.
    let o = run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), "--stage", "gc"]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("stage `gc` has no samples in this input; its stages: ") && err.contains("lookup ("), "{err}");
}

#[test]
fn a_binary_of_another_build_is_refused_naming_both_build_ids() {
    let dir = tmpdir("annotate-wrong-build");
    let rel = recorded_binary();
    let planted = dir.join("symfs").join(&rel);
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    // Another build: this test binary itself.
    let me = std::env::current_exe().unwrap();
    std::fs::copy(&me, &planted).unwrap();
    let mine = analyzer::symbolize::ElfSymbols::open(&me).unwrap().build_id.unwrap();
    let sym = dir.join("symfs").display().to_string();
    let o = run_isolated(&["annotate", "-i", &fixture(), "--symfs", &sym, "--top", "1"], &dir.join("cache"));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let recorded =
        analyzer::symbolize::ElfSymbols::open(&data().join("annotate/symfs").join(&rel)).unwrap().build_id.unwrap();
    assert!(out.contains(&format!("no file of the recorded build-id {recorded} was found")), "{out}");
    assert!(out.contains(&format!("build-id {mine}")), "{out}");
    assert!(out.contains("addresses only"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stripped_binary_gives_addresses_only() {
    if !common::have("strip", &[]) {
        return;
    }
    let dir = tmpdir("annotate-stripped");
    let rel = recorded_binary();
    let stripped = dir.join("symfs").join(&rel);
    std::fs::create_dir_all(stripped.parent().unwrap()).unwrap();
    let st = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(data().join("annotate/symfs").join(&rel))
        .status()
        .unwrap();
    assert!(st.success());
    let sym = dir.join("symfs").display().to_string();
    let o = run_isolated(&["annotate", "-i", &fixture(), "--symfs", &sym, "--top", "1"], &dir.join("cache"));
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("(no symbol)"), "{out}");
    assert!(out.contains("stripped of the symbols naming these addresses"), "{out}");
    assert!(out.contains("(address only)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_huge_function_shows_its_hottest_windows_only() {
    let o = run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), "--top", "1", "--max-instructions", "10"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("over 10: the ") && out.contains("window(s) around the hottest instructions only"), "{out}");
    // The fixture's binary was stripped of its debug sections: no lines, and said so.
    assert!(out.contains("\n   lines: none: no DWARF line information was found for this function"), "{out}");
}

#[test]
fn kernel_functions_need_a_vmlinux_of_the_recorded_build() {
    let pd = data().join("kernel-forwarding.perf.data").display().to_string();
    let ks = data().join("kernel-forwarding.kallsyms.gz").display().to_string();
    let o = run(&["annotate", "-i", &pd, "--kallsyms", &ks, "--top", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("kernel function: kallsyms gives names and addresses only"), "{out}");
    assert!(out.contains("--vmlinux FILE"), "{out}");
    // Another build's image: refused, naming both.
    let me = std::env::current_exe().unwrap();
    let mine = analyzer::symbolize::ElfSymbols::open(&me).unwrap().build_id.unwrap();
    let vm = me.display().to_string();
    let o = run(&["annotate", "-i", &pd, "--kallsyms", &ks, "--top", "1", "--vmlinux", &vm]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(
        err.contains(&format!(
            "build-id {mine}, but the recording's kernel is build-id 48dc540c8b76393804ca8088dbfa7d42911a9444"
        )),
        "{err}"
    );
}

#[test]
fn a_text_profile_has_no_addresses_to_annotate() {
    let p = data().join("perf-report-veth-forwarding.txt").display().to_string();
    let o = run(&["annotate", "-i", &p]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("annotate reads a recording directory (fwdscope record) or a perf.data file"), "{err}");
}

#[test]
fn a_recordings_symbol_map_names_functions_but_gives_addresses_only() {
    let rec = data().join("forwarder-recording").display().to_string();
    let o = run(&["annotate", "-i", &rec, "--top", "1"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("== fwd_nic_generate (fwdscope-forwarder): 575 samples of cpu-clock"), "{out}");
    assert!(out.contains("a symbol map names the function but holds no instruction bytes: addresses only"), "{out}");
    assert!(out.contains("995a5b0c41324fecc8306a59598ccb4bdf6ac0af"), "{out}");
}

/// `--against`: an input set beside itself moves nothing (every line and instruction
/// +0.00, the same counts on both sides, the counts those of the plain annotation); the
/// JSON rows add up to the function's samples on each side.
#[test]
fn an_input_against_itself_moves_nothing() {
    let sym = "fwd_lookup_fib_dir24";
    let o = run(&["annotate", "-i", &fixture(), "--against", &fixture(), "--symfs", &symfs(), sym]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let head = out.lines().find(|l| l.starts_with("== fwd_lookup_fib_dir24")).unwrap_or_default();
    let plain = text(&run(&["annotate", "-i", &fixture(), "--symfs", &symfs(), sym])).0;
    let n = plain
        .lines()
        .find(|l| l.starts_with("== fwd_lookup_fib_dir24"))
        .and_then(|l| l.split("): ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    assert!(head.contains(&format!("A {n} samples")) && head.contains(&format!("B {n} samples")), "{head}\n{plain}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("0x") || l.contains(".rs:")).collect();
    assert!(rows.len() > 3, "{out}");
    assert!(rows.iter().all(|l| l.contains("   +0.00  ")), "{out}");
    let o = run(&["annotate", "-i", &fixture(), "--against", &fixture(), "--symfs", &symfs(), "--format", "json", sym]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let s = &v["symbols"][0];
    let sum = |key: &str, side: &str| s[key].as_array().unwrap().iter().map(|r| r[side].as_u64().unwrap()).sum::<u64>();
    let total = s["a_samples"].as_u64().unwrap();
    assert_eq!(total.to_string(), n);
    for key in ["lines", "instructions"] {
        assert_eq!((sum(key, "a_samples"), sum(key, "b_samples")), (total, total), "{key}");
    }
}

/// A kernel function annotated from a `--vmlinux` of the recorded build, with KASLR: a tiny
/// "kernel" is compiled here (`cc -mcmodel=kernel`, linked at 0xffffffff81000000 with a
/// build-id), a hand-made recording says its kernel was that build-id with `_text` moved
/// up 2 MiB, holds a kallsyms snapshot at the moved addresses, and plants 5, 3 and 7
/// samples on three of `fake_fn`'s instructions (moved addresses). `annotate --vmlinux`
/// must decode `fake_fn` from the image and put each count on its instruction's address
/// as the ELF file states it (objdump's addresses). Skips, saying why, without cc and ld.
#[test]
fn a_kernel_function_is_annotated_from_a_vmlinux_of_its_build() {
    use collector::recording::{Machine, Meta, RecordingWriter, SamplingInfo, FORMAT_VERSION};
    let dir = tmpdir("annotate-vmlinux");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("k.c");
    std::fs::write(
        &src,
        "int fake_fn(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n\
         int fake_other(int x) { return x * 3 + 1; }\n",
    )
    .unwrap();
    let obj = dir.join("k.o");
    let vm = dir.join("vmlinux");
    let cc = std::process::Command::new("cc")
        .args(["-O1", "-mcmodel=kernel", "-fno-pic", "-fno-pie", "-ffreestanding", "-fno-asynchronous-unwind-tables"])
        .args(["-c", "-o"])
        .arg(&obj)
        .arg(&src)
        .status();
    let ld = cc.is_ok_and(|s| s.success())
        && std::process::Command::new("ld")
            .args([
                "-Ttext=0xffffffff81000000",
                "--build-id=sha1",
                "-e",
                "fake_fn",
                "--defsym=_text=0xffffffff81000000",
            ])
            .arg("-o")
            .arg(&vm)
            .arg(&obj)
            .status()
            .is_ok_and(|s| s.success());
    if !ld {
        println!("SKIP: no cc and ld to build a kernel image here");
        return;
    }
    let build_id = analyzer::symbolize::ElfSymbols::open(&vm).unwrap().build_id.expect("a build-id");
    // fake_fn's instructions as objdump gives them: (address, text).
    let dump = std::process::Command::new("objdump").args(["-d", "--no-show-raw-insn"]).arg(&vm).output().unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    let body = dump.split("<fake_fn>:").nth(1).expect("fake_fn in objdump").split("\n\n").next().unwrap().to_string();
    let insns: Vec<u64> =
        body.lines().filter_map(|l| u64::from_str_radix(l.trim().split(':').next()?.trim(), 16).ok()).collect();
    assert!(insns.len() >= 6, "{body}");
    let other = dump
        .lines()
        .find(|l| l.ends_with("<fake_other>:"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .expect("fake_other");
    const SHIFT: u64 = 0x20_0000;
    let rec = dir.join("rec");
    let mut w = RecordingWriter::create(&rec, true).unwrap();
    let planted = [(insns[0], 5u64), (insns[2], 3), (insns[4], 7)];
    let mut t = 0;
    for (addr, n) in planted {
        for _ in 0..n {
            t += 1;
            w.push_sample(collector::records::Sample {
                time: t,
                pid: 0,
                tid: 0,
                cpu: 0,
                ip: addr + SHIFT,
                period: 1,
                kernel: true,
                callchain: vec![],
            });
        }
    }
    w.flush().unwrap();
    w.write_maps_and_tasks().unwrap();
    let text_at = 0xffff_ffff_8100_0000u64 + SHIFT;
    std::fs::write(
        rec.join("kallsyms"),
        format!(
            "{text_at:016x} T _text\n{:016x} T fake_fn\n{:016x} T fake_other\n{:016x} T _etext\n",
            insns[0] + SHIFT,
            other + SHIFT,
            other + SHIFT + 0x100
        ),
    )
    .unwrap();
    let meta = Meta {
        format: "fwdscope-recording".into(),
        version: FORMAT_VERSION,
        sampling: SamplingInfo { requested: "cpu-clock".into(), used: "cpu-clock".into(), ..Default::default() },
        machine: Machine {
            kernel_build_id: Some(build_id.clone()),
            kernel_text: Some(format!("{text_at:#x}")),
            ..Default::default()
        },
        samples: 15,
        status: "complete".into(),
        ..Default::default()
    };
    w.write_meta(&meta).unwrap();
    let o = run(&[
        "annotate",
        "-i",
        rec.to_str().unwrap(),
        "--vmlinux",
        vm.to_str().unwrap(),
        "--format",
        "json",
        "fake_fn",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let s = &v["symbols"][0];
    assert_eq!(s["symbol"], "fake_fn");
    assert_eq!(s["samples"], 15);
    assert!(s["source"].as_str().unwrap().contains(&build_id), "{}", s["source"]);
    let rows = s["instructions"].as_array().unwrap();
    let addrs: Vec<u64> = rows.iter().map(|r| r["address"].as_u64().unwrap()).collect();
    assert_eq!(addrs, insns, "the instructions objdump lists, at the image's addresses");
    for r in rows {
        let a = r["address"].as_u64().unwrap();
        let want = planted.iter().find(|(p, _)| *p == a).map_or(0, |(_, n)| *n);
        assert_eq!(r["samples"].as_u64().unwrap(), want, "{a:#x}: {r}");
        assert!(r["text"].as_str().is_some_and(|t| !t.is_empty()), "not decoded: {r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// binutils' `addr2line -i -f -C` (a DWARF reader independent of this project's) for each
/// of `addrs` in `bin`: its functions, innermost inlined one first, the real one last.
fn binutils_chains(bin: &str, addrs: &[u64]) -> Vec<Vec<String>> {
    let args: Vec<String> = addrs.iter().map(|a| format!("{a:#x}")).collect();
    let o =
        std::process::Command::new("addr2line").args(["-a", "-i", "-f", "-C", "-e", bin]).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Per address: the address line, then pairs of lines (function, FILE:LINE).
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut lines = String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect::<Vec<_>>().into_iter();
    while let Some(l) = lines.next() {
        if l.starts_with("0x") {
            out.push(Vec::new());
        } else if let Some(chain) = out.last_mut() {
            chain.push(l);
            lines.next(); // FILE:LINE
        }
    }
    assert_eq!(out.len(), addrs.len());
    out
}

/// A function with no symbol of its own (Dir24::resolve, inlined into the FIB's batch
/// lookup) is annotated where it was inlined. A live recording of the bundled forwarder
/// (its binary has DWARF): the short name is answered with the full one marked
/// `(inlined)`; the full name gives, per function it was inlined into, exactly the
/// instructions binutils' addr2line places in its inline chain (checked against the whole
/// function's annotation: every such instruction, with the same samples, and no other),
/// and its samples are theirs. `--against` itself moves nothing. Skips without perf or
/// binutils.
#[test]
fn an_inlined_function_is_annotated_where_it_was_inlined() {
    if !common::perf_allows(common::Need::Sample) || !common::have("addr2line", &[]) {
        return;
    }
    let dir = tmpdir("annotate-inlined");
    let o = common::fwdscope()
        .args(["record", "-F", "4000", "-o"])
        .arg(&dir)
        .args(["--", "--duration", "1.5", "--cache", "nocache", "--fib", "dir24", "--no-pin"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rec = dir.display().to_string();
    let want = "forwarder::fib::dir24::Dir24::resolve";
    let (_, err) = text(&run(&["annotate", "-i", &rec, "Dir24::resolve"]));
    assert!(err.contains(&format!("nearest names: `{want}` (inlined)")), "{err}");
    assert!(err.contains("more functions are inlined at their addresses"), "{err}");

    let o = run(&["annotate", "-i", &rec, "--format", "json", want]);
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let copies = v["symbols"].as_array().unwrap();
    assert!(!copies.is_empty());
    for c in copies {
        let into = c["inlined_into"].as_str().expect("inlined_into").to_string();
        assert_eq!(c["symbol"], want);
        let rows = c["instructions"].as_array().unwrap();
        let n = c["samples"].as_u64().unwrap();
        assert!(n > 0);
        assert_eq!(rows.iter().map(|r| r["samples"].as_u64().unwrap()).sum::<u64>(), n, "{into}: rows lose samples");
        // The whole function, annotated as itself: its rows whose binutils chain holds
        // `want` (not as the function itself) are exactly the copy's, samples and all.
        let o = run(&["annotate", "-i", &rec, "--format", "json", &into]);
        assert!(o.status.success(), "{}", text(&o).1);
        let whole: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
        let all = whole["symbols"][0]["instructions"].as_array().unwrap();
        let addrs: Vec<u64> = all.iter().map(|r| r["address"].as_u64().unwrap()).collect();
        let chains = binutils_chains(common::BIN, &addrs);
        let expected: Vec<(u64, u64)> = all
            .iter()
            .zip(&chains)
            .filter(|(_, ch)| ch.iter().take(ch.len().saturating_sub(1)).any(|f| f == want))
            .map(|(r, _)| (r["address"].as_u64().unwrap(), r["samples"].as_u64().unwrap()))
            .collect();
        assert!(chains.iter().all(|ch| ch.last() == Some(&into)), "{into}: binutils names another function");
        let got: Vec<(u64, u64)> =
            rows.iter().map(|r| (r["address"].as_u64().unwrap(), r["samples"].as_u64().unwrap())).collect();
        assert_eq!(got, expected, "{into}: the copy's instructions against binutils' inline chains");
        println!("{want} inlined into {into}: {n} samples on {} instructions", got.len());
    }

    let o = run(&["annotate", "-i", &rec, "--against", &rec, want]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains(&format!("== {want} inlined into ")), "{out}");
    let plain = text(&run(&["annotate", "-i", &rec, want])).0;
    assert!(plain.contains("\n   lines: DWARF (source lines and inline frames)\n"), "{plain}");
    let rows: Vec<&str> = out.lines().filter(|l| l.contains(".rs:")).collect();
    assert!(!rows.is_empty() && rows.iter().all(|l| l.contains("   +0.00  ")), "{out}");
    assert!(!out.contains("no samples in B"), "{out}");
    several_copies_against_the_whole_functions(&rec);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The function inlined with samples into the most of the top eight functions (found from
/// their own annotations' inline chains): one copy per function, each with the samples of
/// that function's instructions whose chain holds it; none "inlined into" itself; and
/// beside itself (`--against`) each copy has the same samples in A and B, nothing B-only.
fn several_copies_against_the_whole_functions(rec: &str) {
    use std::collections::BTreeMap;
    let o = run(&["annotate", "-i", rec, "--top", "8", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let mut by_name: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for s in v["symbols"].as_array().unwrap() {
        let outer = s["symbol"].as_str().unwrap();
        for r in s["instructions"].as_array().unwrap() {
            let n = r["samples"].as_u64().unwrap();
            let frames: Vec<&str> =
                r["frames"].as_array().unwrap().iter().map(|f| f["function"].as_str().unwrap()).collect();
            let mut inlined: Vec<&str> = frames.iter().take(frames.len().saturating_sub(1)).copied().collect();
            inlined.sort_unstable();
            inlined.dedup();
            for f in inlined.into_iter().filter(|f| *f != outer && n > 0) {
                *by_name.entry(f.to_string()).or_default().entry(outer.to_string()).or_default() += n;
            }
        }
    }
    let (name, outers) = by_name
        .iter()
        .max_by_key(|(_, o)| (o.len(), o.values().sum::<u64>()))
        .expect("functions inlined into the top eight");
    assert!(outers.len() >= 2, "no function is inlined with samples into two of the top eight: {by_name:?}");
    let o = run(&["annotate", "-i", rec, "--format", "json", name]);
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let copies: BTreeMap<String, u64> = v["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| Some((c["inlined_into"].as_str()?.to_string(), c["samples"].as_u64().unwrap())))
        .collect();
    assert!(!copies.contains_key(name.as_str()), "{name} inlined into itself");
    for (outer, n) in outers {
        assert_eq!(copies.get(outer), Some(n), "{name} inlined into {outer}: {copies:?}");
    }
    println!("{name}: {} copies, {outers:?} checked", copies.len());
    let o = run(&["annotate", "-i", rec, "--against", rec, "--format", "json", name]);
    assert!(o.status.success(), "{}", text(&o).1);
    let d: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let pairs: Vec<(u64, u64)> = d["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["a_samples"].as_u64().unwrap(), s["b_samples"].as_u64().unwrap()))
        .collect();
    assert!(pairs.len() >= 2 && pairs.iter().all(|(a, b)| a == b), "{pairs:?}");
    assert!(d["warnings"].as_array().unwrap().iter().all(|w| !w.as_str().unwrap().contains("B only")), "{d}");
}
