//! The workspace's layout holds: no module of any crate depends on a sibling that depends
//! back on it (directly or around a longer loop), the forwarder's burst and CPU modules are
//! leaves, and the observers (collector, analyzer, tui, exporter) reach the forwarder only through
//! its published ABI crate, never by linking the forwarder library; no function outside
//! tests and benches runs over 80 lines unless a `// One piece:` comment above it says
//! why; the CLI crate (src/) stays under 700 lines, its verbs' flags and logic living in
//! the libraries.
//!
//! Module dependencies are read from the sources: every `crate::a::b` path (in `use` lists
//! too) and every `super::` path, comments and string literals left out. A reference from
//! module M to module T counts between the two children of their lowest common ancestor
//! that lead to M and to T; a module using its own ancestor or descendant is not a sibling
//! dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CRATES: [&str; 8] = [".", "fwd-abi", "forwarder-under-test", "collector", "analyzer", "compare", "lab", "tui"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// Source text without comments and string literals (replaced by spaces; the newlines
/// they held are kept, so line numbers stay).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let rest = &src[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            i += end;
            out.push(' ');
            out.extend(rest[..end].matches('\n').map(|_| '\n'));
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].bytes().take_while(|&c| c == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = 1 + hashes + 1;
            let end = rest[start..].find(&close).map_or(rest.len(), |e| start + e + close.len());
            i += end;
            out.push(' ');
            out.extend(rest[..end].matches('\n').map(|_| '\n'));
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // An escaped char literal: '\n', '\'', '\u{..}'.
            let end = src[i + 2..].find('\'').map_or(b.len(), |e| i + 2 + e + 1);
            i = end;
            out.push(' ');
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A one-byte char literal such as '"' (a lifetime has no closing quote).
            i += 3;
            out.push(' ');
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push(' ');
            out.extend(src[i..j.min(b.len())].matches('\n').map(|_| '\n'));
            i = j + 1;
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// Paths in a `use` tree or path starting right after `prefix::`: `a::b::C`, `{a, b::{c, D}}`.
fn paths_after(s: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix('{') {
        // Split the group at top-level commas.
        let mut depth = 0;
        let mut start = 0;
        for (k, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    paths_after(&inner[start..k], base.clone(), out);
                    return;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    paths_after(&inner[start..k], base.clone(), out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let id = ident_at(s);
    if id.is_empty() {
        out.push(base);
        return;
    }
    let mut p = base;
    p.push(id.to_string());
    let rest = &s[id.len()..];
    match rest.strip_prefix("::") {
        Some(r) => paths_after(r, p, out),
        None => out.push(p),
    }
}

/// A crate's modules (path from the crate root) and each one's referenced paths (absolute).
fn modules(src_dir: &Path) -> BTreeMap<Vec<String>, Vec<Vec<String>>> {
    let mut files = Vec::new();
    let mut stack = vec![src_dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "bin") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src_dir).unwrap();
        let mut m: Vec<String> = rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
        if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
            m.pop();
        }
        let code = code_only(&std::fs::read_to_string(&f).unwrap());
        let mut refs = Vec::new();
        for (at, _) in code.match_indices("crate::") {
            let before = code[..at].chars().last().unwrap_or(' ');
            if before.is_ascii_alphanumeric() || before == '_' || before == '$' {
                continue;
            }
            paths_after(&code[at + 7..], Vec::new(), &mut refs);
        }
        for (at, _) in code.match_indices("super::") {
            let before = code[..at].chars().last().unwrap_or(' ');
            if before.is_ascii_alphanumeric() || before == '_' || before == ':' {
                continue;
            }
            // `super::super::x` climbs twice.
            let mut base = m.clone();
            let mut rest = &code[at..];
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
            paths_after(rest, base, &mut refs);
        }
        out.insert(m, refs);
    }
    out
}

/// The module a path names: its longest prefix that is a module.
fn module_of(path: &[String], mods: &BTreeSet<Vec<String>>) -> Vec<String> {
    (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| mods.contains(p)).unwrap_or_default()
}

/// Sibling edges: (parent, from child, to child).
fn sibling_edges(mods: &BTreeMap<Vec<String>, Vec<Vec<String>>>) -> BTreeSet<(Vec<String>, String, String)> {
    let names: BTreeSet<Vec<String>> = mods.keys().cloned().collect();
    let mut edges = BTreeSet::new();
    for (m, refs) in mods {
        for r in refs {
            let t = module_of(r, &names);
            let common = m.iter().zip(&t).take_while(|(a, b)| a == b).count();
            if common < m.len() && common < t.len() {
                edges.insert((m[..common].to_vec(), m[common].clone(), t[common].clone()));
            }
        }
    }
    edges
}

/// Cycles among siblings: for each parent, every strongly connected set of two or more.
fn cycles(edges: &BTreeSet<(Vec<String>, String, String)>) -> Vec<String> {
    let mut by_parent: BTreeMap<&Vec<String>, BTreeMap<&str, BTreeSet<&str>>> = BTreeMap::new();
    for (p, a, b) in edges {
        by_parent.entry(p).or_default().entry(a).or_default().insert(b);
    }
    let mut found = Vec::new();
    for (p, g) in by_parent {
        let reach = |from: &str| {
            let mut seen = BTreeSet::new();
            let mut todo = vec![from];
            while let Some(x) = todo.pop() {
                for &y in g.get(x).into_iter().flatten() {
                    if seen.insert(y) {
                        todo.push(y);
                    }
                }
            }
            seen
        };
        for &a in g.keys() {
            let from_a = reach(a);
            let loop_: Vec<&str> = from_a.iter().copied().filter(|b| *b != a && reach(b).contains(a)).collect();
            if !loop_.is_empty() {
                found.push(format!("in `{}`: {a} <-> {}", p.join("::"), loop_.join(", ")));
            }
        }
    }
    found
}

#[test]
fn the_cycle_finder_finds_a_planted_cycle() {
    let mut mods = BTreeMap::new();
    let m = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
    mods.insert(vec![], vec![]);
    mods.insert(m("a"), vec![m("b::f")]);
    mods.insert(m("b"), vec![m("c::X")]);
    mods.insert(m("c"), vec![m("a::Y")]);
    mods.insert(m("d"), vec![m("a")]);
    mods.insert(m("a::x"), vec![m("a::y::Z"), m("a")]);
    mods.insert(m("a::y"), vec![]);
    let c = cycles(&sibling_edges(&mods));
    assert_eq!(c.len(), 3, "{c:?}");
    assert!(c.iter().all(|l| l.starts_with("in ``: ")), "{c:?}");
    let mut refs = Vec::new();
    paths_after("{a::{B, c}, d, self}", vec!["m".into()], &mut refs);
    assert_eq!(refs, vec![m("m::a::B"), m("m::a::c"), m("m::d"), m("m::self")]);
    assert_eq!(code_only("x // crate::a\n\"crate::b\" r#\"crate::c\"# y"), "x \n    y");
}

#[test]
fn no_module_cycle_in_any_crate() {
    let mut all = Vec::new();
    for c in CRATES {
        let mods = modules(&root().join(c).join("src"));
        assert!(mods.len() > 1, "{c}: no modules found");
        for line in cycles(&sibling_edges(&mods)) {
            all.push(format!("{c}: {line}"));
        }
    }
    assert!(all.is_empty(), "module cycles:\n{}", all.join("\n"));
}

#[test]
fn the_forwarders_burst_and_cpu_modules_are_leaves() {
    let mods = modules(&root().join("forwarder-under-test/src"));
    let names: BTreeSet<Vec<String>> = mods.keys().cloned().collect();
    for (leaf, allowed) in [("cpu", vec![]), ("burst", vec!["cpu"])] {
        let used: BTreeSet<String> = mods[&vec![leaf.to_string()]]
            .iter()
            .map(|r| module_of(r, &names).join("::"))
            .filter(|t| !t.is_empty() && t != leaf)
            .collect();
        let extra: Vec<&String> = used.iter().filter(|u| !allowed.contains(&u.as_str())).collect();
        assert!(extra.is_empty(), "{leaf} uses {extra:?}");
    }
}

/// A crate's normal dependencies among the workspace crates, by package name.
fn workspace_deps(dir: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    doc.get("dependencies")
        .and_then(|d| d.as_table())
        .map(|t| t.iter().filter(|(_, v)| v.get("path").is_some()).map(|(k, _)| k.clone()).collect())
        .unwrap_or_default()
}

#[test]
fn observers_reach_the_forwarder_only_through_its_abi() {
    fn dir_of(pkg: &str) -> &str {
        if pkg == "fwdscope" {
            "."
        } else {
            pkg
        }
    }
    for observer in ["fwd-abi", "collector", "analyzer", "tui", "exporter"] {
        let mut seen = BTreeSet::new();
        let mut todo = vec![observer.to_string()];
        while let Some(p) = todo.pop() {
            for d in workspace_deps(dir_of(&p)) {
                if seen.insert(d.clone()) {
                    todo.push(d);
                }
            }
        }
        assert!(!seen.contains("forwarder-under-test"), "{observer} links the forwarder library: {seen:?}");
        if observer != "fwd-abi" {
            assert!(seen.contains("fwd-abi"), "{observer} does not use the forwarder's ABI crate");
        }
    }
}

/// ARCHITECTURE.md's picture draws each library under the CLI with the workspace crates it
/// uses (`name (...) ──▶ a, b, c`): every arrow is a real dependency, and every real
/// dependency is drawn.
#[test]
fn the_architecture_picture_draws_the_real_crate_graph() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut drawn = 0;
    for line in text.lines() {
        // The tree under the CLI: `├── name (...) ──▶ deps` and `└── ...`.
        let t = line.trim_start();
        if !(t.starts_with('├') || t.starts_with('└')) {
            continue;
        }
        let Some((left, right)) = t.split_once("──▶") else { continue };
        let Some(name) = left.trim_start_matches(|c: char| c.is_whitespace() || "├└─".contains(c)).split(' ').next()
        else {
            continue;
        };
        let mut want: Vec<String> = right.split(',').map(|s| s.trim().to_string()).collect();
        let mut have = workspace_deps(name);
        want.sort();
        have.sort();
        assert_eq!(want, have, "ARCHITECTURE.md draws {name} using {want:?}; its Cargo.toml has {have:?}");
        drawn += 1;
    }
    assert_eq!(drawn, 4, "the picture should draw lab, compare, tui and exporter with their dependencies");
    // The crates it names exist.
    for name in CRATES.iter().filter(|c| **c != ".").chain(&["exporter"]) {
        assert!(text.contains(name), "ARCHITECTURE.md does not name {name}");
        assert!(root().join(name).join("Cargo.toml").exists(), "{name} is named but is no crate");
    }
}

