//! Stage rules (TOML): any text loads or gives an error; loaded rules match any symbol.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(r) = analyzer::rules::Rules::parse(&text, "fuzz.toml") {
        let _ = r.stage_of("fib_table_lookup");
    }
});
