//! Recordings: a samples part made of arbitrary bytes (and arbitrary meta.json) opens and
//! aggregates, or gives an error naming the file; never a panic escapes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reader turns panics of the Parquet library into errors (catch_unwind); a panic
    // escaping `Recording`/`group` still aborts the run.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let dir = std::env::temp_dir().join(format!("fwdscope-fuzz-rec-{}", std::process::id()));
    let _ = std::fs::create_dir_all(dir.join("samples.parquet"));
    // Byte 0: length of a meta.json to use (under 8: the golden recording's); then the part.
    let Some((&n, rest)) = data.split_first() else { return };
    let (meta, part) = rest.split_at(rest.len().min(n as usize));
    let meta_ok = include_bytes!("../../tests/data/forwarder-recording/meta.json");
    let _ = std::fs::write(dir.join("meta.json"), if meta.len() < 8 { &meta_ok[..] } else { meta });
    let _ = std::fs::write(dir.join("samples.parquet").join("part-000001.parquet"), part);
    if let Ok(rec) = collector::recording::Recording::open(&dir) {
        if let Ok(df) = rec.samples_df() {
            let _ = analyzer::aggregate::group(df);
        }
    }
});
