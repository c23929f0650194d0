//! Text profiles from the tools the netdev engineers used: `opreport` (a `vma samples %
//! symbol name` table under a CPU / "Counted EVENT events" header) and `perf report
//! --stdio` (lines like `  7.77%  [kernel.kallsyms]  [k] fib_table_lookup`, with or
//! without the Shared Object column, weighted by the `# Samples: N of event 'E'` header).
//! Each becomes a [`TextProfile`] that gives the same stage table as a native recording.
//!
//! Excerpts as people paste them into mails and issues are read too: `perf report` rows
//! without their header (with or without the Command and Shared Object columns, `[k]` and
//! `[.]` markers, a Children column before Self), opreport rows without theirs, quoted with
//! one or more `> `, between paragraphs of prose. An excerpt lists part of a profile: its
//! rows keep their share of the whole, and what it does not list is [`TextProfile::unlisted`].
//!
//! Every format holds one profile: two `# Samples:` headers, two events, a row listed again
//! with another figure, or shares adding up past 100% are refused naming the lines (two
//! profiles pasted together would otherwise be averaged). Files are read line by line in
//! two passes (which format, then the rows), so memory is bounded by the distinct rows
//! ([`MAX_ROWS`]) and the longest line ([`MAX_LINE`]), not by the file; repeated rows are
//! noted a few times and then counted.

use crate::{Error, Result};
use std::collections::HashMap;
use std::io::{BufRead, Read};

/// The longest line a text profile may hold (bytes); longer is refused naming the line.
pub const MAX_LINE: usize = 64 * 1024;
/// The most distinct rows a text profile may hold: a kernel and a few binaries give tens
/// of thousands of symbols; more is not a profile.
pub const MAX_ROWS: usize = 1_000_000;
/// Repeated rows noted one by one before the rest are counted in one note.
const NOTED_REPEATS: usize = 3;

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
    /// For an excerpt: the samples of the whole profile that its rows do not list (in the
    /// rows' unit). None for a whole table.
    pub unlisted: Option<u64>,
    /// What the reader did that the user should know (a repeated row counted once), each
    /// naming the line; repeats past the first few are summed up in one note.
    pub notes: Vec<String>,
}

impl TextProfile {
    /// Whether this is an excerpt (part of a profile), not a whole table.
    pub fn is_excerpt(&self) -> bool {
        self.unlisted.is_some()
    }
}

use crate::printable;

fn bad(origin: &str, line: usize, msg: impl Into<String>) -> Error {
    Error::Import { path: printable(origin.to_string()), line, msg: printable(msg.into()) }
}

/// One pass over a profile's lines: (line number from 1, the line), or the error that
/// stopped reading (naming the line).
type Lines<'a> = Box<dyn Iterator<Item = Result<(usize, String)>> + 'a>;

fn str_lines(text: &str) -> Lines<'_> {
    Box::new(text.lines().enumerate().map(|(i, l)| Ok((i + 1, l.to_string()))))
}

/// A file's lines, each at most [`MAX_LINE`] bytes and UTF-8, read with a bounded buffer.
fn file_lines(path: &std::path::Path) -> Result<Lines<'static>> {
    let io = |e| Error::Io { path: path.into(), source: e };
    let f = std::fs::File::open(path).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(bad(&path.display().to_string(), 0, "not a regular file: expected a text profile"));
    }
    let origin = path.display().to_string();
    let mut r = std::io::BufReader::new(f);
    let mut n = 0usize;
    let mut buf = Vec::new();
    let mut done = false;
    Ok(Box::new(std::iter::from_fn(move || {
        if done {
            return None;
        }
        buf.clear();
        n += 1;
        let got = (&mut r).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buf);
        let out = match got {
            Err(e) => Err(Error::Io { path: origin.clone().into(), source: e }),
            Ok(0) => {
                done = true;
                return None;
            }
            Ok(_) if buf.len() > MAX_LINE && !buf.ends_with(b"\n") => {
                Err(bad(&origin, n, format!("a line longer than {MAX_LINE} bytes: not a text profile")))
            }
            Ok(_) => {
                while buf.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
                    buf.pop();
                }
                match std::str::from_utf8(&buf) {
                    Ok(s) => Ok((n, s.to_string())),
                    Err(e) => Err(bad(&origin, n, format!("byte {}: not UTF-8 text", e.valid_up_to() + 1))),
                }
            }
        };
        if out.is_err() {
            done = true;
        }
        Some(out)
    })))
}

/// Repeated rows: the first few noted by line, the rest counted.
#[derive(Default)]
struct Repeats {
    notes: Vec<String>,
    more: usize,
}

impl Repeats {
    fn add(&mut self, note: impl FnOnce() -> String) {
        if self.notes.len() < NOTED_REPEATS {
            self.notes.push(note());
        } else {
            self.more += 1;
        }
    }

    fn into_notes(mut self) -> Vec<String> {
        if self.more > 0 {
            self.notes.push(format!("{} more repeated rows, each counted once", self.more));
        }
        self.notes
    }
}

/// What a whole table's rows must hold: shares adding up to at most 100% (two decimals of
/// rounding per row allowed), at most [`MAX_ROWS`] rows; and in an excerpt (no header
/// saying what was sampled), each row once (the same row again with the same figure is
/// counted once and noted; with another figure it is a second profile). Under a header the
/// tool printed the rows itself, and a name it lists twice is two functions of that name
/// (static functions, C++ lambdas): both kept.
struct RowCheck<'o> {
    origin: &'o str,
    seen: HashMap<String, (usize, f64)>,
    rows: usize,
    sum: f64,
    repeats: Repeats,
    /// The profile's header was read (`# Samples:`, `Counted ...`): rows are the tool's.
    headed: bool,
    /// Rows whose name an earlier row of a headed profile had.
    same_name: usize,
}

impl<'o> RowCheck<'o> {
    fn new(origin: &'o str) -> Self {
        RowCheck {
            origin,
            seen: HashMap::new(),
            rows: 0,
            sum: 0.0,
            repeats: Repeats::default(),
            headed: false,
            same_name: 0,
        }
    }

