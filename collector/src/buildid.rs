//! Build-ids of mapped files, read from their ELF notes (for maps.json), so the analyzer can
//! check it symbolizes the very binary that was sampled.

use crate::records::Mapping;
use std::collections::HashMap;

/// The GNU build-id of an ELF file, as lowercase hex. The file is mapped, not read: only
/// the pages holding the headers and the note are touched (binaries with debug info run to
/// hundreds of megabytes).
pub fn read_build_id(path: &std::path::Path) -> Option<String> {
    use object::Object;
    let f = std::fs::File::open(path).ok()?;
    // SAFETY: read-only private mapping; a file truncated under us would fault, which for
    // mapped executables of a live process does not happen.
    let data = unsafe { memmap2::Mmap::map(&f) }.ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    Some(id.iter().map(|b| format!("{b:02x}")).collect())
}

/// Fill in build-ids the kernel did not supply, reading each distinct file once.
pub fn fill_build_ids(maps: &mut [Mapping]) {
    let mut cache: HashMap<String, Option<String>> = HashMap::new();
    for m in maps.iter_mut() {
        if m.build_id.is_some() || !m.path.starts_with('/') {
            continue;
        }
        let id = cache.entry(m.path.clone()).or_insert_with(|| read_build_id(std::path::Path::new(&m.path)));
        m.build_id = id.clone();
    }
}
