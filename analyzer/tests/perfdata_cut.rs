//! A perf.data file cut after its data section (its feature sections lost) still has whole
//! samples: they are read, and the table warns of what was skipped, naming the file.

use analyzer::perfdata::parse_perf_data;
use std::path::Path;

#[test]
fn a_perf_data_cut_after_its_samples_is_read_with_a_warning() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernel-forwarding.perf.data");
    let bytes = std::fs::read(&path).unwrap();
    let whole = parse_perf_data(std::io::Cursor::new(&bytes), &path).unwrap();
    assert!(whole.warnings.is_empty(), "{:?}", whole.warnings);
    // The data section's end, from the header (offset 40: data offset, 48: data size).
    let at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap()) as usize;
    let data_end = at(40) + at(48);
    assert!(data_end + 16 < bytes.len(), "the fixture has feature sections after its data");
    let cut = Path::new("cut.perf.data");
    let pd = parse_perf_data(std::io::Cursor::new(&bytes[..data_end + 8]), cut).unwrap();
    assert_eq!(pd.samples.len(), whole.samples.len(), "every sample read");
    assert_eq!(pd.warnings.len(), 1);
    assert!(pd.warnings[0].starts_with("cut.perf.data: feature sections cut: offset"), "{}", pd.warnings[0]);
    // Cut inside the data section: refused, naming the file.
    let e = parse_perf_data(std::io::Cursor::new(&bytes[..data_end - 100]), cut).unwrap_err().to_string();
    assert!(e.starts_with("cut.perf.data: perf.data: offset 40: data section"), "{e}");
}
