//! perf.data import (linux-perf-data): samples, mappings and lost counts of a `perf record`
//! file, converted into the collector's record types so the same symbolizer and stage
//! table apply. Kernel addresses resolve through a kallsyms file (the recording machine's
//! /proc/kallsyms when analyzed there).

use crate::{Error, Result};
use collector::records::{Mapping, Sample};
use collector::sample_decode::{SampleLayout, PERF_RECORD_SAMPLE};
use collector::unwind::UserUnwinder;
use linux_perf_data::linux_perf_event_reader::{
    CpuMode, Endianness, EventRecord, Mmap2FileId, PerfEventType, RawData, RawEventRecord, RecordParseInfo, RecordType,
    SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use std::collections::HashMap;

/// What a perf.data file held.
#[derive(Debug, Clone, Default)]
pub struct PerfData {
    /// The sampled event's name (first event of the file).
    pub event: String,
    pub samples: Vec<Sample>,
    pub maps: Vec<Mapping>,
    /// COMM records (thread names).
    pub tasks: Vec<collector::records::TaskEvent>,
    pub lost: u64,
    /// What was skipped to read the file (feature sections cut off), for the report.
    pub warnings: Vec<String>,
    /// The recorded kernel: its build-id (build-id table) and reference symbol address
    /// (the kernel's MMAP record, `[kernel.kallsyms]_text` at pgoff).
    pub kernel: crate::symbolize::kernel::KernelIdentity,
    /// Kernel modules mapped during the recording: name (`ixgbe`), start, length, and the
    /// build-id the file records for it.
    pub modules: Vec<KernelModule>,
    /// Samples decoded (kept or grouped).
    pub sample_count: u64,
    /// Where samples went: kept in `samples`, or grouped per stack.
    pub grouped: Samples,
    /// How user stacks were unwound, for a file recorded with `--call-graph dwarf` (each
    /// sample's callchain then holds its unwound user frames).
    pub unwinding: Option<collector::unwind::UnwindStats>,
}

/// A kernel module as the recording saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelModule {
    pub name: String,
    pub start: u64,
    pub len: u64,
    pub build_id: Option<String>,
}

/// The module name of a kernel MMAP path: `/lib/modules/6.1/kernel/.../ixgbe.ko(.xz)` or
/// `[ixgbe]` -> `ixgbe` (dashes as the kernel writes them: underscores).
fn module_name(path: &str) -> Option<String> {
    let base = path.rsplit('/').next()?;
    let name = if let Some(b) = base.strip_prefix('[').and_then(|b| b.strip_suffix(']')) {
        b
    } else {
        base.split(".ko").next().filter(|_| base.contains(".ko"))?
    };
    (!name.is_empty() && !name.starts_with("kernel.kallsyms")).then(|| name.replace('-', "_"))
}

/// Fold a kernel-mode MMAP record: the kernel's own (its reference symbol) or a module's.
fn absorb_kernel_map(out: &mut PerfData, path: &[u8], start: u64, len: u64, pgoff: u64) {
    let path = String::from_utf8_lossy(path);
    if let Some(sym) = path.strip_prefix("[kernel.kallsyms]") {
        // `[kernel.kallsyms]_text`: pgoff is the reference symbol's address.
        if !sym.is_empty() && out.kernel.reference.is_none() {
            out.kernel.reference = Some((sym.to_string(), pgoff));
        }
    } else if let Some(name) = module_name(&path) {
        out.modules.push(KernelModule { name, start, len, build_id: None });
    }
}

fn bad(path: &std::path::Path, msg: impl std::fmt::Display) -> Error {
    Error::PerfData { path: path.display().to_string(), msg: msg.to_string() }
}

/// A file mapping from the fields MMAP and MMAP2 records share.
fn mapping(pid: i32, tid: i32, start: u64, len: u64, pgoff: u64, path: &[u8], build_id: Option<String>) -> Mapping {
    Mapping {
        time: 0,
        pid: pid as u32,
        tid: tid as u32,
        start,
        len,
        pgoff,
        path: String::from_utf8_lossy(path).into_owned(),
        build_id,
    }
}

/// Read a perf.data file and choose the kernel symbols of the kernel it recorded
/// ([`crate::symbolize::kernel::kernel_symbols`]), checking its kernel modules too.
/// `grouped`: samples grouped per stack while reading (for a stage table), else kept.
pub fn read_perf_data_with_kernel(
    path: &std::path::Path,
    look: &crate::symbolize::kernel::KernelLookup,
    grouped: bool,
) -> Result<(PerfData, crate::symbolize::kernel::KernelSymbols)> {
    let pd = if grouped { read_perf_data_grouped(path)? } else { read_perf_data(path)? };
    let mut ks = crate::symbolize::kernel::kernel_symbols(&pd.kernel, look, &path.display().to_string())?;
    check_modules(&pd, look, &mut ks);
    Ok((pd, ks))
}

/// Module samples are named only by symbols of the module build and load the file
/// recorded: with this machine's kallsyms, each module with a recorded build-id must have
/// that build-id here (/sys/module/NAME/notes) and sit where it was recorded
/// (/sys/module/NAME/sections/.text); otherwise its range stays unnamed, said by name.
pub fn check_modules(
    pd: &PerfData,
    look: &crate::symbolize::kernel::KernelLookup,
    ks: &mut crate::symbolize::kernel::KernelSymbols,
) {
    if ks.kallsyms.is_none() {
        return;
    }
    if !ks.from_this_machine {
        if !pd.modules.is_empty() {
            ks.source.push_str(&format!(
                "; {} module(s) named from the same file, unchecked (a kallsyms file records no module build-ids)",
                pd.modules.len()
            ));
        }
        return;
    }
    let Some(sys) = look.this_machine.as_ref().map(|t| &t.modules) else { return };
    for m in &pd.modules {
        let dir = sys.join(&m.name);
        let here_id = std::fs::read(dir.join("notes/.note.gnu.build-id"))
            .ok()
            .and_then(|b| crate::symbolize::kernel::build_id_from_notes(&b));
        let here_text = std::fs::read_to_string(dir.join("sections/.text"))
            .ok()
            .and_then(|t| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok());
        let why = match (&m.build_id, &here_id) {
            (_, None) if here_text.is_none() => Some("not loaded on this machine".to_string()),
            (Some(want), Some(have)) if want != have => Some(format!("build-id {have} here, {want} recorded")),
            _ if here_text.is_some_and(|t| t < m.start || t >= m.start.saturating_add(m.len)) => {
                Some(format!("loaded at {:#x} here, recorded at {:#x}", here_text.unwrap_or(0), m.start))
            }
            _ => None,
        };
        if let Some(why) = why {
            ks.warnings.push(format!(
                "{}: module [{}] ({why}): its samples stay unnamed; give the recording machine's kallsyms with \
                 --kallsyms FILE",
                "kernel module", m.name
            ));
            ks.unnamed.push((m.start, m.len));
        }
    }
}

/// Read a perf.data file, keeping every sample.
pub fn read_perf_data(path: &std::path::Path) -> Result<PerfData> {
    let f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    parse_perf_data(std::io::BufReader::with_capacity(1 << 20, f), path)
}

