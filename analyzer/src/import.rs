//! Text profiles from the tools the netdev engineers used: `opreport` (a `vma samples %
//! symbol name` table under a CPU / "Counted EVENT events" header) and `perf report
//! --stdio` (lines like `  7.77%  [kernel.kallsyms]  [k] fib_table_lookup`, with or
//! without the Shared Object column, weighted by the `# Samples: N of event 'E'` header).
//! Each becomes a [`TextProfile`] that gives the same stage table as a native recording.

use crate::{Error, Result};

/// One symbol of a text profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    pub symbol: String,
    pub dso: String,
    /// Samples (opreport's column, or perf's overhead x total samples).
    pub samples: u64,
}

/// A profile read from text.
#[derive(Debug, Clone, PartialEq)]
pub struct TextProfile {
    /// `opreport` or `perf report`.
    pub format: String,
    pub event: String,
    pub rows: Vec<ProfileRow>,
}

fn bad(origin: &str, line: usize, msg: impl Into<String>) -> Error {
    Error::Import { path: origin.to_string(), line, msg: msg.into() }
}

/// Parse opreport output.
pub fn parse_opreport(text: &str, origin: &str) -> Result<TextProfile> {
    let mut event = String::from("unknown");
    let mut header: Option<(bool, usize)> = None; // (has vma column, line)
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("Counted ") {
            event = rest.split_whitespace().next().unwrap_or("unknown").to_string();
            continue;
        }
        if t.starts_with("CPU:") || t.starts_with("Profiling through") || t.starts_with("Interrupt") {
            continue;
        }
        if header.is_none() {
            if t.starts_with("vma") || t.starts_with("samples") {
                header = Some((t.starts_with("vma"), n));
            }
            continue;
        }
        let (has_vma, _) = header.unwrap_or((false, 0));
        let toks: Vec<&str> = t.split_whitespace().collect();
        let base = usize::from(has_vma);
        if toks.len() < base + 3 {
            return Err(bad(
                origin,
                n,
                format!("expected `{}samples % [image] symbol`, found `{t}`", if has_vma { "vma " } else { "" }),
            ));
        }
        if has_vma && u64::from_str_radix(toks[0], 16).is_err() {
            return Err(bad(origin, n, format!("`{}`: expected a hexadecimal vma", toks[0])));
        }
        let samples: u64 =
            toks[base].parse().map_err(|_| bad(origin, n, format!("`{}`: expected a sample count", toks[base])))?;
        toks[base + 1]
            .parse::<f64>()
            .map_err(|_| bad(origin, n, format!("`{}`: expected a percentage", toks[base + 1])))?;
        let symbol = toks[toks.len() - 1].to_string();
        let dso = if toks.len() > base + 3 { toks[base + 2].to_string() } else { String::from("[unknown]") };
        rows.push(ProfileRow { symbol, dso, samples });
    }
    if header.is_none() {
        return Err(bad(origin, 0, "no `vma samples % symbol name` header: not an opreport table"));
    }
    Ok(TextProfile { format: "opreport".into(), event, rows })
}

/// `12K` -> 12000, `1.5M` -> 1500000.
fn parse_count(s: &str) -> Option<f64> {
    let (num, mul) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1e3),
        'M' => (&s[..s.len() - 1], 1e6),
        'G' => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    num.parse::<f64>().ok().map(|v| v * mul)
}

