//! A setting that changes live, through a running forwarder's control block: prefetch
//! depth, cache mode, the calibration cost and the route-cache GC tunables, typed once
//! ([`LiveChange`]: from the command line's typed values, or an experiment file's flags
//! parsed at load), and the request that switches to it. Used by sweeps (as start flags),
//! live comparisons, `top`'s A/B and phased experiments.

use crate::{Error, Result};
use fwd_abi::setting::gc_limits;
use fwd_abi::{CacheMode, Prefetch, Request, Segment};

/// What a setting changes on a running forwarder, typed: each field left `None` keeps the
/// forwarder's value. Parsed once, where the setting enters (the command line's typed
/// values, an experiment file's flags), and turned back into flags only to start a
/// forwarder process with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LiveChange {
    pub prefetch: Option<Prefetch>,
    pub cache: Option<CacheMode>,
    /// The calibration cost, ns per packet.
    pub spin_ns: Option<u32>,
    /// Route-cache GC tunables (`--gc-thresh`, `--gc-elasticity`, `--gc-min-interval-ms`,
    /// `--gc-timeout`); unset ones keep the forwarder's start values.
    pub gc: GcSetting,
}

/// One setting of a live comparison: what the control block is asked for.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LiveSetting {
    pub label: String,
    #[serde(flatten)]
    pub change: LiveChange,
    /// What was reported in the historic post, in the experiment's unit.
    pub reported: Option<f64>,
}

/// GC tunables a live setting changes (None: the forwarder's start value).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct GcSetting {
    pub thresh: Option<u32>,
    pub elasticity: Option<u32>,
    pub min_interval_ms: Option<u32>,
    pub timeout_s: Option<u32>,
}

impl GcSetting {
    /// These tunables over `base` (the forwarder's start values).
    pub(crate) fn over(&self, base: fwd_abi::GcTunables) -> fwd_abi::GcTunables {
        fwd_abi::GcTunables {
            thresh: self.thresh.unwrap_or(base.thresh),
            elasticity: self.elasticity.unwrap_or(base.elasticity),
            min_interval_ms: self.min_interval_ms.unwrap_or(base.min_interval_ms),
            timeout_s: self.timeout_s.unwrap_or(base.timeout_s),
        }
    }
}

/// The forwarder flags that change live, as `--name`; any other flag is a start flag.
pub const LIVE_FLAGS: [&str; 7] =
    ["--prefetch", "--cache", "--spin-ns", "--gc-thresh", "--gc-elasticity", "--gc-min-interval-ms", "--gc-timeout"];