    /// A note on rows of a headed profile that share a name with another, if any.
    fn same_name_note(&self) -> Option<String> {
        (self.same_name > 0).then(|| {
            format!(
                "{} rows name a function an earlier row names too (distinct functions of one name, as the profiler \
                 listed them): each kept",
                self.same_name
            )
        })
    }

    /// Whether to keep the row at line `n` (false: a repeat, counted once).
    fn admit(&mut self, n: usize, key: &str, pct: f64) -> Result<bool> {
        if self.headed && self.seen.contains_key(key) {
            self.same_name += 1;
            return self.count(n, pct).map(|()| true);
        }
        if let Some(&(first, was)) = self.seen.get(key) {
            if (was - pct).abs() < 1e-9 {
                let origin = self.origin;
                self.repeats
                    .add(|| format!("{origin}:{n} repeats the row of line {first} (`{key}` {pct}%): counted once"));
                return Ok(false);
            }
            return Err(bad(
                self.origin,
                n,
                format!(
                    "`{key}` listed again with {pct}% (line {first} gave {was}%): more than one profile (paste each \
                     into a file of its own)"
                ),
            ));
        }
        self.seen.insert(key.to_string(), (n, pct));
        self.count(n, pct).map(|()| true)
    }

    /// Count a kept row against the row cap and the 100% bound.
    fn count(&mut self, n: usize, pct: f64) -> Result<()> {
        if self.rows >= MAX_ROWS {
            return Err(bad(self.origin, n, format!("more than {MAX_ROWS} rows: not a profile fwdscope reads")));
        }
        self.rows += 1;
        self.sum += pct;
        if self.sum > 100.0 + 0.005 * self.rows as f64 {
            return Err(bad(
                self.origin,
                n,
                format!(
                    "the rows' percentages add up to {:.2}% by this line: more than one profile (paste each into a \
                     file of its own)",
                    self.sum
                ),
            ));
        }
        Ok(())
    }
}

/// Parse opreport output.
pub fn parse_opreport(text: &str, origin: &str) -> Result<TextProfile> {
    opreport_lines(str_lines(text), origin)
}

fn opreport_lines(lines: Lines<'_>, origin: &str) -> Result<TextProfile> {
    let mut event: Option<(usize, String)> = None;
    let mut header: Option<(bool, usize)> = None; // (has vma column, line)
    let mut rows = Vec::new();
    let mut check = RowCheck::new(origin);
    for line in lines {
        let (n, line) = line?;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("Counted ") {
            let e = rest.split_whitespace().next().unwrap_or("unknown").to_string();
            if let Some((first, was)) = &event {
                return Err(bad(
                    origin,
                    n,
                    format!(
                        "a second event `{e}` (line {first} counted `{was}`): fwdscope reads one event per profile \
                         (opreport --event, or one file per event)"
                    ),
                ));
            }
            event = Some((n, e));
            check.headed = true;
            continue;
        }
        if t.starts_with("CPU:") || t.starts_with("Profiling through") || t.starts_with("Interrupt") {
            continue;
        }
        let is_header = (t.starts_with("vma") || t.starts_with("samples")) && t.contains('%');
        if let Some((_, first)) = header.filter(|_| is_header) {
            return Err(bad(
                origin,
                n,
                format!("a second table header (the first is at line {first}): more than one profile in one file"),
            ));
        }
        let Some((has_vma, _)) = header else {
            if t.starts_with("vma") || t.starts_with("samples") {
                header = Some((t.starts_with("vma"), n));
            }
            continue;
        };
        let (samples, pct, dso, symbol) = opreport_row(t, has_vma, origin, n)?;
        if check.admit(n, &format!("{dso} {symbol}"), pct)? {
            rows.push(ProfileRow { symbol: printable(symbol), dso: printable(dso), samples });
        }
    }
    if header.is_none() {
        return Err(bad(origin, 0, "no `vma samples % symbol name` header: not an opreport table"));
    }
    let event = event.map_or_else(|| "unknown".to_string(), |e| e.1);
    let same_name = check.same_name_note();
    let mut notes = check.repeats.into_notes();
    notes.extend(same_name);
    Ok(TextProfile { format: "opreport".into(), event, rows, unlisted: None, notes })
}

/// One row under an opreport header (`has_vma`: its first column is the vma), line `n`:
/// (samples, percent, image, symbol).
fn opreport_row(t: &str, has_vma: bool, origin: &str, n: usize) -> Result<(u64, f64, String, String)> {
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
    let pct = toks[base + 1]
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite())
        .ok_or_else(|| bad(origin, n, format!("`{}`: expected a percentage", toks[base + 1])))?;
    if !(0.0..=100.0).contains(&pct) {
        return Err(bad(origin, n, format!("{pct}%: expected a percentage between 0 and 100")));
    }
    let symbol = toks[toks.len() - 1].to_string();
    let dso = if toks.len() > base + 3 { toks[base + 2].to_string() } else { String::from("[unknown]") };
    Ok((samples, pct, dso, symbol))
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
    perf_report_lines(str_lines(text), origin)
}

fn perf_report_lines(lines: Lines<'_>, origin: &str) -> Result<TextProfile> {
    let mut r = PerfReportReader {
        origin,
        event: String::from("unknown"),
        total: None,
        samples_line: None,
        pct_rows: Vec::new(),
        check: RowCheck::new(origin),
        children: false,
        graph_lines: 0,
        rounded: None,
        counts: Vec::new(),
    };
    for line in lines {
        let (n, line) = line?;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(h) = t.strip_prefix('#') {
            r.header_line(n, h.trim())?;
            continue;
        }
        r.row_line(n, &line, t)?;
    }
    r.finish()
}

