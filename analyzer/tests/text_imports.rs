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

/// A peer's golden: its report names the peer's rule file (`rules`: file and rule count)
/// and leaves under `max_other` percent in `other`.
fn check_peer(name: &str, rules: &str, max_other: f64) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let p = load_text(&data.join(format!("{name}.txt"))).unwrap();
    let t = profile_table(&p, &Rules::builtin());
    assert!(t.text(5).contains(rules), "{name}: the report names {rules}");
    let other = t.stages.iter().find(|r| r.stage == "other").map_or(0.0, |r| r.percent);
    assert!(other < max_other, "{name}: other {other}%");
}

#[test]
fn opreport_of_the_2003_forwarding_path() {
    check("opreport-2003-forwarding", "GLOBAL_POWER_EVENTS");
}

#[test]
fn perf_report_of_veth_forwarding() {
    check("perf-report-veth-forwarding", "cpu-clock");
}

/// The lab's XDP forwarder, profiled here (source at the top of the file): the XDP rules
/// name the program, bpf_fib_lookup's helper and the redirect, the Linux rules the FIB and
/// the skb path beneath; under 1% is `other`.
#[test]
fn perf_report_of_the_labs_xdp_forwarder() {
    check("xdp-lab-veth.perf-report", "cpu-clock");
    check_peer("xdp-lab-veth.perf-report", "analyzer/rules/xdp-forwarding.toml 3", 1.0);
}

/// DPDK's l3fwd through the af_packet PMD in the lab, profiled here (source at the top of
/// the file): the DPDK rules name the lookup, the packet-type parse, the stripped PMD and
/// l3fwd's loop by file; the Linux rules the kernel's AF_PACKET and veth path beneath;
/// under 5% is `other`.
#[test]
fn perf_report_of_dpdk_l3fwd_through_the_af_packet_pmd() {
    check("dpdk-l3fwd-afpacket.perf-report", "cpu-clock");
    check_peer("dpdk-l3fwd-afpacket.perf-report", "analyzer/rules/dpdk-forwarding.toml 4", 5.0);
}

#[test]
fn opreport_of_a_2_6_route_cache_flood() {
    check("opreport-2.6-rtcache-flood", "CPU_CLK_UNHALTED");
}

#[test]
fn perf_report_excerpt_quoted_in_a_mail() {
    check("perf-report-excerpt-mail", "unknown");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let p = load_text(&data.join("perf-report-excerpt-mail.txt")).unwrap();
    assert!(p.is_excerpt());
    let t = profile_table(&p, &Rules::builtin());
    assert!(
        t.warnings[0].contains("an excerpt") && t.warnings[0].contains("58.45% of the profile"),
        "{:?}",
        t.warnings
    );
    assert!(t.text(5).contains("# WARNING: an excerpt"), "the report says the input was an excerpt");
}

/// Public tables from netdev mails (sources at the top of each file): perf top of a 2x100G
/// router on 5.4 and on 4.19, and perf report of an ARM home router on 4.19, each against a
/// stage table assigned by hand row by row.
#[test]
fn perf_top_of_a_100g_router_on_5_4_from_netdev() {
    check("netdev-2019-5.4-mlx5-router.perf-top", "unknown");
    // The mail repeats one row under the table to point at it: read once, and said.
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let p = load_text(&data.join("netdev-2019-5.4-mlx5-router.perf-top.txt")).unwrap();
    assert_eq!(p.rows.iter().filter(|r| r.symbol == "rr_transmit").count(), 1);
    let t = profile_table(&p, &Rules::builtin());
    assert!(
        t.warnings
            .iter()
            .any(|w| w.contains("perf-top.txt:76 repeats the row of line 18") && w.contains("rr_transmit")),
        "{:?}",
        t.warnings
    );
}

#[test]
fn perf_top_of_a_100g_router_on_4_19_from_netdev() {
    check("netdev-2019-4.19-mlx5-router.perf-top", "unknown");
}

/// A quarter of this one is one lock's slow path: `shared`, with the report saying that
/// only callchains could charge it, not `other`.
#[test]
fn perf_top_of_a_100g_router_on_4_19_before_the_order0_patches() {
    check("netdev-2019-4.19-mlx5-router-before-order0.perf-top", "unknown");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let p = load_text(&data.join("netdev-2019-4.19-mlx5-router-before-order0.perf-top.txt")).unwrap();
    let t = profile_table(&p, &Rules::builtin());
    let text = t.text(3);
    assert!(text.contains("# shared: locks, copies, the page allocator"), "{text}");
    assert!(text.contains("perf record -g"), "{text}");
    // Shared machinery is not offered as a name to write a rule for; unknown names are.
    assert!(text.contains("# top symbols in no rule (add rules with --stages FILE): cmd_exec (13)"), "{text}");
}

#[test]
fn perf_report_of_an_arm_home_router_with_fold_markers_and_decimal_commas() {
    check("netdev-2019-4.19-arm-nat.perf-report", "unknown");
}

/// Every Linux golden profile of the project leaves at most 5% of its samples in `other`
/// (names the rules do not know; locks and copies in a table without callchains are
/// `shared`, not `other`).
#[test]
fn linux_goldens_leave_at_most_five_percent_in_other() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/results");
    let mut checked = Vec::new();
    for e in std::fs::read_dir(&results).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".stages") || name.starts_with("forwarder-") {
            continue;
        }
        let other: f64 = std::fs::read_to_string(&p)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("other "))
            .map(|l| l.split_whitespace().nth(2).unwrap().parse::<f64>().unwrap())
            .sum();
        assert!(other <= 5.0, "{name}: other {other}% over 5%");
        checked.push(name);
    }
    assert!(checked.len() >= 8, "{checked:?}");
}
