//! Two annotations of the same functions side by side (`annotate -i A --against B`): for
//! each function the first input chose, its samples in both, then per source line (with
//! the call sites it was inlined through) the line's share of the function's samples in A
//! and in B and the difference in percentage points: what a prefetch or cache change moved
//! inside a function. Where both inputs ran the same build of the function (the same
//! bytes: one build-id), its instructions are set side by side too, by address.

use crate::annotate::{Annotation, SymbolAnnotation};
use serde::Serialize;
use std::collections::HashMap;

/// One source line (or instruction) in both inputs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    /// `FILE:LINE` (with `< CALLER` inline sites), or for an instruction its address and text.
    pub what: String,
    /// The innermost function at that line (empty for an instruction).
    pub function: String,
    pub a_samples: u64,
    /// Share of the function's samples in A, percent.
    pub a_percent: f64,
    pub b_samples: u64,
    pub b_percent: f64,
    /// `b_percent - a_percent`, percentage points.
    pub delta: f64,
}

/// One function in both inputs.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolDiff {
    pub symbol: String,
    /// For a copy of `symbol` inlined into another function, that function; None for a
    /// symbol's own annotation.
    pub inlined_into: Option<String>,
    pub dso: String,
    pub a_samples: u64,
    pub b_samples: u64,
    /// Share of all samples of each input, percent.
    pub a_percent: f64,
    pub b_percent: f64,
    /// Per source line, most samples (A and B together) first.
    pub lines: Vec<DiffRow>,
    /// Per instruction, in address order, when both inputs ran the same build; else empty.
    pub instructions: Vec<DiffRow>,
    /// What this comparison lacks and why.
    pub notes: Vec<String>,
}

/// The comparison of two annotations.
#[derive(Debug, Clone, Serialize)]
pub struct AnnotationDiff {
    pub a_input: String,
    pub b_input: String,
    pub a_event: String,
    pub b_event: String,
    pub a_samples: u64,
    pub b_samples: u64,
    pub symbols: Vec<SymbolDiff>,
    pub warnings: Vec<String>,
}

fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// A line's key: its position and the call sites it was inlined through.
fn line_key(l: &crate::annotate::LineRow) -> String {
    if l.inlined_at.is_empty() {
        l.location.clone()
    } else {
        format!("{} < {}", l.location, l.inlined_at.join(" < "))
    }
}

/// Rows of `a` and `b` joined by key: (what, function, A samples, B samples), in `a`'s
/// order then `b`'s new keys.
fn join(a: Vec<(String, String, u64)>, b: Vec<(String, String, u64)>) -> Vec<(String, String, u64, u64)> {
    let mut out: Vec<(String, String, u64, u64)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (k, f, n) in a {
        match at.get(&k) {
            Some(&i) => out[i].2 += n,
            None => {
                at.insert(k.clone(), out.len());
                out.push((k, f, n, 0));
            }
        }
    }
    for (k, f, n) in b {
        match at.get(&k) {
            Some(&i) => out[i].3 += n,
            None => {
                at.insert(k.clone(), out.len());
                out.push((k, f, 0, n));
            }
        }
    }
    out
}

fn rows(joined: Vec<(String, String, u64, u64)>, a_total: u64, b_total: u64) -> Vec<DiffRow> {
    joined
        .into_iter()
        .map(|(what, function, a, b)| {
            let (ap, bp) = (pct(a, a_total), pct(b, b_total));
            DiffRow { what, function, a_samples: a, a_percent: ap, b_samples: b, b_percent: bp, delta: bp - ap }
        })
        .collect()
}

/// One function of A against the same function (name and binary) in B, if B has it.
fn symbol_diff(a: &SymbolAnnotation, b: Option<&SymbolAnnotation>, a_all: u64, b_all: u64) -> SymbolDiff {
    let mut notes = Vec::new();
    let b_samples = b.map_or(0, |b| b.samples);
    if b.is_none() {
        notes.push("no samples in B".to_string());
    }
    let lines_of = |s: &SymbolAnnotation| -> Vec<(String, String, u64)> {
        s.lines.iter().map(|l| (line_key(l), l.function.clone(), l.samples)).collect()
    };
    let mut lines = rows(join(lines_of(a), b.map(lines_of).unwrap_or_default()), a.samples, b_samples);
    lines.sort_by(|x, y| (y.a_samples + y.b_samples).cmp(&(x.a_samples + x.b_samples)).then(x.what.cmp(&y.what)));
    let same_build = b.is_some_and(|b| b.source == a.source && a.instructions_total > 0 && b.instructions_total > 0);
    let instructions = match b {
        Some(b) if same_build => {
            let insns = |s: &SymbolAnnotation| -> Vec<(String, String, u64)> {
                s.instructions
                    .iter()
                    .map(|r| {
                        (format!("{:#x}  {}", r.address, r.text.as_deref().unwrap_or("")), String::new(), r.samples)
                    })
                    .collect()
            };
            let mut v = rows(join(insns(a), insns(b)), a.samples, b.samples);
            // Address order: the key starts with the address.
            v.sort_by_key(|r| {
                r.what.split_whitespace().next().and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
            });
            v
        }
        Some(b) => {
            notes.push(format!(
                "instructions not compared: A's bytes come from {}, B's from {} (not one build)",
                a.source, b.source
            ));
            Vec::new()
        }
        None => Vec::new(),
    };
    SymbolDiff {
        symbol: a.symbol.clone(),
        inlined_into: a.inlined_into.clone(),
        dso: a.dso.clone(),
        a_samples: a.samples,
        b_samples,
        a_percent: pct(a.samples, a_all),
        b_percent: pct(b_samples, b_all),
        lines,
        instructions,
        notes,
    }
}

