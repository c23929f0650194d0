//! Kernel samples are named only with symbols of the kernel build the file recorded.
//!
//! - The golden perf.data (tests/data, recorded on another kernel build than most machines
//!   run) against a stand-in for "this machine" whose build-id is and is not the recorded
//!   one: named only when it is.
//! - A perf.data recorded here (root and perf needed; skipped with a reason otherwise),
//!   then the same file with its kernel build-id doctored: not one kernel sample may get
//!   a name from this machine's kallsyms.

use analyzer::perfdata::{read_perf_data, read_perf_data_with_kernel};
use analyzer::rules::{Rules, KERNEL_UNKNOWN};
use analyzer::stages::perfdata_table_with;
use analyzer::symbolize::kernel::{KernelLookup, KernelSymbols, ThisMachine};
use analyzer::symbolize::Symbolizer;
use std::path::{Path, PathBuf};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fwdscope-kid-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An ELF notes blob holding one GNU build-id (hex).
fn notes(id: &str) -> Vec<u8> {
    let bytes: Vec<u8> = (0..id.len()).step_by(2).map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap()).collect();
    let mut v = Vec::new();
    v.extend_from_slice(&4u32.to_le_bytes());
    v.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    v.extend_from_slice(&3u32.to_le_bytes());
    v.extend_from_slice(b"GNU\0");
    v.extend_from_slice(&bytes);
    v
}

/// A stand-in for this machine: notes file `notes` in `d`, kallsyms `ks`, no modules.
fn machine(d: &Path, notes: &str, ks: PathBuf) -> ThisMachine {
    ThisMachine { notes: d.join(notes), kallsyms: ks, modules: d.join("module") }
}

fn kernel_named(path: &Path, look: &KernelLookup) -> (u64, u64, KernelSymbols) {
    let (pd, ks) = read_perf_data_with_kernel(path, look, true).unwrap();
    let source = KernelSymbols { source: ks.source.clone(), warnings: ks.warnings.clone(), ..Default::default() };
    let t = perfdata_table_with(&pd, Symbolizer::with_kernel(pd.maps.clone(), ks), &Rules::builtin()).unwrap();
    let kernel = |named: bool| {
        t.symbols
            .iter()
            .filter(|s| s.dso == "[kernel.kallsyms]" && (s.stage != KERNEL_UNKNOWN) == named)
            .map(|s| s.samples)
            .sum::<u64>()
    };
    (kernel(true), kernel(false), source)
}

