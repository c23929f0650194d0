//! What the analyzer reads, told apart in one place: a recording directory (`fwdscope
//! record`), a dataset of them across hosts (`_dataset.json`, see [`crate::dataset`]), a
//! perf.data file (by its `PERFILE2` magic), or a text profile (opreport or `perf report
//! --stdio`). `report`, `diff`, `export` and `top --replay` all open their
//! inputs here, so an input is the same kind of thing to each of them.

use crate::export::Profile;
use crate::import::TextProfile;
use crate::rules::Rules;
use crate::stages::StageTable;
use crate::symbolize::kernel::KernelLookup;
use crate::symbolize::{SymbolPaths, Symbolizer};
use crate::{Error, Result};
use collector::recording::Recording;
use std::path::{Path, PathBuf};

/// The first bytes of a perf.data file.
pub const PERF_DATA_MAGIC: &[u8; 8] = b"PERFILE2";

/// An input, opened.
pub enum Input {
    /// A recording directory (its meta.json already read and checked).
    Recording(Box<Recording>),
    /// A perf.data file; parsed when a table or profile is asked for, with the kernel
    /// symbols that go with it.
    PerfData(PathBuf),
    /// A text profile, parsed.
    Text(TextProfile),
    /// A dataset of runs across hosts, or a partition of one (its run.json files read).
    Dataset(crate::dataset::Dataset),
}

/// Open `path`: a directory is a recording; a file starting with [`PERF_DATA_MAGIC`] is
/// perf.data; any other file is a text profile (errors name the file and line).
pub fn open(path: &Path) -> Result<Input> {
    open_with(path, false)
}

/// [`open`]; `strict` refuses a recording with a part that cannot be read (otherwise such
/// a part is skipped and the table warns of it).
pub fn open_with(path: &Path, strict: bool) -> Result<Input> {
    let md = std::fs::metadata(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    if md.is_dir() {
        return open_dir(path, strict);
    }
    if !md.is_file() {
        return Err(kind_error(path, not_regular(&md).to_string()));
    }
    if md.len() == 0 {
        return Err(kind_error(path, "an empty file".into()));
    }
    open_file(path)
}

/// The error for `path`, an input of another kind than the analyzer reads (`found`).
fn kind_error(path: &Path, found: String) -> Error {
    Error::InputKind { path: path.display().to_string(), found }
}

/// A directory: a dataset, or a recording (its meta.json read); any other directory is
/// said for what it looks like.
fn open_dir(path: &Path, strict: bool) -> Result<Input> {
    let kind = |found: String| kind_error(path, found);
    if crate::dataset::root_of(path).is_some() {
        return Ok(Input::Dataset(crate::dataset::Dataset::open(path)?));
    }
    // A dataset's description that is there but no file (a FIFO, a device): said as
    // such, not taken for a directory without meta.json.
    let described = path.join(crate::dataset::DATASET_FILE);
    if let Ok(md) = std::fs::metadata(&described) {
        if let Some(what) = collector::files::not_regular(md.file_type()) {
            return Err(kind(format!(
                "a dataset whose {} is {what}, not a regular file: not read",
                crate::dataset::DATASET_FILE
            )));
        }
    }
    if let Err(e) = std::fs::metadata(path.join("meta.json")) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            return Err(kind(format!(
                "a directory this user may not read ({e}): a recording made as root is kept private to root"
            )));
        }
    }
    if !path.join("meta.json").exists() {
        let found = if path.join("results.parquet").exists() {
            "a sweep directory (results.parquet; `report --html FILE -i DIR` makes its page)".to_string()
        } else if path.join("live.json").exists() {
            "a live comparison's directory (`sweep --live`: its table is table.txt, and \
             `report --html FILE -i DIR` makes its page)"
                .to_string()
        } else {
            "a directory without meta.json, so not a recording".to_string()
        };
        return Err(kind(found));
    }
    let mut rec = Recording::open(path)?;
    rec.strict = strict;
    Ok(Input::Recording(Box::new(rec)))
}

