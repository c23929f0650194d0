//! What a forwarder says about itself: its configuration and its run information, as the
//! stats segment's configuration text carries it (`{"config": {...}, "info": {...}}`) and
//! as a recording's meta.json keeps it. One typed form for the forwarder that writes it
//! and for every observer that reads it (`top`, the exporter, the analyzer, the lab), so
//! no reader picks the text apart by key with a fallback of its own.
//!
//! The fields observers use are typed; every other field the forwarder publishes (its
//! table, traffic, route-cache tunables, ...) is kept as it came in `other`, so a
//! recording keeps the whole configuration. A field another forwarder does not publish
//! (a peer in the lab, an older recording) is `None`, never guessed.

use serde::{Deserialize, Serialize};

/// A forwarder's configuration and run information.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Published {
    #[serde(default)]
    pub config: PublishedConfig,
    #[serde(default)]
    pub info: PublishedInfo,
}

/// The configuration: the settings a comparison tells apart, and the rest as published.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PublishedConfig {
    /// Packet I/O: `synthetic`, `afpacket`, `afxdp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Its worker blocks are CPUs, not threads (the lab's XDP forwarder: one block per
    /// CPU the program ran on): `stat` counts each CPU whole and `top` samples every CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_are_cpus: Option<bool>,
    /// Cache mode by name (`rtcache`, `nocache`, `nhcache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<String>,
    /// FIB engine by name (`hash`, `lctrie`, `dir24`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fib: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<crate::Prefetch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_clock: Option<bool>,
    /// One poll in this many is clocked (and scaled up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_one_in: Option<u32>,
    /// Where the synthetic device runs as asked (`auto`, `thread`, `inline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen_mode: Option<String>,
    /// Route-cache tunables: the version is typed, the rest kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt: Option<PublishedRt>,
    /// Everything else the forwarder published, as it came.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// The route cache's tunables as published.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PublishedRt {
    /// The Linux generation whose route cache and GC are modelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// The run information: what the start resolved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PublishedInfo {
    /// TSC ticks per second (stage clocks are in TSC cycles); 0 or absent: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_hz: Option<u64>,
    /// Where the TSC rate came from (the kernel's log, or calibration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tsc_source: Option<String>,
    /// What played the device as the run resolved it (`thread`, `inline`, `AF_XDP on ...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats_path: Option<String>,
    /// Everything else, as it came.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// A typed field that does not have its type (a damaged meta.json, another forwarder's
/// JSON) is not read as that field but kept in `other` as it was written (so it is shown,
/// and written back, as it came); the rest still reads.
fn lenient(v: &serde_json::Value) -> Published {
    let split = |v: Option<&serde_json::Value>| -> serde_json::Map<String, serde_json::Value> {
        v.and_then(|v| v.as_object()).cloned().unwrap_or_default()
    };
    let (mut config, bad): (PublishedConfig, _) = object_of(
        split(v.get("config")),
        &[
            "driver",
            "workers",
            "workers_are_cpus",
            "cache",
            "fib",
            "prefetch",
            "stage_clock",
            "clock_one_in",
            "gen_mode",
            "rt",
        ],
    );
    config.other.extend(bad);
    let (mut info, bad): (PublishedInfo, _) =
        object_of(split(v.get("info")), &["tsc_hz", "tsc_source", "device", "stats_path"]);
    info.other.extend(bad);
    Published { config, info }
}

/// Parse `map` as `T`; each of `typed` whose value does not fit its field is left out and
/// returned.
fn object_of<T: serde::de::DeserializeOwned + Default>(
    mut map: serde_json::Map<String, serde_json::Value>,
    typed: &[&str],
) -> (T, serde_json::Map<String, serde_json::Value>) {
    let mut bad = serde_json::Map::new();
    if let Ok(t) = serde_json::from_value(serde_json::Value::Object(map.clone())) {
        return (t, bad);
    }
    for k in typed {
        let Some(v) = map.get(*k).cloned() else { continue };
        let mut one = serde_json::Map::new();
        one.insert((*k).to_string(), v);
        if serde_json::from_value::<T>(serde_json::Value::Object(one)).is_err() {
            if let Some(v) = map.remove(*k) {
                bad.insert((*k).to_string(), v);
            }
        }
    }
    (serde_json::from_value(serde_json::Value::Object(map)).unwrap_or_default(), bad)
}

impl Published {
    /// From the JSON a forwarder published or meta.json kept. A configuration published
    /// flat (no `config` key: an early format) is read as the configuration.
    pub fn from_value(v: &serde_json::Value) -> Published {
        if v.get("config").is_none() && v.get("info").is_none() && v.is_object() {
            return lenient(&serde_json::json!({ "config": v }));
        }
        lenient(v)
    }

