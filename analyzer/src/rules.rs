//! Stage rules as data: which symbols belong to which stage (lookup, gc, slab, driver, ip,
//! idle, nic), loaded from TOML. Built in: the bundled forwarder's published map
//! (`fwd_abi::STAGE_MAP_TOML`), XDP forwarding (`rules/xdp-forwarding.toml`: the JIT'd
//! program, bpf_fib_lookup, the redirect), the Linux kernel's forwarding path
//! (`rules/linux-forwarding.toml`) and DPDK forwarders such as l3fwd
//! (`rules/dpdk-forwarding.toml`, tried after the kernel's). Users add their own with `--stages FILE`; rules are
//! tried in order and the first match wins; a symbol no rule matches is `other`.
//!
//! ```toml
//! [[rule]]
//! stage = "lookup"
//! prefix = ["fib_table_lookup", "ip_route_input"]   # or a single string
//! exact = "check_leaf"
//! contains = ["_xmit_frame"]
//!
//! [shared]            # machinery every caller uses: in no stage (see `Rules::is_shared`)
//! prefix = ["_raw_spin_lock"]
//! ```

use crate::{Error, Result};
use serde::Deserialize;

/// The stage of samples no rule matches.
pub const OTHER: &str = "other";

/// Stages reports list in this order (others after them, alphabetically): the forwarding
/// stages, `other`, then what is apart from forwarding work (the synthetic device, waiting).
pub const STAGE_ORDER: [&str; 9] = ["lookup", "gc", "slab", "driver", "ip", "calib", "other", "nic", "idle"];

/// Stages that are not forwarding work: the synthetic device (simulated hardware), the
/// machine's own traffic and programs (`local`, in kernel profiles), waiting, and the
/// forwarder's start-up before its first worker ran. Tables and charts show them apart
/// from the forwarding stages' totals, and they have no per-packet cost.
pub const APART: [&str; 4] = ["nic", "local", "idle", STARTUP];

/// The forwarder's own work before its first worker thread started (loading the route
/// table, building the FIB): one-off cost, not per-packet cost (recordings of the bundled
/// forwarder only; its workers are found by their thread names).
pub const STARTUP: &str = "startup";

/// Kernel samples that could not be named (no kernel symbols of the recorded kernel's
/// build): a stage of their own, never guessed into another.
pub const KERNEL_UNKNOWN: &str = "kernel-unknown";

/// User-space samples in a binary of which no file of the recorded build was found (a
/// rebuilt program, another machine's library): a stage of their own, never guessed into
/// another.
pub const BINARY_UNKNOWN: &str = "binary-unknown";

/// The part of a profile an excerpt does not list (imported excerpts only).
pub const UNLISTED: &str = "unlisted";

/// Machinery every caller uses (locks, copies, the page allocator, system-call entry) in a
/// profile without callchains, which cannot charge it to its callers (text profiles only;
/// with callchains such samples are charged to the nearest staged caller).
pub const SHARED: &str = "shared";

/// Longest stage name a rules file may give, in bytes (the stage column of a table is at
/// most this wide).
pub const MAX_STAGE_NAME: usize = 64;

/// Where a stage sorts in tables: [`STAGE_ORDER`], with the kernel rules' `netfilter`
/// after `ip` and `local`, and [`SHARED`], [`KERNEL_UNKNOWN`] and [`BINARY_UNKNOWN`] after `other`; any
/// other stage after all of these (ties by name).
pub fn stage_rank(stage: &str) -> usize {
    const RANK: [&str; 16] = [
        "lookup",
        "gc",
        "slab",
        "driver",
        "ip",
        "netfilter",
        "calib",
        "other",
        SHARED,
        KERNEL_UNKNOWN,
        BINARY_UNKNOWN,
        UNLISTED,
        "local",
        "nic",
        "idle",
        STARTUP,
    ];
    RANK.iter().position(|x| *x == stage).unwrap_or(RANK.len())
}

/// The Linux kernel's forwarding path rules.
pub const LINUX_RULES_TOML: &str = include_str!("../rules/linux-forwarding.toml");

