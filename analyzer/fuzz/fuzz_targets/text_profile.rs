//! Text profiles (opreport, perf report --stdio): any input parses or gives an error; the
//! stage table of what parsed never panics either.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(p) = analyzer::import::parse_text(&text, "fuzz") {
        let _ = analyzer::stages::profile_table(&p, &analyzer::rules::Rules::builtin());
    }
});