/// Check the file header and the feature section table against the file's length before
/// the parser allocates by them: a corrupt size must be an error naming its offset, not an
/// allocation of whatever the bytes say.
/// Returns the data section's offset and size.
fn check_header<R: std::io::Read + std::io::Seek>(r: &mut R, path: &std::path::Path) -> Result<(u64, u64)> {
    use std::io::SeekFrom;
    let io = |e| Error::Io { path: path.into(), source: e };
    let len = r.seek(SeekFrom::End(0)).map_err(io)?;
    r.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut h = [0u8; 104];
    r.read_exact(&mut h).map_err(|_| bad(path, format!("file of {len} bytes is shorter than the 104-byte header")))?;
    let at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap_or([0; 8]));
    if &h[0..8] != b"PERFILE2" {
        return Err(bad(path, "offset 0: expected magic PERFILE2 (little-endian perf.data version 2)"));
    }
    if at(8) != 104 {
        return Err(bad(path, format!("offset 8: header size {}: expected 104", at(8))));
    }
    let attr_size = at(16);
    if !(80..=4096).contains(&attr_size) {
        return Err(bad(path, format!("offset 16: attr size {attr_size}: expected 80..4096")));
    }
    for (name, off) in [("attrs", 24usize), ("data", 40), ("event types", 56)] {
        let (o, sz) = (at(off), at(off + 8));
        if o.checked_add(sz).is_none_or(|end| end > len) {
            return Err(bad(
                path,
                format!("offset {off}: {name} section {o}+{sz} runs past the end of the file ({len} bytes)"),
            ));
        }
    }
    // simpleperf (Android) files: their attr and meta sections are parsed eagerly by the
    // library, by counts we do not check; not a format this tool reads.
    if (128..=132).any(|bit: usize| h[72 + bit / 8] & (1 << (bit % 8)) != 0) {
        return Err(bad(path, "offset 72: simpleperf feature sections: simpleperf (Android) files are not supported"));
    }
    let sections = Sections { path, len, attr_size };
    sections.check_attrs(r, at(24), at(32))?;
    sections.check_event_types(r, at(56), at(64))?;
    sections.check_features(r, &h, at(40) + at(48))?;
    r.seek(SeekFrom::Start(0)).map_err(io)?;
    Ok((at(40), at(48)))
}

/// What the header says that every section is checked against ([`check_header`]).
struct Sections<'a> {
    path: &'a std::path::Path,
    /// The file's length in bytes.
    len: u64,
    /// The size of an attrs entry (an attr and its id list's offset and size).
    attr_size: u64,
}

impl Sections<'_> {
    /// The error reading the file.
    fn io(&self, e: std::io::Error) -> Error {
        Error::Io { path: self.path.into(), source: e }
    }

    /// The (offset, size) of an id list at `at`: an error unless the list ends within the
    /// file (`of`: whose list, in the error's words).
    fn check_id_list<R: std::io::Read + std::io::Seek>(&self, r: &mut R, at: u64, of: &str) -> Result<()> {
        let (o, sz) = read_section(r, at).map_err(|e| self.io(e))?;
        if o.checked_add(sz).is_none_or(|end| end > self.len) {
            return Err(bad(
                self.path,
                format!("offset {at}: id list {o}+{sz} of {of} runs past the end ({} bytes)", self.len),
            ));
        }
        Ok(())
    }

    /// Each attrs entry of the section at `off` (`size` bytes): an attr followed by the
    /// (offset, size) of its id list.
    fn check_attrs<R: std::io::Read + std::io::Seek>(&self, r: &mut R, off: u64, size: u64) -> Result<()> {
        let attr_size = self.attr_size;
        for k in 0..size / attr_size {
            // The attr's own size field must leave exactly the id section after it, or the
            // parser (which reads the attr by its own size) looks for the ids elsewhere.
            let own_at = off + k * attr_size + 4;
            let own = read_u32(r, own_at).map_err(|e| self.io(e))? as u64;
            if own != attr_size - 16 {
                return Err(bad(
                    self.path,
                    format!("offset {own_at}: attr {k} size field {own}: expected {}", attr_size - 16),
                ));
            }
            let ids_at = off + k * attr_size + attr_size - 16;
            self.check_id_list(r, ids_at, &format!("attr {k}"))?;
        }
        Ok(())
    }

    /// The old `event types` section at `off` (`size` bytes): entries of an attr (attr_size
    /// bytes) and the (offset, size) of its id list, read by the library (which sizes the
    /// list by it) when present.
    fn check_event_types<R: std::io::Read + std::io::Seek>(&self, r: &mut R, off: u64, size: u64) -> Result<()> {
        let attr_size = self.attr_size;
        for k in 0..size / (attr_size + 16) {
            // The library reads each attr by its own size field, then skips to attr_size: a
            // size between two perf_event_attr versions leaves it short of where it skips
            // from, so it would read the id list from elsewhere.
            let own_at = off + k * (attr_size + 16) + 4;
            let own = u64::from(read_u32(r, own_at).map_err(|e| self.io(e))?);
            let version_size = [64, 72, 80, 96, 104, 112, 120].contains(&own) || own >= 128;
            if !version_size || own > attr_size {
                return Err(bad(
                    self.path,
                    format!(
                        "offset {own_at}: event type {k} attr size field {own}: expected a perf_event_attr version \
                         size (64, 72, 80, 96, 104, 112, 120, or 128 and up) of at most {attr_size}"
                    ),
                ));
            }
            let ids_at = off + k * (attr_size + 16) + attr_size;
            self.check_id_list(r, ids_at, &format!("event type {k}"))?;
        }
        Ok(())
    }

    /// The feature sections' table at `table` (it follows the data section): one (offset,
    /// size) per bit set in the header `h`, in bit order; the event description section's
    /// contents too.
    fn check_features<R: std::io::Read + std::io::Seek>(&self, r: &mut R, h: &[u8; 104], table: u64) -> Result<()> {
        let len = self.len;
        let mut slot = 0u64;
        for bit in 0..256usize {
            if h[72 + bit / 8] & (1 << (bit % 8)) == 0 {
                continue;
            }
            let entry_at = table + 16 * slot;
            slot += 1;
            if entry_at + 16 > len {
                return Err(bad(
                    self.path,
                    format!(
                        "{FEATURES_CUT}offset {entry_at}: feature table entry for bit {bit} past the end ({len} bytes)"
                    ),
                ));
            }
            let (o, sz) = read_section(r, entry_at).map_err(|e| self.io(e))?;
            if o.checked_add(sz).is_none_or(|end| end > len) {
                return Err(bad(
                    self.path,
                    format!(
                        "{FEATURES_CUT}offset {entry_at}: feature {bit} section {o}+{sz} runs past the end ({len} \
                         bytes)"
                    ),
                ));
            }
            if bit == HEADER_EVENT_DESC {
                check_event_desc(r, o, sz)
                    .map_err(|m| bad(self.path, format!("offset {o}: event description section: {m}")))?;
            }
        }
        Ok(())
    }
}

/// The little-endian u32 at `at`.
fn read_u32<R: std::io::Read + std::io::Seek>(r: &mut R, at: u64) -> std::io::Result<u32> {
    r.seek(std::io::SeekFrom::Start(at))?;
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

/// How a feature-section error starts: the samples may still be whole.
const FEATURES_CUT: &str = "feature sections cut: ";

/// PERF_RECORD_MISC_MMAP_BUILD_ID: an MMAP2 record carries a build-id instead of inode data.
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Feature bit of HEADER_EVENT_DESC (event names; parsed eagerly by linux-perf-data).
const HEADER_EVENT_DESC: usize = 12;

/// The little-endian (offset, size) pair at `at`.
fn read_section<R: std::io::Read + std::io::Seek>(r: &mut R, at: u64) -> std::io::Result<(u64, u64)> {
    let mut e = [0u8; 16];
    r.seek(std::io::SeekFrom::Start(at))?;
    r.read_exact(&mut e)?;
    let (a, b) = e.split_at(8);
    Ok((u64::from_le_bytes(a.try_into().unwrap_or([0; 8])), u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))))
}