    /// From the text of a stats segment's configuration; `None` when it is no JSON object.
    pub fn from_json(text: &str) -> Option<Published> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        v.is_object().then(|| Published::from_value(&v))
    }

    /// What a forwarder publishes: its configuration and run information, each any
    /// serializable struct (the forwarder's own types), typed here on the way.
    pub fn of<C: Serialize, I: Serialize>(config: &C, info: &I) -> crate::Result<Published> {
        let v = serde_json::json!({
            "config": serde_json::to_value(config).map_err(|e| crate::Error::Config(e.to_string()))?,
            "info": serde_json::to_value(info).map_err(|e| crate::Error::Config(e.to_string()))?,
        });
        serde_json::from_value(v).map_err(|e| crate::Error::Config(format!("the published configuration: {e}")))
    }

    /// The JSON text, as a segment carries it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
    }

    /// `cache=.. fib=.. prefetch=..` (what a comparison labels a run with); `-` when the
    /// publisher gave none of them.
    pub fn setting(&self) -> String {
        let c = &self.config;
        let parts: Vec<String> = [
            c.cache.as_ref().map(|v| format!("cache={v}")),
            c.fib.as_ref().map(|v| format!("fib={v}")),
            c.prefetch.map(|v| format!("prefetch={v}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }

    /// The TSC rate as it was written, for a message: `absent`, or its JSON text (a
    /// damaged value included).
    pub fn tsc_hz_text(&self) -> String {
        match (self.info.tsc_hz, self.info.other.get("tsc_hz")) {
            (Some(hz), _) => hz.to_string(),
            (None, Some(v)) => v.to_string(),
            (None, None) => "absent".into(),
        }
    }

    /// The TSC rate, when it is a plausible one (100 MHz to 100 GHz); a rate outside is no
    /// TSC rate (a damaged meta.json).
    pub fn tsc_hz(&self) -> Option<u64> {
        self.info.tsc_hz.filter(|hz| (TSC_HZ_MIN..=TSC_HZ_MAX).contains(hz))
    }
}

/// The plausible TSC rates, Hz.
pub const TSC_HZ_MIN: u64 = 100_000_000;
pub const TSC_HZ_MAX: u64 = 100_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_fields_read_and_the_rest_is_kept() {
        let text = r#"{"config":{"driver":"afxdp","workers":2,"cache":"nocache","fib":"dir24","prefetch":3,
            "stage_clock":true,"clock_one_in":8,"gen_mode":"auto","rt":{"version":"v26","gc_thresh":4096},
            "flows":7},"info":{"tsc_hz":2596000000,"tsc_source":"dmesg","device":"inline","routes":10}}"#;
        let p = Published::from_json(text).unwrap();
        assert_eq!(p.config.driver.as_deref(), Some("afxdp"));
        assert_eq!(
            (p.config.workers, p.config.prefetch, p.config.clock_one_in),
            (Some(2), crate::Prefetch::new(3), Some(8))
        );
        assert_eq!(p.config.rt.as_ref().and_then(|r| r.version.as_deref()), Some("v26"));
        assert_eq!(p.config.other["flows"], 7);
        assert_eq!(p.info.other["routes"], 10);
        assert_eq!(p.setting(), "cache=nocache fib=dir24 prefetch=3");
        assert_eq!(p.tsc_hz(), Some(2_596_000_000));
        // Written back, nothing is lost.
        let again: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        let orig: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(again, orig);
    }

    #[test]
    fn a_field_of_the_wrong_type_is_dropped_not_the_whole() {
        let v = serde_json::json!({"config": {"cache": "rtcache", "prefetch": "two"}, "info": {"tsc_hz": -1}});
        let p = Published::from_value(&v);
        assert_eq!(p.config.cache.as_deref(), Some("rtcache"));
        assert_eq!(p.config.prefetch, None);
        assert_eq!((p.info.tsc_hz, p.tsc_hz_text()), (None, "-1".to_string()));
        // Kept as written.
        assert_eq!(serde_json::from_str::<serde_json::Value>(&p.to_json()).unwrap(), v);
        // Implausible rates are no rates.
        let p = Published::from_value(&serde_json::json!({"info": {"tsc_hz": 0}}));
        assert_eq!((p.info.tsc_hz, p.tsc_hz()), (Some(0), None));
        // A flat configuration (an early format) and no forwarder at all.
        let p = Published::from_value(&serde_json::json!({"cache": "nhcache", "fib": "hash"}));
        assert_eq!(p.setting(), "cache=nhcache fib=hash");
        assert_eq!(Published::default().setting(), "-");
        assert!(Published::from_json("[1]").is_none());
    }
}