/// DPDK forwarders' rules (l3fwd, the PMDs, mbufs and mempools), tried after the kernel's.
pub const DPDK_RULES_TOML: &str = include_str!("../rules/dpdk-forwarding.toml");
/// XDP forwarding's rules (tried before the Linux rules).
pub const XDP_RULES_TOML: &str = include_str!("../rules/xdp-forwarding.toml");

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    stage: String,
    prefix: Option<OneOrMany>,
    exact: Option<OneOrMany>,
    contains: Option<OneOrMany>,
    dso: Option<OneOrMany>,
    process: Option<OneOrMany>,
}

/// The `[shared]` table: patterns of shared machinery, in no stage.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShared {
    prefix: Option<OneOrMany>,
    exact: Option<OneOrMany>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    rule: Vec<RawRule>,
    shared: Option<RawShared>,
    // Descriptive keys allowed in rule files.
    #[allow(dead_code)]
    version: Option<u32>,
    #[allow(dead_code)]
    name: Option<String>,
    #[allow(dead_code)]
    forwarder: Option<String>,
}

/// One rule: a stage and the symbol patterns that select it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub stage: String,
    pub prefix: Vec<String>,
    pub exact: Vec<String>,
    pub contains: Vec<String>,
    /// Prefixes of the file name (without its directory) of the binary a user-space
    /// symbol came from: every symbol of such a binary matches.
    pub dso: Vec<String>,
    /// Prefixes of a thread's name (COMM): a sample no symbol rule, inlined function or
    /// caller placed is charged by the thread that ran it (a load generator's libc code).
    pub process: Vec<String>,
}

/// `sym` without the suffix a compiler gives a function's clones and split parts
/// (`ip_rcv_core.isra.22.constprop.27`, `get_partial_node.part.0`, `tg3_poll.cold`): an
/// exact name matches its clones too.
pub fn without_clone_suffix(sym: &str) -> &str {
    const SUFFIXES: [&str; 6] = [".isra.", ".constprop.", ".part.", ".cold", ".lto_priv.", ".llvm."];
    SUFFIXES.iter().filter_map(|x| sym.find(x)).filter(|&i| i > 0).min().map_or(sym, |i| &sym[..i])
}

impl Rule {
    /// The rule a `[[rule]]` table gives (its stage trimmed), unchecked.
    fn from_raw(r: RawRule) -> Rule {
        Rule {
            stage: r.stage.trim().to_string(),
            prefix: r.prefix.map(OneOrMany::into_vec).unwrap_or_default(),
            exact: r.exact.map(OneOrMany::into_vec).unwrap_or_default(),
            contains: r.contains.map(OneOrMany::into_vec).unwrap_or_default(),
            dso: r.dso.map(OneOrMany::into_vec).unwrap_or_default(),
            process: r.process.map(OneOrMany::into_vec).unwrap_or_default(),
        }
    }

    /// Whether `sym` (whose clone-suffix-free name is `base`) of binary `dso` matches.
    fn matches(&self, sym: &str, base: &str, dso: Option<&str>) -> bool {
        self.exact.iter().any(|e| e == sym || e == base)
            || self.prefix.iter().any(|p| sym.starts_with(p.as_str()))
            || self.contains.iter().any(|c| sym.contains(c.as_str()))
            || dso.is_some_and(|d| {
                let base = d.rsplit('/').next().unwrap_or(d);
                !base.starts_with('[') && self.dso.iter().any(|p| base.starts_with(p.as_str()))
            })
    }
}

/// An ordered rule set.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub rules: Vec<Rule>,
    /// Each file the rules came from and how many rules it contributed, in the order tried.
    pub sources: Vec<(String, usize)>,
    /// What loading found suspicious but accepted (a pattern that looks like a regular
    /// expression, matched literally), each naming its file and rule.
    pub warnings: Vec<String>,
    /// Shared machinery (the files' `[shared]` tables): symbols in no stage rule, charged
    /// through callchains to their callers; see [`Rules::is_shared`].
    pub shared: SharedPatterns,
}