/// Walk an EVENT_DESC section (nr, attr_size, then per event: attr, nr_ids, a
/// length-prefixed name, ids) and check every count and length stays inside it.
fn check_event_desc<R: std::io::Read + std::io::Seek>(
    r: &mut R,
    off: u64,
    size: u64,
) -> std::result::Result<(), String> {
    let mut buf = vec![0u8; usize::try_from(size).map_err(|_| "too large".to_string())?];
    r.seek(std::io::SeekFrom::Start(off)).map_err(|e| e.to_string())?;
    r.read_exact(&mut buf).map_err(|e| e.to_string())?;
    let u32_at = |p: u64| -> std::result::Result<u64, String> {
        let p = usize::try_from(p).map_err(|_| "offset overflow".to_string())?;
        buf.get(p..p + 4)
            .and_then(|b| b.try_into().ok())
            .map(|b| u32::from_le_bytes(b) as u64)
            .ok_or_else(|| format!("ends at byte {p} inside a count"))
    };
    let (nr, attr_size) = (u32_at(0)?, u32_at(4)?);
    if !(64..=4096).contains(&attr_size) {
        return Err(format!("attr size {attr_size}: expected 64..4096"));
    }
    let mut p = 8u64;
    for i in 0..nr {
        // The attr's own size field must agree, or the parser's cursor and ours part ways.
        let own = u32_at(p + 4)?;
        if own != attr_size {
            return Err(format!("event {i}: attr size field {own} differs from the section's {attr_size}"));
        }
        p += attr_size;
        let nr_ids = u32_at(p)?;
        let name_len = u32_at(p + 4)?;
        p += 8 + name_len + 8 * nr_ids;
        if p > size {
            return Err(format!("event {i} of {nr} runs past the section's {size} bytes"));
        }
    }
    Ok(())
}

/// Run a step of the third-party perf.data parser, turning a panic on malformed input (it
/// asserts and multiplies unchecked in places) into an error naming the file and where.
fn guard<T>(path: &std::path::Path, at: &str, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| bad(path, format!("{at}: malformed (the perf.data parser rejected it by panicking)")))
}

/// PERF_RECORD_AUXTRACE: its body announces a u64 size of trace data that follows it.
const PERF_RECORD_AUXTRACE: u32 = 71;

/// Walk the data section's record headers: every record at least 8 bytes and inside the
/// section, AUXTRACE payloads too (the parser resizes a buffer to whatever they claim).
fn check_records(data: &[u8], off: u64) -> std::result::Result<(), String> {
    let size = data.len() as u64;
    let mut pos = 0u64;
    while pos < size {
        let at = off + pos;
        let h = &data[pos as usize..];
        if h.len() < 8 {
            return Err(format!("offset {at}: {} stray bytes at the end of the data section", h.len()));
        }
        let ty = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let len = u16::from_le_bytes([h[6], h[7]]) as u64;
        if len < 8 || len > size - pos {
            return Err(format!(
                "offset {at}: record of type {ty} with size {len}: expected 8 up to the section's end"
            ));
        }
        let mut extra = 0u64;
        if ty == PERF_RECORD_AUXTRACE && len >= 16 {
            extra = u64::from_le_bytes(h[8..16].try_into().unwrap_or([0; 8]));
            if extra > size - pos - len {
                return Err(format!("offset {at}: AUXTRACE record announces {extra} bytes past the section's end"));
            }
        }
        pos += len + extra;
    }
    Ok(())
}

/// Fold one parsed side-band record into `out` (samples are decoded by
/// [`SampleLayout::decode`], never here).
/// The user-space unwinder, when the file's samples carry user stacks, follows the
/// processes' mappings, forks and execs.
fn absorb(out: &mut PerfData, parsed: EventRecord, unwinder: Option<&mut UserUnwinder>) {
    if let Some(u) = unwinder {
        match &parsed {
            EventRecord::Fork(f) => u.fork(f.ppid as u32, f.pid as u32),
            EventRecord::Comm(c) if c.is_execve => u.exec(c.pid as u32),
            _ => {}
        }
        let maps = out.maps.len();
        absorb_record(out, parsed);
        if let Some(m) = out.maps.get(maps) {
            u.map(m);
        }
        return;
    }
    absorb_record(out, parsed)
}

