//! Annotation below the symbol (`fwdscope annotate`): a function's instructions, decoded
//! with iced-x86 from the very binary the recording names (found by build-id as the
//! report finds it), each with its samples, its share of the function's samples, the
//! stage those samples were charged to (the report's [`Attributor`] and rules), and its
//! source position with inline frames (DWARF, through the symbolizer's addr2line context);
//! plus the same samples folded by source line. Kernel functions are annotated from a
//! vmlinux the user gives (checked against the recorded kernel's build-id, moved by the
//! recorded `_text` for KASLR); without one only their sampled addresses are listed.
//!
//! The pure parts (folding by line, nearest names, windows of a huge function) are
//! functions of plain data, tested by hand-computed cases below.

use crate::input::Input;
use crate::rules::{Rules, STARTUP};
use crate::stages::Attributor;
use crate::symbolize::kernel::KernelIdentity;
use crate::symbolize::{ElfSymbols, Frame, Svma, SymbolPaths, Symbolizer};
use crate::{Error, Result};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

mod inlined;

/// What samples mean at an instruction, said in every output (perf's docs say the same of
/// skid: the sample is taken on the instruction after the one that waited).
pub const SKID: &str = "samples land on the instruction after the one that waited (skid): a hot \
                        instruction is often the one after a slow load, branch or division";

/// Where `annotate`'s output is cut, and what it annotates.
#[derive(Debug, Clone)]
pub struct Options {
    /// One symbol by its exact name. Default: none (the top symbols).
    pub symbol: Option<String>,
    /// The top symbols of this stage only. Default: none (all stages).
    pub stage: Option<String>,
    /// How many symbols. Default 5.
    pub top: usize,
    /// A kernel image with symbols (an ELF `vmlinux`), for kernel functions. Default: none
    /// (kernel functions list their sampled addresses only, saying why).
    pub vmlinux: Option<PathBuf>,
    /// A function of more instructions than this shows its hottest windows only.
    /// Default 100,000.
    pub max_instructions: usize,
    /// Instructions shown either side of a hot one in such a window. Default 16.
    pub window_radius: usize,
    /// How many windows at most. Default 12.
    pub max_windows: usize,
    /// These symbols by exact name, each that has samples (none is an error): the second
    /// input of a comparison annotates what the first chose. Default: none.
    pub names: Vec<String>,
    /// Also annotate the named functions (`symbol`, `names`) where DWARF says they were
    /// inlined into others, one annotation per function inlined into; and answer a name
    /// not found with inlined functions among the nearest. It reads the inline chain of
    /// every sampled user-space address. Default: false (symbols only).
    pub inlined_copies: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            symbol: None,
            stage: None,
            top: 5,
            vmlinux: None,
            max_instructions: 100_000,
            window_radius: 16,
            max_windows: 12,
            names: Vec::new(),
            inlined_copies: false,
        }
    }
}

/// Samples charged to one stage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageCount {
    pub stage: String,
    pub samples: u64,
}

/// One instruction (or, with addresses only, one sampled address).
#[derive(Debug, Clone, Serialize)]
pub struct InstructionRow {
    /// The address as the ELF file states it (as objdump and `perf annotate` show it);
    /// for a kernel function without vmlinux, the runtime address.
    pub address: u64,
    /// Its bytes' length (0 when not decoded).
    pub length: usize,
    /// The instruction in Intel syntax; None when not decoded (addresses only).
    pub text: Option<String>,
    pub samples: u64,
    /// Share of the function's samples, in percent.
    pub percent: f64,
    /// The stage its samples were charged to, most samples first.
    pub stages: Vec<StageCount>,
    /// Innermost inlined function first, the function itself last, each with its source
    /// position (for an inlined frame, the call site in the frame after it).
    pub frames: Vec<Frame>,
    /// Among the hottest instructions of the function (the three with most samples).
    pub hot: bool,
    /// The first instruction of a window after instructions left out (huge functions).
    pub after_gap: bool,
}

/// The samples of one source position (with the call sites it was inlined through).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineRow {
    /// `FILE:LINE` of the innermost frame (file name only), or `?` without DWARF.
    pub location: String,
    /// The full path DWARF gives.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The innermost function.
    pub function: String,
    /// Where it was inlined, innermost first: `FUNCTION at FILE:LINE`.
    pub inlined_at: Vec<String>,
    pub samples: u64,
    pub percent: f64,
    pub stages: Vec<StageCount>,
    /// Among the three hottest lines.
    pub hot: bool,
}

/// One function annotated.
#[derive(Debug, Clone, Serialize)]
pub struct SymbolAnnotation {
    /// The function annotated: a symbol, or a function inlined into one.
    pub symbol: String,
    /// For a copy of `symbol` inlined into another function, that function (whose
    /// instructions of the copy only are then shown); None for a symbol's own annotation.
    pub inlined_into: Option<String>,
    pub dso: String,
    pub kernel: bool,
    pub samples: u64,
    /// Share of all samples, in percent.
    pub percent: f64,
    /// Where its bytes and names came from: the file and how it was matched (build-id).
    pub source: String,
    /// The function's start and size as the file states them, when known.
    pub start: Option<u64>,
    pub size: Option<u64>,
    /// Instructions decoded in the whole function (0 when not decoded).
    pub instructions_total: usize,
    /// What this annotation lacks and why (addresses only, windows only, kernel).
    pub notes: Vec<String>,
    pub instructions: Vec<InstructionRow>,
    /// The same samples folded by source line, most first.
    pub lines: Vec<LineRow>,
}

/// The whole annotation.
#[derive(Debug, Clone, Serialize)]
pub struct Annotation {
    pub input: String,
    /// The sampled event.
    pub event: String,
    /// Samples in the input.
    pub samples: u64,
    pub skid: String,
    /// Where kernel names came from.
    pub kernel_source: String,
    pub symbols: Vec<SymbolAnnotation>,
    /// What the input or the symbol sources lack.
    pub warnings: Vec<String>,
}

/// One sampled address of a symbol: its process, address, whether kernel, samples, and
/// the stage they were charged to.
#[derive(Debug, Clone)]
struct Hit {
    pid: u32,
    ip: u64,
    samples: u64,
    stage: String,
}

/// A symbol's samples, as the report names it.
#[derive(Debug, Default, Clone)]
struct Sampled {
    samples: u64,
    kernel: bool,
    /// Whether the name is an address left unnamed (stripped binary, unknown build).
    unnamed: bool,
    binary_unknown: bool,
    by_stage: HashMap<String, u64>,
    hits: Vec<Hit>,
}

