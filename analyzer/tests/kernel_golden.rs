//! Golden perf.data: the Linux kernel forwarding UDP between two network namespaces,
//! recorded system-wide with `perf record -a -g` (scripts/record-kernel-golden.sh), with the
//! kallsyms of that boot beside it. Checked two ways:
//!
//! - against perf itself: every kernel symbol's share in our stage table equals its
//!   `Self` share in `perf report --stdio --sort sym -g none --no-children` of the same
//!   file (results/kernel-forwarding.perf-report.txt, made by perf when recorded), to
//!   perf's two decimals;
//! - against the expected stage table (results/kernel-forwarding.stages).

use analyzer::import::parse_text;
use analyzer::perfdata::read_perf_data;
use analyzer::rules::Rules;
use analyzer::stages::perfdata_table;
use analyzer::symbolize::Kallsyms;
use std::path::Path;

fn data() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn table() -> analyzer::stages::StageTable {
    let pd = read_perf_data(&data().join("kernel-forwarding.perf.data")).unwrap();
    let ks = Kallsyms::load(&data().join("kernel-forwarding.kallsyms.gz")).unwrap();
    perfdata_table(&pd, Some(ks), &Rules::builtin()).unwrap()
}

#[test]
fn kernel_symbols_agree_with_perf_report() {
    let t = table();
    let text = std::fs::read_to_string(data().join("results/kernel-forwarding.perf-report.txt")).unwrap();
    // The importer reads this file too (event name from the header).
    assert_eq!(parse_text(&text, "kernel-forwarding.perf-report.txt").unwrap().event, "cpu-clock");
    // perf's rows: `  49.98%  [k] pv_native_safe_halt`, shares of all samples to 0.01%.
    let mut compared = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let toks: Vec<&str> = line.split_whitespace().collect();
        let [pct, "[k]", symbol] = toks[..] else { continue };
        let perf_pct: f64 = pct.trim_end_matches('%').parse().unwrap();
        if perf_pct < 0.1 || symbol.starts_with("0x") {
            continue;
        }
        let ours: u64 =
            t.symbols.iter().filter(|s| s.symbol == symbol && s.dso == "[kernel.kallsyms]").map(|s| s.samples).sum();
        let ours_pct = 100.0 * ours as f64 / t.samples as f64;
        assert!((ours_pct - perf_pct).abs() <= 0.0051, "{symbol}: ours {ours_pct:.3}% perf {perf_pct:.2}%");
        compared += 1;
    }
    assert!(compared >= 10, "only {compared} kernel symbols compared");
}

#[test]
fn kernel_forwarding_stage_table_matches_golden() {
    let t = table();
    let got: Vec<String> = t.stages.iter().map(|r| format!("{} {} {:.2}", r.stage, r.samples, r.percent)).collect();
    let want: Vec<String> = std::fs::read_to_string(data().join("results/kernel-forwarding.stages"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    assert_eq!(got, want);
}