/// What a forwarder publishes (`{"config", "info"}`) is read through fwd_abi::Published
/// only: no library outside fwd-abi indexes it by key.
#[test]
fn the_published_configuration_is_read_through_its_type_only() {
    let keyed = ["[\"config\"]", "[\"info\"]", ".get(\"config\")", ".get(\"info\")"];
    for krate in CRATES.iter().chain(&["exporter"]).filter(|c| **c != "fwd-abi") {
        for p in rust_files(&root().join(krate).join("src")) {
            let text = std::fs::read_to_string(&p).unwrap();
            // Unit tests may build JSON by hand.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for k in keyed {
                assert!(!code.contains(k), "{} reads the published configuration by key ({k})", p.display());
            }
        }
    }
}

/// Functions of one source file longer than `max` lines, as (name, first line, lines),
/// leaving out unit tests (what follows `#[cfg(test)]` and a `mod` line) and functions
/// with a `// One piece:` comment among the comments and attributes just above them.
fn long_functions(src: &str, max: usize) -> Vec<(String, usize, usize)> {
    let code = code_only(src);
    let code: Vec<&str> = code.lines().collect();
    let orig: Vec<&str> = src.lines().collect();
    let end = (0..orig.len())
        .find(|&i| {
            orig[i].trim() == "#[cfg(test)]" && orig.get(i + 1).is_some_and(|l| l.trim_start().starts_with("mod "))
        })
        .unwrap_or(orig.len());
    let mut out = Vec::new();
    for i in 0..end.min(code.len()) {
        let words: Vec<&str> = code[i].split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else { continue };
        let before_ok = words[..at].iter().all(|w| {
            w.starts_with("pub") || ["const", "async", "unsafe", "extern", "default"].contains(w) || w.is_empty()
        });
        if !before_ok || at + 1 >= words.len() {
            continue;
        }
        let name: String = words[at + 1].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // Its body: from the first `{` (a `;` first means no body) to the matching `}`.
        let (mut depth, mut opened, mut last) = (0i64, false, None);
        'lines: for (j, line) in code.iter().enumerate().skip(i) {
            for c in line.chars() {
                match c {
                    ';' if !opened => break 'lines,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
                if opened && depth == 0 {
                    last = Some(j);
                    break 'lines;
                }
            }
        }
        let Some(last) = last else { continue };
        let lines = last - i + 1;
        let said = orig[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with("//") || t.starts_with("#[")
            })
            .any(|l| l.trim_start().starts_with("// One piece:"));
        if lines > max && !said {
            out.push((name, i + 1, lines));
        }
    }
    out
}