/// Prefixes and exact names of shared machinery.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedPatterns {
    pub prefix: Vec<String>,
    pub exact: Vec<String>,
}

/// Whether a literal pattern looks like a regular expression (`fib_.*`, `^ip_`, `rcv$`,
/// `a|b`, `[0-9]`, `\d`): rules match literally, so such a pattern is almost certainly
/// not what was meant. Demangled symbols' own `<`, `>`, `::`, `(`, `)` are not counted.
pub fn looks_like_regex(p: &str) -> bool {
    p.contains(".*")
        || p.contains(".+")
        || p.starts_with('^')
        || (p.ends_with('$') && p.len() > 1)
        || p.contains('\\')
        || p.contains('|')
        || p.contains("(?")
        || (p.contains('[') && p.contains(']') && !p.contains("[]"))
}

/// Why rule `i` (from 0) cannot be used, if it cannot: its stage name empty, too long or
/// not printable, no pattern, or an empty pattern.
fn check_rule(i: usize, rule: &Rule) -> std::result::Result<(), String> {
    if rule.stage.is_empty() {
        return Err(format!("rule {}: `stage` is empty", i + 1));
    }
    if rule.stage.len() > MAX_STAGE_NAME {
        return Err(format!(
            "rule {}: a stage name of {} bytes: expected at most {MAX_STAGE_NAME}",
            i + 1,
            rule.stage.len()
        ));
    }
    // A stage name is printed in tables and on a terminal: no control characters.
    if rule.stage.chars().any(char::is_control) {
        return Err(format!(
            "rule {}: stage {:?} holds control characters: expected a printable name",
            i + 1,
            rule.stage
        ));
    }
    if rule.prefix.is_empty()
        && rule.exact.is_empty()
        && rule.contains.is_empty()
        && rule.dso.is_empty()
        && rule.process.is_empty()
    {
        return Err(format!(
            "rule {} (stage {}): expected at least one of prefix, exact, contains, dso or process",
            i + 1,
            rule.stage
        ));
    }
    // An empty pattern matches every symbol (prefix, contains) or none (exact): either way
    // not what was meant.
    let empty = [
        ("prefix", &rule.prefix),
        ("exact", &rule.exact),
        ("contains", &rule.contains),
        ("dso", &rule.dso),
        ("process", &rule.process),
    ]
    .into_iter()
    .find(|(_, v)| v.iter().any(|p| p.is_empty()));
    if let Some((kind, _)) = empty {
        return Err(format!(
            "rule {} (stage {}): an empty {kind} pattern would match {} symbol",
            i + 1,
            rule.stage,
            if kind == "exact" { "no" } else { "every" }
        ));
    }
    Ok(())
}

/// A warning for each pattern of rule `i` (from 0, of file `origin`) that looks like a
/// regular expression: patterns match literally.
fn regex_warnings(i: usize, rule: &Rule, origin: &str) -> Vec<String> {
    rule.prefix
        .iter()
        .chain(&rule.exact)
        .chain(&rule.contains)
        .chain(&rule.dso)
        .chain(&rule.process)
        .filter(|p| looks_like_regex(p))
        .map(|p| {
            format!(
                "{origin}: rule {} (stage {}): `{p}` looks like a regular expression, but patterns \
                 match literally (prefix, exact, contains): it matches only symbols holding those characters",
                i + 1,
                rule.stage
            )
        })
        .collect()
}

/// The `[shared]` table's patterns; none may be empty.
fn shared_patterns(sh: RawShared) -> std::result::Result<SharedPatterns, String> {
    let shared = SharedPatterns {
        prefix: sh.prefix.map(OneOrMany::into_vec).unwrap_or_default(),
        exact: sh.exact.map(OneOrMany::into_vec).unwrap_or_default(),
    };
    if shared.prefix.iter().chain(&shared.exact).any(|p| p.is_empty()) {
        return Err("[shared]: an empty pattern would match every symbol (prefix) or none (exact)".into());
    }
    Ok(shared)
}

