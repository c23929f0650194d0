//! A setting that changes live, through a running forwarder's control block: prefetch
//! depth, cache mode, the calibration cost and the route-cache GC tunables, from forwarder
//! flags (anything else is refused, naming it), and the request that switches to it. Used
//! by live comparisons, `top`'s A/B and phased experiments.

use crate::{Error, Result};
use fwd_abi::{CacheMode, Prefetch, Request, Segment};

/// One setting of a live comparison: what the control block is asked for.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LiveSetting {
    pub label: String,
    pub prefetch: Option<Prefetch>,
    pub cache: Option<CacheMode>,
    pub spin_ns: Option<u32>,
    /// Route-cache GC tunables (`--gc-thresh`, `--gc-elasticity`, `--gc-min-interval-ms`,
    /// `--gc-timeout`); unset ones keep the forwarder's start values.
    pub gc: GcSetting,
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

impl LiveSetting {
    /// From forwarder flags (`--prefetch N`, `--cache MODE`, `--spin-ns N`); any other flag
    /// cannot change while the forwarder runs and is refused, naming it.
    pub fn from_flags(label: &str, flags: &[String]) -> Result<LiveSetting> {
        let mut s = LiveSetting {
            label: label.to_string(),
            prefetch: None,
            cache: None,
            spin_ns: None,
            gc: GcSetting::default(),
            reported: None,
        };
        let mut it = flags.iter();
        while let Some(f) = it.next() {
            let (name, inline) = match f.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (f.as_str(), None),
            };
            let mut value = || -> Result<String> {
                inline
                    .clone()
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| Error::Config(format!("setting {label}: {name} needs a value")))
            };
            let num = |v: String, max: u32| -> Result<u32> {
                v.parse::<u32>().ok().filter(|x| *x <= max).ok_or_else(|| {
                    Error::Config(format!("setting {label}: {name} {v}: expected a whole number 0..={max}"))
                })
            };
            match name {
                "--prefetch" => {
                    let v = value()?;
                    s.prefetch = Some(
                        v.parse::<Prefetch>()
                            .map_err(|e| Error::Config(format!("setting {label}: {name} {v}: {e}")))?,
                    );
                }
                "--spin-ns" => s.spin_ns = Some(num(value()?, fwd_abi::segment::MAX_SPIN_NS)?),
                // The route-cache GC tunables, within the bounds the forwarder takes at start
                // (gc-thresh must also stay below the running forwarder's max_size: workers
                // clamp it there).
                "--gc-thresh" => s.gc.thresh = Some(num(value()?, 1 << 26)?),
                "--gc-elasticity" => {
                    s.gc.elasticity = Some(num(value()?, 1024)?.max(1));
                }
                "--gc-min-interval-ms" => s.gc.min_interval_ms = Some(num(value()?, 3_600_000)?),
                "--gc-timeout" => s.gc.timeout_s = Some(num(value()?, 86_400)?),
                "--cache" => {
                    let v = value()?;
                    s.cache = Some(CacheMode::from_name(&v).ok_or_else(|| {
                        Error::Config(format!("setting {label}: --cache {v}: expected rtcache, nocache or nhcache"))
                    })?);
                }
                other => {
                    return Err(Error::Config(format!(
                        "setting {label}: {other} cannot change while the forwarder runs (live mode switches \
                         --prefetch, --cache, --spin-ns and the GC tunables --gc-thresh, --gc-elasticity, \
                         --gc-min-interval-ms, --gc-timeout); compare it with the multi-process sweep (without --live)"
                    )))
                }
            }
        }
        Ok(s)
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
        Request {
            prefetch: self.prefetch,
            cache_mode: self.cache.map(CacheMode::code),
            spin_ns: Some(self.spin_ns.unwrap_or(spin_ns)),
            gc: Some(self.gc.over(gc)),
            flush: false,
            setting: tag,
        }
    }

    /// The kind of switch from `prev` to this setting (for the settle figures).
    pub(crate) fn switch_kind(&self, prev: &LiveSetting) -> &'static str {
        if self.cache != prev.cache {
            "cache mode"
        } else if self.prefetch != prev.prefetch {
            "prefetch"
        } else if self.spin_ns.unwrap_or(0) != prev.spin_ns.unwrap_or(0) {
            "calibration"
        } else if self.gc != prev.gc {
            "GC tunables"
        } else {
            "same setting"
        }
    }
}
