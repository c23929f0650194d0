//! DWARF symbolization against GNU binutils: 1000 pseudo-random addresses in the `.text`
//! of this test binary (which links the forwarder, collector and analyzer) are resolved by
//! the analyzer (function, file and line of every inline frame) and by `addr2line -f -i -C`;
//! the frame lists must agree. Where the linker folded identical functions into one body
//! (identical code folding), one address has several names: when every inner frame and the
//! outermost frame's file:line agree and only that outermost name differs, the two tools
//! picked different aliases of the same code, and the address counts as agreeing (the
//! number is printed and must stay under 1%).

use analyzer::symbolize::{ElfSymbols, Frame};
use object::{Object, ObjectSection, ObjectSymbol};
use std::io::Write;
use std::process::{Command, Stdio};

/// Parse `addr2line -a -f -i` output: an `0x...` line, then function/location pairs.
fn parse_binutils(out: &str) -> Vec<(u64, Vec<(String, String)>)> {
    let mut res: Vec<(u64, Vec<(String, String)>)> = Vec::new();
    let mut lines = out.lines().peekable();
    while let Some(l) = lines.next() {
        if let Some(hex) = l.strip_prefix("0x") {
            res.push((u64::from_str_radix(hex, 16).unwrap(), Vec::new()));
            continue;
        }
        let loc = lines.next().expect("location line after function line");
        // Drop a trailing " (discriminator N)".
        let loc = loc.split(" (discriminator").next().unwrap();
        // A unit without a line table: binutils names the unit (or `??`) with line `?`;
        // we report no location for it.
        let loc = if loc.ends_with(":?") { "??:0".to_string() } else { loc.to_string() };
        res.last_mut().expect("address first").1.push((l.to_string(), loc));
    }
    res
}

/// Our frames in binutils' notation (`??` and `??:0` for unknowns).
fn ours(frames: &[Frame]) -> Vec<(String, String)> {
    if frames.is_empty() {
        return vec![("??".into(), "??:0".into())];
    }
    frames
        .iter()
        .map(|f| {
            let loc = match (&f.file, f.line) {
                (Some(file), Some(line)) => format!("{file}:{line}"),
                // Line 0 (no source correspondence): binutils prints `??:0`.
                _ => "??:0".into(),
            };
            (f.function.clone(), loc)
        })
        .collect()
}

#[test]
fn dwarf_frames_match_binutils_addr2line() {
    if Command::new("addr2line").arg("--version").output().is_err() {
        println!("SKIP: binutils addr2line is not installed");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let data = std::fs::read(&exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").expect(".text");
    let (lo, size) = (text.address(), text.size());
    // Function extents from the symbol table: addresses in the alignment padding between
    // functions are never sampled and binutils guesses a neighbour there, so skip them.
    let mut funcs: Vec<(u64, u64)> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.address() + s.size()))
        .collect();
    funcs.sort();
    let inside = |a: u64| {
        let i = funcs.partition_point(|f| f.0 <= a);
        funcs[..i].iter().rev().take(64).any(|f| a < f.1)
    };
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut addrs: Vec<u64> = Vec::new();
    while addrs.len() < 1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = lo + x % size;
        if inside(a) {
            addrs.push(a);
        }
    }

    let mut child = Command::new("addr2line")
        .args(["-a", "-f", "-i", "-C", "-e"])
        .arg(&exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for a in &addrs {
        input.push_str(&format!("{a:#x}\n"));
    }
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let theirs = parse_binutils(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(theirs.len(), addrs.len());

    let elf = ElfSymbols::load(&exe).unwrap();
    assert!(elf.has_dwarf(), "the test binary has DWARF");
    let mut mismatches = Vec::new();
    let mut with_lines = 0;
    let mut folded = 0;
    for (a, (ta, tf)) in addrs.iter().zip(&theirs) {
        assert_eq!(a, ta);
        let mine = ours(&elf.frames_at_vaddr(analyzer::symbolize::Svma(*a)));
        if mine.iter().any(|f| f.1 != "??:0") {
            with_lines += 1;
        }
        if &mine != tf {
            let n = mine.len();
            let alias = n > 0
                && n == tf.len()
                && mine[..n - 1] == tf[..n - 1]
                && mine[n - 1].1 == tf[n - 1].1
                && mine[n - 1].1 != "??:0";
            if alias {
                folded += 1;
            } else {
                mismatches.push(format!("{a:#x}:\n  ours:     {mine:?}\n  binutils: {tf:?}"));
            }
        }
    }
    println!(
        "{} addresses, {} with source lines, {} folded aliases, {} mismatches",
        addrs.len(),
        with_lines,
        folded,
        mismatches.len()
    );
    assert!(folded < addrs.len() / 100, "{folded} folded aliases: too many to be identical code folding");
    assert!(with_lines > 100, "too few addresses with DWARF lines to compare: {with_lines}");
    assert!(
        mismatches.is_empty(),
        "{} of 1000 differ:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(400)].join("\n")
    );
}
