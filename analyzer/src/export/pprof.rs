//! pprof's profile.proto as prost messages (field numbers from
//! github.com/google/pprof/proto/profile.proto) and the conversion of a [`Profile`]'s
//! stacks into it: values `samples/count` and the sampled time or events, labels `stage`,
//! `thread` (and the profile's `host`, `run`, `setting`) on every sample, one location per
//! address with its DWARF inline lines, and mappings with their build-ids.
//!
//! The value types follow what profile stores expect of CPU profiles (as Go's runtime
//! writes them): a clock event (cpu-clock, task-clock) is `cpu/nanoseconds`, with the same
//! period type and the mean sampling period as `period`; a counted event is
//! `EVENT/count`. The event actually used is named in the profile's comment.

use super::Profile;
use crate::symbolize::Symbolizer;
use crate::{Error, Result};
use std::collections::HashMap;
use std::io::Write;

#[derive(Clone, PartialEq, prost::Message)]
pub struct PProfile {
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<PSample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<PMapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    #[prost(int64, tag = "12")]
    pub period: i64,
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PSample {
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct PMapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    #[prost(uint64, tag = "3")]
    pub address: u64,
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    #[prost(int64, tag = "2")]
    pub line: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(int64, tag = "2")]
    pub name: i64,
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// String table with index 0 = "".
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        Strings { table: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }
    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        self.table.push(s.to_string());
        let i = self.table.len() as i64 - 1;
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Build the profile.proto message of `p`, symbolizing locations through `sym`.
pub fn build(p: &Profile, sym: &mut Symbolizer) -> PProfile {
    let mut b = Builder::new(p);
    let samples_t = ValueType { r#type: b.st.id("samples"), unit: b.st.id("count") };
    let period_t = if p.unit == "nanoseconds" {
        ValueType { r#type: b.st.id("cpu"), unit: b.st.id("nanoseconds") }
    } else {
        ValueType { r#type: b.st.id(&p.event), unit: b.st.id("count") }
    };
    let (k_stage, k_thread) = (b.st.id("stage"), b.st.id("thread"));
    let profile_labels: Vec<Label> =
        p.labels.iter().map(|(k, v)| Label { key: b.st.id(k), str: b.st.id(v), ..Default::default() }).collect();
    let mut samples = Vec::with_capacity(p.stacks.len());
    for s in &p.stacks {
        let ids: Vec<u64> = s
            .addrs
            .iter()
            .enumerate()
            .map(|(depth, &(addr, kernel))| b.location(sym, s.pid, addr, kernel, depth > 0))
            .collect();
        samples.push(PSample {
            location_id: ids,
            value: vec![s.samples as i64, s.period as i64],
            label: [
                Label { key: k_stage, str: b.st.id(&s.stage), ..Default::default() },
                Label { key: k_thread, str: b.st.id(&s.thread), ..Default::default() },
            ]
            .into_iter()
            .chain(profile_labels.iter().cloned())
            .collect(),
        });
    }
    let Builder { mut st, mappings, functions, locations, .. } = b;
    let comment = vec![st.id(&format!("fwdscope {}: event used {}", env!("CARGO_PKG_VERSION"), p.event))];
    let (n, sum) =
        p.stacks.iter().fold((0u64, 0u64), |(n, t), s| (n.saturating_add(s.samples), t.saturating_add(s.period)));
    let period = if n == 0 { 0 } else { (sum as f64 / n as f64).round() as i64 };
    PProfile {
        sample_type: vec![samples_t, period_t.clone()],
        sample: samples,
        mapping: mappings,
        location: locations,
        function: functions,
        string_table: st.table,
        time_nanos: p.start_unix_ns.map_or(0, |t| t.min(i64::MAX as u64) as i64),
        duration_nanos: p.duration_ns.map_or(0, |t| t.min(i64::MAX as u64) as i64),
        period_type: Some(period_t),
        period,
        comment,
        default_sample_type: 0,
    }
}

/// The tables of a profile.proto being built ([`build`]), each entry made once: strings,
/// mappings, functions and locations, with the ids they were given.
struct Builder<'a> {
    p: &'a Profile,
    st: Strings,
    mappings: Vec<PMapping>,
    /// (pid, start) of a process's mapping -> its id.
    mapping_ids: HashMap<(u32, u64), u64>,
    kernel_mapping: Option<u64>,
    functions: Vec<Function>,
    function_ids: HashMap<(String, Option<String>), u64>,
    locations: Vec<Location>,
    /// (pid, address, kernel, caller) -> location id.
    location_ids: HashMap<(u32, u64, bool, bool), u64>,
}

impl<'a> Builder<'a> {
    fn new(p: &'a Profile) -> Builder<'a> {
        Builder {
            p,
            st: Strings::new(),
            mappings: Vec::new(),
            mapping_ids: HashMap::new(),
            kernel_mapping: None,
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
        }
    }

    /// The location of `addr` in process `pid` (`kernel`: a kernel address; `caller`: a
    /// return address, whose call instruction is symbolized), with its inline lines; made
    /// at its first use.
    fn location(&mut self, sym: &mut Symbolizer, pid: u32, addr: u64, kernel: bool, caller: bool) -> u64 {
        let key = (pid, addr, kernel, caller);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        // Callers: symbolize the call instruction, not the return address.
        let probe = if caller { addr.saturating_sub(1) } else { addr };
        let mapping_id = self.mapping_id(pid, addr, kernel);
        let lines = sym
            .frames_ip(pid, probe, kernel)
            .iter()
            .map(|f| Line { function_id: self.function_id(f), line: f.line.map_or(0, i64::from) })
            .collect();
        let id = self.locations.len() as u64 + 1;
        self.locations.push(Location { id, mapping_id, address: addr, line: lines });
        self.location_ids.insert(key, id);
        id
    }

    /// The id of the mapping `addr` of process `pid` lies in (one for the whole kernel; 0:
    /// in no known mapping); made at its first use.
    fn mapping_id(&mut self, pid: u32, addr: u64, kernel: bool) -> u64 {
        let (mappings, st) = (&mut self.mappings, &mut self.st);
        if kernel {
            return *self.kernel_mapping.get_or_insert_with(|| {
                mappings.push(PMapping {
                    id: mappings.len() as u64 + 1,
                    memory_start: 0xffff_8000_0000_0000,
                    memory_limit: u64::MAX,
                    filename: st.id("[kernel.kallsyms]"),
                    has_functions: true,
                    ..Default::default()
                });
                mappings.len() as u64
            });
        }
        match self.p.maps.iter().rev().find(|m| m.pid == pid && addr >= m.start && addr < m.start + m.len) {
            Some(m) => *self.mapping_ids.entry((pid, m.start)).or_insert_with(|| {
                mappings.push(PMapping {
                    id: mappings.len() as u64 + 1,
                    memory_start: m.start,
                    memory_limit: m.start + m.len,
                    file_offset: m.pgoff,
                    filename: st.id(&m.path),
                    build_id: m.build_id.as_deref().map_or(0, |b| st.id(b)),
                    has_functions: true,
                    has_filenames: true,
                    has_line_numbers: true,
                    has_inline_frames: true,
                });
                mappings.len() as u64
            }),
            None => 0,
        }
    }

    /// The id of frame `f`'s function (by name and file); made at its first use.
    fn function_id(&mut self, f: &crate::symbolize::Frame) -> u64 {
        let fkey = (f.function.clone(), f.file.clone());
        if let Some(&id) = self.function_ids.get(&fkey) {
            return id;
        }
        let name = self.st.id(&f.function);
        let filename = f.file.as_deref().map_or(0, |x| self.st.id(x));
        self.functions.push(Function { id: self.functions.len() as u64 + 1, name, system_name: name, filename });
        self.function_ids.insert(fkey, self.functions.len() as u64);
        self.functions.len() as u64
    }
}

impl Profile {
    /// gzipped pprof profile.proto.
    pub fn pprof(&self, sym: &mut Symbolizer) -> Result<Vec<u8>> {
        let p = build(self, sym);
        let bytes = prost::Message::encode_to_vec(&p);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&bytes).map_err(|e| Error::Export(e.to_string()))?;
        gz.finish().map_err(|e| Error::Export(e.to_string()))
    }
}
