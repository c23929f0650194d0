//! What the analyzer reads, told apart in one place: a recording directory (`fwdscope
//! record`), a perf.data file (by its `PERFILE2` magic), or a text profile (opreport or
//! `perf report --stdio`). `report`, `diff`, `export` and `top --replay` all open their
//! inputs here, so an input is the same kind of thing to each of them.

use crate::export::Profile;
use crate::import::TextProfile;
use crate::rules::Rules;
use crate::stages::StageTable;
use crate::symbolize::Symbolizer;
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
}

/// Open `path`: a directory is a recording; a file starting with [`PERF_DATA_MAGIC`] is
/// perf.data; any other file is a text profile (errors name the file and line).
pub fn open(path: &Path) -> Result<Input> {
    open_with(path, false)
}

/// [`open`]; `strict` refuses a recording with a part that cannot be read (otherwise such
/// a part is skipped and the table warns of it).
pub fn open_with(path: &Path, strict: bool) -> Result<Input> {
    if path.is_dir() {
        let mut rec = Recording::open(path)?;
        rec.strict = strict;
        return Ok(Input::Recording(Box::new(rec)));
    }
    let mut magic = [0u8; 8];
    let f = std::fs::File::open(path).map_err(|e| Error::Io { path: path.into(), source: e })?;
    let is_perf_data = std::io::Read::read_exact(&mut &f, &mut magic).is_ok() && &magic == PERF_DATA_MAGIC;
    if is_perf_data {
        Ok(Input::PerfData(path.to_path_buf()))
    } else {
        Ok(Input::Text(crate::import::load_text(path)?))
    }
}

impl Input {
    /// What kind of input this is, in words.
    pub fn kind(&self) -> &'static str {
        match self {
            Input::Recording(_) => "recording",
            Input::PerfData(_) => "perf.data",
            Input::Text(_) => "text profile",
        }
    }

    /// The stage table. `kallsyms` names the kernel symbols of a perf.data file (default:
    /// this machine's); recordings carry their own snapshot.
    pub fn stage_table(&self, rules: &Rules, kallsyms: Option<&Path>) -> Result<StageTable> {
        match self {
            Input::Recording(rec) => crate::stages::stage_table(rec, rules),
            Input::PerfData(p) => {
                let (pd, ks) = crate::perfdata::read_perf_data_with_kallsyms(p, kallsyms)?;
                crate::stages::perfdata_table(&pd, ks, rules)
            }
            Input::Text(t) => Ok(crate::stages::profile_table(t, rules)),
        }
    }

    /// The stacks, symbolized, and the symbolizer that did it (reuse it for pprof's
    /// locations). A text profile has no stacks.
    pub fn profile(&self, rules: &Rules, kallsyms: Option<&Path>) -> Result<(Profile, Symbolizer)> {
        match self {
            Input::Recording(rec) => {
                let mut sym = Symbolizer::for_recording(rec)?;
                Ok((crate::export::recording_profile(rec, &mut sym, rules)?, sym))
            }
            Input::PerfData(p) => {
                let (pd, ks) = crate::perfdata::read_perf_data_with_kallsyms(p, kallsyms)?;
                let mut sym = Symbolizer::new(pd.maps.clone(), ks);
                Ok((crate::export::perfdata_profile(&pd, &mut sym, rules)?, sym))
            }
            Input::Text(t) => Err(Error::Export(format!(
                "a {} profile is a table of symbols without stacks: nothing to export (report reads it)",
                t.format
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