/// A symbol's key in the tables: its name (a binary's unnamed addresses folded into one
/// `DSO (no symbol)` entry) and DSO.
type Key = (String, String);

/// Annotate the symbols `o` asks for in `input` (a recording or a perf.data file).
pub fn annotate(input: &Input, path: &Path, rules: &Rules, paths: &SymbolPaths, o: &Options) -> Result<Annotation> {
    let (groups, sym, names, event, kernel_id, mut warnings) = open_samples(input, path, paths)?;
    let mut at = Attributor::new(sym, rules.clone());
    let mut table: HashMap<Key, Sampled> = HashMap::new();
    let mut total = 0u64;
    for (window, g) in &groups {
        let (a, _) = at.attribute_group(g, &names);
        let stage = if *window == 1 { STARTUP.to_string() } else { a.stage };
        total += g.samples;
        let dso = a.symbol.dso.clone();
        let unnamed = a.symbol.binary_unknown
            || a.symbol.name.starts_with(&format!("{dso}+0x"))
            || crate::symbolize::is_unnamed_kernel(&a.symbol.name)
            || a.symbol.name.starts_with("[unknown]");
        let name = if unnamed { format!("{dso} (no symbol)") } else { a.symbol.name };
        let e = table.entry((name, dso)).or_default();
        e.samples += g.samples;
        e.kernel = g.kernel;
        e.unnamed = unnamed;
        e.binary_unknown |= a.symbol.binary_unknown;
        *e.by_stage.entry(stage.clone()).or_default() += g.samples;
        e.hits.push(Hit { pid: g.pid, ip: g.ip, samples: g.samples, stage });
    }
    let chosen = targets(&table, o, &mut at)?;
    let vmlinux = match &o.vmlinux {
        Some(p) if chosen.iter().any(|t| t.sampled.kernel) => Some(Vmlinux::open(p, &kernel_id)?),
        _ => None,
    };
    let kernel_source = at.symbolizer().sources().into_iter().next().unwrap_or_default();
    let mut out = Vec::new();
    for t in &chosen {
        out.push(annotate_one(t, total, &mut at, vmlinux.as_ref(), &kernel_id, o));
    }
    warnings.extend(at.symbolizer().warnings().iter().cloned());
    Ok(Annotation {
        input: path.display().to_string(),
        event,
        samples: total,
        skid: SKID.to_string(),
        kernel_source,
        symbols: out,
        warnings,
    })
}

type Opened =
    (Vec<(u32, crate::aggregate::Group)>, Symbolizer, HashMap<u32, String>, String, KernelIdentity, Vec<String>);

/// The input's grouped samples (with the start-up window, as the report marks it), its
/// symbolizer, thread names, event, recorded kernel and warnings.
fn open_samples(input: &Input, path: &Path, paths: &SymbolPaths) -> Result<Opened> {
    match input {
        Input::Recording(rec) => {
            let sym = Symbolizer::for_recording_with(rec, paths)?;
            let tasks = rec.tasks()?;
            let starts = crate::stages::forwarding_starts(&tasks);
            let df = crate::stages::mark_startup(rec.samples_df()?, &starts)?;
            let groups = crate::aggregate::group_by_window(df)?;
            let m = &rec.meta.machine;
            let id = KernelIdentity {
                build_id: m.kernel_build_id.clone(),
                reference: m
                    .kernel_text
                    .as_deref()
                    .and_then(|t| u64::from_str_radix(t.trim_start_matches("0x"), 16).ok())
                    .map(|a| ("_text".to_string(), a)),
            };
            Ok((groups, sym, crate::stages::thread_names(&tasks), rec.meta.sampling.used.clone(), id, rec.problems()))
        }
        Input::PerfData(p) => {
            let look = crate::symbolize::kernel::KernelLookup { given: paths.kallsyms.clone(), ..Default::default() };
            let (pd, ks) = crate::perfdata::read_perf_data_with_kernel(p, &look, true)?;
            let sym = Symbolizer::with_kernel(pd.maps.clone(), ks).with_symfs(paths.symfs.as_deref());
            let groups = pd.groups()?.into_iter().map(|g| (0, g)).collect();
            Ok((groups, sym, crate::stages::thread_names(&pd.tasks), pd.event.clone(), pd.kernel.clone(), pd.warnings))
        }
        other => Err(Error::Annotate(format!(
            "{}: a {}; annotate reads a recording directory (fwdscope record) or a perf.data file: it needs \
             sampled addresses",
            path.display(),
            other.kind()
        ))),
    }
}

/// What one annotation covers: a symbol's samples, or (`inlined` names it) those of a
/// function inlined into that symbol.
struct Target<'t> {
    key: Key,
    sampled: std::borrow::Cow<'t, Sampled>,
    inlined: Option<String>,
}

/// The annotations to make: the symbols [`choose`] picks, then (`o.inlined_copies`) for
/// each name asked for (`o.symbol`, `o.names`) its copies inlined into other functions
/// where samples fell (a function may have a symbol of its own and be inlined elsewhere
/// too); a named symbol found in neither is an error giving the nearest names.
fn targets<'t>(table: &'t HashMap<Key, Sampled>, o: &Options, at: &mut Attributor) -> Result<Vec<Target<'t>>> {
    use std::borrow::Cow;
    let chosen = choose(table, o)?;
    let mut out: Vec<Target> =
        chosen.iter().map(|k| Target { key: k.clone(), sampled: Cow::Borrowed(&table[k]), inlined: None }).collect();
    let mut asked: Vec<&str> = match &o.symbol {
        Some(s) => vec![s.as_str()],
        None => o.names.iter().map(String::as_str).collect(),
    };
    // A name given twice is looked for once (its samples are not counted twice).
    asked.sort_unstable();
    asked.dedup();
    let mut seen = std::collections::BTreeSet::new();
    if o.inlined_copies && !asked.is_empty() {
        let (found, names) = inlined::inlined_samples(table, &asked, at);
        seen = names;
        out.extend(found.into_iter().map(|(name, key, s)| Target { key, sampled: Cow::Owned(s), inlined: Some(name) }));
    }
    match &o.symbol {
        Some(want) if out.is_empty() => Err(inlined::no_such_symbol(want, table, &seen)),
        _ => Ok(out),
    }
}