fn absorb_record(out: &mut PerfData, parsed: EventRecord) {
    match parsed {
        EventRecord::Comm(c) => out.tasks.push(collector::records::TaskEvent::Comm {
            time: 0,
            pid: c.pid as u32,
            tid: c.tid as u32,
            comm: String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
            exec: c.is_execve,
        }),
        EventRecord::Mmap(m) if matches!(m.cpu_mode, CpuMode::Kernel) => {
            absorb_kernel_map(out, &m.path.as_slice(), m.address, m.length, m.page_offset)
        }
        EventRecord::Mmap2(m) if matches!(m.cpu_mode, CpuMode::Kernel) => {
            absorb_kernel_map(out, &m.path.as_slice(), m.address, m.length, m.page_offset)
        }
        EventRecord::Mmap(m) => {
            out.maps.push(mapping(m.pid, m.tid, m.address, m.length, m.page_offset, &m.path.as_slice(), None))
        }
        EventRecord::Mmap2(m) => {
            let build_id = match &m.file_id {
                Mmap2FileId::BuildId(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
                _ => None,
            };
            out.maps.push(mapping(m.pid, m.tid, m.address, m.length, m.page_offset, &m.path.as_slice(), build_id))
        }
        EventRecord::Lost(l) => out.lost = out.lost.saturating_add(l.count),
        _ => {}
    }
}

/// The sample layout one event's attributes give its records.
fn sample_layout(a: &linux_perf_data::linux_perf_event_reader::PerfEventAttr, endian: Endianness) -> SampleLayout {
    SampleLayout {
        sample_type: a.sample_format.bits(),
        read_format: a.read_format.bits(),
        default_period: match a.sampling_policy {
            SamplingPolicy::Period(p) => p.get(),
            _ => 1,
        },
        big_endian: endian == Endianness::BigEndian,
    }
}

/// The user-stack unwinder for a file whose samples carry user registers and stack
/// copies (`perf record --call-graph dwarf`), x86-64 only; a warning when there are stacks
/// this cannot unwind.
fn unwinder_for(perf_file: &linux_perf_data::PerfFile, out: &mut PerfData) -> Option<UserUnwinder> {
    use linux_perf_data::linux_perf_event_reader::SampleFormat;
    let a = perf_file.event_attributes().iter().map(|a| a.attributes()).find(|a| {
        a.sample_format.contains(SampleFormat::REGS_USER) && a.sample_format.contains(SampleFormat::STACK_USER)
    })?;
    let arch = perf_file.arch().ok().flatten().unwrap_or("unknown");
    if arch != "x86_64" {
        out.warnings.push(format!(
            "the samples carry user stacks for DWARF unwinding, recorded on {arch}: only x86_64 stacks are \
             unwound here, so user callchains stop at the sampled function"
        ));
        return None;
    }
    // Each binary the file of the build-id the file recorded for it: at its path, or in
    // perf's build-id cache (a rebuilt binary at the path is not the one that ran).
    let lookup = crate::symbolize::BinaryLookup::default();
    let file_of: collector::unwind::FileOf =
        Box::new(move |path: &str, id: Option<&str>, _pid: u32| lookup.file_of(path, id));
    let u = UserUnwinder::new(a.sample_regs_user, file_of);
    if u.is_none() {
        out.warnings.push(format!(
            "the samples carry user stacks but not the registers an unwind starts from (sample_regs_user {:#x} \
             lacks IP, SP or BP): user callchains stop at the sampled function",
            a.sample_regs_user
        ));
    }
    u
}

/// linux-perf-event-reader asserts (panics) on an MMAP2 build-id longer than 20 bytes:
/// refuse such a record first.
fn check_mmap2(path: &std::path::Path, n: u64, ty: RecordType, misc: u16, body: Option<u8>) -> Result<()> {
    if ty == RecordType::MMAP2 && misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 && body.is_none_or(|l| l > 20) {
        return Err(bad(path, format!("record {n}: MMAP2 build-id length {body:?}: expected at most 20")));
    }
    Ok(())
}

/// Parse perf.data from a reader; errors name `path` and the offset or record number.
///
/// Files with one event and a sample layout without READ (what `perf record` writes
/// unless asked for groups) are decoded straight from the data section, in file order;
/// others go through linux-perf-data's time-sorted iterator. Order does not matter here:
/// every mapping applies to every sample of its process.
pub fn parse_perf_data<R: std::io::Read + std::io::Seek>(reader: R, path: &std::path::Path) -> Result<PerfData> {
    parse_perf_data_into(reader, path, Samples::Keep)
}

/// Read a perf.data file for a stage table: samples grouped per distinct stack while
/// reading ([`PerfData::groups`]), never all kept (`samples` stays empty): memory grows
/// with the distinct stacks, not with the samples.
pub fn read_perf_data_grouped(path: &std::path::Path) -> Result<PerfData> {
    let f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    parse_perf_data_into(std::io::BufReader::with_capacity(1 << 20, f), path, Samples::Group(Default::default()))
}

/// Where decoded samples go.
#[derive(Debug, Clone, Default)]
pub enum Samples {
    /// Each kept in [`PerfData::samples`].
    #[default]
    Keep,
    /// Summed per (pid, tid, kernel, ip, callchain): samples and period.
    Group(Grouper),
}

/// Samples summed per distinct stack while reading. Each distinct callchain is stored
/// once, with the (pid, tid, kernel, ip) groups that ended in it (nearly always one: the
/// chain starts at the sampled ip), so a sample whose stack was seen before costs one hash
/// of its chain, one comparison and no allocation.
#[derive(Debug, Clone, Default)]
pub struct Grouper {
    by_chain: HashMap<Box<[u64]>, Vec<GroupSum>, foldhash::fast::RandomState>,
}

/// One group's sums under its callchain.
#[derive(Debug, Clone, Copy)]
struct GroupSum {
    pid: u32,
    tid: u32,
    kernel: bool,
    ip: u64,
    samples: u64,
    period: u64,
}

impl Grouper {
    /// Count one sample of `period` with this stack.
    pub fn add(&mut self, pid: u32, tid: u32, kernel: bool, ip: u64, chain: &[u64], period: u64) {
        let fresh = GroupSum { pid, tid, kernel, ip, samples: 1, period };
        let Some(sums) = self.by_chain.get_mut(chain) else {
            self.by_chain.insert(chain.into(), vec![fresh]);
            return;
        };
        match sums.iter_mut().find(|g| g.ip == ip && g.tid == tid && g.pid == pid && g.kernel == kernel) {
            Some(g) => {
                g.samples += 1;
                g.period = g.period.saturating_add(period);
            }
            None => sums.push(fresh),
        }
    }

    /// The groups summed so far (in no particular order).
    pub fn groups(&self) -> Vec<crate::aggregate::Group> {
        self.by_chain
            .iter()
            .flat_map(|(chain, sums)| {
                sums.iter().map(move |g| crate::aggregate::Group {
                    pid: g.pid,
                    tid: g.tid,
                    kernel: g.kernel,
                    ip: g.ip,
                    callchain: chain.to_vec(),
                    samples: g.samples,
                    period: g.period,
                })
            })
            .collect()
    }

    /// Distinct callchains seen.
    pub fn distinct_chains(&self) -> usize {
        self.by_chain.len()
    }
}

impl PerfData {
    /// Take one decoded sample; the period's limit is checked here (periods are summed per
    /// stack: one near 2^64 would overflow the sum).
    fn take(&mut self, s: Sample, path: &std::path::Path) -> Result<()> {
        self.take_with_chain(s, None, path)
    }

    /// Take one decoded sample whose callchain is `chain` when given (then `s.callchain`
    /// is ignored: the decoder reuses one buffer for every sample's chain).
    fn take_with_chain(&mut self, mut s: Sample, chain: Option<&[u64]>, path: &std::path::Path) -> Result<()> {
        if s.period > collector::recording::MAX_PERIOD {
            return Err(bad(
                path,
                format!(
                    "sample {}: period {} over the limit of {}",
                    self.sample_count,
                    s.period,
                    collector::recording::MAX_PERIOD
                ),
            ));
        }
        self.sample_count += 1;
        match &mut self.grouped {
            Samples::Keep => {
                if let Some(c) = chain {
                    s.callchain = c.to_vec();
                }
                self.samples.push(s)
            }
            Samples::Group(g) => g.add(s.pid, s.tid, s.kernel, s.ip, chain.unwrap_or(&s.callchain), s.period),
        }
        Ok(())
    }

    /// The samples per distinct stack: from the grouping done while reading, or grouped
    /// now from the kept samples.
    pub fn groups(&self) -> Result<Vec<crate::aggregate::Group>> {
        match &self.grouped {
            Samples::Group(g) => Ok(g.groups()),
            Samples::Keep => {
                let df = collector::recording::samples_frame(&self.samples)
                    .map_err(|e| Error::Aggregate(format!("samples frame: {e}")))?;
                crate::aggregate::group(df)
            }
        }
    }
}

fn parse_perf_data_into<R: std::io::Read + std::io::Seek>(
    mut reader: R,
    path: &std::path::Path,
    samples: Samples,
) -> Result<PerfData> {
    match parse_with(&mut reader, path, true, samples.clone()) {
        Ok(pd) => Ok(pd),
        // A file cut after its data section (a copy that stopped early, a disk that filled
        // while perf wrote the features) still has whole samples: read them without the
        // feature sections and say what was skipped.
        Err(Error::PerfData { msg, .. }) if msg.starts_with(FEATURES_CUT) => {
            let io = |e| Error::Io { path: path.into(), source: e };
            reader.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).map_err(io)?;
            if bytes.len() < 104 {
                return Err(bad(path, msg));
            }
            bytes[72..104].fill(0);
            let mut pd = parse_with(std::io::Cursor::new(bytes), path, true, samples)?;
            pd.warnings.push(format!(
                "{}: {msg}; read the samples without the feature sections (no recorded build-ids, event \
                 names or kernel build-id: symbols come from the binaries and kallsyms as they are now)",
                path.display()
            ));
            Ok(pd)
        }
        Err(e) => Err(e),
    }
}

/// The event name and the direct decoder's layout (the sample layout and the side-band
/// records' parse info), when the file's events allow it.
type Layout = (String, Option<(SampleLayout, RecordParseInfo)>);

fn layout(perf_file: &linux_perf_data::PerfFile, allow_fast: bool) -> Layout {
    let attrs = perf_file.event_attributes();
    let is_dummy = |a: &linux_perf_data::AttributeDescription| {
        matches!(a.attributes().type_, PerfEventType::Software(SoftwareCounterType::Dummy))
    };
    let event = attrs
        .iter()
        .find(|a| !is_dummy(a))
        .and_then(|a| a.name())
        .map(|n| n.split(':').next().unwrap_or(n).to_string())
        .unwrap_or_else(|| "unknown".into());
    // The direct decoder needs one sample layout: every event with the same sample_type
    // and at most one that samples (perf adds a non-sampling dummy event for side-band
    // records when recording system-wide).
    let sampling: Vec<_> = attrs.iter().filter(|a| !is_dummy(a)).collect();
    let same_layout = attrs.windows(2).all(|w| {
        let (a, b) = (w[0].attributes(), w[1].attributes());
        a.sample_format == b.sample_format && a.read_format == b.read_format
    });
    let fast = match sampling[..] {
        [one] if allow_fast && same_layout && perf_file.endian() == Endianness::LittleEndian => {
            let a = one.attributes();
            Some((sample_layout(a, Endianness::LittleEndian), RecordParseInfo::new(a, Endianness::LittleEndian)))
        }
        _ => None,
    };
    (event, fast)
}

