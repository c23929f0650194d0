//! Folded stacks (`thread;root;...;leaf COUNT`, read by inferno and flamegraph.pl) and
//! inferno's flame graph of them.

use super::Profile;
use crate::{Error, Result};

/// Frame names in folded lines may not hold `;` (the separator) or a newline.
fn folded_name(s: &str) -> String {
    s.replace([';', '\n'], ":")
}

impl Profile {
    /// Folded stacks: `thread;root;...;leaf SAMPLES`, one line per distinct stack.
    pub fn folded(&self) -> String {
        let mut lines: Vec<String> = self
            .stacks
            .iter()
            .map(|s| {
                let mut l = folded_name(&s.thread);
                for f in &s.frames {
                    l.push(';');
                    l.push_str(&folded_name(f));
                }
                format!("{l} {}", s.samples)
            })
            .collect();
        lines.sort();
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }

    /// An inferno flame graph (SVG) of the folded stacks.
    pub fn svg(&self, title: &str) -> Result<Vec<u8>> {
        let folded = self.folded();
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        opts.count_name = "samples".into();
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut out)
            .map_err(|e| Error::Export(format!("flame graph: {e}")))?;
        Ok(out)
    }
}
