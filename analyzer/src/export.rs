//! `fwdscope export`: a profile's stacks in the formats other tools read.
//!
//! Samples are grouped in polars ([`crate::aggregate`]); each distinct stack is symbolized
//! once, with DWARF inline frames, into [`Stack`]s (root first, the sampled function last,
//! its charged stage and the thread). From those:
//!
//! - `folded`: `thread;root;...;leaf COUNT` lines (Brendan Gregg's format, read by inferno
//!   and flamegraph.pl);
//! - `svg`: an inferno flame graph of the folded stacks;
//! - `pprof`: gzipped profile.proto (values `samples/count` and the event's period; labels
//!   `stage` and `thread`; mappings with build-ids), read by `go tool pprof`;
//! - `speedscope`: speedscope's file format (one sampled profile per thread);
//! - `csv`, `json`, `parquet`: one row per stack: thread, stage, leaf, dso, stack, samples,
//!   period.

use crate::aggregate::Group;
use crate::rules::{Rules, OTHER};
use crate::symbolize::Symbolizer;
use crate::{Error, Result};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;

/// One distinct stack.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stack {
    pub thread: String,
    /// Charged stage (the leaf's own, or its nearest caller's with a stage).
    pub stage: String,
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
}

/// An address's frames (innermost first), its own stage and its DSO.
type Resolved = (Vec<String>, String, String);

/// A thread's speedscope samples (frame indices) and weights.
type ThreadSamples<'a> = (&'a str, Vec<Vec<usize>>, Vec<u64>);