impl LiveChange {
    /// From forwarder flags: the live ones (`--prefetch N`, `--cache MODE`, `--spin-ns N`,
    /// the GC tunables; `--name value` or `--name=value`) typed and checked against their
    /// limits, every other word kept in order as a start flag. Errors name `label`, the
    /// flag and what was expected.
    pub fn split_flags(label: &str, flags: &[String]) -> Result<(LiveChange, Vec<String>)> {
        let mut s = LiveChange::default();
        let mut start = Vec::new();
        let mut it = flags.iter();
        while let Some(f) = it.next() {
            let (name, inline) = match f.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (f.as_str(), None),
            };
            if !LIVE_FLAGS.contains(&name) {
                start.push(f.clone());
                continue;
            }
            let value = inline
                .or_else(|| it.next().cloned())
                .ok_or_else(|| Error::Config(format!("setting {label}: {name} needs a value")))?;
            s.set(label, name, value)?;
        }
        Ok((s, start))
    }

    /// From flags that must all change live ([`LiveChange::split_flags`] with no start
    /// flag left): any other flag is refused, naming it.
    pub fn live_only(label: &str, flags: &[String]) -> Result<LiveChange> {
        let (s, start) = Self::split_flags(label, flags)?;
        match start.first() {
            None => Ok(s),
            Some(other) => Err(Error::Config(format!(
                "setting {label}: {} cannot change while the forwarder runs (live mode switches \
                 --prefetch, --cache, --spin-ns and the GC tunables --gc-thresh, --gc-elasticity, \
                 --gc-min-interval-ms, --gc-timeout); compare it with the multi-process sweep (without --live)",
                other.split_once('=').map_or(other.as_str(), |(n, _)| n)
            ))),
        }
    }

    /// Set live flag `name` (one of [`LIVE_FLAGS`]) from its `value`, within its limits.
    fn set(&mut self, label: &str, name: &str, v: String) -> Result<()> {
        let num = |v: String, max: u32| -> Result<u32> {
            v.parse::<u32>()
                .ok()
                .filter(|x| *x <= max)
                .ok_or_else(|| Error::Config(format!("setting {label}: {name} {v}: expected a whole number 0..={max}")))
        };
        match name {
            "--prefetch" => {
                self.prefetch = Some(
                    v.parse::<Prefetch>().map_err(|e| Error::Config(format!("setting {label}: {name} {v}: {e}")))?,
                );
            }
            "--spin-ns" => self.spin_ns = Some(num(v, fwd_abi::segment::MAX_SPIN_NS)?),
            // The route-cache GC tunables, within the bounds the forwarder takes at start
            // (gc-thresh must also stay below the running forwarder's max_size: workers
            // clamp it there).
            "--gc-thresh" => self.gc.thresh = Some(num(v, gc_limits::MAX_ENTRIES)?),
            "--gc-elasticity" => self.gc.elasticity = Some(num(v, gc_limits::MAX_ELASTICITY)?.max(1)),
            "--gc-min-interval-ms" => self.gc.min_interval_ms = Some(num(v, gc_limits::MAX_MIN_INTERVAL_MS)?),
            "--gc-timeout" => self.gc.timeout_s = Some(num(v, gc_limits::MAX_TIMEOUT_S)?),
            _ => {
                self.cache = Some(CacheMode::from_name(&v).ok_or_else(|| {
                    Error::Config(format!("setting {label}: {name} {v}: expected rtcache, nocache or nhcache"))
                })?);
            }
        }
        Ok(())
    }

    /// The forwarder flags that start a forwarder in this setting (fields left unset give
    /// none), in [`LIVE_FLAGS`] order.
    pub fn flags(&self) -> Vec<String> {
        let g = &self.gc;
        let fields: [(&str, Option<String>); 7] = [
            ("--prefetch", self.prefetch.map(|p| p.to_string())),
            ("--cache", self.cache.map(|c| c.name().to_string())),
            ("--spin-ns", self.spin_ns.map(|v| v.to_string())),
            ("--gc-thresh", g.thresh.map(|v| v.to_string())),
            ("--gc-elasticity", g.elasticity.map(|v| v.to_string())),
            ("--gc-min-interval-ms", g.min_interval_ms.map(|v| v.to_string())),
            ("--gc-timeout", g.timeout_s.map(|v| v.to_string())),
        ];
        fields.into_iter().filter_map(|(n, v)| v.map(|v| [n.to_string(), v])).flatten().collect()
    }
}

impl LiveSetting {
    /// A setting labelled `label` that makes `change`.
    pub fn new(label: &str, change: LiveChange) -> LiveSetting {
        LiveSetting { label: label.to_string(), change, reported: None }
    }

    /// The request for this setting in a live block, tagged `tag`.
    pub(crate) fn request(&self, tag: u64) -> Request {
        // Every block sets all four ([`crate::live::fill_unset`] gave the unset ones the
        // forwarder's values), so a switch back restores the baseline's.
        self.request_with(tag, fwd_abi::GcTunables::default(), 0)
    }

    /// The request for this setting on a running forwarder, fields left unset keeping
    /// their current values (`seg`'s control block), tagged `tag`.
    pub fn request_over(&self, seg: &Segment, tag: u64) -> Request {
        let c = seg.control();
        self.request_with(tag, c.gc(), c.spin_ns.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// The request, unset GC tunables and calibration cost taken from `gc` and `spin_ns`.
    fn request_with(&self, tag: u64, gc: fwd_abi::GcTunables, spin_ns: u32) -> Request {
        let c = &self.change;
        Request {
            prefetch: c.prefetch,
            cache_mode: c.cache.map(CacheMode::code),
            spin_ns: Some(c.spin_ns.unwrap_or(spin_ns)),
            gc: Some(c.gc.over(gc)),
            flush: false,
            setting: tag,
        }
    }

    /// The kind of switch from `prev` to this setting (for the settle figures).
    pub(crate) fn switch_kind(&self, prev: &LiveSetting) -> &'static str {
        let (a, b) = (&self.change, &prev.change);
        if a.cache != b.cache {
            "cache mode"
        } else if a.prefetch != b.prefetch {
            "prefetch"
        } else if a.spin_ns.unwrap_or(0) != b.spin_ns.unwrap_or(0) {
            "calibration"
        } else if a.gc != b.gc {
            "GC tunables"
        } else {
            "same setting"
        }
    }
}
