//! perf.data: any bytes parse or give an error naming the file and offset or record.
//! The analyzer turns panics of the third-party parser into errors (catch_unwind), so the
//! panic hook here stays quiet; a panic escaping `parse_perf_data` still aborts the run.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let _ = analyzer::perfdata::parse_perf_data(std::io::Cursor::new(data), std::path::Path::new("fuzz.data"));
});