/// The symbols to annotate: the one named (none when no symbol has that name), a stage's
/// top, or the top overall.
fn choose(table: &HashMap<Key, Sampled>, o: &Options) -> Result<Vec<Key>> {
    let mut all: Vec<(&Key, &Sampled)> = table.iter().collect();
    all.sort_by(|a, b| b.1.samples.cmp(&a.1.samples).then(a.0.cmp(b.0)));
    if !o.names.is_empty() {
        return Ok(all.iter().filter(|(k, _)| o.names.contains(&k.0)).map(|(k, _)| (*k).clone()).collect());
    }
    if let Some(want) = &o.symbol {
        return Ok(all.iter().filter(|(k, _)| &k.0 == want).map(|(k, _)| (*k).clone()).collect());
    }
    if let Some(stage) = &o.stage {
        let mut in_stage: Vec<(&Key, u64)> =
            all.iter().filter_map(|(k, s)| Some((*k, *s.by_stage.get(stage)?))).filter(|(_, n)| *n > 0).collect();
        if in_stage.is_empty() {
            let mut stages: BTreeMap<&str, u64> = BTreeMap::new();
            for (_, s) in &all {
                for (st, n) in &s.by_stage {
                    *stages.entry(st).or_default() += n;
                }
            }
            let list: Vec<String> = stages.iter().map(|(s, n)| format!("{s} ({n})")).collect();
            return Err(Error::Annotate(format!(
                "stage `{}` has no samples in this input; its stages: {}",
                crate::printable(stage.clone()),
                list.join(", ")
            )));
        }
        in_stage.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        return Ok(in_stage.into_iter().take(o.top).map(|(k, _)| k.clone()).collect());
    }
    Ok(all.into_iter().take(o.top).map(|(k, _)| k.clone()).collect())
}

/// Up to `k` of `names` nearest to `want`: those containing it (or contained in it),
/// case-insensitively, shortest first; then the rest by a similarity, best first (ties by
/// name; only those at least 0.4 similar): the best of the normalized Levenshtein
/// similarity of their last path segments, of the whole names, and the share of the
/// query's words (runs of letters and digits, 3 or more long) the name contains
/// (`Dir24::lookup` finds `fwd_lookup_fib_dir24`, where it was inlined).
pub fn nearest_names(want: &str, names: &[&str], k: usize) -> Vec<String> {
    let lw = want.to_lowercase();
    let last = |s: &str| s.rsplit("::").next().unwrap_or(s).to_lowercase();
    let words: Vec<String> =
        lw.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() >= 3).map(str::to_string).collect();
    let mut contains: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            let ln = n.to_lowercase();
            ln.contains(&lw) || (!ln.is_empty() && lw.contains(&ln))
        })
        .collect();
    contains.sort_by(|a, b| a.len().cmp(&b.len()).then(a.cmp(b)));
    contains.dedup();
    let mut out: Vec<String> = contains.into_iter().take(k).map(str::to_string).collect();
    let mut scored: Vec<(f64, &str)> = names
        .iter()
        .copied()
        .filter(|n| !out.iter().any(|o| o == n))
        .map(|n| {
            let ln = n.to_lowercase();
            let shared = if words.is_empty() {
                0.0
            } else {
                words.iter().filter(|w| ln.contains(w.as_str())).count() as f64 / words.len() as f64
            };
            let s = strsim::normalized_levenshtein(&last(n), &last(want))
                .max(strsim::normalized_levenshtein(&ln, &lw))
                .max(shared);
            (s, n)
        })
        .filter(|(s, _)| *s >= 0.4)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    for (_, n) in scored {
        if out.len() >= k {
            break;
        }
        if !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// The instruction ranges of a huge function worth showing: a window of `radius`
/// instructions either side of each of the hottest ones (`samples[i]`: instruction `i`'s
/// samples), hottest first, windows that touch or overlap merged, at most `max` windows
/// (counted after merging), in address order. Instructions without samples open none.
pub fn hot_windows(samples: &[u64], radius: usize, max: usize) -> Vec<std::ops::Range<usize>> {
    let mut order: Vec<usize> = (0..samples.len()).filter(|&i| samples[i] > 0).collect();
    order.sort_by(|&a, &b| samples[b].cmp(&samples[a]).then(a.cmp(&b)));
    let mut windows: Vec<std::ops::Range<usize>> = Vec::new();
    for i in order {
        if windows.iter().any(|w| w.contains(&i)) {
            continue;
        }
        let mut w = i.saturating_sub(radius)..(i + radius + 1).min(samples.len());
        // Merge every window this one touches or overlaps.
        let mut k = 0;
        let before = windows.len();
        while k < windows.len() {
            let o = &windows[k];
            if o.start <= w.end && w.start <= o.end {
                w = o.start.min(w.start)..o.end.max(w.end);
                windows.swap_remove(k);
            } else {
                k += 1;
            }
        }
        if windows.len() == before && windows.len() >= max {
            // A new window (not merged into one already chosen) would be one too many.
            continue;
        }
        windows.push(w);
    }
    windows.sort_by_key(|w| w.start);
    windows
}

/// One instruction's samples and stages, and its frames: the input of [`fold_lines`].
#[derive(Debug, Clone)]
pub struct LineInput<'a> {
    pub samples: u64,
    pub stages: &'a [StageCount],
    pub frames: &'a [Frame],
}

/// The samples folded by source position: instructions whose innermost frame has the same
/// file and line, inlined through the same call sites, are one row. Rows most samples
/// first (then by location); `total` is the function's samples (for percent); the three
/// hottest rows with samples are marked. Instructions without samples are left out.
pub fn fold_lines(rows: &[LineInput<'_>], total: u64) -> Vec<LineRow> {
    type LineKey = (Option<String>, Option<u32>, String, Vec<String>);
    let mut by: BTreeMap<LineKey, (u64, BTreeMap<String, u64>)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.samples > 0) {
        let (function, file, line) = match r.frames.first() {
            Some(f) => (f.function.clone(), f.file.clone(), f.line),
            None => ("?".to_string(), None, None),
        };
        // For each inlined frame, the call site is the location of the frame after it.
        let inlined_at: Vec<String> =
            r.frames.iter().skip(1).map(|f| format!("{} at {}", f.function, location(&f.file, f.line))).collect();
        let e = by.entry((file, line, function, inlined_at)).or_default();
        e.0 += r.samples;
        for s in r.stages {
            *e.1.entry(s.stage.clone()).or_default() += s.samples;
        }
    }
    let mut out: Vec<LineRow> = by
        .into_iter()
        .map(|((file, line, function, inlined_at), (samples, st))| LineRow {
            location: location(&file, line),
            file,
            line,
            function,
            inlined_at,
            samples,
            percent: pct(samples, total),
            stages: stage_counts(st.into_iter()),
            hot: false,
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.location.cmp(&b.location)));
    for r in out.iter_mut().take(3) {
        r.hot = r.samples > 0;
    }
    out
}

