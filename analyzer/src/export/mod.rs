//! `fwdscope export`: a profile's stacks in the formats other tools read. Here the stacks;
//! each format in a submodule ([`folded`] and SVG, [`pprof`], [`speedscope`], and [`table`]
//! for CSV, JSON and Parquet).
//!
//! Samples are grouped in polars ([`crate::aggregate`]); each distinct stack is symbolized
//! once, with DWARF inline frames, into [`Stack`]s (root first, the sampled function last,
//! its charged stage and the thread). From those:
//!
//! - `folded`: `thread;root;...;leaf COUNT` lines (Brendan Gregg's format, read by inferno
//!   and flamegraph.pl);
//! - `svg`: an inferno flame graph of the folded stacks;
//! - `pprof`: gzipped profile.proto (values `samples/count` and `cpu/nanoseconds` or
//!   `EVENT/count`; labels `stage`, `thread`, `host`, `run`, `setting`; mappings with
//!   build-ids), read by `go tool pprof` and profile stores;
//! - `speedscope`: speedscope's file format (one sampled profile per thread);
//! - `csv`, `json`, `parquet`: one row per stack: thread, stage, leaf, dso, stack, samples,
//!   period.

mod folded;
pub mod page;
pub use folded::{stage_colour, SvgOptions};
pub mod pprof;
mod speedscope;
mod table;

pub use pprof::PProfile;

use crate::aggregate::Group;
use crate::rules::Rules;
use crate::stages::Attributor;
use crate::symbolize::Symbolizer;
use crate::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;

/// One distinct stack.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stack {
    pub thread: String,
    /// Charged stage (the leaf's own, or its nearest caller's with a stage).
    pub stage: String,
    /// How the stage was found (own symbol, inlined function, callchain, thread name).
    #[serde(skip)]
    pub by: crate::stages::By,
    /// The sampled function as the stage table names it (the attributed symbol: for an
    /// address inside an inlined stage function, the function it was inlined into).
    #[serde(skip)]
    pub symbol: String,
    /// The sampled function's DSO.
    pub dso: String,
    /// Frames, root first; inlined functions appear as frames of their own.
    pub frames: Vec<String>,
    pub samples: u64,
    pub period: u64,
    /// Addresses of the stack, leaf first (sample IP, then return addresses), with their
    /// pid and whether each is a kernel address; for pprof locations.
    #[serde(skip)]
    pub addrs: Vec<(u64, bool)>,
    #[serde(skip)]
    pub pid: u32,
}

/// Stacks of a profile and what they were sampled with.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The event used (cpu-clock, cycles...).
    pub event: String,
    /// `nanoseconds` for clock events, else `events`.
    pub unit: String,
    pub stacks: Vec<Stack>,
    /// Mappings (for pprof).
    pub maps: Vec<collector::records::Mapping>,
    /// Labels of the whole profile, put on every pprof sample: `host`, `run`, `setting`
    /// for a recording (a dataset run's own, else the machine's hostname, the recording
    /// directory's name and the forwarder's settings).
    pub labels: Vec<(String, String)>,
    /// When sampling started (Unix ns) and how long it ran, when known.
    pub start_unix_ns: Option<u64>,
    pub duration_ns: Option<u64>,
    /// What the input lacks and what that costs the profile (a recording's skipped parts or
    /// unfinished writer, a perf.data file's records not understood): each said to the user.
    pub warnings: Vec<String>,
    /// How the SVG flame graph is drawn (default: start-up frames trimmed).
    pub svg_options: SvgOptions,
}

/// Symbolize grouped samples into stacks. The stage of each stack is the [`Attributor`]'s
/// (the one `report` and `top` use: own symbol, inlined function, then callers), so every
/// export labels a stack as the report counts it. Each group comes with its window: 1 for
/// samples of the forwarder's start-up, charged to `startup` as the report does.
pub fn stacks(groups: &[(u32, Group)], at: &mut Attributor, names: &HashMap<u32, String>) -> Vec<Stack> {
    let mut cache: HashMap<(u32, u64, bool), Vec<String>> = HashMap::new();
    let mut out = Vec::with_capacity(groups.len());
    for (window, g) in groups {
        let (a, thread) = at.attribute_group(g, names);
        let mut frames_of = |at: &mut Attributor, pid: u32, addr: u64, kernel: bool| -> Vec<String> {
            cache
                .entry((pid, addr, kernel))
                .or_insert_with(|| at.frames(pid, addr, kernel).into_iter().map(|f| f.function).collect())
                .clone()
        };
        let mut frames_leaf_first = frames_of(at, g.pid, g.ip, g.kernel);
        let mut addrs = vec![(g.ip, g.kernel)];
        let callers = g.callchain.iter().skip(usize::from(g.callchain.first() == Some(&g.ip)));
        for &ret in callers {
            let k = crate::stages::is_kernel_address(ret);
            frames_leaf_first.extend(frames_of(at, g.pid, ret.saturating_sub(1), k));
            addrs.push((ret, k));
        }
        frames_leaf_first.reverse();
        out.push(Stack {
            thread,
            // Window 1: sampled during the forwarder's start-up (see `stages`).
            stage: if *window == 1 { crate::rules::STARTUP.to_string() } else { a.stage },
            by: a.by,
            symbol: a.symbol.name,
            dso: a.symbol.dso,
            frames: frames_leaf_first,
            samples: g.samples,
            period: g.period,
            addrs,
            pid: g.pid,
        });
    }
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.frames.cmp(&b.frames)));
    out
}