/// A against B, function by function in A's order (B's functions matched by name and
/// binary, and an inlined copy by the function it was inlined into); what B has that A
/// has not is a warning. The events should be the same; when they are not, a warning says
/// so.
pub fn diff(a: &Annotation, b: &Annotation) -> AnnotationDiff {
    let mut warnings: Vec<String> = a.warnings.iter().map(|w| format!("A: {w}")).collect();
    warnings.extend(b.warnings.iter().map(|w| format!("B: {w}")));
    if a.event != b.event {
        warnings.push(format!(
            "A sampled {} and B {}: shares are compared, but they measure different things",
            a.event, b.event
        ));
    }
    let same = |x: &SymbolAnnotation, s: &SymbolAnnotation| {
        x.symbol == s.symbol && x.dso == s.dso && x.inlined_into == s.inlined_into
    };
    let symbols =
        a.symbols.iter().map(|s| symbol_diff(s, b.symbols.iter().find(|x| same(x, s)), a.samples, b.samples)).collect();
    // What B has of the same functions that A has not (a copy inlined elsewhere in B's
    // build, or a function that has its own symbol in B only): said, not dropped silently.
    for x in b.symbols.iter().filter(|x| !a.symbols.iter().any(|s| same(x, s))) {
        warnings.push(format!(
            "B only: {}{} ({}), {} samples ({:.2}% of all): A has no samples there",
            x.symbol,
            x.inlined_into.as_deref().map_or(String::new(), |f| format!(" inlined into {f}")),
            x.dso,
            x.samples,
            pct(x.samples, b.samples)
        ));
    }
    AnnotationDiff {
        a_input: a.input.clone(),
        b_input: b.input.clone(),
        a_event: a.event.clone(),
        b_event: b.event.clone(),
        a_samples: a.samples,
        b_samples: b.samples,
        symbols,
        warnings,
    }
}