/// `FILE:LINE` with the file's name only; `?` when unknown.
fn location(file: &Option<String>, line: Option<u32>) -> String {
    match (file, line) {
        (Some(f), l) => {
            let name = Path::new(f).file_name().map_or(f.clone(), |n| n.to_string_lossy().into_owned());
            match l {
                Some(l) => format!("{name}:{l}"),
                None => name,
            }
        }
        (None, _) => "?".to_string(),
    }
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    }
}

/// Stage counts most samples first (then by name).
fn stage_counts(it: impl Iterator<Item = (String, u64)>) -> Vec<StageCount> {
    let mut v: Vec<StageCount> = it.map(|(stage, samples)| StageCount { stage, samples }).collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.stage.cmp(&b.stage)));
    v
}

/// A kernel image for kernel functions: its symbols, and the shift from the recording's
/// runtime addresses to the image's (KASLR: the recorded `_text` minus the image's).
struct Vmlinux {
    elf: ElfSymbols,
    shift: i128,
    source: String,
}

impl Vmlinux {
    /// Open `path`; refused unless it is an ELF file with symbols whose build-id is the
    /// recorded kernel's (when one was recorded).
    fn open(path: &Path, id: &KernelIdentity) -> Result<Vmlinux> {
        let bad = |msg: String| Error::Annotate(format!("--vmlinux {}: {msg}", path.display()));
        let elf = ElfSymbols::open(path).ok_or_else(|| bad("not a readable ELF file".into()))?;
        let own = elf.build_id.clone();
        match (&id.build_id, &own) {
            (Some(want), Some(have)) if want != have => {
                return Err(bad(format!(
                    "build-id {have}, but the recording's kernel is build-id {want}: refused (another build's \
                     instructions would be shown against these samples)"
                )))
            }
            (Some(want), None) => {
                return Err(bad(format!(
                    "carries no build-id note, and the recording's kernel is build-id {want}: refused (it cannot be \
                     checked)"
                )))
            }
            _ => {}
        }
        let text = symbol_address(path, "_text").or_else(|| symbol_address(path, "_stext"));
        let shift = kaslr_shift(id.reference.as_ref().map(|r| r.1), text);
        let source = format!(
            "--vmlinux {} (build-id {}{}){}",
            path.display(),
            own.as_deref().unwrap_or("none"),
            if id.build_id.is_some() { ", as recorded" } else { "; the recording names none: unchecked" },
            match shift {
                0 => String::new(),
                s => format!("; addresses moved by {s:#x} (the recorded _text against the image's: KASLR)"),
            }
        );
        Ok(Vmlinux { elf, shift, source })
    }

    /// The image's address of a runtime kernel address.
    fn svma(&self, ip: u64) -> Option<Svma> {
        u64::try_from(i128::from(ip) - self.shift).ok().map(Svma)
    }
}

/// How far the running kernel sat from its image: the recorded reference address minus
/// the image's (0 when either is unknown).
pub fn kaslr_shift(recorded_text: Option<u64>, image_text: Option<u64>) -> i128 {
    match (recorded_text, image_text) {
        (Some(r), Some(i)) => i128::from(r) - i128::from(i),
        _ => 0,
    }
}

/// The address of symbol `name` in the ELF file at `path`, any kind.
fn symbol_address(path: &Path, name: &str) -> Option<u64> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let found = file.symbols().find(|s| s.name() == Ok(name)).map(|s| s.address());
    found
}

/// Samples and stages per address (the address as the file states it).
type PerAddress = BTreeMap<u64, (u64, BTreeMap<String, u64>)>;

/// Where a symbol's hits are placed: the file annotated (None: addresses only), what the
/// source line says of it, and each hit's address as that file states it.
struct Placed<'a> {
    elf: Option<&'a ElfSymbols>,
    source: String,
    svmas: Vec<Option<Svma>>,
}

/// Annotate one symbol: find its binary and bytes, decode, place the samples.
fn annotate_one(
    t: &Target,
    total: u64,
    at: &mut Attributor,
    vmlinux: Option<&Vmlinux>,
    kernel_id: &KernelIdentity,
    o: &Options,
) -> SymbolAnnotation {
    let ((name, dso), s) = (&t.key, &t.sampled);
    let mut notes = Vec::new();
    let sym = at.symbolizer();
    let Placed { elf, source, svmas } = if s.kernel {
        place_kernel_hits(s, sym, vmlinux, kernel_id, &mut notes)
    } else {
        place_user_hits(s, sym, dso, &mut notes)
    };
    // The function's range and bytes.
    let (range, bytes) = match (elf, s.unnamed) {
        (Some(e), false) => function_bytes(e, s, &svmas, &mut notes),
        _ => (None, None),
    };
    let per_addr = samples_by_address(s, &svmas, range, &mut notes);
    let (mut rows, instructions_total) = instruction_rows(range, bytes, &per_addr, s.samples, &mut notes);
    let frames = |rows: &mut [InstructionRow]| {
        if let Some(e) = elf {
            for r in rows {
                r.frames = e.frames_at_vaddr(Svma(r.address));
            }
        }
    };
    // An inlined copy is cut from its function before a huge one is cut to windows; a
    // symbol's own rows get their frames after (only the rows shown).
    if let Some(f) = &t.inlined {
        frames(&mut rows);
        inlined::keep_inlined_rows(&mut rows, f, name, range.map(|r| r.0 .0), &mut notes);
    }
    if rows.len() > o.max_instructions && instructions_total > 0 {
        rows = keep_hot_windows(rows, o, &mut notes);
    }
    if t.inlined.is_none() {
        frames(&mut rows);
    }
    mark_hottest(&mut rows);
    let inputs: Vec<LineInput<'_>> =
        rows.iter().map(|r| LineInput { samples: r.samples, stages: &r.stages, frames: &r.frames }).collect();
    let lines = fold_lines(&inputs, s.samples);
    SymbolAnnotation {
        symbol: t.inlined.clone().unwrap_or_else(|| name.clone()),
        inlined_into: t.inlined.as_ref().map(|_| name.clone()),
        dso: dso.clone(),
        kernel: s.kernel,
        samples: s.samples,
        percent: pct(s.samples, total),
        source,
        start: range.map(|r| r.0 .0),
        size: range.map(|r| r.1),
        instructions_total,
        notes,
        instructions: rows,
        lines,
    }
}