#[test]
fn the_golden_file_is_named_only_by_a_kernel_of_its_build() {
    let file = data().join("kernel-forwarding.perf.data");
    let pd = read_perf_data(&file).unwrap();
    let recorded = pd.kernel.build_id.clone().expect("perf record writes the kernel's build-id");
    assert_eq!(recorded, "48dc540c8b76393804ca8088dbfa7d42911a9444");
    assert_eq!(pd.kernel.reference, Some(("_text".to_string(), 0xffffffff81000000)));
    let d = tmp("golden");
    let ks = d.join("kallsyms");
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(data().join("kernel-forwarding.kallsyms.gz")).unwrap()),
        &mut text,
    )
    .unwrap();
    std::fs::write(&ks, text).unwrap();
    // "This machine" runs the recorded build: every kernel sample is named.
    std::fs::write(d.join("notes-same"), notes(&recorded)).unwrap();
    let look =
        KernelLookup { given: None, buildid_dir: None, this_machine: Some(machine(&d, "notes-same", ks.clone())) };
    let (named, unnamed, src) = kernel_named(&file, &look);
    assert!(named > 2000 && unnamed == 0, "named {named}, unnamed {unnamed}: {}", src.source);
    // Another build with the same kallsyms text: not one kernel sample gets a name.
    std::fs::write(d.join("notes-other"), notes(&"ab".repeat(20))).unwrap();
    let look =
        KernelLookup { given: None, buildid_dir: None, this_machine: Some(machine(&d, "notes-other", ks.clone())) };
    let (named, unnamed, src) = kernel_named(&file, &look);
    assert_eq!(named, 0, "{}", src.source);
    assert!(unnamed > 2000);
    assert!(src.warnings[0].contains(&recorded) && src.warnings[0].contains("--kallsyms"), "{:?}", src.warnings);
    // The same symbols from perf's build-id cache under the recorded build-id: named.
    let cache = d.join("debug");
    std::fs::create_dir_all(cache.join("[kernel.kallsyms]").join(&recorded)).unwrap();
    std::fs::copy(&ks, cache.join("[kernel.kallsyms]").join(&recorded).join("kallsyms")).unwrap();
    let look =
        KernelLookup { given: None, buildid_dir: Some(cache), this_machine: Some(machine(&d, "notes-other", ks)) };
    let (named, unnamed, src) = kernel_named(&file, &look);
    assert!(named > 2000 && unnamed == 0, "{}", src.source);
    assert!(src.source.contains("build-id cache"), "{}", src.source);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_kallsyms_from_another_boot_is_moved_and_warned_of() {
    // The golden kallsyms moved by 16 MiB, as another boot's KASLR would place it.
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(data().join("kernel-forwarding.kallsyms.gz")).unwrap()),
        &mut text,
    )
    .unwrap();
    let moved: String = text
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(' ')?;
            Some(format!("{:016x} {rest}\n", u64::from_str_radix(a, 16).ok()?.wrapping_add(0x100_0000)))
        })
        .collect();
    let d = tmp("moved");
    std::fs::write(d.join("k"), moved).unwrap();
    let file = data().join("kernel-forwarding.perf.data");
    let look = KernelLookup { given: Some(d.join("k")), buildid_dir: None, this_machine: None };
    let (named, unnamed, src) = kernel_named(&file, &look);
    assert!(
        src.warnings.iter().any(|w| w.contains("0xffffffff82000000") && w.contains("0xffffffff81000000")),
        "the warning names both addresses: {:?}",
        src.warnings
    );
    assert!(named > 2000 && unnamed == 0, "{}", src.source);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Replace every occurrence of `from` in `bytes` by `to`; how many.
fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= bytes.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    n
}

#[test]
fn a_perf_data_recorded_here_with_a_doctored_build_id_gets_no_kernel_name() {
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: needs root (perf record -a and a readable /proc/kallsyms)");
        return;
    }
    let Some(running) = analyzer::symbolize::kernel::running_build_id(Path::new("/sys/kernel/notes")) else {
        println!("skipped: /sys/kernel/notes has no build-id on this machine");
        return;
    };
    let d = tmp("doctored");
    let file = d.join("here.perf.data");
    let st = std::process::Command::new("perf")
        .args(["record", "-q", "-a", "-e", "cpu-clock", "-F", "2000", "-o"])
        .arg(&file)
        .args(["--", "sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; cat /proc/kallsyms > /dev/null"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    if !st.is_ok_and(|s| s.success()) {
        println!("skipped: perf record failed or is not installed");
        return;
    }
    let look = KernelLookup { buildid_dir: None, ..KernelLookup::default() };
    let (named, _, src) = kernel_named(&file, &look);
    assert!(named > 0, "recorded here, this kernel names its samples: {}", src.source);
    assert!(src.source.contains("matches the running kernel"), "{}", src.source);
    // Doctor the kernel's build-id in the file's build-id table.
    let id: Vec<u8> =
        (0..running.len()).step_by(2).map(|i| u8::from_str_radix(&running[i..i + 2], 16).unwrap()).collect();
    let mut doctored_id = id.clone();
    doctored_id[0] ^= 0xff;
    let mut bytes = std::fs::read(&file).unwrap();
    assert!(replace_all(&mut bytes, &id, &doctored_id) >= 1, "the build-id table holds the running kernel's id");
    let bad = d.join("doctored.perf.data");
    std::fs::write(&bad, bytes).unwrap();
    let (named, unnamed, src) = kernel_named(&bad, &look);
    assert_eq!(named, 0, "a kernel sample got a name from a kernel of another build: {}", src.source);
    assert!(unnamed > 0);
    let want: String = doctored_id.iter().map(|b| format!("{b:02x}")).collect();
    assert!(src.warnings.iter().any(|w| w.contains(&want)), "{:?}", src.warnings);
    std::fs::remove_dir_all(&d).unwrap();
}