impl Rules {
    /// Parse rules from TOML text; `origin` names the file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Rules> {
        let raw: RawFile = toml::from_str(text)
            .map_err(|e| Error::Rules { path: origin.into(), msg: printable_lines(&e.to_string()) })?;
        let bad = |msg: String| Error::Rules { path: origin.into(), msg };
        let mut rules = Vec::new();
        let mut warnings = Vec::new();
        for (i, r) in raw.rule.into_iter().enumerate() {
            let rule = Rule::from_raw(r);
            check_rule(i, &rule).map_err(bad)?;
            warnings.extend(regex_warnings(i, &rule, origin));
            rules.push(rule);
        }
        if rules.is_empty() {
            return Err(bad(
                "no rules: expected [[rule]] tables (each with a stage and prefix, exact or contains)".into()
            ));
        }
        let shared = match raw.shared {
            Some(sh) => shared_patterns(sh).map_err(bad)?,
            None => SharedPatterns::default(),
        };
        let sources = vec![(origin.to_string(), rules.len())];
        Ok(Rules { rules, sources, warnings, shared })
    }

    /// Load a rules file.
    pub fn load(path: &std::path::Path) -> Result<Rules> {
        let text = collector::files::read_to_string(path, collector::files::Kind::Description)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The bundled forwarder's rules.
    pub fn forwarder() -> Rules {
        // The embedded map is part of this build and covered by a test.
        Self::parse(fwd_abi::STAGE_MAP_TOML, "fwd-abi/stages.toml").unwrap_or_default()
    }

    /// The Linux kernel forwarding path's rules.
    pub fn linux() -> Rules {
        Self::parse(LINUX_RULES_TOML, "analyzer/rules/linux-forwarding.toml").unwrap_or_default()
    }

    /// DPDK forwarders' rules.
    pub fn dpdk() -> Rules {
        Self::parse(DPDK_RULES_TOML, "analyzer/rules/dpdk-forwarding.toml").unwrap_or_default()
    }

    /// XDP forwarding's rules.
    pub fn xdp() -> Rules {
        Self::parse(XDP_RULES_TOML, "analyzer/rules/xdp-forwarding.toml").unwrap_or_default()
    }

    /// Built-in rules for everything: the forwarder's, then XDP's, then the kernel's, then
    /// DPDK's.
    pub fn builtin() -> Rules {
        Self::dpdk().prepend(Self::linux().prepend(Self::xdp()).prepend(Self::forwarder()))
    }

    /// The built-in rules with a user's rules file (`--stages FILE`) tried first.
    pub fn builtin_with(user: Option<&std::path::Path>) -> Result<Rules> {
        Ok(match user {
            Some(p) => Rules::builtin().prepend(Rules::load(p)?),
            None => Rules::builtin(),
        })
    }

    /// `first` rules tried before these.
    pub fn prepend(mut self, first: Rules) -> Rules {
        let mut v = first.rules;
        v.append(&mut self.rules);
        self.rules = v;
        let mut s = first.sources;
        s.append(&mut self.sources);
        self.sources = s;
        let mut w = first.warnings;
        w.append(&mut self.warnings);
        self.warnings = w;
        let mut sh = first.shared;
        sh.prefix.append(&mut self.shared.prefix);
        sh.exact.append(&mut self.shared.exact);
        self.shared = sh;
        self
    }

    /// "FILE N, FILE M": the files tried, in order, and the rules each contributed.
    pub fn sources_text(&self) -> String {
        self.sources.iter().map(|(f, n)| format!("{f} {n}")).collect::<Vec<_>>().join(", ")
    }

    /// The stage of the first rule matching `sym`, if any (a rule may say `other`
    /// explicitly: such a symbol is not charged through its inline frames or callers).
    pub fn rule_stage(&self, sym: &str) -> Option<&str> {
        self.rule_stage_in(sym, None)
    }

    /// [`Rules::rule_stage`] for a symbol of binary `dso` (rules with `dso` patterns match
    /// by it too).
    pub fn rule_stage_in(&self, sym: &str, dso: Option<&str>) -> Option<&str> {
        let base = without_clone_suffix(sym);
        self.rules.iter().find(|r| r.matches(sym, base, dso)).map(|r| r.stage.as_str())
    }

    /// The stage of the first rule whose `process` patterns match thread name `comm`.
    pub fn process_stage(&self, comm: &str) -> Option<&str> {
        self.rules.iter().find(|r| r.process.iter().any(|p| comm.starts_with(p.as_str()))).map(|r| r.stage.as_str())
    }

    /// Whether `sym` is shared machinery that no stage rule places (a file's `[shared]`
    /// table): a lock, a copy, the page allocator, system-call entry. With callchains its
    /// samples are charged to the caller like any unstaged symbol; a table without
    /// callchains shows them as [`SHARED`] rather than `other`, which is left for names the
    /// rules do not know.
    pub fn is_shared(&self, sym: &str) -> bool {
        let base = without_clone_suffix(sym);
        self.rule_stage(sym).is_none()
            && (self.shared.exact.iter().any(|e| e == sym || e == base)
                || self.shared.prefix.iter().any(|p| sym.starts_with(p.as_str())))
    }

    /// The stage of a symbol, or [`OTHER`].
    pub fn stage_of(&self, sym: &str) -> &str {
        self.rule_stage(sym).unwrap_or(OTHER)
    }

    /// The stage of a symbol of binary `dso`, or [`OTHER`].
    pub fn stage_in(&self, sym: &str, dso: &str) -> &str {
        self.rule_stage_in(sym, Some(dso)).unwrap_or(OTHER)
    }
}