/// Run `f` with an [`Attributor`] over `sym` and `rules`, and give the symbolizer back
/// (the binaries it loaded are reused by the caller, for pprof's mappings).
fn with_attributor<T>(sym: &mut Symbolizer, rules: &Rules, f: impl FnOnce(&mut Attributor) -> T) -> T {
    let mut at = Attributor::new(std::mem::replace(sym, Symbolizer::new(Vec::new(), None)), rules.clone());
    let out = f(&mut at);
    *sym = at.into_symbolizer();
    out
}

/// The profile of a recording, symbolized through `sym` (keep it for [`Profile::pprof`]:
/// the binaries it loaded are reused).
pub fn recording_profile(
    rec: &collector::recording::Recording,
    sym: &mut Symbolizer,
    rules: &Rules,
) -> Result<Profile> {
    let tasks = rec.tasks()?;
    let starts = crate::stages::forwarding_starts(&tasks);
    let groups = crate::aggregate::group_by_window(crate::stages::mark_startup(rec.samples_df()?, &starts)?)?;
    let names = crate::stages::thread_names(&tasks);
    let event = rec.meta.sampling.used.clone();
    let stacks = with_attributor(sym, rules, |at| stacks(&groups, at, &names));
    let m = &rec.meta;
    Ok(Profile {
        unit: unit_of(&event),
        event,
        stacks,
        maps: rec.maps()?,
        labels: recording_labels(rec),
        start_unix_ns: Some(m.start_unix_ns).filter(|&t| t > 0),
        duration_ns: m.end_unix_ns.map(|e| e.saturating_sub(m.start_unix_ns)),
        // After the samples were read: their skipped parts are known then.
        warnings: rec.problems(),
        svg_options: SvgOptions::default(),
    })
}

/// `host`, `run` and `setting` of a recording: the machine's hostname, the directory's
/// name and the forwarder's settings (a dataset run's own replace them: see
/// [`crate::input::Input::profile`]).
fn recording_labels(rec: &collector::recording::Recording) -> Vec<(String, String)> {
    vec![
        ("host".into(), rec.meta.machine.hostname.clone()),
        ("run".into(), rec.dir.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())),
        ("setting".into(), setting_of(rec.meta.forwarder.as_ref())),
    ]
}

pub use crate::stages::setting_of;

/// The profile of a perf.data file, symbolized through `sym` (built from its mappings and
/// the kallsyms that match it).
pub fn perfdata_profile(pd: &crate::perfdata::PerfData, sym: &mut Symbolizer, rules: &Rules) -> Result<Profile> {
    let df = collector::recording::samples_frame(&pd.samples).map_err(|e| Error::Aggregate(e.to_string()))?;
    // perf.data samples: no start-up split (see `stages::perfdata_table_with`).
    let groups: Vec<(u32, Group)> = crate::aggregate::group(df)?.into_iter().map(|g| (0, g)).collect();
    let names = crate::stages::thread_names(&pd.tasks);
    let stacks = with_attributor(sym, rules, |at| stacks(&groups, at, &names));
    Ok(Profile {
        unit: unit_of(&pd.event),
        event: pd.event.clone(),
        stacks,
        maps: pd.maps.clone(),
        labels: Vec::new(),
        start_unix_ns: None,
        duration_ns: None,
        warnings: pd.warnings.clone(),
        svg_options: SvgOptions::default(),
    })
}

/// The formats a profile can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// `thread;root;...;leaf COUNT` lines (inferno, flamegraph.pl).
    Folded,
    /// A flame graph (inferno).
    Svg,
    /// gzipped profile.proto for `go tool pprof`.
    Pprof,
    /// speedscope's JSON file format (open it at speedscope.app).
    Speedscope,
    Csv,
    Json,
    Parquet,
}

impl Format {
    /// Whether the format is binary (not for a terminal).
    pub fn is_binary(self) -> bool {
        matches!(self, Format::Pprof | Format::Parquet)
    }
}

impl Profile {
    /// The profile in `format`; `title` names flame graphs and speedscope profiles, `sym`
    /// (the symbolizer that made the stacks) gives pprof its locations' lines.
    pub fn encode(&self, format: Format, title: &str, sym: &mut Symbolizer) -> Result<Vec<u8>> {
        Ok(match format {
            Format::Folded => self.folded().into_bytes(),
            Format::Svg => self.svg_with(title, &self.svg_options)?,
            Format::Pprof => self.pprof(sym)?,
            Format::Speedscope => self.speedscope(title)?.into_bytes(),
            Format::Csv => self.csv().into_bytes(),
            Format::Json => self.json()?.into_bytes(),
            Format::Parquet => {
                let mut v = Vec::new();
                self.parquet(&mut v)?;
                v
            }
        })
    }

    /// Stacks, samples and the event, in one line.
    pub fn summary(&self) -> String {
        format!(
            "{} stacks, {} samples, event used: {}",
            self.stacks.len(),
            self.stacks.iter().map(|s| s.samples).sum::<u64>(),
            self.event
        )
    }
}

/// pprof's unit of a sampled event's periods.
fn unit_of(event: &str) -> String {
    if collector::events::is_clock(event) {
        "nanoseconds".into()
    } else {
        "events".into()
    }
}