/// A kernel function's hits: in the `--vmlinux` image (moved by the KASLR shift), or
/// without one as runtime addresses only (the notes say why).
fn place_kernel_hits<'a>(
    s: &Sampled,
    sym: &Symbolizer,
    vmlinux: Option<&'a Vmlinux>,
    kernel_id: &KernelIdentity,
    notes: &mut Vec<String>,
) -> Placed<'a> {
    match vmlinux {
        Some(v) => {
            Placed { elf: Some(&v.elf), source: v.source.clone(), svmas: s.hits.iter().map(|h| v.svma(h.ip)).collect() }
        }
        None => {
            let source = sym.sources().into_iter().next().unwrap_or_default();
            notes.push(format!(
                "kernel function: kallsyms gives names and addresses only, not instruction bytes or source \
                 lines; give the recorded kernel's image with --vmlinux FILE (an ELF with symbols{}, as the \
                 distribution's kernel debug package installs it): its sampled addresses only",
                kernel_id.build_id.as_deref().map_or(String::new(), |b| format!(", build-id {b}"))
            ));
            Placed { elf: None, source, svmas: s.hits.iter().map(|h| Some(Svma(h.ip))).collect() }
        }
    }
}

/// A user-space function's hits: in the binary of its hottest hit's mapping (each hit as
/// an address of that file, None when another file holds it), or as addresses only when
/// no recorded mapping holds them or the binary is not at hand (the notes say which).
fn place_user_hits<'a>(s: &Sampled, sym: &'a mut Symbolizer, dso: &str, notes: &mut Vec<String>) -> Placed<'a> {
    // The binary of the hottest hit names the function; every hit is placed in it.
    let hottest = s.hits.iter().max_by_key(|h| h.samples).map(|h| (h.pid, h.ip));
    let Some((m, _)) = hottest.and_then(|(pid, ip)| sym.mapping_of(pid, ip)) else {
        notes.push("no recorded mapping holds these addresses: addresses only".to_string());
        return Placed {
            elf: None,
            source: "no recorded mapping holds these addresses".to_string(),
            svmas: s.hits.iter().map(|h| Some(Svma(h.ip))).collect(),
        };
    };
    let source = sym.binary_source(&m);
    let mut svmas = Vec::with_capacity(s.hits.len());
    for h in &s.hits {
        let off = sym.mapping_of(h.pid, h.ip).filter(|(hm, _)| hm.path == m.path).map(|(_, off)| off);
        let sv = off.map(|off| sym.binary(&m).and_then(|e| e.vaddr_of(off)).unwrap_or(Svma(off.0)));
        svmas.push(sv);
    }
    let e = sym.binary(&m);
    match e {
        None => notes.push(format!(
            "no file of the recorded build was found (see the source line): addresses only, as file \
             offsets in {dso}"
        )),
        Some(e) if s.unnamed => notes.push(format!(
            "{}: stripped of the symbols naming these addresses (no symbol table, no debug file by \
             build-id): addresses only",
            e.path().display()
        )),
        Some(e) if !e.is_elf() => notes.push(format!(
            "{}: a symbol map names the function but holds no instruction bytes: addresses only (file \
             offsets); give the binary (build-id {}) with --symfs DIR",
            e.path().display(),
            m.build_id.as_deref().unwrap_or("none recorded")
        )),
        Some(_) => {}
    }
    Placed { elf: e, source, svmas }
}

/// The range (start, size) of the function in `e` that holds the hottest placed hit, and
/// its bytes when `e` is an ELF file that has them (the notes say what is missing).
fn function_bytes<'e>(
    e: &'e ElfSymbols,
    s: &Sampled,
    svmas: &[Option<Svma>],
    notes: &mut Vec<String>,
) -> (Option<(Svma, u64)>, Option<&'e [u8]>) {
    let hottest = s.hits.iter().zip(svmas).filter_map(|(h, a)| Some((h.samples, (*a)?))).max_by_key(|x| x.0);
    let Some((_, a)) = hottest else { return (None, None) };
    let Some((_, start, size)) = e.function_at(a) else {
        notes.push(format!("{}: no function holds {:#x}: addresses only", e.path().display(), a.0));
        return (None, None);
    };
    let mut bytes = None;
    if e.is_elf() {
        bytes = e.bytes_at(start, size);
        if bytes.is_none() {
            notes.push(format!(
                "{}: the function's bytes are in no file-backed segment: addresses only",
                e.path().display()
            ));
        }
    }
    (Some((start, size)), bytes)
}

/// Samples and stages per address; those outside the function's `range` are said.
fn samples_by_address(
    s: &Sampled,
    svmas: &[Option<Svma>],
    range: Option<(Svma, u64)>,
    notes: &mut Vec<String>,
) -> PerAddress {
    let mut per_addr = PerAddress::new();
    let mut outside = 0u64;
    for (h, sv) in s.hits.iter().zip(svmas) {
        match sv {
            Some(a) if range.is_none_or(|(st, sz): (Svma, u64)| a.0 >= st.0 && a.0 - st.0 < sz) => {
                let e = per_addr.entry(a.0).or_default();
                e.0 += h.samples;
                *e.1.entry(h.stage.clone()).or_default() += h.samples;
            }
            _ => outside += h.samples,
        }
    }
    if outside > 0 {
        notes.push(format!(
            "{outside} of its samples sit outside the function's range in the file (another process's mapping, \
             or a symbol of the same name elsewhere): not shown"
        ));
    }
    per_addr
}

/// The function's rows: all its decoded instructions with their samples (cut to the
/// hottest windows by the caller), or the sampled addresses only when there are no
/// bytes. Returns the rows and the count of instructions decoded.
fn instruction_rows(
    range: Option<(Svma, u64)>,
    bytes: Option<&[u8]>,
    per_addr: &PerAddress,
    fn_samples: u64,
    notes: &mut Vec<String>,
) -> (Vec<InstructionRow>, usize) {
    let row = |address: u64, length: usize, text: Option<String>| {
        let (n, st) =
            per_addr.get(&address).map_or((0, Vec::new()), |(n, st)| (*n, stage_counts(st.clone().into_iter())));
        InstructionRow {
            address,
            length,
            text,
            samples: n,
            percent: pct(n, fn_samples),
            stages: st,
            frames: Vec::new(),
            hot: false,
            after_gap: false,
        }
    };
    match (range, bytes) {
        (Some((start, _)), Some(b)) if !b.is_empty() => {
            let all: Vec<InstructionRow> =
                decode(b, start.0).into_iter().map(|(a, len, text)| row(a, len, Some(text))).collect();
            let instructions_total = all.len();
            // A sample between instruction starts (decoding out of step): said, not lost.
            let starts: std::collections::HashSet<u64> = all.iter().map(|r| r.address).collect();
            let stray: u64 = per_addr.iter().filter(|(a, _)| !starts.contains(a)).map(|(_, (n, _))| n).sum();
            if stray > 0 {
                notes.push(format!("{stray} samples at addresses that start no decoded instruction: not shown"));
            }
            (all, instructions_total)
        }
        _ => (per_addr.keys().map(|&a| row(a, 0, None)).collect(), 0),
    }
}