#[test]
fn the_function_length_check_finds_a_planted_long_function() {
    let body: String = (0..85).map(|i| format!("    let x{i} = \"{{\"; // }}\n")).collect();
    let long = format!("/// Doc.\npub(crate) fn planted(a: u8) -> u8 {{\n{body}    a\n}}\n");
    assert_eq!(long_functions(&long, 80), vec![("planted".to_string(), 2, 88)]);
    let said = long.replace("/// Doc.\n", "/// Doc.\n// One piece: a planted table.\n");
    assert!(long_functions(&said, 80).is_empty());
    let in_tests = format!("#[cfg(test)]\nmod tests {{\n{long}}}\n");
    assert!(long_functions(&in_tests, 80).is_empty());
    assert!(long_functions("fn short() {\n}\ntrait T {\n    fn f(&self);\n}\n", 80).is_empty());
}

/// No function of the libraries or the CLI runs over 80 lines (tests and benches aside)
/// unless a `// One piece:` comment above it says why it must be one.
#[test]
fn no_function_runs_over_80_lines_unsaid() {
    let mut found = Vec::new();
    for krate in CRATES.iter().chain(&["exporter"]) {
        for p in rust_files(&root().join(krate).join("src")) {
            let text = std::fs::read_to_string(&p).unwrap();
            for (name, line, n) in long_functions(&text, 80) {
                found.push(format!("{}:{line} {name}: {n} lines", p.display()));
            }
        }
    }
    assert!(found.is_empty(), "functions over 80 lines without a `// One piece:` comment:\n{}", found.join("\n"));
}

/// The CLI crate is main, the verb enum and thin dispatch: each verb's flags and the work
/// they describe live in the library that does the work.
#[test]
fn the_cli_crate_stays_under_700_lines() {
    let total: usize =
        rust_files(&root().join("src")).iter().map(|p| std::fs::read_to_string(p).unwrap().lines().count()).sum();
    assert!(total > 100 && total < 700, "the CLI crate's src/ has {total} lines: keep it under 700");
}