impl AnnotationDiff {
    /// The comparison as text: per function its samples in both, then its source lines
    /// (most samples first) with A's and B's shares and the difference; the three largest
    /// moves marked `*`; with `instructions`, the instructions too (same build only).
    pub fn text(&self, instructions: bool) -> String {
        use std::fmt::Write;
        let p = |s: &str| crate::printable(s.to_string());
        let mut out = String::new();
        let _ = writeln!(out, "# fwdscope annotate: A = {}, B = {}", p(&self.a_input), p(&self.b_input));
        let _ = writeln!(
            out,
            "# event: A {} ({} samples), B {} ({} samples); shares are of each function's own samples",
            p(&self.a_event),
            self.a_samples,
            p(&self.b_event),
            self.b_samples
        );
        for w in &self.warnings {
            let _ = writeln!(out, "# WARNING: {}", p(w));
        }
        for s in &self.symbols {
            let _ = writeln!(
                out,
                "\n== {}{} ({}): A {} samples ({:.2}% of all), B {} samples ({:.2}% of all)",
                p(&s.symbol),
                s.inlined_into.as_deref().map_or(String::new(), |f| format!(" inlined into {}", p(f))),
                p(&s.dso),
                s.a_samples,
                s.a_percent,
                s.b_samples,
                s.b_percent
            );
            for n in &s.notes {
                let _ = writeln!(out, "   note: {}", p(n));
            }
            let table = |out: &mut String, rows: &[DiffRow], head: &str| {
                let mut moved: Vec<f64> = rows.iter().map(|r| r.delta.abs()).filter(|d| *d > 0.0).collect();
                moved.sort_by(|x, y| y.total_cmp(x));
                let mark = moved.get(2).or(moved.last()).copied().unwrap_or(f64::INFINITY);
                let _ = writeln!(out, "   {:>7} {:>7} {:>8} {:>8} {:>8}  {head}", "A", "A%", "B", "B%", "B-A pp");
                for r in rows {
                    let star = if r.delta.abs() >= mark { "*" } else { " " };
                    let func = if r.function.is_empty() { String::new() } else { format!("  {}", p(&r.function)) };
                    let _ = writeln!(
                        out,
                        "{star}  {:>7} {:>7.2} {:>8} {:>8.2} {:>+8.2}  {}{func}",
                        r.a_samples,
                        r.a_percent,
                        r.b_samples,
                        r.b_percent,
                        r.delta,
                        p(&r.what)
                    );
                }
            };
            table(&mut out, &s.lines, "source line  function");
            if instructions && !s.instructions.is_empty() {
                table(&mut out, &s.instructions, "address  instruction");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotate::{InstructionRow, LineRow};

    fn line(loc: &str, n: u64, inlined: &[&str]) -> LineRow {
        LineRow {
            location: loc.into(),
            file: None,
            line: None,
            function: "f".into(),
            inlined_at: inlined.iter().map(|s| s.to_string()).collect(),
            samples: n,
            percent: 0.0,
            stages: Vec::new(),
            hot: false,
        }
    }

    fn insn(addr: u64, n: u64) -> InstructionRow {
        InstructionRow {
            address: addr,
            length: 1,
            text: Some(format!("i{addr:x}")),
            samples: n,
            percent: 0.0,
            stages: Vec::new(),
            frames: Vec::new(),
            hot: false,
            after_gap: false,
        }
    }

    fn sym(name: &str, source: &str, lines: Vec<LineRow>, insns: Vec<InstructionRow>) -> SymbolAnnotation {
        SymbolAnnotation {
            symbol: name.into(),
            inlined_into: None,
            dso: "bin".into(),
            kernel: false,
            samples: lines.iter().map(|l| l.samples).sum(),
            percent: 0.0,
            source: source.into(),
            start: None,
            size: None,
            instructions_total: insns.len(),
            notes: Vec::new(),
            instructions: insns,
            lines,
        }
    }

    fn ann(input: &str, samples: u64, symbols: Vec<SymbolAnnotation>) -> Annotation {
        Annotation {
            input: input.into(),
            event: "cpu-clock".into(),
            samples,
            skid: String::new(),
            kernel_source: String::new(),
            symbols,
            warnings: Vec::new(),
        }
    }

    /// Shares worked out by hand: A's function has 100 samples (lines 60/40), B's 200
    /// (lines 60/100 and a line A never sampled, 40): A 60%/40%/0%, B 30%/50%/20%.
    #[test]
    fn lines_are_joined_and_their_shares_compared() {
        let a = ann(
            "A",
            1000,
            vec![sym(
                "f",
                "b1",
                vec![line("x.rs:1", 60, &[]), line("x.rs:2", 40, &["g at y.rs:9"])],
                vec![insn(0x10, 60), insn(0x14, 40)],
            )],
        );
        let b = ann(
            "B",
            400,
            vec![sym(
                "f",
                "b1",
                vec![line("x.rs:1", 60, &[]), line("x.rs:2", 100, &["g at y.rs:9"]), line("x.rs:3", 40, &[])],
                vec![insn(0x10, 60), insn(0x14, 100), insn(0x18, 40)],
            )],
        );
        let d = diff(&a, &b);
        let s = &d.symbols[0];
        assert_eq!((s.a_samples, s.b_samples), (100, 200));
        assert!((s.a_percent - 10.0).abs() < 1e-9 && (s.b_percent - 50.0).abs() < 1e-9);
        let got: Vec<(&str, u64, u64, i64)> = s
            .lines
            .iter()
            .map(|r| (r.what.as_str(), r.a_samples, r.b_samples, (r.delta * 100.0).round() as i64))
            .collect();
        assert_eq!(got, [("x.rs:2 < g at y.rs:9", 40, 100, 1000), ("x.rs:1", 60, 60, -3000), ("x.rs:3", 0, 40, 2000)]);
        // The same build: instructions side by side, by address.
        let ins: Vec<(u64, u64)> = s.instructions.iter().map(|r| (r.a_samples, r.b_samples)).collect();
        assert_eq!(ins, [(60, 60), (40, 100), (0, 40)]);
        let t = d.text(true);
        assert!(t.contains("== f (bin): A 100 samples (10.00% of all), B 200 samples (50.00% of all)"), "{t}");
        assert!(t.contains("*       60   60.00       60    30.00   -30.00  x.rs:1  f"), "{t}");
    }

    #[test]
    fn another_build_compares_lines_only_and_a_missing_function_says_so() {
        let a = ann(
            "A",
            10,
            vec![
                sym("f", "b1", vec![line("x.rs:1", 5, &[])], vec![insn(1, 5)]),
                sym("g", "b1", vec![line("z.rs:1", 5, &[])], vec![insn(2, 5)]),
            ],
        );
        let b = ann("B", 10, vec![sym("f", "b2", vec![line("x.rs:1", 10, &[])], vec![insn(1, 10)])]);
        let d = diff(&a, &b);
        assert!(d.symbols[0].instructions.is_empty());
        assert!(d.symbols[0].notes[0].starts_with("instructions not compared: A's bytes come from b1, B's from b2"));
        assert_eq!(d.symbols[0].lines[0].delta, 0.0);
        assert_eq!(d.symbols[1].notes, ["no samples in B"]);
        assert_eq!((d.symbols[1].lines[0].a_samples, d.symbols[1].lines[0].b_samples), (5, 0));
    }
}