fn parse_with<R: std::io::Read + std::io::Seek>(
    mut reader: R,
    path: &std::path::Path,
    allow_fast: bool,
    samples: Samples,
) -> Result<PerfData> {
    let io = |e| Error::Io { path: path.into(), source: e };
    if is_pipe_mode(&mut reader).map_err(io)? {
        return parse_pipe(reader, path, samples);
    }
    let (data_off, data_size) = check_header(&mut reader, path)?;
    // The header, attributes and feature sections (the data section is not read here).
    let (perf_file, event, fast) = {
        let PerfFileReader { perf_file, record_iter } =
            guard(path, "header", || PerfFileReader::parse_file(&mut reader))?.map_err(|e| bad(path, e))?;
        drop(record_iter);
        let (event, fast) = layout(&perf_file, allow_fast);
        (perf_file, event, fast)
    };
    let mut out = PerfData { event, grouped: samples, ..Default::default() };
    let mut ids = BuildIds::default();
    if let Ok(table) = guard(path, "build-id table", || perf_file.build_ids())? {
        ids.take_table(&mut out, table);
    }
    if let Some((sample_layout, info)) = fast {
        let unwinder = unwinder_for(&perf_file, &mut out);
        let mut dec = Decoder::new(&mut out, path, sample_layout, info, unwinder);
        reader.seek(std::io::SeekFrom::Start(data_off)).map_err(io)?;
        read_direct(&mut reader, path, data_off, data_size, &mut dec, &mut ids)?;
        dec.finish()?;
        return ids.finish(out, path);
    }
    // Other files go through the library's sorted iterator, after every record size in the
    // data section was checked (it allocates by them).
    let mut data = vec![0u8; usize::try_from(data_size).map_err(|_| bad(path, "data section too large"))?];
    reader.seek(std::io::SeekFrom::Start(data_off)).map_err(io)?;
    reader.read_exact(&mut data).map_err(io)?;
    check_records(&data, data_off).map_err(|m| bad(path, m))?;
    drop(data);
    reader.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
    let PerfFileReader { mut perf_file, mut record_iter } =
        guard(path, "header", || PerfFileReader::parse_file(reader))?.map_err(|e| bad(path, e))?;
    read_sorted(&mut out, &mut perf_file, &mut record_iter, path, &mut ids)?;
    ids.finish(out, path)
}

/// The data section (the reader stands at its start), record by record through `dec`:
/// read in chunks of 4 MiB, each record checked against the section's end before it is
/// decoded in place. Memory does not grow with the file.
fn read_direct<R: std::io::Read + std::io::Seek>(
    reader: &mut R,
    path: &std::path::Path,
    data_off: u64,
    data_size: u64,
    dec: &mut Decoder,
    ids: &mut BuildIds,
) -> Result<()> {
    let io = |e| Error::Io { path: path.into(), source: e };
    let mut chunks = Chunks { reader, buf: vec![0u8; chunk_size()], lo: 0, hi: 0, unread: data_size };
    let mut pos = 0u64;
    while pos < data_size {
        let at = data_off + pos;
        let left = data_size - pos;
        if left < 8 {
            return Err(bad(path, format!("offset {at}: {left} stray bytes at the end of the data section")));
        }
        if !chunks.need(8).map_err(io)? {
            return Err(bad(path, format!("offset {at}: the data section ends inside a record header")));
        }
        let (ty, misc, len) = record_header(chunks.peek_header());
        if len < 8 || len > left {
            return Err(bad(
                path,
                format!("offset {at}: record of type {ty} with size {len}: expected 8 up to the section's end"),
            ));
        }
        if !chunks.need(len as usize).map_err(io)? {
            return Err(bad(path, format!("offset {at}: the data section ends inside a record")));
        }
        let body = &chunks.take(len as usize)[8..];
        let mut step = len;
        let mut extra = 0;
        if ty == PERF_RECORD_AUXTRACE && len >= 16 {
            extra = u64::from_le_bytes(body[0..8].try_into().unwrap_or([0; 8]));
            if extra > left - len {
                return Err(bad(
                    path,
                    format!("offset {at}: AUXTRACE record announces {extra} bytes past the section's end"),
                ));
            }
            step += extra;
        }
        dec.record(ty, misc, body, At { offset: at, decompressed: false }, ids)?;
        chunks.skip(extra).map_err(io)?;
        pos += step;
    }
    Ok(())
}

/// How much of the data section is read at a time: 4 MiB (a test reads in smaller chunks
/// so that records straddle them).
fn chunk_size() -> usize {
    #[cfg(test)]
    return tests::CHUNK.with(|c| c.get());
    #[cfg(not(test))]
    return 4 << 20;
}

/// A window on the data section: `buf[lo..hi]` read but not yet decoded, `unread` bytes of
/// the section still in the file.
struct Chunks<'r, R> {
    reader: &'r mut R,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    unread: u64,
}

impl<R: std::io::Read + std::io::Seek> Chunks<'_, R> {
    /// Make at least `n` bytes available (the buffer grows to hold them); false when the
    /// section has fewer left.
    fn need(&mut self, n: usize) -> std::io::Result<bool> {
        if self.hi - self.lo >= n {
            return Ok(true);
        }
        if n > self.buf.len() {
            self.buf.resize(n, 0);
        }
        self.buf.copy_within(self.lo..self.hi, 0);
        self.hi -= self.lo;
        self.lo = 0;
        let want = usize::try_from(((self.buf.len() - self.hi) as u64).min(self.unread)).unwrap_or(0);
        self.reader.read_exact(&mut self.buf[self.hi..self.hi + want])?;
        self.hi += want;
        self.unread -= want as u64;
        Ok(self.hi - self.lo >= n)
    }

    /// The next 8 bytes (after `need(8)`).
    fn peek_header(&self) -> &[u8; 8] {
        self.buf[self.lo..self.lo + 8].try_into().unwrap_or(&[0; 8])
    }

    /// The next `n` bytes (after `need(n)`), consumed.
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.buf[self.lo..self.lo + n];
        self.lo += n;
        s
    }

    /// Step over `n` bytes: what the buffer holds, then the rest in the file.
    fn skip(&mut self, n: u64) -> std::io::Result<()> {
        let here = n.min((self.hi - self.lo) as u64);
        self.lo += here as usize;
        let rest = n - here;
        if rest > 0 {
            self.reader.seek(std::io::SeekFrom::Current(rest as i64))?;
            self.unread -= rest;
        }
        Ok(())
    }
}

/// Read every record through linux-perf-data's sorted iterator (which decompresses
/// `perf record -z` chunks itself): events into `out`, build-id records into `ids`, record
/// types nothing here reads counted.
fn read_sorted<R: std::io::Read>(
    out: &mut PerfData,
    perf_file: &mut linux_perf_data::PerfFile,
    record_iter: &mut linux_perf_data::PerfRecordIter<R>,
    path: &std::path::Path,
    ids: &mut BuildIds,
) -> Result<()> {
    let mut unwinder = unwinder_for(perf_file, out);
    let mut n = 0u64;
    while let Some(rec) = guard(path, &format!("record {n}"), || record_iter.next_record(perf_file))?
        .map_err(|e| bad(path, format!("record {n}: {e}")))?
    {
        n += 1;
        match rec {
            PerfFileRecord::EventRecord { attr_index, record } if record.record_type.0 == PERF_RECORD_SAMPLE => {
                let layout = perf_file
                    .event_attributes()
                    .get(attr_index)
                    .map(|a| sample_layout(a.attributes(), perf_file.endian()))
                    .ok_or_else(|| {
                        bad(path, format!("record {n}: a sample of event {attr_index}, which the file lacks"))
                    })?;
                let body = record.data.as_slice();
                let s = match &mut unwinder {
                    Some(u) => unwound(&layout, &body, record.misc, u),
                    None => layout.decode(&body, record.misc),
                }
                .ok_or_else(|| bad(path, format!("record {n}: sample shorter than its layout")))?;
                out.take(s, path)?;
            }
            PerfFileRecord::EventRecord { record, .. } => {
                check_mmap2(
                    path,
                    n,
                    record.record_type,
                    record.misc,
                    record.data.get(32..33).map(|b| b.as_slice()[0]),
                )?;
                let parsed = guard(path, &format!("record {n}"), || record.parse())?
                    .map_err(|e| bad(path, format!("record {n}: {e}")))?;
                absorb(out, parsed, unwinder.as_mut());
            }
            PerfFileRecord::UserRecord(u) => {
                let ty = u.record_type.record_type().0;
                if ty == PERF_RECORD_HEADER_BUILD_ID {
                    ids.take_record(u.misc, &u.data.as_slice());
                } else if !USER_RECORDS_WITHOUT_SAMPLES.contains(&ty) {
                    *ids.skipped.entry(ty).or_default() += 1;
                }
            }
        }
    }
    out.unwinding = unwinder.map(|u| u.stats);
    Ok(())
}