/// Parse `perf report --stdio` output (children off, no callgraph).
pub fn parse_perf_report(text: &str, origin: &str) -> Result<TextProfile> {
    let mut event = String::from("unknown");
    let mut total: Option<f64> = None;
    let mut rows = Vec::new();
    let mut pct_rows: Vec<(String, String, f64)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(h) = t.strip_prefix('#') {
            let h = h.trim();
            if let Some(rest) = h.strip_prefix("Samples:") {
                // "10K of event 'cpu-clock:pppH'"
                let mut it = rest.split_whitespace();
                total = it.next().and_then(parse_count);
                if total.is_some_and(|t| !(0.0..=1e15).contains(&t)) {
                    return Err(bad(origin, n, "`# Samples:` count out of range: expected at most 10^15"));
                }
                if let Some(q) = rest.split('\'').nth(1) {
                    event = q.split(':').next().unwrap_or(q).to_string();
                }
            }
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        let pct: f64 = toks
            .first()
            .and_then(|p| p.strip_suffix('%'))
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| bad(origin, n, format!("expected `OVERHEAD%  [DSO]  [k|.] SYMBOL`, found `{t}`")))?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(bad(origin, n, format!("overhead {pct}%: expected a percentage between 0 and 100")));
        }
        let marker = toks.iter().position(|x| *x == "[k]" || *x == "[.]" || *x == "[g]" || *x == "[u]");
        let (dso, symbol) = match marker {
            Some(m) => {
                let dso = if m >= 2 {
                    toks[m - 1].to_string()
                } else if toks[m] == "[k]" {
                    "[kernel.kallsyms]".into()
                } else {
                    "[unknown]".into()
                };
                (dso, toks[m + 1..].join(" "))
            }
            None => ("[unknown]".into(), toks[1..].join(" ")),
        };
        if symbol.is_empty() {
            return Err(bad(origin, n, "a row without a symbol"));
        }
        pct_rows.push((symbol, dso, pct));
    }
    if pct_rows.is_empty() {
        return Err(bad(origin, 0, "no `OVERHEAD%  ...  SYMBOL` rows: not a perf report --stdio text"));
    }
    // Without a sample total, weigh rows by their percentage of a notional 10000 samples.
    let total = total.unwrap_or(10_000.0);
    for (symbol, dso, pct) in pct_rows {
        rows.push(ProfileRow { symbol, dso, samples: (pct / 100.0 * total).round() as u64 });
    }
    Ok(TextProfile { format: "perf report".into(), event, rows })
}

/// Read a text profile, telling the format by its content.
pub fn load_text(path: &std::path::Path) -> Result<TextProfile> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    parse_text(&text, &path.display().to_string())
}

/// Parse a text profile, telling opreport from `perf report` by its content; errors name
/// `origin` and the line.
pub fn parse_text(text: &str, origin: &str) -> Result<TextProfile> {
    let origin = origin.to_string();
    if text.lines().any(|l| l.trim_start().starts_with("# Overhead") || l.contains(" of event '")) {
        parse_perf_report(text, &origin)
    } else {
        parse_opreport(text, &origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opreport_rows_and_errors() {
        let p = parse_opreport(
            "Counted CPU_CLK_UNHALTED events\nvma samples % symbol name\nc02c0ea0 5113 9.07 fn_hash_lookup\n",
            "a",
        )
        .unwrap();
        assert_eq!(p.event, "CPU_CLK_UNHALTED");
        assert_eq!(
            p.rows,
            vec![ProfileRow { symbol: "fn_hash_lookup".into(), dso: "[unknown]".into(), samples: 5113 }]
        );
        let p = parse_opreport("samples % image name symbol name\n120 1.2 vmlinux ip_rcv\n", "b").unwrap();
        assert_eq!(p.rows[0].dso, "vmlinux");
        let e = parse_opreport("vma samples % symbol name\nzz 1 2 f\n", "x.txt").unwrap_err().to_string();
        assert!(e.starts_with("x.txt:2: `zz`: expected a hexadecimal vma"), "{e}");
        let e = parse_opreport("vma samples % symbol name\nc0 many 2 f\n", "x.txt").unwrap_err().to_string();
        assert!(e.contains("x.txt:2") && e.contains("expected a sample count"), "{e}");
        assert!(parse_opreport("hello\n", "y").unwrap_err().to_string().contains("not an opreport table"));
    }

    #[test]
    fn perf_report_rows_with_and_without_dso() {
        let p = parse_perf_report(
            "# Samples: 2K of event 'cycles'\n  7.77%  [k] fib_table_lookup\n  2.00%  libc.so.6  [.] memcpy\n",
            "p",
        )
        .unwrap();
        assert_eq!(p.event, "cycles");
        assert_eq!(
            p.rows[0],
            ProfileRow { symbol: "fib_table_lookup".into(), dso: "[kernel.kallsyms]".into(), samples: 155 }
        );
        assert_eq!(p.rows[1].dso, "libc.so.6");
        let e = parse_perf_report("# Samples: 1K of event 'x'\nfoo bar\n", "q.txt").unwrap_err().to_string();
        assert!(e.starts_with("q.txt:2: expected `OVERHEAD%"), "{e}");
    }
}