/// What reading `perf report --stdio` output has gathered so far.
struct PerfReportReader<'o> {
    origin: &'o str,
    event: String,
    total: Option<f64>,
    samples_line: Option<usize>,
    /// (symbol, DSO, percent) of each row kept.
    pct_rows: Vec<(String, String, f64)>,
    check: RowCheck<'o>,
    // perf report's default output: a Children column before Self (`--children`), and the
    // call graph under each row (`-g`), indented lines of `|`, `---` and caller names.
    children: bool,
    graph_lines: usize,
    // The header's sample count as perf rounds it (`7K`), and the rows' exact counts when
    // perf printed them (`perf report -n`: a Samples column after the overhead).
    rounded: Option<String>,
    counts: Vec<Option<u64>>,
}

impl PerfReportReader<'_> {
    /// A `#` line at line `n` (`h`: after the `#`): the column heads, or `# Samples: N of
    /// event 'E'`.
    fn header_line(&mut self, n: usize, h: &str) -> Result<()> {
        let origin = self.origin;
        let cols: Vec<&str> = h.split_whitespace().collect();
        if cols.first() == Some(&"Children") && cols.get(1) == Some(&"Self") {
            self.children = true;
        }
        let Some(rest) = h.strip_prefix("Samples:") else { return Ok(()) };
        if let Some(first) = self.samples_line {
            return Err(bad(
                origin,
                n,
                format!(
                    "a second `# Samples:` header (the first is at line {first}): more than one profile or \
                     event in one file (give each its own file, e.g. perf report --stdio -e EVENT)"
                ),
            ));
        }
        self.samples_line = Some(n);
        self.check.headed = true;
        // "10K of event 'cpu-clock:pppH'"
        let mut it = rest.split_whitespace();
        let raw = it.next();
        self.rounded = raw
            .filter(|r| r.ends_with(['K', 'M', 'G', 'k', 'm', 'g']))
            .map(|r| printable(r.chars().take(20).collect()));
        self.total = raw.and_then(parse_count);
        if self.total.is_some_and(|t| !(0.0..=1e15).contains(&t)) {
            return Err(bad(origin, n, "`# Samples:` count out of range: expected at most 10^15"));
        }
        if let Some(q) = rest.split('\'').nth(1) {
            self.event = q.split(':').next().unwrap_or(q).to_string();
        }
        Ok(())
    }

    /// A line that is no header at line `n` (`t`: trimmed): a row of the table, or a line
    /// of a call graph under one (counted, skipped).
    fn row_line(&mut self, n: usize, line: &str, t: &str) -> Result<()> {
        let origin = self.origin;
        let all: Vec<&str> = t.split_whitespace().collect();
        let toks = without_expand_marker(&all);
        // A call-graph line: indented, and no percentage first (a row has one).
        let indented = line.starts_with(' ') || line.starts_with('\t');
        if indented && toks.first().is_some_and(|p| percent_token(p).is_none()) && !self.pct_rows.is_empty() {
            self.graph_lines += 1;
            return Ok(());
        }
        let first: f64 = toks.first().and_then(|p| percent_token(p)).ok_or_else(|| {
            bad(
                origin,
                n,
                format!(
                    "expected `OVERHEAD%  [DSO]  [k|.] SYMBOL` (or `CHILDREN%  SELF%  ...` with --children), found \
                     `{t}`"
                ),
            )
        })?;
        // With --children the second percentage is the row's own (Self): the one that adds
        // up to 100% over the rows.
        let (pct, toks) = match toks.get(1).and_then(|x| percent_token(x)) {
            Some(selfp) if self.children => (selfp, &toks[1..]),
            _ => (first, toks),
        };
        if !(0.0..=100.0).contains(&pct) {
            return Err(bad(origin, n, format!("overhead {pct}%: expected a percentage between 0 and 100")));
        }
        let (count, toks) = match toks.get(1) {
            Some(c) if toks.len() > 2 && !c.is_empty() && c.chars().all(|x| x.is_ascii_digit()) => {
                (c.parse::<u64>().ok(), &toks[1..])
            }
            _ => (None, toks),
        };
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
        // A row of perf's table is unique by its columns after the overhead (command,
        // object, symbol).
        if self.check.admit(n, &toks[1..].join(" "), pct)? {
            self.pct_rows.push((symbol, dso, pct));
            self.counts.push(count);
        }
        Ok(())
    }

    /// The profile read, with notes on what was read how.
    fn finish(self) -> Result<TextProfile> {
        if self.pct_rows.is_empty() {
            return Err(bad(self.origin, 0, "no `OVERHEAD%  ...  SYMBOL` rows: not a perf report --stdio text"));
        }
        let same_name = self.check.same_name_note();
        let mut notes = self.check.repeats.into_notes();
        notes.extend(same_name);
        if self.children {
            notes.push("read the Self column (perf report --children): each row's own share".to_string());
        }
        let graph_lines = self.graph_lines;
        if graph_lines > 0 {
            notes.push(format!(
                "skipped {graph_lines} call-graph lines (perf report -g): the rows' own shares are read, the graphs are not"
            ));
        }
        // Exact counts when every row has one; else each row's percentage of the header's
        // total (or of a notional 10000 samples without one).
        let exact = self.counts.iter().all(Option::is_some);
        if let Some(r) = self.rounded.filter(|_| !exact) {
            notes.push(format!(
                "sample counts estimated: each row's percentage of the header's rounded total (`# Samples: {r}`); \
                 perf report -n prints the exact counts, which are read when present"
            ));
        }
        let total = self.total.unwrap_or(10_000.0);
        let rows = self
            .pct_rows
            .into_iter()
            .zip(self.counts)
            .map(|((symbol, dso, pct), count)| ProfileRow {
                symbol: printable(symbol),
                dso: printable(dso),
                samples: match count.filter(|_| exact) {
                    Some(c) => c,
                    None => (pct / 100.0 * total).round() as u64,
                },
            })
            .collect();
        Ok(TextProfile { format: "perf report".into(), event: self.event, rows, unlisted: None, notes })
    }
}

/// Read a text profile, telling the format by its content: one pass to tell the format,
/// one to read the rows, each line by line.
pub fn load_text(path: &std::path::Path) -> Result<TextProfile> {
    let kind = detect(file_lines(path)?)?;
    parse_kind(kind, file_lines(path)?, &path.display().to_string())
}