/// The windows of `all` around its hottest instructions (`o.window_radius` either side,
/// `o.max_windows` at most), each window's first row marked as after a gap; said in the notes.
fn keep_hot_windows(mut all: Vec<InstructionRow>, o: &Options, notes: &mut Vec<String>) -> Vec<InstructionRow> {
    let counts: Vec<u64> = all.iter().map(|r| r.samples).collect();
    let ws = hot_windows(&counts, o.window_radius, o.max_windows);
    notes.push(format!(
        "{} instructions, over {}: the {} window(s) around the hottest instructions only ({} either \
         side)",
        all.len(),
        o.max_instructions,
        ws.len(),
        o.window_radius
    ));
    let mut keep = Vec::new();
    for w in ws {
        for (j, r) in all[w.clone()].iter_mut().enumerate() {
            r.after_gap |= j == 0 && w.start > 0;
        }
        keep.extend(all[w].iter().cloned());
    }
    keep
}

/// Mark the three hottest instructions (ties: the first).
fn mark_hottest(rows: &mut [InstructionRow]) {
    let mut order: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].samples > 0).collect();
    order.sort_by(|&a, &b| rows[b].samples.cmp(&rows[a].samples).then(a.cmp(&b)));
    for &i in order.iter().take(3) {
        rows[i].hot = true;
    }
}

/// Decode `bytes` placed at `ip`: each instruction's address, length and Intel text
/// (`(bad)` where the bytes decode to nothing, one byte skipped).
pub fn decode(bytes: &[u8], ip: u64) -> Vec<(u64, usize, String)> {
    use iced_x86::{Decoder, DecoderOptions, Formatter, Instruction, IntelFormatter};
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut f = IntelFormatter::new();
    let mut ins = Instruction::default();
    let mut out = Vec::new();
    while d.can_decode() {
        d.decode_out(&mut ins);
        let mut text = String::new();
        if ins.is_invalid() {
            text.push_str("(bad)");
        } else {
            f.format(&ins, &mut text);
        }
        out.push((ins.ip(), ins.len(), text));
    }
    out
}

/// A source file's lines, read once each (None: not readable here).
#[derive(Default)]
struct Sources {
    files: HashMap<String, Option<Vec<String>>>,
}

impl Sources {
    /// Line `line` (1-based) of `file`, when the file is readable here and that long.
    fn line(&mut self, file: &str, line: u32) -> Option<&str> {
        let lines = self.files.entry(file.to_string()).or_insert_with(|| {
            // Bounded: a source file, not whatever a DWARF path may name.
            std::fs::metadata(file).ok().filter(|m| m.is_file() && m.len() < (16 << 20))?;
            std::fs::read(file).ok().map(|b| String::from_utf8_lossy(&b).lines().map(str::to_string).collect())
        });
        lines.as_ref()?.get((line as usize).checked_sub(1)?).map(String::as_str)
    }
}

/// The stages of a row as a column: `lookup`, or `lookup,ip` when several.
fn stages_cell(st: &[StageCount]) -> String {
    st.iter().map(|s| s.stage.as_str()).collect::<Vec<_>>().join(",")
}

/// The inline chain of frames (innermost first) in words: `inlined into F at FILE:LINE`.
fn inline_chain(frames: &[Frame]) -> String {
    if frames.len() < 2 {
        return String::new();
    }
    let parts: Vec<String> =
        frames.iter().skip(1).map(|f| format!("{} at {}", short_fn(&f.function), location(&f.file, f.line))).collect();
    format!("  [inlined into {}]", parts.join(" < "))
}

/// A function's last two path segments (`Dir24::lookup`), for the listing's margins;
/// `::` inside brackets does not split (`<[T] as Index<I>>::index` stays whole, and so do
/// a C++ name's parameters).
fn short_fn(f: &str) -> String {
    let mut depth = 0i32;
    let mut cuts = Vec::new();
    let b = f.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'<' | b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            // `->` in a function type is no bracket.
            b'>' if i == 0 || b[i - 1] != b'-' => depth -= 1,
            b':' if depth == 0 && b.get(i + 1) == Some(&b':') => cuts.push(i),
            _ => {}
        }
    }
    match cuts.len() {
        0 | 1 => f.to_string(),
        n => f[cuts[n - 2] + 2..].to_string(),
    }
}

impl Annotation {
    /// The annotation as text: a head (input, event, samples, skid), then per function its
    /// source, notes and instructions with source lines interleaved (`source`: the lines
    /// folded instead).
    pub fn text(&self, source: bool) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let p = printable;
        let _ = writeln!(out, "# fwdscope annotate {}", p(&self.input));
        let _ = writeln!(out, "# event {}: {} samples", p(&self.event), self.samples);
        let _ = writeln!(out, "# skid: {}", self.skid);
        let _ = writeln!(out, "# {}", p(&self.kernel_source));
        for w in &self.warnings {
            let _ = writeln!(out, "# WARNING: {}", p(w));
        }
        let mut src = Sources::default();
        for a in &self.symbols {
            write_function_head(&mut out, a, &self.event);
            if source {
                write_source_lines(&mut out, a);
            } else {
                write_instructions(&mut out, a, &mut src);
            }
        }
        out
    }
}

/// `s` as printed (control characters escaped).
fn printable(s: &str) -> String {
    crate::printable(s.to_string())
}