/// A multi-line message (TOML's, which quotes the line it failed on) with each line made
/// [`crate::printable`].
fn printable_lines(msg: &str) -> String {
    msg.lines().map(|l| crate::printable(l.to_string())).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rules file that is no TOML: the error quotes its line with control characters
    /// escaped.
    #[test]
    fn a_toml_error_is_printed_escaped() {
        let e = Rules::parse("x\u{1b}[31m = = 1\n", "r.toml").expect_err("refused").to_string();
        assert!(e.contains("\\u{1b}") && !e.contains('\u{1b}'), "{e}");
    }

    #[test]
    fn clones_match_exact_names_and_shared_machinery_is_in_no_stage() {
        assert_eq!(without_clone_suffix("ip_rcv_core.isra.22.constprop.27"), "ip_rcv_core");
        assert_eq!(without_clone_suffix("get_partial_node.part.0"), "get_partial_node");
        assert_eq!(without_clone_suffix("tg3_poll.cold"), "tg3_poll");
        assert_eq!(without_clone_suffix("fib_table_lookup"), "fib_table_lookup");
        assert_eq!(without_clone_suffix(".isra.1"), ".isra.1");
        let r = Rules::builtin();
        assert_eq!(r.stage_of("get_partial_node.isra.78"), "slab");
        // Shared machinery: no stage (callchains charge it), but known as shared.
        for sym in
            ["queued_spin_lock_slowpath", "_raw_spin_lock_irqsave", "memcpy_erms", "get_page_from_freelist", "schedule"]
        {
            assert_eq!(r.stage_of(sym), OTHER, "{sym}");
            assert!(r.is_shared(sym), "{sym}");
        }
        assert!(!r.is_shared("fib_table_lookup") && !r.is_shared("cmd_exec"));
        // A user's file may name shared machinery of its own, tried with the built-in.
        let user =
            Rules::parse("[[rule]]\nstage = \"lookup\"\nexact = \"my_lookup\"\n[shared]\nprefix = \"my_lock\"\n", "u")
                .unwrap();
        let r = Rules::builtin().prepend(user);
        assert!(r.is_shared("my_lock_slowpath") && r.is_shared("_raw_spin_lock"));
        let e = Rules::parse("[[rule]]\nstage = \"x\"\nexact = \"y\"\n[shared]\nprefix = [\"\"]\n", "bad.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.toml") && e.contains("[shared]: an empty pattern"), "{e}");
        let e = Rules::parse("[[rule]]\nstage = \"x\"\nexact = \"y\"\n[shared]\nstage = \"z\"\n", "bad2.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad2.toml") && e.contains("unknown field `stage`"), "{e}");
    }

    #[test]
    fn builtin_rule_files_parse() {
        assert!(Rules::parse(fwd_abi::STAGE_MAP_TOML, "fwd").unwrap().rules.len() >= 6);
        assert!(Rules::parse(LINUX_RULES_TOML, "linux").unwrap().rules.len() >= 6);
        let dpdk = Rules::parse(DPDK_RULES_TOML, "dpdk").unwrap();
        assert!(dpdk.rules.len() == 4 && dpdk.warnings.is_empty(), "{:?}", dpdk.warnings);
        assert_eq!(Rules::parse(XDP_RULES_TOML, "xdp").unwrap().rules.len(), 3);
    }

    #[test]
    fn forwarder_symbols_map_to_their_stage() {
        let r = Rules::builtin();
        for (sym, stage) in [
            ("fwd_driver_rx_burst", "driver"),
            ("fwd_ip_input_burst", "ip"),
            ("fwd_lookup_fib_dir24", "lookup"),
            ("fwd_lookup_rtcache_input", "lookup"),
            ("fwd_gc_rt_garbage_collect", "gc"),
            ("fwd_slab_alloc_bulk", "slab"),
            ("fwd_nic_generate", "nic"),
            ("forwarder::traffic::FlowGen::next_slot", "nic"),
            ("forwarder::nic::synthetic::run_device_thread", "nic"),
            ("memcpy", "other"),
        ] {
            assert_eq!(r.stage_of(sym), stage, "{sym}");
        }
    }

    /// Names from a real l3fwd (DPDK 22.11, built by the lab with -O3 -g) and a `perf
    /// record -g -p` of it forwarding in the lab through each PMD: its own symbols (`nm`),
    /// functions inlined into its loop (addr2line -i at the sampled addresses), the
    /// stripped PMDs by file, and the kernel side of each PMD's socket.
    #[test]
    fn dpdk_l3fwd_symbols_map_to_their_stage() {
        let r = Rules::builtin();
        for (sym, dso, stage) in [
            // inlined into lpm_main_loop: the LPM lookup, the burst calls, header work
            ("rte_lpm_lookupx4", "dpdk-l3fwd", "lookup"),
            ("rte_lpm_lookup", "dpdk-l3fwd", "lookup"),
            ("processx4_step2", "dpdk-l3fwd", "lookup"),
            ("rte_eth_rx_burst", "dpdk-l3fwd", "driver"),
            ("send_packetsx4", "dpdk-l3fwd", "driver"),
            ("rte_rdtsc", "dpdk-l3fwd", "driver"),
            ("rfc1812_process", "dpdk-l3fwd", "ip"),
            // l3fwd's own symbols
            ("lpm_cb_parse_ptype", "dpdk-l3fwd", "ip"),
            ("processx4_step3", "dpdk-l3fwd", "ip"),
            ("rte_pktmbuf_free_bulk", "librte_mbuf.so.23.0", "slab"),
            ("rte_mempool_cache_free", "librte_mempool.so.23.0", "slab"),
            ("0x0000000000001a40", "librte_mempool_ring.so.23.0", "slab"),
            // the stripped PMDs, by file; ethdev's glue
            ("0x0000000000003a31", "librte_net_af_packet.so.23.0", "driver"),
            ("0x0000000000004eba", "librte_net_af_xdp.so.23.0", "driver"),
            ("rte_eth_call_rx_callbacks", "librte_ethdev.so.23.0", "driver"),
            // the kernel side of the sockets: AF_PACKET by the Linux rules, AF_XDP here
            ("packet_sendmsg", "[kernel.kallsyms]", "driver"),
            ("tpacket_destruct_skb", "[kernel.kallsyms]", "driver"),
            ("xsk_recvmsg", "[kernel.kallsyms]", "driver"),
            ("__xsk_generic_xmit", "[kernel.kallsyms]", "driver"),
            ("xsk_destruct_skb", "[kernel.kallsyms]", "driver"),
        ] {
            assert_eq!(r.rule_stage_in(sym, Some(dso)), Some(stage), "{sym} in {dso}");
        }
        // The loop functions everything is inlined into have no rule of their own, so a
        // sample there goes to the inlined function at its address; what is left goes by
        // the thread's name.
        for sym in ["lpm_main_loop", "lpm_main_loop.cold", "l3fwd_lpm_process_packets"] {
            assert_eq!(r.rule_stage_in(sym, Some("dpdk-l3fwd")), None, "{sym}");
        }
        assert_eq!(r.process_stage("dpdk-l3fwd"), Some("driver"));
        // Socket system calls stay unstaged (charged by callchain or thread), as in the
        // Linux rules.
        assert_eq!(r.rule_stage_in("__sys_recvfrom", Some("[kernel.kallsyms]")), None);
    }

    /// Names from a `perf record -a -g` of the lab's XDP forwarder (native on veth), each
    /// with the file that names it: the JIT'd program and the helpers by the XDP rules, the
    /// FIB and the skb path beneath by the Linux rules.
    #[test]
    fn xdp_forwarding_symbols_map_as_the_lab_profile_reads() {
        let r = Rules::builtin();
        for (sym, stage) in [
            ("bpf_prog_e9cdc7ea7967346a_fwd_xdp_fwd", "ip"),
            ("bpf_prog_614b434cd8324ecc_fwd_xdp_pass", "driver"),
            ("bpf_prog_run_xdp", "driver"),
            ("bpf_dispatcher_xdp_func", "driver"),
            ("bpf_xdp_fib_lookup", "lookup"),
            ("bpf_ipv4_fib_lookup", "lookup"),
            ("dev_get_by_index_rcu", "lookup"),
            ("fib_table_lookup", "lookup"),
            ("fib_lookup_good_nhc", "lookup"),
            ("xdp_do_redirect", "driver"),
            ("dev_hash_map_redirect", "driver"),
            ("dev_map_enqueue", "driver"),
            ("bq_enqueue", "driver"),
            ("bq_xmit_all", "driver"),
            ("__dev_flush", "driver"),
            ("xdp_do_flush", "driver"),
            ("veth_ndo_xdp_xmit", "driver"),
            ("veth_xdp_rcv_skb", "driver"),
            ("skb_pp_cow_data", "driver"),
            ("__xdp_build_skb_from_frame", "driver"),
            ("__xsk_generic_xmit", "driver"),
            ("xsk_destruct_skb", "driver"),
            ("kmem_cache_alloc_node_noprof", "slab"),
        ] {
            assert_eq!(r.stage_of(sym), stage, "{sym}");
        }
        // Which file: the program's stage comes from the XDP rules, not from a Linux rule.
        assert_eq!(Rules::linux().stage_of("bpf_prog_e9cdc7ea7967346a_fwd_xdp_fwd"), "other");
        assert_eq!(Rules::xdp().stage_of("bpf_prog_e9cdc7ea7967346a_fwd_xdp_fwd"), "ip");
        assert_eq!(Rules::xdp().stage_of("fib_table_lookup"), "other", "the FIB is the Linux rules'");
    }

    #[test]
    fn kernel_forwarding_symbols_map_as_the_netdev_profiles_read() {
        let r = Rules::linux();
        for (sym, stage) in [
            ("fib_table_lookup", "lookup"),
            ("fn_hash_lookup", "lookup"),
            ("check_leaf", "lookup"),
            ("ip_route_input_slow", "lookup"),
            ("ip_route_input_noref", "lookup"),
            ("rt_intern_hash", "lookup"),
            ("fib_validate_source", "lookup"),
            ("rt_garbage_collect", "gc"),
            ("dst_destroy", "gc"),
            ("kmem_cache_alloc", "slab"),
            ("kmem_cache_free", "slab"),
            ("kfree", "slab"),
            ("__kmalloc", "slab"),
            ("alloc_skb", "slab"),
            ("__alloc_skb", "slab"),
            ("build_skb", "slab"),
            ("kfree_skb", "slab"),
            ("tg3_poll", "driver"),
            ("e1000_clean_rx_irq", "driver"),
            ("ixgbe_xmit_frame_ring", "driver"),
            ("veth_xmit", "driver"),
            ("virtnet_poll", "driver"),
            ("packet_sendmsg", "driver"),
            ("tpacket_rcv", "driver"),
            ("tpacket_destruct_skb", "driver"),
            ("__dev_direct_xmit", "driver"),
            ("enqueue_to_backlog", "driver"),
            ("sock_alloc_send_pskb", "slab"),
            ("sock_wfree", "slab"),
            ("ip_rcv", "ip"),
            ("ip_forward", "ip"),
            ("ip_finish_output2", "ip"),
            ("intel_idle", "idle"),
            ("poll_idle", "idle"),
            ("tcp_v4_rcv", "local"),
            ("nf_hook_slow", "netfilter"),
            ("neigh_resolve_output", "ip"),
            ("schedule", "other"),
        ] {
            assert_eq!(r.stage_of(sym), stage, "{sym}");
        }
    }

    #[test]
    fn user_rules_come_first_and_bad_files_are_located() {
        let mine = Rules::parse("[[rule]]\nstage = \"lookup\"\nexact = \"memcpy\"\n", "mine.toml").unwrap();
        let r = Rules::builtin().prepend(mine);
        assert_eq!(r.stage_of("memcpy"), "lookup");
        let e = Rules::parse("[[rule]]\nstage = \"x\"\n", "bad.toml").unwrap_err().to_string();
        assert!(e.starts_with("bad.toml: rule 1 (stage x): expected at least one of"), "{e}");
        let e = Rules::parse("[[rule]]\nstage = \"x\"\nprefx = \"a\"\n", "typo.toml").unwrap_err().to_string();
        assert!(e.contains("typo.toml") && e.contains("prefx"), "{e}");
        // A regex-looking pattern is accepted (it may be meant) but warned of, by file and rule.
        let r = Rules::parse("[[rule]]\nstage = \"lookup\"\nprefix = [\"fib_.*\", \"ip_route\"]\n", "re.toml").unwrap();
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].starts_with("re.toml: rule 1 (stage lookup): `fib_.*` looks like a regular"),
            "{:?}",
            r.warnings
        );
        assert_eq!(r.sources, vec![("re.toml".to_string(), 1)]);
        for (p, re) in [
            ("^ip_", true),
            ("rcv$", true),
            ("a|b", true),
            ("x[0-9]", true),
            ("<T as Tr>::f", false),
            ("operator()", false),
            ("fib_table_lookup", false),
        ] {
            assert_eq!(looks_like_regex(p), re, "{p}");
        }
        let b = Rules::builtin_with(None).unwrap();
        assert_eq!(b.sources.len(), 4);
        assert_eq!(b.sources.iter().map(|s| s.1).sum::<usize>(), b.rules.len());
        assert!(b.warnings.is_empty(), "built-in rules warn: {:?}", b.warnings);
        // An empty file and a misspelled table name load no rule: refused, not silently empty.
        let e = Rules::parse("", "empty.toml").unwrap_err().to_string();
        assert!(e.starts_with("empty.toml: no rules: expected [[rule]] tables"), "{e}");
        let e = Rules::parse("[[rules]]\nstage = \"x\"\nprefix = \"a\"\n", "tables.toml").unwrap_err().to_string();
        assert!(e.contains("tables.toml") && e.contains("rules"), "{e}");
        // An empty prefix would claim every symbol.
        let e = Rules::parse("[[rule]]\nstage = \"lookup\"\nprefix = [\"fib_\", \"\"]\n", "all.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "all.toml: rule 1 (stage lookup): an empty prefix pattern would match every symbol");
        // A stage name of 70,000 bytes made the table's formatter panic (width past u16).
        let long = format!("[[rule]]\nstage = \"{}\"\nprefix = \"a\"\n", "s".repeat(70_000));
        let e = Rules::parse(&long, "long.toml").unwrap_err().to_string();
        assert_eq!(e, "long.toml: rule 1: a stage name of 70000 bytes: expected at most 64");
    }
}