/// Parse a text profile, telling opreport from `perf report` by its content, and either
/// from an excerpt (rows without a header); errors name `origin` and the line.
pub fn parse_text(text: &str, origin: &str) -> Result<TextProfile> {
    let kind = detect(str_lines(text))?;
    parse_kind(kind, str_lines(text), origin)
}

#[derive(Clone, Copy)]
enum Kind {
    PerfReport,
    Opreport,
    Excerpt,
}

fn detect(lines: Lines<'_>) -> Result<Kind> {
    let mut op = false;
    for line in lines {
        let (_, l) = line?;
        if l.trim_start().starts_with("# Overhead") || l.contains(" of event '") {
            return Ok(Kind::PerfReport);
        }
        let t = unquote(&l).trim_start();
        op |= (t.starts_with("vma") || t.starts_with("samples")) && t.contains('%') && t.contains("symbol");
    }
    Ok(if op { Kind::Opreport } else { Kind::Excerpt })
}

fn parse_kind(kind: Kind, lines: Lines<'_>, origin: &str) -> Result<TextProfile> {
    match kind {
        Kind::PerfReport => perf_report_lines(lines, origin),
        Kind::Opreport => opreport_lines(lines, origin),
        Kind::Excerpt => excerpt_lines(lines, origin),
    }
}

/// A line without its mail quoting: any run of `>` (each optionally followed by spaces).
fn unquote(line: &str) -> &str {
    let mut t = line;
    loop {
        let s = t.trim_start_matches([' ', '\t']);
        match s.strip_prefix('>') {
            Some(rest) => t = rest,
            None => return if t.len() == line.len() { line } else { s },
        }
    }
}

/// `7.77%` -> 7.77; `7,77%` (perf under a locale with a decimal comma) -> 7.77.
fn percent_token(t: &str) -> Option<f64> {
    let num = t.strip_suffix('%')?;
    let num = match num.split_once(',') {
        Some((a, b))
            if !a.is_empty()
                && !b.is_empty()
                && !num.contains('.')
                && a.chars().all(|c| c.is_ascii_digit())
                && b.chars().all(|c| c.is_ascii_digit()) =>
        {
            format!("{a}.{b}")
        }
        _ => num.to_string(),
    };
    num.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Rows copied from `perf report`'s interactive view start with its fold marker (`+`
/// folded, `-` unfolded callchain) before the percentages: drop it.
fn without_expand_marker<'a>(toks: &'a [&'a str]) -> &'a [&'a str] {
    match toks {
        [m, p, ..] if (*m == "+" || *m == "-") && percent_token(p).is_some() => &toks[1..],
        _ => toks,
    }
}

/// One row of an excerpt.
enum ExcerptRow {
    /// `perf report` style: the Self percentage, DSO, symbol, and the row's columns after
    /// the percentages (command, object, symbol: what makes a row unique in perf's table).
    Perf { pct: f64, dso: String, symbol: String, key: String },
    /// opreport style: samples, percentage, image (if any), symbol.
    Op { samples: u64, pct: f64, dso: String, symbol: String },
}

/// A `perf report --stdio` row: `[CHILDREN%] SELF% [COMMAND] [DSO] [k|.] SYMBOL`, or with
/// no marker `SELF% [DSO] SYMBOL`. None for anything else (prose).
fn perf_row(t: &str) -> Option<ExcerptRow> {
    // Rows copied from perf's TUI end in its scroll bar (`▒`) or box lines.
    let t = t.trim_end_matches(|c: char| !c.is_ascii() || c.is_whitespace());
    let all: Vec<&str> = t.split_whitespace().collect();
    let toks = without_expand_marker(&all);
    let first = percent_token(toks.first()?)?;
    // With --children, two percentages: Children then Self.
    let (pct, rest) = match toks.get(1).and_then(|x| percent_token(x)) {
        Some(selfp) => (selfp, &toks[2..]),
        None => (first, &toks[1..]),
    };
    let marker = rest.iter().position(|x| matches!(*x, "[k]" | "[.]" | "[g]" | "[u]" | "[H]"));
    let (dso, symbol) = match marker {
        Some(m) => {
            // The column before the marker is the Shared Object, unless it is the Command
            // (sorted by comm and symbol only): a kernel row's object is bracketed
            // (`[kernel.kallsyms]`, `[ixgbe]`) or a module file.
            let before = m.checked_sub(1).map(|i| rest[i]);
            let dso = match (before, rest[m]) {
                (Some(d), "[k]") if d.starts_with('[') || d.ends_with(".ko") || d.starts_with("vmlinux") => {
                    d.to_string()
                }
                (_, "[k]") => "[kernel.kallsyms]".to_string(),
                (Some(d), _) => d.to_string(),
                (None, _) => "[unknown]".to_string(),
            };
            (dso, rest[m + 1..].join(" "))
        }
        // Without markers, prose such as "5% faster than before" is not a row: accept only
        // `SYMBOL` or `DSO SYMBOL` where the symbol looks like an identifier.
        None => match rest {
            [sym] => ("[unknown]".to_string(), sym.to_string()),
            [dso, sym] => (dso.to_string(), sym.to_string()),
            _ => return None,
        },
    };
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.:<>$@+[]()~, &*-/".contains(c))
            && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '[' || c == '.')
    };
    if !ident(&symbol) || (marker.is_none() && !symbol.contains('_') && !symbol.starts_with('[')) {
        return None;
    }
    Some(ExcerptRow::Perf { pct, dso, symbol, key: rest.join(" ") })
}