/// What a path that is neither a directory nor a regular file is, for the error.
fn not_regular(md: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = md.file_type();
    if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO (a pipe is read once and cannot be told apart first; save it to a file)"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// A regular file that is not empty, told by its first bytes: perf.data, a text profile
/// (parsed), or something else said for what it is.
fn open_file(path: &Path) -> Result<Input> {
    let kind = |found: String| kind_error(path, found);
    let mut head = vec![0u8; 4096];
    let f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    let n = read_up_to(&f, &mut head).map_err(|e| Error::Io { path: path.into(), source: e })?;
    head.truncate(n);
    if head.starts_with(PERF_DATA_MAGIC) {
        return Ok(Input::PerfData(path.to_path_buf()));
    }
    if head.starts_with(b"PERFFILE") || head.starts_with(b"PERFILE") {
        return Err(kind("a perf.data file of an old layout (not PERFILE2)".into()));
    }
    if head.starts_with(b"PAR1") {
        return Err(kind("a Parquet file (a recording is the directory that holds it)".into()));
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Err(kind("gzip-compressed data (decompress it first: gunzip -k)".into()));
    }
    // Text profiles are text: a NUL, or bytes that are not UTF-8 early on, mean binary
    // data (a character cut at the end of the window is not counted against it).
    let text_prefix = match std::str::from_utf8(&head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && e.valid_up_to() + 4 >= head.len(),
    };
    if head.contains(&0) || !text_prefix {
        let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(kind(format!("binary data that is not perf.data (first bytes {})", shown.join(" "))));
    }
    Ok(Input::Text(crate::import::load_text(path)?))
}

/// What the analyzer reads, for errors about an input of another kind.
pub const ACCEPTED: &str = "a recording directory (fwdscope record), a dataset of recordings or a partition of \
     one (fwdscope record --dataset), a perf.data file (perf record), or a text profile (opreport, perf report --stdio)";

/// Where a perf.data file's kernel symbols are looked for: `--kallsyms` if given, else the
/// defaults of [`KernelLookup`].
fn lookup(paths: &SymbolPaths) -> KernelLookup {
    KernelLookup { given: paths.kallsyms.clone(), ..KernelLookup::default() }
}

/// Read until `buf` is full or the file ends.
fn read_up_to(mut f: &std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

impl Input {
    /// What kind of input this is, in words.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Recording(_) => "recording",
            Input::PerfData(_) => "perf.data",
            Input::Text(_) => "text profile",
            Input::Dataset(_) => "dataset",
        }
    }

    /// The stage table. `paths.kallsyms` names the kernel symbols of a perf.data file
    /// (default: perf's build-id cache or this machine's, when of the recorded kernel
    /// build; recordings carry their own snapshot); `paths.symfs` a copy of the recording
    /// machine's binaries, tried first.
    pub fn stage_table(&self, rules: &Rules, paths: &SymbolPaths) -> Result<StageTable> {
        match self {
            Input::Recording(rec) => crate::stages::stage_table_with(rec, rules, paths),
            Input::PerfData(p) => {
                let (pd, ks) = crate::perfdata::read_perf_data_with_kernel(p, &lookup(paths), true)?;
                let sym = Symbolizer::with_kernel(pd.maps.clone(), ks).with_symfs(paths.symfs.as_deref());
                crate::stages::perfdata_table_with(&pd, sym, rules)
            }
            Input::Text(t) => Ok(crate::stages::profile_table(t, rules)),
            Input::Dataset(d) => d.stage_table(rules),
        }
    }

    /// The stacks, symbolized, and the symbolizer that did it (reuse it for pprof's
    /// locations). A text profile has no stacks.
    pub fn profile(&self, rules: &Rules, paths: &SymbolPaths) -> Result<(Profile, Symbolizer)> {
        match self {
            Input::Recording(rec) => {
                let mut sym = Symbolizer::for_recording_with(rec, paths)?;
                let mut p = crate::export::recording_profile(rec, &mut sym, rules)?;
                // A dataset run's recording is labelled as the run.
                if let Some(run) = crate::dataset::run_of_recording(&rec.dir) {
                    p.labels =
                        vec![("host".into(), run.host), ("run".into(), run.run), ("setting".into(), run.setting)];
                }
                Ok((p, sym))
            }
            Input::PerfData(p) => {
                let (pd, ks) = crate::perfdata::read_perf_data_with_kernel(p, &lookup(paths), false)?;
                let mut sym = Symbolizer::with_kernel(pd.maps.clone(), ks).with_symfs(paths.symfs.as_deref());
                Ok((crate::export::perfdata_profile(&pd, &mut sym, rules)?, sym))
            }
            Input::Text(t) => Err(Error::Export(format!(
                "a {} profile is a table of symbols without stacks: nothing to export (report reads it)",
                t.format
            ))),
            Input::Dataset(d) => Err(Error::Export(format!(
                "{}: a dataset keeps its stacks in stacks.parquet per run (read them directly); export reads one run's recording: -i {}",
                d.selected.display(),
                d.runs[0].dir.join(crate::dataset::RECORDING_DIR).display()
            ))),
        }
    }

    /// The recording, for what only a recording has (its counters, a replay).
    pub fn into_recording(self, path: &Path) -> Result<Recording> {
        match self {
            Input::Recording(r) => Ok(*r),
            other => Err(Error::Export(format!(
                "{}: a {}, not a recording directory (from `fwdscope record`)",
                path.display(),
                other.kind()
            ))),
        }
    }
}