/// Whether the file starts with a pipe-mode header (`perf record -o -`: the 16-byte
/// header, attributes and features as records in the stream). Leaves the reader at 0.
fn is_pipe_mode<R: std::io::Read + std::io::Seek>(r: &mut R) -> std::io::Result<bool> {
    let mut h = [0u8; 16];
    r.seek(std::io::SeekFrom::Start(0))?;
    let got = r.read(&mut h)?;
    r.seek(std::io::SeekFrom::Start(0))?;
    Ok(got == 16 && &h[0..8] == b"PERFILE2" && u64::from_le_bytes(h[8..16].try_into().unwrap_or([0; 8])) == 16)
}

/// A pipe-mode file is records from byte 16 to its end: checked as a data section is
/// (the library resizes a buffer to whatever an AUXTRACE record claims), then rewound.
fn check_pipe_records<R: std::io::Read + std::io::Seek>(reader: &mut R, path: &std::path::Path) -> Result<()> {
    let io = |e| Error::Io { path: path.into(), source: e };
    let len = reader.seek(std::io::SeekFrom::End(0)).map_err(io)?;
    let mut data = vec![0u8; usize::try_from(len.saturating_sub(16)).map_err(|_| bad(path, "file too large"))?];
    reader.seek(std::io::SeekFrom::Start(16)).map_err(io)?;
    reader.read_exact(&mut data).map_err(io)?;
    check_records(&data, 16).map_err(|m| bad(path, m))?;
    reader.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
    Ok(())
}

/// A pipe-mode stream (`perf record -o - > FILE`): the library reads the attributes and
/// features from the stream's first records; the rest as in a file.
fn parse_pipe<R: std::io::Read + std::io::Seek>(
    mut reader: R,
    path: &std::path::Path,
    samples: Samples,
) -> Result<PerfData> {
    check_pipe_records(&mut reader, path)?;
    let PerfFileReader { mut perf_file, mut record_iter } =
        guard(path, "pipe-mode header", || PerfFileReader::parse_pipe(reader))?
            .map_err(|e| bad(path, format!("pipe-mode stream: {e}")))?;
    let (event, _) = layout(&perf_file, false);
    let mut out = PerfData { event, grouped: samples, ..Default::default() };
    let mut ids = BuildIds::default();
    if let Ok(table) = guard(path, "build-id table", || perf_file.build_ids())? {
        ids.take_table(&mut out, table);
    }
    read_sorted(&mut out, &mut perf_file, &mut record_iter, path, &mut ids)?;
    out.warnings.push(format!(
        "{}: a pipe-mode stream (perf record -o -): read in full; the build-ids it carries are those perf wrote into \
         the stream",
        path.display()
    ));
    ids.finish(out, path)
}

/// A record header: type, misc, size.
fn record_header(h: &[u8; 8]) -> (u32, u16, u64) {
    (
        u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
        u16::from_le_bytes([h[4], h[5]]),
        u16::from_le_bytes([h[6], h[7]]) as u64,
    )
}

/// perf's own record types (>= 64) that carry no samples and nothing this reader uses:
/// attributes and features (read from the header or by the library), rounds, the ID index,
/// AUX trace, thread and CPU maps, `perf stat` records, time conversion, init markers.
const USER_RECORDS_WITHOUT_SAMPLES: [u32; 18] =
    [64, 65, 66, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 82, 84];

/// PERF_RECORD_HEADER_BUILD_ID: a binary's build-id, written into the stream.
const PERF_RECORD_HEADER_BUILD_ID: u32 = 67;
/// PERF_RECORD_COMPRESSED (Linux 5.2) and COMPRESSED2 (Linux 6.16): zstd frames of records.
const PERF_RECORD_COMPRESSED: u32 = 81;
const PERF_RECORD_COMPRESSED2: u32 = 83;
/// PERF_RECORD_MISC_BUILD_ID_SIZE: byte 20 of a build-id record's id field is its length.
const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// Build-ids a file records (its build-id table, build-id records in the stream) and the
/// record types nothing here reads, gathered while reading and applied at the end.
#[derive(Default)]
struct BuildIds {
    modules: Vec<(String, String)>,
    /// User-space binaries by the path the recording names.
    user: HashMap<String, String>,
    /// Record types read but not understood, with counts.
    skipped: std::collections::BTreeMap<u32, u64>,
}

impl BuildIds {
    /// Take the build-id table (a feature section): the kernel's goes to `out` now.
    fn take_table(&mut self, out: &mut PerfData, table: HashMap<linux_perf_data::DsoKey, linux_perf_data::DsoInfo>) {
        for (key, info) in table {
            if info.build_id.is_empty() {
                continue;
            }
            let id = hex(&info.build_id);
            match key {
                linux_perf_data::DsoKey::Kernel => out.kernel.build_id = Some(id),
                linux_perf_data::DsoKey::KernelModule { name } => {
                    self.modules.push((name.trim_start_matches('[').trim_end_matches(']').replace('-', "_"), id))
                }
                linux_perf_data::DsoKey::GuestKernel => {}
                _ => {
                    self.user.insert(String::from_utf8_lossy(&info.path).into_owned(), id);
                }
            }
        }
    }

    /// A PERF_RECORD_HEADER_BUILD_ID body: pid (4), id (24: 20 and, with
    /// PERF_RECORD_MISC_BUILD_ID_SIZE, its length), then the NUL-terminated path.
    fn take_record(&mut self, misc: u16, body: &[u8]) {
        let (Some(idf), Some(rest)) = (body.get(4..28), body.get(28..)) else { return };
        let len = if misc & PERF_RECORD_MISC_BUILD_ID_SIZE != 0 {
            usize::from(idf[20].min(20))
        } else {
            // Older perf: the length is what is left after trailing zero words.
            let mut n = 20;
            while n >= 4 && idf[n - 4..n].iter().all(|b| *b == 0) {
                n -= 4;
            }
            n
        };
        let p = rest.split(|b| *b == 0).next().unwrap_or_default();
        if len > 0 && !p.is_empty() && !p.starts_with(b"[kernel.kallsyms]") {
            self.user.insert(String::from_utf8_lossy(p).into_owned(), hex(&idf[..len]));
        }
    }

    /// Give every mapping without a build-id of its own record the one the file records
    /// for its path, modules theirs; warn of record types nothing read; refuse a file whose
    /// samples all vanished in decoding.
    fn finish(self, mut out: PerfData, path: &std::path::Path) -> Result<PerfData> {
        for m in out.maps.iter_mut().filter(|m| m.build_id.is_none()) {
            m.build_id = self.user.get(&m.path).cloned();
        }
        for m in &mut out.modules {
            m.build_id = self.modules.iter().find(|(n, _)| *n == m.name).map(|(_, id)| id.clone());
        }
        if !self.skipped.is_empty() {
            let list: Vec<String> = self.skipped.iter().map(|(t, n)| format!("{n} of type {t}")).collect();
            if out.sample_count == 0 {
                return Err(bad(
                    path,
                    format!(
                        "no sample could be decoded, and records of a kind this reader does not know were skipped \
                         ({}): the samples may be in them; `perf report -i FILE` on the recording machine, or \
                         `perf inject -i FILE -o PLAIN.data` to rewrite it plainly",
                        list.join(", ")
                    ),
                ));
            }
            out.warnings.push(format!(
                "{}: records of a kind this reader does not know were skipped ({}): their contents are not in these \
                 figures",
                path.display(),
                list.join(", ")
            ));
        }
        Ok(out)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A sample with its user frames unwound from the stack copy it carries.
fn unwound(layout: &SampleLayout, body: &[u8], misc: u16, u: &mut UserUnwinder) -> Option<Sample> {
    let (mut s, stack) = layout.decode_with_stack(body, misc, u.regs_mask())?;
    if let Some(stack) = stack {
        u.extend(&mut s, &stack);
    }
    Some(s)
}

/// Where a record sits, for messages: its offset in the file, or inside the compressed
/// record at that offset. Formatted only when a message needs it.
#[derive(Debug, Clone, Copy)]
struct At {
    offset: u64,
    decompressed: bool,
}

impl std::fmt::Display for At {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offset {}", self.offset)?;
        if self.decompressed {
            f.write_str(" (decompressed)")?;
        }
        Ok(())
    }
}

/// The direct decoder: one record at a time, from the file or from a decompressed
/// `perf record -z` chunk (records may straddle chunks: the tail waits for the next).
struct Decoder<'a> {
    out: &'a mut PerfData,
    path: &'a std::path::Path,
    samples: SampleLayout,
    info: RecordParseInfo,
    /// Records decoded so far (for messages).
    n: u64,
    zstd: Option<zstd_safe::DCtx<'static>>,
    /// Decompressed bytes not yet a whole record.
    pending: Vec<u8>,
    /// Unwinds user stacks, when the samples carry them.
    unwinder: Option<UserUnwinder>,
    /// The callchain of the sample being decoded (one buffer for all of them).
    chain: Vec<u64>,
}

