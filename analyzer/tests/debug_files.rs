//! Debug files by build-id: a distribution's libc is stripped to its dynamic symbols, and
//! its internal functions (the memmove variants a profile of packet copies lands in) are
//! named only in `/usr/lib/debug/.build-id/NN/REST.debug` (Debian's libc6-dbg; CI installs
//! it). The analyzer must name them as binutils' `nm` reads them from that file, and must
//! not without it. Skips, saying why, where the debug file is not installed.

use analyzer::symbolize::{ElfSymbols, Svma, DEBUG_ROOT};
use std::collections::{HashMap, HashSet};
use std::process::Command;

/// The libc this test process has mapped.
fn libc_path() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().filter_map(|l| l.split_whitespace().nth(5)).find(|p| p.contains("/libc.so")).map(str::to_string)
}

/// `nm -S --defined-only FILE`: address -> names of local or global text symbols of at
/// least `min_size` bytes.
fn nm_text(file: &str, dynamic: bool, min_size: u64) -> HashMap<u64, HashSet<String>> {
    let mut cmd = Command::new("nm");
    cmd.args(["-S", "--defined-only"]);
    if dynamic {
        cmd.arg("-D");
    }
    let out = cmd.arg(file).output().expect("nm (binutils)");
    let mut m: HashMap<u64, HashSet<String>> = HashMap::new();
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() != 4 || !matches!(f[2], "t" | "T" | "i" | "W" | "w") {
            continue;
        }
        let (Ok(addr), Ok(size)) = (u64::from_str_radix(f[0], 16), u64::from_str_radix(f[1], 16)) else { continue };
        if size >= min_size {
            m.entry(addr).or_default().insert(f[3].split('@').next().unwrap_or(f[3]).to_string());
        }
    }
    m
}

#[test]
fn libc_internal_functions_are_named_from_its_debug_file() {
    let Some(libc) = libc_path() else {
        println!("SKIP: no libc.so mapped in this process");
        return;
    };
    let with = ElfSymbols::load(std::path::Path::new(&libc)).expect("libc loads");
    let id = with.build_id.clone().expect("Debian's libc has a build-id");
    let want = std::path::Path::new(DEBUG_ROOT).join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
    if !want.exists() {
        println!("SKIP: no debug file {} for {libc}: install libc6-dbg", want.display());
        return;
    }
    let dbg = with.debug_file.clone().expect("the installed debug file is found");
    assert_eq!(dbg, want);
    let without = ElfSymbols::load_with_debug(std::path::Path::new(&libc), None).expect("libc loads");
    assert!(without.debug_file.is_none());
    let all = nm_text(&dbg.display().to_string(), false, 32);
    let exported = nm_text(&libc, true, 1);
    // Functions only the debug file names: their start addresses appear in no dynamic symbol.
    let internal: Vec<(&u64, &HashSet<String>)> = all.iter().filter(|(a, _)| !exported.contains_key(a)).collect();
    assert!(internal.len() > 100, "libc's debug file names its internal functions: {}", internal.len());
    let mut named = 0;
    for (addr, names) in &internal {
        let got = with.at_vaddr(Svma(*addr + 1)).map(str::to_string);
        assert!(got.as_ref().is_some_and(|g| names.contains(g)), "{addr:#x}: nm says {names:?}, we say {got:?}");
        named += 1;
        let before = without.at_vaddr(Svma(*addr + 1)).map(str::to_string);
        assert!(before.is_none_or(|b| !names.contains(&b)), "{addr:#x} was named without the debug file");
    }
    let memmove = internal.iter().any(|(_, n)| n.iter().any(|s| s.starts_with("__memmove_avx")));
    println!("{named} internal libc functions named from {} (a memmove variant among them: {memmove})", dbg.display());
}