/// An opreport row: `[VMA] SAMPLES PERCENT [IMAGE] SYMBOL`. None for anything else.
fn op_row(t: &str) -> Option<ExcerptRow> {
    let toks: Vec<&str> = t.split_whitespace().collect();
    let hex = |s: &str| s.len() >= 6 && s.chars().all(|c| c.is_ascii_hexdigit());
    let base = usize::from(toks.len() >= 4 && hex(toks[0]) && toks[1].parse::<u64>().is_ok());
    let samples: u64 = toks.get(base)?.parse().ok()?;
    let pct: f64 = toks.get(base + 1)?.parse().ok().filter(|v: &f64| v.is_finite())?;
    let rest = &toks[base + 2..];
    let (dso, symbol) = match rest {
        [sym] => ("[unknown]".to_string(), sym.to_string()),
        [dso, sym] => (dso.to_string(), sym.to_string()),
        // `symbol name` columns of C++ symbols hold spaces: image, then the rest.
        [dso, sym @ ..] if !sym.is_empty() => (dso.to_string(), sym.join(" ")),
        _ => return None,
    };
    let ok = symbol.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '.' || c == '(');
    ok.then_some(ExcerptRow::Op { samples, pct, dso, symbol })
}

/// Parse an excerpt of a `perf report` or opreport table (rows without a header, maybe
/// quoted, maybe between prose). The rows keep their share of the whole profile; the rest
/// is `unlisted`. Errors name `origin` and the line: no row at all, or rows whose
/// percentages add up to more than 100 (two profiles pasted together).
pub fn parse_excerpt(text: &str, origin: &str) -> Result<TextProfile> {
    excerpt_lines(str_lines(text), origin)
}

fn excerpt_lines(lines: Lines<'_>, origin: &str) -> Result<TextProfile> {
    let (perf, op, repeats) = excerpt_rows(lines, origin)?;
    if perf.is_empty() && op.is_empty() {
        return Err(bad(
            origin,
            0,
            "no profile row: expected `perf report` rows (`7.77%  [k] fib_table_lookup`) or opreport rows \
             (`[vma] samples % [image] symbol`), with or without their header, quoted or not",
        ));
    }
    // One kind per excerpt: the kind with more rows (a stray line of the other kind in the
    // prose is not part of the table).
    let use_perf = perf.len() >= op.len();
    let pcts: Vec<(usize, f64)> =
        if use_perf { perf.iter().map(|r| (r.0, r.1)).collect() } else { op.iter().map(|r| (r.0, r.2)).collect() };
    check_excerpt_shares(&pcts, origin)?;
    let (rows, unlisted, format) = if use_perf {
        let (rows, unlisted) = perf_excerpt_rows(perf);
        (rows, unlisted, "perf report excerpt")
    } else {
        let (rows, unlisted) = op_excerpt_rows(op);
        (rows, unlisted, "opreport excerpt")
    };
    Ok(TextProfile {
        format: format.into(),
        event: "unknown".into(),
        rows,
        unlisted: Some(unlisted),
        notes: repeats.into_notes(),
    })
}

/// An excerpt's `perf report` rows: (line, percent, DSO, symbol).
type PerfExcerptRows = Vec<(usize, f64, String, String)>;
/// An excerpt's opreport rows: (line, samples, percent, image, symbol).
type OpExcerptRows = Vec<(usize, u64, f64, String, String)>;

/// The rows of an excerpt, of either kind, each once: a row met again with the same figure
/// is noted in the repeats, with another it is an error (a second profile).
fn excerpt_rows(lines: Lines<'_>, origin: &str) -> Result<(PerfExcerptRows, OpExcerptRows, Repeats)> {
    let mut perf = PerfExcerptRows::new();
    let mut op = OpExcerptRows::new();
    // A table lists each row once (perf: per command, object and symbol; opreport: per
    // image and symbol). A row met again is the writer pointing back at it ("that is why
    // this one is high:") when its figure is the same, and a second profile when not.
    let mut seen: HashMap<(bool, String), (usize, f64)> = HashMap::new();
    let mut repeats = Repeats::default();
    for line in lines {
        let (n, line) = line?;
        let t = unquote(&line).trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let Some(row) = perf_row(t).or_else(|| op_row(t)) else { continue };
        let (key, pct) = match &row {
            ExcerptRow::Perf { pct, key, .. } => ((true, key.clone()), *pct),
            ExcerptRow::Op { pct, dso, symbol, .. } => ((false, format!("{dso} {symbol}")), *pct),
        };
        if let Some(&(first, was)) = seen.get(&key) {
            if (was - pct).abs() < 1e-9 {
                repeats
                    .add(|| format!("{origin}:{n} repeats the row of line {first} (`{}` {pct}%): counted once", key.1));
                continue;
            }
            return Err(bad(
                origin,
                n,
                format!(
                    "`{}` listed again with {pct}% (line {first} gave {was}%): more than one profile (paste each \
                     into a file of its own)",
                    key.1
                ),
            ));
        }
        if seen.len() >= MAX_ROWS {
            return Err(bad(origin, n, format!("more than {MAX_ROWS} rows: not a profile fwdscope reads")));
        }
        seen.insert(key, (n, pct));
        match row {
            ExcerptRow::Perf { pct, dso, symbol, .. } => perf.push((n, pct, dso, symbol)),
            ExcerptRow::Op { samples, pct, dso, symbol } => op.push((n, samples, pct, dso, symbol)),
        }
    }
    Ok((perf, op, repeats))
}

/// Refuse an excerpt's shares (line, percent) past 100% each or in sum (two decimals of
/// rounding per row allowed).
fn check_excerpt_shares(pcts: &[(usize, f64)], origin: &str) -> Result<()> {
    let mut sum = 0.0;
    for (line, pct) in pcts {
        if !(0.0..=100.0).contains(pct) {
            return Err(bad(origin, *line, format!("{pct}%: expected a percentage between 0 and 100")));
        }
        sum += pct;
        // Rows are rounded to two decimals: allow that much per row.
        if sum > 100.0 + 0.005 * pcts.len() as f64 {
            return Err(bad(
                origin,
                *line,
                format!(
                    "the rows' percentages add up to {sum:.2}% by this line: more than one profile (paste each \
                     into a file of its own)"
                ),
            ));
        }
    }
    Ok(())
}