/// A function's head: samples, where its symbols came from, its range, the stages its
/// samples were charged to, and the notes.
fn write_function_head(out: &mut String, a: &SymbolAnnotation, event: &str) {
    use std::fmt::Write;
    let p = printable;
    let _ = writeln!(
        out,
        "\n== {}{} ({}): {} samples of {}, {:.2}% of all",
        p(&a.symbol),
        a.inlined_into.as_deref().map_or(String::new(), |f| format!(" inlined into {}", p(f))),
        p(&a.dso),
        a.samples,
        p(event),
        a.percent
    );
    let _ = writeln!(out, "   symbols: {}", p(&a.source));
    // Where the source lines and inline frames come from (said apart from the symbols:
    // a symbol table names functions, DWARF places lines).
    if a.instructions_total > 0 {
        let lines = if a.instructions.iter().any(|r| r.frames.iter().any(|f| f.file.is_some())) {
            "DWARF (source lines and inline frames)"
        } else {
            "none: no DWARF line information was found for this function (built without debug info, or \
             stripped of it)"
        };
        let _ = writeln!(out, "   lines: {lines}");
    }
    if let (Some(st), Some(sz)) = (a.start, a.size) {
        let _ = writeln!(
            out,
            "   function: {st:#x}, {sz} bytes{}",
            if a.instructions_total > 0 { format!(", {} instructions", a.instructions_total) } else { String::new() }
        );
    }
    let mut by_stage: BTreeMap<&str, u64> = BTreeMap::new();
    for r in &a.instructions {
        for s in &r.stages {
            *by_stage.entry(&s.stage).or_default() += s.samples;
        }
    }
    let st = stage_counts(by_stage.into_iter().map(|(k, v)| (k.to_string(), v)));
    let st: Vec<String> = st.iter().map(|s| format!("{} {}", s.stage, s.samples)).collect();
    let _ = writeln!(out, "   stages charged: {}", if st.is_empty() { "none".into() } else { st.join(", ") });
    for n in &a.notes {
        let _ = writeln!(out, "   note: {}", p(n));
    }
}

/// A function's samples folded by source line (`annotate --source`).
fn write_source_lines(out: &mut String, a: &SymbolAnnotation) {
    use std::fmt::Write;
    let p = printable;
    let _ = writeln!(out, "   {:>8} {:>7}  {:<28} {:<12} function", "samples", "%", "source line", "stage");
    for l in &a.lines {
        let _ = writeln!(
            out,
            "{}  {:>8} {:>7.2}  {:<28} {:<12} {}",
            if l.hot { "*" } else { " " },
            l.samples,
            l.percent,
            p(&l.location),
            stages_cell(&l.stages),
            p(&short_fn(&l.function))
        );
        if !l.inlined_at.is_empty() {
            let _ = writeln!(out, "{:50}inlined into {}", "", p(&l.inlined_at.join(" < ")));
        }
    }
}

