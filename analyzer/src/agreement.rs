//! Where the two instruments are known to part: `rules/instrument-agreement.toml` (data,
//! embedded) lists hosts and forwarder configurations on which samples and stage clocks
//! were measured more than [`crate::crosscheck::MAX_POINTS_APART`] points apart, with what
//! was seen and why. [`Partings::matching`] picks the entries for a recording's host and
//! configuration; the cross-check prints them.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// The embedded table.
pub const AGREEMENT_TOML: &str = include_str!("../rules/instrument-agreement.toml");

/// One host and configuration where the instruments part.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Parting {
    /// Substring of the host's CPU model name, any case; none matches any CPU.
    #[serde(default)]
    pub cpu: Option<String>,
    /// The forwarder's TSC rate range, MHz, inclusive; none matches any rate.
    #[serde(default)]
    pub tsc_mhz: Option<[f64; 2]>,
    /// Cache modes; empty matches any.
    #[serde(default)]
    pub cache: Vec<String>,
    /// FIB engines; empty matches any.
    #[serde(default)]
    pub fib: Vec<String>,
    /// Prefetch depths; empty matches any.
    #[serde(default)]
    pub prefetch: Vec<fwd_abi::Prefetch>,
    /// The stages that part.
    pub stages: Vec<String>,
    /// What was measured.
    pub seen: String,
    /// Why, and what to trust instead.
    pub why: String,
}

/// A recording's host and forwarder configuration, as far as it was recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setting {
    pub cpu_model: String,
    pub tsc_hz: u64,
    pub cache: Option<String>,
    pub fib: Option<String>,
    pub prefetch: Option<fwd_abi::Prefetch>,
}

impl Setting {
    /// From a recording's CPU model, TSC rate and what its forwarder published (empty for
    /// other targets).
    pub fn of(cpu_model: &str, tsc_hz: u64, forwarder: &fwd_abi::Published) -> Setting {
        let c = &forwarder.config;
        Setting {
            cpu_model: cpu_model.to_string(),
            tsc_hz,
            cache: c.cache.clone(),
            fib: c.fib.clone(),
            prefetch: c.prefetch,
        }
    }
}

impl Parting {
    /// Whether this entry names `s`. A field the entry gives must be known in `s` and match.
    pub fn matches(&self, s: &Setting) -> bool {
        let listed = |list: &[String], v: &Option<String>| {
            list.is_empty() || v.as_ref().is_some_and(|v| list.iter().any(|x| x.eq_ignore_ascii_case(v)))
        };
        self.cpu.as_ref().is_none_or(|c| s.cpu_model.to_lowercase().contains(&c.to_lowercase()))
            && self.tsc_mhz.is_none_or(|[lo, hi]| {
                let mhz = s.tsc_hz as f64 / 1e6;
                s.tsc_hz > 0 && mhz >= lo && mhz <= hi
            })
            && listed(&self.cache, &s.cache)
            && listed(&self.fib, &s.fib)
            && (self.prefetch.is_empty() || s.prefetch.is_some_and(|p| self.prefetch.contains(&p)))
    }

    /// One line for a report.
    pub fn note(&self) -> String {
        format!("known to part here on {}: {}; {}", self.stages.join(" and "), self.seen, self.why)
    }
}

/// The table of partings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partings {
    #[serde(default)]
    pub parting: Vec<Parting>,
}

impl Partings {
    /// Parse a table; `path` names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Partings> {
        let p: Partings = toml::from_str(text).map_err(|e| Error::Rules { path: path.into(), msg: e.to_string() })?;
        for (i, e) in p.parting.iter().enumerate() {
            if e.stages.is_empty() {
                return Err(Error::Rules { path: path.into(), msg: format!("parting {}: stages is empty", i + 1) });
            }
            if let Some([lo, hi]) = e.tsc_mhz {
                if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                    return Err(Error::Rules {
                        path: path.into(),
                        msg: format!("parting {}: tsc_mhz must be [low, high] with low <= high", i + 1),
                    });
                }
            }
        }
        Ok(p)
    }

    /// The embedded table (empty, never a panic, if it could not be parsed: its unit test
    /// keeps it parseable).
    pub fn embedded() -> Partings {
        Self::parse(AGREEMENT_TOML, "analyzer/rules/instrument-agreement.toml").unwrap_or_default()
    }

    /// The entries naming `s`.
    pub fn matching(&self, s: &Setting) -> Vec<&Parting> {
        self.parting.iter().filter(|p| p.matches(s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_names_the_2300_mhz_host() {
        let t = Partings::parse(AGREEMENT_TOML, "embedded").expect("embedded table");
        assert!(!t.parting.is_empty());
        let cfg = serde_json::json!({"config": {"cache": "nocache", "fib": "dir24", "prefetch": 4}});
        let on = |tsc: u64, pf: u64| {
            let mut c = cfg.clone();
            c["config"]["prefetch"] = pf.into();
            Setting::of("Some CPU", tsc, &fwd_abi::Published::from_value(&c))
        };
        let hit = t.matching(&on(2_300_000_000, 4));
        assert_eq!(hit.len(), 1);
        assert_eq!(hit[0].stages, ["ip", "driver"]);
        assert!(hit[0].note().starts_with("known to part here on ip and driver: "));
        // Another host, another depth, another FIB: nothing known.
        assert!(t.matching(&on(2_445_424_000, 4)).is_empty());
        assert!(t.matching(&on(2_300_000_000, 0)).is_empty());
        let lctrie = serde_json::json!({"config": {"cache": "nocache", "fib": "lctrie", "prefetch": 4}});
        assert!(t.matching(&Setting::of("x", 2_300_000_000, &fwd_abi::Published::from_value(&lctrie))).is_empty());
        // Not recorded is no match for an entry that names the field.
        assert!(t.matching(&Setting::of("x", 2_300_000_000, &fwd_abi::Published::default())).is_empty());
    }

    #[test]
    fn cpu_substring_any_case_and_bad_tables_are_refused() {
        let t = Partings::parse(
            "[[parting]]\ncpu = \"epyc\"\nstages = [\"lookup\"]\nseen = \"s\"\nwhy = \"w\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(t.matching(&Setting { cpu_model: "AMD EPYC 7B13".into(), ..Default::default() }).len(), 1);
        assert!(t.matching(&Setting { cpu_model: "Intel Xeon".into(), ..Default::default() }).is_empty());
        let e = Partings::parse("[[parting]]\nstages = []\nseen = \"s\"\nwhy = \"w\"\n", "t.toml").unwrap_err();
        assert!(e.to_string().contains("t.toml: parting 1: stages is empty"), "{e}");
        let e = Partings::parse("[[parting]]\nstage = [\"ip\"]\n", "t.toml").unwrap_err();
        assert!(e.to_string().starts_with("t.toml: "), "{e}");
        let e = Partings::parse(
            "[[parting]]\ntsc_mhz = [3.0, 2.0]\nstages = [\"ip\"]\nseen = \"s\"\nwhy = \"w\"\n",
            "t.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("low <= high"), "{e}");
    }
}