/// Symbolize grouped samples into stacks.
pub fn stacks(groups: &[Group], sym: &mut Symbolizer, rules: &Rules, names: &HashMap<u32, String>) -> Vec<Stack> {
    let mut cache: HashMap<(u32, u64, bool), Resolved> = HashMap::new();
    let mut frames_of = |pid: u32, addr: u64, kernel: bool| -> Resolved {
        cache
            .entry((pid, addr, kernel))
            .or_insert_with(|| {
                let frames: Vec<String> = sym.frames_ip(pid, addr, kernel).into_iter().map(|f| f.function).collect();
                let s = sym.resolve_ip(pid, addr, kernel);
                let stage = rules.stage_of(&s.name).to_string();
                (frames, stage, s.dso)
            })
            .clone()
    };
    let mut out = Vec::with_capacity(groups.len());
    for g in groups {
        let (leaf_frames, own, dso) = frames_of(g.pid, g.ip, g.kernel);
        let mut stage = own;
        let mut frames_leaf_first = leaf_frames;
        let mut addrs = vec![(g.ip, g.kernel)];
        let callers = g.callchain.iter().skip(usize::from(g.callchain.first() == Some(&g.ip)));
        for &ret in callers {
            let k = crate::stages::is_kernel_address(ret);
            let (f, st, _) = frames_of(g.pid, ret.saturating_sub(1), k);
            if stage == OTHER && st != OTHER {
                stage = st;
            }
            frames_leaf_first.extend(f);
            addrs.push((ret, k));
        }
        frames_leaf_first.reverse();
        out.push(Stack {
            thread: names.get(&g.tid).cloned().unwrap_or_else(|| format!("tid {}", g.tid)),
            stage,
            dso,
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

/// The profile of a recording, symbolized through `sym` (keep it for [`Profile::pprof`]:
/// the binaries it loaded are reused).
pub fn recording_profile(
    rec: &collector::recording::Recording,
    sym: &mut Symbolizer,
    rules: &Rules,
) -> Result<Profile> {
    let groups = crate::aggregate::group(rec.samples_df()?)?;
    let names = crate::stages::thread_names(&rec.tasks()?);
    let event = rec.meta.sampling.used.clone();
    Ok(Profile { unit: unit_of(&event), event, stacks: stacks(&groups, sym, rules, &names), maps: rec.maps()? })
}

/// The profile of a perf.data file, symbolized through `sym` (built from its mappings and
/// the kallsyms that match it).
pub fn perfdata_profile(pd: &crate::perfdata::PerfData, sym: &mut Symbolizer, rules: &Rules) -> Result<Profile> {
    let df = collector::recording::samples_frame(&pd.samples).map_err(|e| Error::Aggregate(e.to_string()))?;
    let groups = crate::aggregate::group(df)?;
    let names = crate::stages::thread_names(&pd.tasks);
    Ok(Profile {
        unit: unit_of(&pd.event),
        event: pd.event.clone(),
        stacks: stacks(&groups, sym, rules, &names),
        maps: pd.maps.clone(),
    })
}

fn unit_of(event: &str) -> String {
    if event == "cpu-clock" || event == "task-clock" {
        "nanoseconds".into()
    } else {
        "events".into()
    }
}

/// Frame names in folded lines may not hold `;` (the separator) or a newline.
fn folded_name(s: &str) -> String {
    s.replace([';', '\n'], ":")
}

impl Profile {
    /// Folded stacks: `thread;root;...;leaf SAMPLES`, one line per distinct stack.
    pub fn folded(&self) -> String {
        let mut lines: Vec<String> = self
            .stacks
            .iter()
            .map(|s| {
                let mut l = folded_name(&s.thread);
                for f in &s.frames {
                    l.push(';');
                    l.push_str(&folded_name(f));
                }
                format!("{l} {}", s.samples)
            })
            .collect();
        lines.sort();
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }

    /// An inferno flame graph (SVG) of the folded stacks.
    pub fn svg(&self, title: &str) -> Result<Vec<u8>> {
        let folded = self.folded();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.count_name = "samples".into();
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .map_err(|e| Error::Export(format!("flame graph: {e}")))?;
        Ok(out)
    }

    /// One row per stack as CSV.
    pub fn csv(&self) -> String {
        let q = crate::csv_field;
        let mut s = String::from("thread,stage,leaf,dso,stack,samples,period\n");
        for st in &self.stacks {
            s.push_str(&format!(
                "{},{},{},{},{},{},{}\n",
                q(&st.thread),
                q(&st.stage),
                q(st.frames.last().map_or("", String::as_str)),
                q(&st.dso),
                q(&st.frames.join(";")),
                st.samples,
                st.period
            ));
        }
        s
    }

    /// The stacks as JSON.
    pub fn json(&self) -> Result<String> {
        #[derive(Serialize)]
        struct J<'a> {
            event: &'a str,
            unit: &'a str,
            stacks: &'a [Stack],
        }
        serde_json::to_string_pretty(&J { event: &self.event, unit: &self.unit, stacks: &self.stacks })
            .map_err(|e| Error::Export(e.to_string()))
    }

    /// One row per stack as Parquet (polars).
    pub fn parquet(&self, out: &mut impl Write) -> Result<()> {
        use polars::prelude::*;
        let st = &self.stacks;
        let mut df = DataFrame::new_infer_height(vec![
            Column::new("thread".into(), st.iter().map(|s| s.thread.as_str()).collect::<Vec<_>>()),
            Column::new("stage".into(), st.iter().map(|s| s.stage.as_str()).collect::<Vec<_>>()),
            Column::new(
                "leaf".into(),
                st.iter().map(|s| s.frames.last().map_or("", String::as_str)).collect::<Vec<_>>(),
            ),
            Column::new("dso".into(), st.iter().map(|s| s.dso.as_str()).collect::<Vec<_>>()),
            Column::new("stack".into(), st.iter().map(|s| s.frames.join(";")).collect::<Vec<_>>()),
            Column::new("samples".into(), st.iter().map(|s| s.samples).collect::<Vec<u64>>()),
            Column::new("period".into(), st.iter().map(|s| s.period).collect::<Vec<u64>>()),
        ])
        .map_err(|e| Error::Export(e.to_string()))?;
        ParquetWriter::new(out).finish(&mut df).map_err(|e| Error::Export(e.to_string()))?;
        Ok(())
    }

    /// speedscope's file format: one sampled profile per thread, weights in samples.
    pub fn speedscope(&self, name: &str) -> Result<String> {
        let mut frame_ix: HashMap<&str, usize> = HashMap::new();
        let mut frames: Vec<serde_json::Value> = Vec::new();
        let mut by_thread: Vec<ThreadSamples> = Vec::new();
        for s in &self.stacks {
            let ids: Vec<usize> = s
                .frames
                .iter()
                .map(|f| {
                    *frame_ix.entry(f.as_str()).or_insert_with(|| {
                        frames.push(serde_json::json!({ "name": f }));
                        frames.len() - 1
                    })
                })
                .collect();
            let t = match by_thread.iter().position(|t| t.0 == s.thread) {
                Some(i) => i,
                None => {
                    by_thread.push((s.thread.as_str(), Vec::new(), Vec::new()));
                    by_thread.len() - 1
                }
            };
            by_thread[t].1.push(ids);
            by_thread[t].2.push(s.samples);
        }
        let profiles: Vec<serde_json::Value> = by_thread
            .into_iter()
            .map(|(thread, samples, weights)| {
                let total: u64 = weights.iter().sum();
                serde_json::json!({
                    "type": "sampled",
                    "name": thread,
                    "unit": "none",
                    "startValue": 0,
                    "endValue": total,
                    "samples": samples,
                    "weights": weights,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "name": name,
            "exporter": format!("fwdscope {}", env!("CARGO_PKG_VERSION")),
            "activeProfileIndex": 0,
            "shared": { "frames": frames },
            "profiles": profiles,
        });
        serde_json::to_string(&doc).map_err(|e| Error::Export(e.to_string()))
    }

    /// gzipped pprof profile.proto.
    pub fn pprof(&self, sym: &mut Symbolizer) -> Result<Vec<u8>> {
        let p = crate::pprof::build(self, sym);
        let bytes = prost::Message::encode_to_vec(&p);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&bytes).map_err(|e| Error::Export(e.to_string()))?;
        gz.finish().map_err(|e| Error::Export(e.to_string()))
    }
}