/// A function's instructions with their samples, each new source position heading the
/// instructions it gave (with its line of source when `src` finds the file).
fn write_instructions(out: &mut String, a: &SymbolAnnotation, src: &mut Sources) {
    use std::fmt::Write;
    let p = printable;
    let hot_lines: Vec<(&Option<String>, Option<u32>)> =
        a.lines.iter().filter(|l| l.hot).map(|l| (&l.file, l.line)).collect();
    let _ = writeln!(out, "   {:>8} {:>7}  {:<18} {:<44} stage", "samples", "%", "address", "instruction");
    let mut last: Option<(Option<String>, Option<u32>)> = None;
    for r in &a.instructions {
        if r.after_gap {
            let _ = writeln!(out, "   {:>8} {:>7}  ...", "", "");
        }
        // Only positions DWARF gave: a name alone (a symbol map) heads nothing.
        let here = r.frames.first().filter(|f| f.file.is_some()).map(|f| (f.file.clone(), f.line));
        if here.is_some() && here != last {
            if let Some((file, line)) = &here {
                let hot = hot_lines.iter().any(|(f, l)| *f == file && *l == *line);
                let _ = writeln!(
                    out,
                    "{}{:>28}; {}{}",
                    if hot { "*" } else { " " },
                    "",
                    p(&location(file, *line)),
                    p(&inline_chain(&r.frames))
                );
                if let (Some(f), Some(l)) = (file, line) {
                    if let Some(text) = src.line(f, *l) {
                        let _ = writeln!(out, " {:>28}; {:>5} | {}", "", l, p(text.trim_end()));
                    }
                }
            }
            last = here;
        }
        let _ = writeln!(
            out,
            "{} {:>8} {:>7.2}  {:<18} {:<44} {}",
            if r.hot { ">>" } else { "  " },
            r.samples,
            r.percent,
            format!("{:x}:", r.address),
            p(r.text.as_deref().unwrap_or("(address only)")),
            stages_cell(&r.stages)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, line: u32) -> Frame {
        Frame { function: function.into(), file: Some(file.into()), line: Some(line) }
    }

    fn st(stage: &str, samples: u64) -> StageCount {
        StageCount { stage: stage.into(), samples }
    }

    /// Instructions of one line and call site are one row; the same line reached through
    /// another call site is another; unsampled instructions are left out.
    #[test]
    fn folding_by_line_keeps_call_sites_apart() {
        let a = [frame("lookup", "/src/fib/dir24.rs", 88), frame("Worker::run", "/src/worker.rs", 120)];
        let b = [frame("lookup", "/src/fib/dir24.rs", 88), frame("Worker::run", "/src/worker.rs", 131)];
        let c = [frame("Worker::run", "/src/worker.rs", 40)];
        let (s1, s2, s3) = ([st("lookup", 5)], [st("lookup", 3), st("ip", 1)], [st("ip", 2)]);
        let rows = [
            LineInput { samples: 5, stages: &s1, frames: &a },
            LineInput { samples: 4, stages: &s2, frames: &a },
            LineInput { samples: 0, stages: &[], frames: &c },
            LineInput { samples: 2, stages: &s3, frames: &b },
            LineInput { samples: 1, stages: &[], frames: &[] },
        ];
        let got = fold_lines(&rows, 12);
        let brief: Vec<(&str, u64, Vec<String>, bool)> =
            got.iter().map(|r| (r.location.as_str(), r.samples, r.inlined_at.clone(), r.hot)).collect();
        assert_eq!(
            brief,
            vec![
                ("dir24.rs:88", 9, vec!["Worker::run at worker.rs:120".to_string()], true),
                ("dir24.rs:88", 2, vec!["Worker::run at worker.rs:131".to_string()], true),
                ("?", 1, vec![], true),
            ]
        );
        // 9 of 12 samples; lookup 5 + 3, ip 1.
        assert_eq!(got[0].percent, 75.0);
        assert_eq!(got[0].stages, vec![st("lookup", 8), st("ip", 1)]);
        assert_eq!(got[0].file.as_deref(), Some("/src/fib/dir24.rs"));
    }

    /// Only the three hottest lines are marked.
    #[test]
    fn folding_marks_the_three_hottest_lines() {
        let f: Vec<[Frame; 1]> = (1..=4).map(|l| [frame("f", "a.rs", l)]).collect();
        let rows: Vec<LineInput<'_>> =
            f.iter().zip([1, 4, 3, 2]).map(|(fr, n)| LineInput { samples: n, stages: &[], frames: fr }).collect();
        let got: Vec<(String, bool)> = fold_lines(&rows, 10).into_iter().map(|r| (r.location, r.hot)).collect();
        assert_eq!(
            got,
            vec![("a.rs:2".into(), true), ("a.rs:3".into(), true), ("a.rs:4".into(), true), ("a.rs:1".into(), false)]
        );
    }

    /// Names containing the query come first (shortest first), then look-alikes by edit
    /// distance; unrelated names never.
    #[test]
    fn nearest_names_by_substring_then_edit_distance() {
        let names = [
            "forwarder::fib::dir24::Dir24::lookup",
            "forwarder::fib::lc::LcTrie::lookup",
            "forwarder::slab::Slab::alloc",
            "fib_table_lookup",
            "memcpy",
        ];
        // Contains the query: Dir24's. Then by similarity: LcTrie's (its last segment is
        // `lookup` too: 1.0), fib_table_lookup (one of the two words: 0.5); slab's alloc
        // (0.18) and memcpy (0.0) are too far.
        assert_eq!(
            nearest_names("Dir24::lookup", &names, 5),
            vec![
                "forwarder::fib::dir24::Dir24::lookup".to_string(),
                "forwarder::fib::lc::LcTrie::lookup".to_string(),
                "fib_table_lookup".to_string()
            ]
        );
        // A typo: `memcopy` is 1 edit from `memcpy` (6/7 similar); nothing contains it.
        assert_eq!(nearest_names("memcopy", &names, 2), vec!["memcpy".to_string()]);
        // Case-insensitive substring, limited to k.
        assert_eq!(nearest_names("LOOKUP", &names, 1), vec!["fib_table_lookup".to_string()]);
        assert!(nearest_names("zzzzzzzz", &names, 5).is_empty());
        // By words: both of `dir24` and `lookup` (1.0), then one of the two (0.5 each, by
        // name); memcpy shares none.
        let inlined = ["fwd_lookup_burst", "memcpy", "fwd_lookup_fib_dir24", "forwarder::fib::dir24::Dir24::build"];
        assert_eq!(
            nearest_names("Dir24::lookup", &inlined, 5),
            vec![
                "fwd_lookup_fib_dir24".to_string(),
                "forwarder::fib::dir24::Dir24::build".to_string(),
                "fwd_lookup_burst".to_string()
            ]
        );
    }

    /// The margins' short names: the last two segments of a path, brackets kept whole.
    #[test]
    fn short_names_keep_their_bracketed_paths_whole() {
        assert_eq!(short_fn("forwarder::fib::dir24::Dir24::lookup"), "Dir24::lookup");
        assert_eq!(short_fn("fwd_lookup_burst"), "fwd_lookup_burst");
        assert_eq!(short_fn("Dir24::lookup"), "Dir24::lookup");
        assert_eq!(
            short_fn("core::slice::index::<impl core::ops::index::Index<I> for [T]>::index"),
            "<impl core::ops::index::Index<I> for [T]>::index"
        );
        assert_eq!(
            short_fn("<alloc::vec::Vec<T,A> as core::ops::index::Index<I>>::index"),
            "<alloc::vec::Vec<T,A> as core::ops::index::Index<I>>::index"
        );
        assert_eq!(short_fn("a::b::<fn() -> u32 as x::F>::call"), "<fn() -> u32 as x::F>::call");
        assert_eq!(
            short_fn("ns::a::f(std::vector<int, std::allocator<int> > const&, ns2::T)"),
            "a::f(std::vector<int, std::allocator<int> > const&, ns2::T)"
        );
        assert_eq!(short_fn("x::y::main::{{closure}}"), "main::{{closure}}");
    }

    /// Windows of radius 2 around the hottest instructions, merged where they touch, at
    /// most `max` of them, in address order.
    #[test]
    fn hot_windows_of_a_huge_function() {
        //            0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19
        let s = [0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 7, 0, 0, 0, 1];
        // 3 -> 1..6; 15 -> 13..18; 12 -> 10..15 merges with 13..18 -> 10..18; 19 -> 17..20
        // merges too -> 10..20.
        assert_eq!(hot_windows(&s, 2, 10), vec![1..6, 10..20]);
        // One window only: the hottest; 15, 12 and 19 would each open another.
        assert_eq!(hot_windows(&s, 2, 1), vec![1..6]);
        // Radius 0: each sampled instruction alone; at most 3: 3, 15, 12 (19 is the 4th).
        assert_eq!(hot_windows(&s, 0, 3), vec![3..4, 12..13, 15..16]);
        assert!(hot_windows(&[0, 0], 4, 3).is_empty());
        // Clamped at both ends.
        assert_eq!(hot_windows(&[1, 0, 0, 0, 2], 3, 5), vec![0..5]);
    }

    /// The KASLR shift is the recorded `_text` minus the image's; unknown: none.
    #[test]
    fn kaslr_shift_is_recorded_minus_image() {
        assert_eq!(kaslr_shift(Some(0xffffffff9a000000), Some(0xffffffff81000000)), 0x19000000);
        assert_eq!(kaslr_shift(None, Some(0xffffffff81000000)), 0);
        assert_eq!(kaslr_shift(Some(0x1000), Some(0x2000)), -0x1000);
    }

    /// iced-x86 decodes a hand-assembled function: push rbp; mov rbp,rsp; xor eax,eax;
    /// pop rbp; ret.
    #[test]
    fn decode_places_instructions_at_their_addresses() {
        let got = decode(&[0x55, 0x48, 0x89, 0xe5, 0x31, 0xc0, 0x5d, 0xc3], 0x1000);
        let brief: Vec<(u64, usize, &str)> = got.iter().map(|(a, l, t)| (*a, *l, t.as_str())).collect();
        assert_eq!(
            brief,
            vec![
                (0x1000, 1, "push rbp"),
                (0x1001, 3, "mov rbp,rsp"),
                (0x1004, 2, "xor eax,eax"),
                (0x1006, 1, "pop rbp"),
                (0x1007, 1, "ret")
            ]
        );
    }
}
