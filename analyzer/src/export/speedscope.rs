//! speedscope's file format: one sampled profile per thread.

use super::Profile;
use crate::{Error, Result};
use std::collections::HashMap;

/// A thread's speedscope samples (frame indices) and weights.
type ThreadSamples<'a> = (&'a str, Vec<Vec<usize>>, Vec<u64>);

impl Profile {
    /// speedscope's file format: one sampled profile per thread, weights in samples.
    pub fn speedscope(&self, name: &str) -> Result<String> {
        let mut frame_ix: HashMap<&str, usize> = HashMap::new();
        let mut frames: Vec<serde_json::Value> = Vec::new();
        let mut by_thread: Vec<ThreadSamples> = Vec::new();
        for s in &self.stacks {
            let ids: Vec<usize> = s
                .frames
                .iter()
                .map(|f| {
                    *frame_ix.entry(f.as_str()).or_insert_with(|| {
                        frames.push(serde_json::json!({ "name": f }));
                        frames.len() - 1
                    })
                })
                .collect();
            let t = match by_thread.iter().position(|t| t.0 == s.thread) {
                Some(i) => i,
                None => {
                    by_thread.push((s.thread.as_str(), Vec::new(), Vec::new()));
                    by_thread.len() - 1
                }
            };
            by_thread[t].1.push(ids);
            by_thread[t].2.push(s.samples);
        }
        let profiles: Vec<serde_json::Value> = by_thread
            .into_iter()
            .map(|(thread, samples, weights)| {
                let total: u64 = weights.iter().sum();
                serde_json::json!({
                    "type": "sampled",
                    "name": thread,
                    "unit": "none",
                    "startValue": 0,
                    "endValue": total,
                    "samples": samples,
                    "weights": weights,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "$schema": "https://www.speedscope.app/file-format-schema.json",
            "name": name,
            "exporter": format!("fwdscope {}", env!("CARGO_PKG_VERSION")),
            "activeProfileIndex": 0,
            "shared": { "frames": frames },
            "profiles": profiles,
        });
        serde_json::to_string(&doc).map_err(|e| Error::Export(e.to_string()))
    }
}