impl<'a> Decoder<'a> {
    fn new(
        out: &'a mut PerfData,
        path: &'a std::path::Path,
        samples: SampleLayout,
        info: RecordParseInfo,
        unwinder: Option<UserUnwinder>,
    ) -> Decoder<'a> {
        Decoder { out, path, samples, info, n: 0, zstd: None, pending: Vec::new(), unwinder, chain: Vec::new() }
    }

    /// One record: `at` says where it is for messages.
    fn record(&mut self, ty: u32, misc: u16, body: &[u8], at: At, ids: &mut BuildIds) -> Result<()> {
        let path = self.path;
        let n = self.n;
        self.n += 1;
        match ty {
            PERF_RECORD_SAMPLE => {
                let short = || bad(path, format!("record {n} at {at}: sample shorter than its layout"));
                match &mut self.unwinder {
                    Some(u) => {
                        let s = unwound(&self.samples, body, misc, u).ok_or_else(short)?;
                        self.out.take(s, path)
                    }
                    None => {
                        let s = self.samples.decode_reusing(body, misc, &mut self.chain).ok_or_else(short)?;
                        self.out.take_with_chain(s, Some(&self.chain), path)
                    }
                }
            }
            // Kernel record types.
            t if t < 64 => {
                let rt = RecordType(t);
                check_mmap2(path, n, rt, misc, body.get(32).copied())?;
                let raw = RawEventRecord::new(rt, misc, RawData::Single(body), self.info);
                let parsed = guard(path, &format!("record {n}"), || raw.parse())?
                    .map_err(|e| bad(path, format!("record {n} at {at}: {e}")))?;
                absorb(self.out, parsed, self.unwinder.as_mut());
                Ok(())
            }
            PERF_RECORD_COMPRESSED => self.decompress(body, at, ids),
            PERF_RECORD_COMPRESSED2 => {
                let size = body.get(0..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
                match size.filter(|&sz| sz <= body.len() as u64 - 8) {
                    Some(sz) => self.decompress(&body[8..8 + sz as usize], at, ids),
                    None => Err(bad(path, format!("record {n} at {at}: COMPRESSED2 size {size:?} past its record"))),
                }
            }
            PERF_RECORD_HEADER_BUILD_ID => {
                ids.take_record(misc, body);
                Ok(())
            }
            t if USER_RECORDS_WITHOUT_SAMPLES.contains(&t) => Ok(()),
            t => {
                *ids.skipped.entry(t).or_default() += 1;
                Ok(())
            }
        }
    }

    /// Decompress one zstd chunk and decode the whole records it completes, 1 MiB of
    /// output at a time (a chunk that inflates without end is read in bounded memory).
    fn decompress(&mut self, compressed: &[u8], at: At, ids: &mut BuildIds) -> Result<()> {
        let path = self.path;
        let mut dctx = self.zstd.take().unwrap_or_else(zstd_safe::DCtx::create);
        let mut out = vec![0u8; 1 << 20];
        let mut input = zstd_safe::InBuffer::around(compressed);
        loop {
            let mut ob = zstd_safe::OutBuffer::around(&mut out[..]);
            dctx.decompress_stream(&mut ob, &mut input).map_err(|code| {
                bad(path, format!("compressed record at {at}: zstd: {}", zstd_safe::get_error_name(code)))
            })?;
            let produced = ob.pos();
            self.pending.extend_from_slice(&out[..produced]);
            self.drain_pending(at, ids)?;
            if produced < out.len() && input.pos() == compressed.len() {
                break;
            }
        }
        self.zstd = Some(dctx);
        Ok(())
    }

    /// Decode the whole records at the front of the decompressed bytes.
    fn drain_pending(&mut self, at: At, ids: &mut BuildIds) -> Result<()> {
        let mut pos = 0usize;
        let pending = std::mem::take(&mut self.pending);
        while let Some(h) = pending.get(pos..pos + 8) {
            let (ty, misc, len) = record_header(h.try_into().unwrap_or(&[0; 8]));
            if len < 8 {
                return Err(bad(self.path, format!("compressed record at {at}: inner record of size {len}")));
            }
            let Some(body) = pending.get(pos + 8..pos + len as usize) else { break };
            if matches!(ty, PERF_RECORD_COMPRESSED | PERF_RECORD_COMPRESSED2) {
                return Err(bad(self.path, format!("compressed record at {at}: a compressed record inside one")));
            }
            self.record(ty, misc, body, At { decompressed: true, ..at }, ids)?;
            pos += len as usize;
        }
        self.pending = pending[pos..].to_vec();
        Ok(())
    }

    /// The stream must not end inside a record.
    fn finish(self) -> Result<()> {
        self.out.unwinding = self.unwinder.map(|u| u.stats);
        if self.pending.is_empty() {
            Ok(())
        } else {
            Err(bad(
                self.path,
                format!("the compressed records end inside a record ({} bytes left over)", self.pending.len()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// The data section's chunk size in this test thread.
        pub(super) static CHUNK: std::cell::Cell<usize> = const { std::cell::Cell::new(4 << 20) };
    }

    /// Records straddle the chunks the data section is read in: read in chunks of 40 bytes
    /// (smaller than most records: the buffer grows), 1,000 bytes and 4 MiB, the golden
    /// file gives the same samples, mappings and thread names.
    #[test]
    fn chunk_boundaries_do_not_change_what_is_read() {
        let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
        let read = |chunk: usize| {
            CHUNK.with(|c| c.set(chunk));
            let pd = read_perf_data(&p).unwrap();
            CHUNK.with(|c| c.set(4 << 20));
            pd
        };
        let whole = read(4 << 20);
        assert!(whole.samples.len() > 1000, "{} samples", whole.samples.len());
        assert!(whole.samples.iter().any(|s| !s.callchain.is_empty()));
        for chunk in [40, 1000] {
            let pd = read(chunk);
            assert_eq!(pd.samples, whole.samples, "chunk {chunk}");
            assert_eq!(pd.maps, whole.maps, "chunk {chunk}");
            assert_eq!(pd.tasks, whole.tasks, "chunk {chunk}");
        }
    }

    /// The grouper sums by (pid, tid, kernel, ip) under each distinct chain, and the same
    /// chain under two ips stays two groups.
    #[test]
    fn the_grouper_keeps_each_stack_apart() {
        let mut g = Grouper::default();
        g.add(1, 1, false, 0x10, &[0x10, 0x20], 5);
        g.add(1, 1, false, 0x10, &[0x10, 0x20], 7);
        g.add(1, 2, false, 0x10, &[0x10, 0x20], 1);
        g.add(1, 1, true, 0x10, &[0x10, 0x20], 1);
        g.add(1, 1, false, 0x11, &[0x10, 0x20], 1);
        g.add(1, 1, false, 0x10, &[0x10], 1);
        g.add(1, 1, false, 0x10, &[], u64::MAX);
        g.add(1, 1, false, 0x10, &[], 3);
        let mut got: Vec<_> =
            g.groups().into_iter().map(|x| (x.tid, x.kernel, x.ip, x.callchain, x.samples, x.period)).collect();
        got.sort();
        let mut want = vec![
            (1, false, 0x10, vec![0x10, 0x20], 2, 12),
            (2, false, 0x10, vec![0x10, 0x20], 1, 1),
            (1, true, 0x10, vec![0x10, 0x20], 1, 1),
            (1, false, 0x11, vec![0x10, 0x20], 1, 1),
            (1, false, 0x10, vec![0x10], 1, 1),
            (1, false, 0x10, vec![], 2, u64::MAX),
        ];
        want.sort();
        assert_eq!(got, want);
        assert_eq!(g.distinct_chains(), 3);
    }

    /// The one sample decoder (collector's, used live and here) reads every sample of the
    /// golden kernel-forwarding file as linux-perf-data's own parser does: the same ip,
    /// pid, tid, time, cpu, period, kernel-or-not (host or guest kernel) and callchain
    /// without context markers.
    #[test]
    fn the_sample_decoder_agrees_with_linux_perf_data() {
        use collector::sample_decode::PERF_CONTEXT_MAX;
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
        let PerfFileReader { mut perf_file, mut record_iter } =
            PerfFileReader::parse_file(std::io::BufReader::new(std::fs::File::open(&p).unwrap())).unwrap();
        let mut compared = 0;
        while let Some(rec) = record_iter.next_record(&mut perf_file).unwrap() {
            let PerfFileRecord::EventRecord { attr_index, record } = rec else { continue };
            if record.record_type.0 != PERF_RECORD_SAMPLE {
                continue;
            }
            let layout = sample_layout(perf_file.event_attributes()[attr_index].attributes(), perf_file.endian());
            let ours = layout.decode(&record.data.as_slice(), record.misc).unwrap();
            let EventRecord::Sample(s) = record.parse().unwrap() else { panic!("not a sample") };
            let theirs = Sample {
                time: s.timestamp.unwrap_or(0),
                pid: s.pid.unwrap_or(0) as u32,
                tid: s.tid.unwrap_or(0) as u32,
                cpu: s.cpu.unwrap_or(0),
                ip: s.ip.unwrap_or(0),
                period: s.period.unwrap_or(layout.default_period),
                kernel: matches!(s.cpu_mode, CpuMode::Kernel | CpuMode::GuestKernel),
                callchain: s
                    .callchain
                    .map(|c| (0..c.len()).filter_map(|i| c.get(i)).filter(|&a| a < PERF_CONTEXT_MAX).collect())
                    .unwrap_or_default(),
            };
            assert_eq!(ours, theirs);
            compared += 1;
        }
        assert!(compared > 1000, "{compared} samples");
        for misc in 0u16..8 {
            let by_crate = matches!(CpuMode::from_misc(misc), CpuMode::Kernel | CpuMode::GuestKernel);
            assert_eq!(collector::sample_decode::CpuMode::from_misc(misc).is_kernel(), by_crate, "cpumode {misc}");
        }
    }

    /// The direct decoder and linux-perf-data's sorted iterator read the same samples,
    /// mappings and thread names from the golden kernel-forwarding file.
    #[test]
    fn direct_decoding_matches_the_library_path() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
        let read = |fast| {
            parse_with(std::io::BufReader::new(std::fs::File::open(&p).unwrap()), &p, fast, Samples::Keep).unwrap()
        };
        let (mut a, mut b) = (read(true), read(false));
        assert!(a.samples.len() > 1000);
        assert!(a.samples.iter().any(|s| !s.callchain.is_empty()));
        let key = |s: &Sample| (s.time, s.cpu, s.ip);
        a.samples.sort_by_key(key);
        b.samples.sort_by_key(key);
        assert_eq!(a.samples, b.samples);
        a.maps.sort_by_key(|m| (m.pid, m.start));
        b.maps.sort_by_key(|m| (m.pid, m.start));
        assert_eq!(a.maps, b.maps);
        assert_eq!(a.tasks.len(), b.tasks.len());
        assert_eq!((a.event.as_str(), a.lost), (b.event.as_str(), b.lost));
    }

    /// Grouping while reading gives the groups the kept samples give (same stacks, counts
    /// and periods), and keeps no sample.
    #[test]
    fn grouped_reading_gives_the_same_groups_as_kept_samples() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
        let kept = read_perf_data(&p).unwrap();
        let grouped = read_perf_data_grouped(&p).unwrap();
        assert!(grouped.samples.is_empty());
        assert_eq!(grouped.sample_count, kept.samples.len() as u64);
        let key = |g: &crate::aggregate::Group| (g.pid, g.tid, g.kernel, g.ip, g.callchain.clone());
        let (mut a, mut b) = (kept.groups().unwrap(), grouped.groups().unwrap());
        a.sort_by_key(key);
        b.sort_by_key(key);
        assert_eq!(a, b);
        assert!(b.len() > 100 && b.len() < kept.samples.len());
        assert_eq!((kept.kernel.clone(), kept.maps.len()), (grouped.kernel.clone(), grouped.maps.len()));
    }

    /// With this machine's kallsyms, a recorded module is named only when this machine has
    /// the same build of it loaded at the recorded place.
    #[test]
    fn modules_of_another_build_or_load_stay_unnamed() {
        use crate::symbolize::kernel::{KernelLookup, KernelSymbols, ThisMachine};
        let d = std::env::temp_dir().join(format!("fwdscope-modules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let module = |name: &str, id: u8, text: &str| {
            let m = d.join("module").join(name);
            std::fs::create_dir_all(m.join("notes")).unwrap();
            std::fs::create_dir_all(m.join("sections")).unwrap();
            let mut notes = Vec::new();
            for v in [4u32, 20, 3] {
                notes.extend_from_slice(&v.to_le_bytes());
            }
            notes.extend_from_slice(b"GNU\0");
            notes.extend_from_slice(&[id; 20]);
            std::fs::write(m.join("notes/.note.gnu.build-id"), notes).unwrap();
            std::fs::write(m.join("sections/.text"), text).unwrap();
        };
        module("ixgbe", 0xaa, "0xffffffffc0a00000\n");
        module("e1000e", 0xbb, "0xffffffffc0b00000\n");
        module("tg3", 0xcc, "0xffffffffc0f00000\n");
        let rec = |name: &str, start: u64, id: u8| KernelModule {
            name: name.into(),
            start,
            len: 0x10000,
            build_id: Some(format!("{id:02x}").repeat(20)),
        };
        let pd = PerfData {
            modules: vec![
                rec("ixgbe", 0xffffffffc0a00000, 0xaa),     // same build, same place: named
                rec("e1000e", 0xffffffffc0b00000, 0x11),    // another build
                rec("tg3", 0xffffffffc0c00000, 0xcc),       // loaded elsewhere now
                rec("mlx5_core", 0xffffffffc0d00000, 0xdd), // not loaded here
            ],
            ..Default::default()
        };
        let look = KernelLookup {
            given: None,
            buildid_dir: None,
            this_machine: Some(ThisMachine {
                notes: d.join("notes"),
                kallsyms: d.join("kallsyms"),
                modules: d.join("module"),
            }),
        };
        let mut ks = KernelSymbols {
            kallsyms: Some(crate::symbolize::Kallsyms::parse("ffffffff81000000 T _text\n")),
            from_this_machine: true,
            ..Default::default()
        };
        check_modules(&pd, &look, &mut ks);
        let starts: Vec<u64> = ks.unnamed.iter().map(|u| u.0).collect();
        assert_eq!(starts, [0xffffffffc0b00000, 0xffffffffc0c00000, 0xffffffffc0d00000]);
        assert!(ks.warnings[0].contains("[e1000e]") && ks.warnings[0].contains(&"bb".repeat(20)), "{:?}", ks.warnings);
        assert!(ks.warnings[1].contains("[tg3]") && ks.warnings[1].contains("loaded at 0xffffffffc0f00000"));
        assert!(ks.warnings[2].contains("[mlx5_core] (not loaded on this machine)"), "{:?}", ks.warnings);
        // With a given kallsyms file, modules cannot be checked: said in the source line.
        let mut given =
            KernelSymbols { kallsyms: ks.kallsyms.take(), source: "kernel: --kallsyms k".into(), ..Default::default() };
        check_modules(&pd, &look, &mut given);
        assert!(given.unnamed.is_empty() && given.source.contains("4 module(s) named from the same file, unchecked"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