/// A `perf report` excerpt's rows in hundredths of a percent (a notional 10,000 samples),
/// and the samples they leave unlisted.
fn perf_excerpt_rows(perf: PerfExcerptRows) -> (Vec<ProfileRow>, u64) {
    // Shares in hundredths of a percent: a notional 10,000 samples.
    let rows: Vec<ProfileRow> = perf
        .into_iter()
        .map(|(_, pct, dso, symbol)| ProfileRow {
            symbol: printable(symbol),
            dso: printable(dso),
            samples: (pct * 100.0).round() as u64,
        })
        .collect();
    let listed: u64 = rows.iter().map(|r| r.samples).sum();
    (rows, 10_000u64.saturating_sub(listed))
}

/// An opreport excerpt's rows with their samples, and the samples of the whole profile
/// they leave unlisted.
fn op_excerpt_rows(op: OpExcerptRows) -> (Vec<ProfileRow>, u64) {
    // The whole profile's samples, from the row that gives it most precisely (the
    // largest): samples / percent.
    let total =
        op.iter().filter(|r| r.2 > 0.0).max_by_key(|r| r.1).map(|r| (r.1 as f64 * 100.0 / r.2).round()).unwrap_or(0.0);
    let rows: Vec<ProfileRow> = op
        .into_iter()
        .map(|(_, samples, _, dso, symbol)| ProfileRow { symbol: printable(symbol), dso: printable(dso), samples })
        .collect();
    let listed: u64 = rows.iter().fold(0u64, |a, r| a.saturating_add(r.samples));
    let total = if total.is_finite() && total < 1e15 { total as u64 } else { listed };
    (rows, total.saturating_sub(listed))
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

    /// perf report's default output: Children and Self columns and a call graph under
    /// each row. The Self column is read (it adds up to 100%), the graph lines skipped and
    /// both said; an unindented line that is no row is still an error.
    #[test]
    fn perf_report_default_output_with_children_and_call_graphs() {
        let text = "# Samples: 1K of event 'cpu-clock'\n\
                    #\n\
                    # Children      Self  Command  Shared Object      Symbol\n\
                    # ........  ........  .......  .................  ......\n\
                    #\n\
                    \x20   90.00%     0.00%  fwd      fwdscope           [.] main\n\
                    \x20           |\n\
                    \x20           ---main\n\
                    \x20              |--60.00%--fwd_lookup_fib_dir24\n\
                    \x20              |          fwd_lookup_burst\n\
                    \n\
                    \x20   60.00%    60.00%  fwd      fwdscope           [.] fwd_lookup_fib_dir24\n\
                    \x20           |\n\
                    \x20           ---fwd_lookup_fib_dir24\n\
                    \x20   40.00%    40.00%  fwd      [kernel.kallsyms]  [k] fib_table_lookup\n";
        let p = parse_perf_report(text, "pr.txt").expect("read");
        let got: Vec<(&str, u64)> = p.rows.iter().map(|r| (r.symbol.as_str(), r.samples)).collect();
        assert_eq!(got, vec![("main", 0), ("fwd_lookup_fib_dir24", 600), ("fib_table_lookup", 400)]);
        assert!(p.notes.iter().any(|n| n.contains("Self column")), "{:?}", p.notes);
        assert!(p.notes.iter().any(|n| n.starts_with("skipped 6 call-graph lines")), "{:?}", p.notes);
        let bad = text.replace("\x20   40.00%", "garbage 40.00%");
        let e = parse_perf_report(&bad, "pr.txt").expect_err("refused").to_string();
        assert!(e.starts_with("pr.txt:15: expected `OVERHEAD%"), "{e}");
    }

    /// With `perf report -n` the exact Samples column is read; without it the counts are
    /// estimated from the rounded header, and the report says so.
    #[test]
    fn exact_sample_counts_when_perf_printed_them() {
        let with_n = "# Samples: 7K of event 'cpu-clock'\n\
                      # Overhead  Samples  Command  Shared Object  Symbol\n\
                      \x20    8.23%      587  bash     libc.so.6      [.] _int_free\n\
                      \x20    4.00%      285  bash     libc.so.6      [.] malloc\n";
        let p = parse_perf_report(with_n, "n.txt").expect("read");
        let got: Vec<(&str, &str, u64)> =
            p.rows.iter().map(|r| (r.symbol.as_str(), r.dso.as_str(), r.samples)).collect();
        assert_eq!(got, vec![("_int_free", "libc.so.6", 587), ("malloc", "libc.so.6", 285)]);
        assert!(!p.notes.iter().any(|n| n.starts_with("sample counts estimated")), "{:?}", p.notes);
        let without = "# Samples: 7K of event 'cpu-clock'\n\x20    8.23%  bash  libc.so.6  [.] _int_free\n";
        let p = parse_perf_report(without, "e.txt").expect("read");
        assert_eq!(p.rows[0].samples, 576);
        assert!(p.notes.iter().any(|n| n.starts_with("sample counts estimated")), "{:?}", p.notes);
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

    #[test]
    fn excerpts_in_every_shape_people_paste_them() {
        let row = |t: &str| match perf_row(t) {
            Some(ExcerptRow::Perf { pct, dso, symbol, .. }) => Some((pct, dso, symbol)),
            _ => None,
        };
        let k = "[kernel.kallsyms]".to_string();
        assert_eq!(row("7.77%  [k] fib_table_lookup"), Some((7.77, k.clone(), "fib_table_lookup".into())));
        assert_eq!(
            row("3.02%  swapper  [kernel.kallsyms]  [k] __slab_free"),
            Some((3.02, k.clone(), "__slab_free".into()))
        );
        assert_eq!(row("2.00%  libc.so.6  [.] memcpy"), Some((2.0, "libc.so.6".into(), "memcpy".into())));
        // Children, then Self: the Self column is the sample's own share.
        assert_eq!(row("40.00%  1.50%  ksoftirqd/0  [k] net_rx_action"), Some((1.5, k, "net_rx_action".into())));
        assert_eq!(row("4.10%  fib_table_lookup"), Some((4.1, "[unknown]".into(), "fib_table_lookup".into())));
        assert_eq!(row("4.10%  vmlinux  ip_rcv"), Some((4.1, "vmlinux".into(), "ip_rcv".into())));
        // perf top's `[kernel]`, and the TUI's scroll bar at the end of a copied row.
        assert_eq!(row("3.11%  [kernel]  [k] ipt_do_table"), Some((3.11, "[kernel]".into(), "ipt_do_table".into())));
        assert_eq!(
            row("0.38%  iperf3  [kernel.kallsyms]  [k] __slab_free      ▒"),
            Some((0.38, "[kernel.kallsyms]".into(), "__slab_free".into()))
        );
        // perf's fold marker and a locale's decimal comma, as rows copied from its TUI show.
        assert_eq!(
            row("+    9,04%  swapper          [kernel.kallsyms]  [k] v7_dma_inv_range"),
            Some((9.04, "[kernel.kallsyms]".into(), "v7_dma_inv_range".into()))
        );
        assert_eq!(row("-   12,50%  2,00%  ksoftirqd/1  [k] net_rx_action").map(|r| r.0), Some(2.0));
        assert_eq!(percent_token("1,234.5%"), None);
        assert_eq!(percent_token("12,5%"), Some(12.5));
        // Prose with a percentage is not a row.
        assert_eq!(row("+ 5% faster"), None);
        assert_eq!(row("5% faster than before, as expected"), None);
        assert_eq!(row("5% faster"), None);
        assert_eq!(unquote(">      7.77%  [k] x"), "7.77%  [k] x");
        assert_eq!(unquote("> > >  1.00%  [k] x"), "1.00%  [k] x");
        assert_eq!(unquote(">>1.00%  [k] x"), "1.00%  [k] x");
        assert_eq!(unquote("  plain"), "  plain");
        match op_row("c0268e20 18837    10.3112  rt_garbage_collect") {
            Some(ExcerptRow::Op { samples, pct, dso, symbol }) => {
                assert_eq!(
                    (samples, pct, dso.as_str(), symbol.as_str()),
                    (18837, 10.3112, "[unknown]", "rt_garbage_collect")
                )
            }
            _ => panic!("opreport row with vma not read"),
        }
        match op_row("9112  4.9879  vmlinux  free_block") {
            Some(ExcerptRow::Op { samples, dso, .. }) => assert_eq!((samples, dso.as_str()), (9112, "vmlinux")),
            _ => panic!("opreport row without vma not read"),
        }
        assert!(op_row("2003 was 39 kpps").is_none());
    }

    #[test]
    fn an_excerpt_keeps_its_rows_shares_of_the_whole_profile() {
        let text = "Hi,\n\nthe router now shows\n\n>      7.77%  [k] fib_table_lookup\n> >    2.23%  [k] ip_rcv\n\n\
                    5% better than before.\n";
        let p = parse_text(text, "mail.txt").unwrap();
        assert_eq!(p.format, "perf report excerpt");
        assert_eq!(p.rows.iter().map(|r| r.samples).collect::<Vec<_>>(), [777, 223]);
        assert_eq!(p.unlisted, Some(10_000 - 1000));
        // opreport: the whole is samples / share of the largest row (1000 / 10% = 10000).
        let p = parse_text("c0000000 1000 10.0 fn_hash_lookup\nc0000100 500 5.0 ip_rcv\n", "op.txt").unwrap();
        assert_eq!((p.format.as_str(), p.unlisted), ("opreport excerpt", Some(8500)));
        // A whole table is not an excerpt.
        let p = parse_text("vma samples % symbol name\nc0 10 100.0 ip_rcv\n", "whole.txt").unwrap();
        assert_eq!(p.unlisted, None);
    }

    #[test]
    fn bad_excerpts_are_refused_naming_file_and_line() {
        let e = parse_text("Hello,\nno numbers here.\n", "prose.txt").unwrap_err().to_string();
        assert!(e.starts_with("prose.txt: no profile row: expected"), "{e}");
        let e = parse_text("a\n 60.00%  [k] x_a\n 30.00%  [k] x_b\nb\n 50.00%  [k] x_c\n", "two.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("two.txt:5: the rows' percentages add up to 140.00%"), "{e}");
        // The same row again with another figure: a second profile, named by both lines.
        let e = parse_text(" 6.00%  [k] x_a\n 3.00%  [k] x_b\nlater:\n 5.00%  [k] x_a\n", "again.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("again.txt:4: `[k] x_a` listed again with 5% (line 1 gave 6%)"), "{e}");
        // The same row with the same figure is the writer pointing back at it: once, said.
        let p = parse_text(" 6.00%  [k] x_a\n 3.00%  [k] x_b\nthis one:\n> 6.00%  [k] x_a\n", "ok.txt").unwrap();
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.unlisted, Some(10_000 - 900));
        assert_eq!(p.notes, ["ok.txt:4 repeats the row of line 1 (`[k] x_a` 6%): counted once"]);
        // The same symbol under two commands is two rows of perf's table.
        let p = parse_text(" 2.00%  swapper  [k] x_a\n 1.00%  ksoftirqd/0  [k] x_a\n", "comm.txt").unwrap();
        assert_eq!(p.rows.len(), 2);
        let e = parse_text(" 160.00%  [k] x_a\n", "big.txt").unwrap_err().to_string();
        assert!(e.starts_with("big.txt:1: 160%: expected a percentage between 0 and 100"), "{e}");
    }

    #[test]
    fn every_format_holds_one_profile() {
        // Two pasted perf profiles (60/40 and 30/70) are two headers, not a 45/55 average.
        let two = "# Samples: 10K of event 'cycles'\n# Overhead  Symbol\n 60.00%  [k] x_a\n 40.00%  [k] x_b\n\
                   # Samples: 10K of event 'cycles'\n 30.00%  [k] x_a\n 70.00%  [k] x_b\n";
        let e = parse_text(two, "two.txt").unwrap_err().to_string();
        assert!(e.starts_with("two.txt:5: a second `# Samples:` header (the first is at line 1)"), "{e}");
        // Without the second header: the shares pass 100% at the pasted profile's first row.
        let e =
            parse_text(&two.replace("# Samples: 10K of event 'cycles'\n 30", " 30"), "t.txt").unwrap_err().to_string();
        assert!(e.starts_with("t.txt:5: the rows' percentages add up to 130.00%"), "{e}");
        // In an excerpt (no header), the row listed again with another figure.
        let e = parse_text(" 60.00%  [k] x_a\n 10.00%  [k] x_b\n 20.00%  [k] x_a\n", "x.txt").unwrap_err().to_string();
        assert!(e.starts_with("x.txt:3: `[k] x_a` listed again with 20% (line 1 gave 60%)"), "{e}");
        // Shares past 100% under one header.
        let e = parse_text("# Samples: 1K of event 'c'\n 60.00%  [k] x_a\n 50.00%  [k] x_b\n", "s.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("s.txt:3: the rows' percentages add up to 110.00%"), "{e}");
        // opreport: two events, or two tables.
        let e = parse_text(
            "Counted CPU_CLK_UNHALTED events\nCounted DATA_CACHE_MISSES events\nvma samples % symbol name\n",
            "o.txt",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("o.txt:2: a second event `DATA_CACHE_MISSES`"), "{e}");
        let e = parse_text(
            "vma samples % symbol name\nc0 60 60.0 f_a\nvma samples % symbol name\nc0 30 30.0 f_a\n",
            "o2.txt",
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("o2.txt:3: a second table header (the first is at line 1)"), "{e}");
        let e = parse_text("vma samples % symbol name\nc0 60 60.0 f_a\nc1 60 60.0 f_b\n", "o3.txt")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("o3.txt:3: the rows' percentages add up to 120.00%"), "{e}");
    }

    #[test]
    fn repeated_rows_count_once_and_their_notes_are_summed_up() {
        // 100k copies of a 60% row under a 10K-sample header: refused where the shares pass
        // 100% (not 600 million samples of a 10K-sample profile).
        let mut text = String::from("# Samples: 10K of event 'cycles'\n 30.00%  [k] x_b\n");
        for _ in 0..100_000 {
            text.push_str(" 60.00%  [k] x_a\n");
        }
        let e = parse_text(&text, "rep.txt").unwrap_err().to_string();
        assert!(e.starts_with("rep.txt:4: the rows' percentages add up to 150.00%"), "{e}");
        // In an excerpt (no header: rows anyone may have pasted twice), read from a file
        // line by line, the repeats are counted once and their notes summed up.
        let dir = std::env::temp_dir().join(format!("fwdscope-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("excerpt.txt");
        std::fs::write(&f, text.replace("# Samples: 10K of event 'cycles'\n", "")).unwrap();
        let p = load_text(&f).unwrap();
        assert_eq!((p.format.as_str(), p.rows.len(), p.unlisted), ("perf report excerpt", 2, Some(1000)));
        assert_eq!(p.notes.len(), NOTED_REPEATS + 1);
        assert!(
            p.notes[0].ends_with("excerpt.txt:3 repeats the row of line 2 (`[k] x_a` 60%): counted once"),
            "{:?}",
            p.notes
        );
        assert_eq!(p.notes[NOTED_REPEATS], format!("{} more repeated rows, each counted once", 99_999 - NOTED_REPEATS));
        // A line past MAX_LINE, and bytes that are not text, name their line.
        std::fs::write(&f, format!(" 1.00%  [k] x_a\n{}\n", "x".repeat(MAX_LINE + 10))).unwrap();
        let e = load_text(&f).unwrap_err().to_string();
        assert!(e.ends_with(&format!("excerpt.txt:2: a line longer than {MAX_LINE} bytes: not a text profile")), "{e}");
        std::fs::write(&f, b" 1.00%  [k] x_a\n 2.00% [k] \xff\n").unwrap();
        let e = load_text(&f).unwrap_err().to_string();
        assert!(e.ends_with("excerpt.txt:2: byte 12: not UTF-8 text"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_name_twice_under_a_header_is_two_functions() {
        // perf lists two static functions (or C++ lambdas) of one name in one object as two
        // rows: a profile perf printed keeps both.
        let t = "# Samples: 100 of event 'cpu-clock'\n#\n# Overhead  Shared Object  Symbol\n#\n\
                 \x20   60.00%  libLLVM.so  [.] foo()::$_0::operator()\n\
                 \x20   40.00%  libLLVM.so  [.] foo()::$_0::operator()\n";
        let p = parse_text(t, "d.txt").unwrap();
        assert_eq!(p.rows.iter().map(|r| r.samples).collect::<Vec<_>>(), [60, 40]);
        assert!(
            p.notes.iter().any(|n| n.starts_with("1 rows name a function an earlier row names too")),
            "{:?}",
            p.notes
        );
        // opreport likewise, under its `Counted` line.
        let o = "Counted CPU_CLK_UNHALTED events\nsamples  %  symbol name\n600 60.0 f_a\n400 40.0 f_a\n";
        assert_eq!(parse_text(o, "o.txt").unwrap().rows.len(), 2);
        // Shares past 100% are still a second profile.
        let e = parse_text(&t.replace("40.00%", "60.00%"), "d.txt").unwrap_err().to_string();
        assert!(e.starts_with("d.txt:6: the rows' percentages add up to 120.00%"), "{e}");
    }

    #[test]
    fn terminal_escapes_in_names_are_escaped_not_printed() {
        let p = parse_text("# Samples: 1K of event 'c'\n 50.00%  [k] evil\x1b[2J\n", "esc.txt").unwrap();
        assert_eq!(p.rows[0].symbol, "evil\\u{1b}[2J");
        let e = parse_text("# Samples: 1K of event 'c'\n\x1b[31mred\n", "esc.txt").unwrap_err().to_string();
        assert!(!e.contains('\x1b') && e.contains("\\u{1b}[31mred"), "{e}");
    }
}
