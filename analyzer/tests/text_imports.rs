//! Golden files: text profiles of the kernel's forwarding path (tests/data) against
//! hand-checked stage tables (tests/data/results, the arithmetic written in their comments).

use analyzer::import::load_text;
use analyzer::rules::Rules;
use analyzer::stages::profile_table;
use std::path::Path;

fn check(name: &str, expected_event: &str) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let p = load_text(&data.join(format!("{name}.txt"))).unwrap();
    assert_eq!(p.event, expected_event);
    let t = profile_table(&p, &Rules::builtin());
    let got: Vec<String> = t.stages.iter().map(|r| format!("{} {} {:.2}", r.stage, r.samples, r.percent)).collect();
    let want: Vec<String> = std::fs::read_to_string(data.join(format!("results/{name}.stages")))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    assert_eq!(got, want, "{name}");
}

#[test]
fn opreport_of_the_2003_forwarding_path() {
    check("opreport-2003-forwarding", "GLOBAL_POWER_EVENTS");
}

#[test]
fn perf_report_of_veth_forwarding() {
    check("perf-report-veth-forwarding", "cpu-clock");
}
