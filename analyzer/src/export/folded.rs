//! Folded stacks (`thread;root;...;leaf COUNT`, read by inferno and flamegraph.pl) and
//! inferno's flame graph of them, coloured by stage: each frame is named with the stage its
//! samples were charged to (`fwd_lookup_fib_dir24 [lookup]`, so the tooltip says it too)
//! and filled with that stage's colour, the legend in the subtitle. The thread start-up
//! frames under every stack (`_start`, `std::rt::lang_start`, `start_thread`, ...) are
//! trimmed unless kept, and a stack whose unwind broke (an unnamed frame: `[unknown]`,
//! `BINARY+0x...`) is cut at its first such frame from the leaf, counted in the subtitle.

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

    /// An inferno flame graph (SVG) of the folded stacks, coloured by stage, start-up
    /// frames trimmed (see [`SvgOptions`]).
    pub fn svg(&self, title: &str) -> Result<Vec<u8>> {
        self.svg_with(title, &SvgOptions::default())
    }

    /// [`Profile::svg`] with options.
    pub fn svg_with(&self, title: &str, o: &SvgOptions) -> Result<Vec<u8>> {
        use inferno::flamegraph::color::{parse_hex_color, PaletteMap};
        use std::collections::BTreeMap;
        // The stage each function's samples went to most (a function in stacks charged to
        // several stages takes the one with most samples).
        let mut by_fn: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
        for s in &self.stacks {
            for f in &s.frames {
                *by_fn.entry(f.as_str()).or_default().entry(s.stage.as_str()).or_default() += s.samples;
            }
        }
        let stage_of = |f: &str| -> &str {
            by_fn.get(f).and_then(|m| m.iter().max_by_key(|(_, n)| **n).map(|(st, _)| *st)).unwrap_or("other")
        };
        let named = |f: &str| folded_name(&format!("{f} [{}]", stage_of(f)));
        let mut palette = PaletteMap::default();
        let mut cut = 0u64;
        let mut lines: Vec<String> = Vec::new();
        for s in &self.stacks {
            let mut frames: &[String] = &s.frames;
            // From the leaf: the first unnamed frame ends what the unwind can be trusted for.
            if let Some(i) = frames.iter().rposition(|f| unnamed(f)) {
                if i + 1 < frames.len() {
                    cut += s.samples;
                    frames = &frames[i + 1..];
                }
            }
            if !o.keep_startup {
                let skip = frames.iter().take_while(|f| startup(f)).count();
                // A stack of start-up frames only keeps its leaf.
                frames = &frames[skip.min(frames.len().saturating_sub(1))..];
            }
            let mut l = folded_name(&s.thread);
            for f in frames {
                let n = named(f);
                if let Some(c) = parse_hex_color(stage_colour(stage_of(f))) {
                    palette.insert(&n, c);
                }
                l.push(';');
                l.push_str(&n);
            }
            lines.push(format!("{l} {}", s.samples));
        }
        lines.sort();
        let mut stages: Vec<&str> = self.stacks.iter().map(|s| s.stage.as_str()).collect();
        stages.sort_by_key(|st| crate::rules::stage_rank(st));
        stages.dedup();
        let legend: Vec<String> = stages.iter().map(|st| format!("{st} {}", stage_colour_name(st))).collect();
        let mut subtitle = format!("stage colours: {}", legend.join(", "));
        if cut > 0 {
            subtitle.push_str(&format!("; {cut} samples with their stacks cut at a broken unwind (an unnamed frame)"));
        }
        if !o.keep_startup {
            subtitle.push_str("; thread start-up frames trimmed");
        }
        let mut opts = inferno::flamegraph::Options::default();
        opts.title = title.to_string();
        // Wide enough for the legend line (12 px monospace, about 7.3 px a character).
        opts.image_width = Some(1200usize.max((subtitle.chars().count() as f64 * 7.3) as usize + 40));
        opts.subtitle = Some(subtitle);
        opts.count_name = "samples".into();
        // Labels are cut to fit their frames by this estimate of a character's width (in
        // ems), inferno counting neither the 3 px its label starts inside the frame nor that
        // browsers' monospace faces (DejaVu Sans Mono, Liberation Mono) are 0.60 em wide: at
        // its 0.59 labels ran past their frames (measured in Chromium: 585 px of label in a
        // 571 px frame). 0.69 fits even the shortest label, a character and `..` (3 x 7.2 px
        // + 3 px in a 3 x 8.3 px frame); longer ones lose about a tenth of their characters.
        opts.font_width = 0.69;
        opts.palette_map = Some(&mut palette);
        let mut out = Vec::new();
        inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
            .map_err(|e| Error::Export(format!("flame graph: {e}")))?;
        Ok(out)
    }
}

/// How the flame graph is drawn.
#[derive(Debug, Clone, Default)]
pub struct SvgOptions {
    /// Keep the thread start-up frames under every stack (default false: trimmed).
    pub keep_startup: bool,
}

/// Whether a frame is unnamed: what an unwind that went wrong produces.
fn unnamed(f: &str) -> bool {
    f.starts_with("[unknown]") || f.contains("+0x") || f.starts_with("0x")
}

/// Whether a frame is thread or process start-up machinery, the same under every stack.
fn startup(f: &str) -> bool {
    const STARTUP: &[&str] = &[
        "_start",
        "__libc_start",
        "start_thread",
        "clone",
        "__clone",
        "thread_start",
        "main",
        "std::rt::",
        "std::sys::",
        "std::thread::",
        "std::panicking::",
        "std::panic::",
        "core::ops::function::",
        "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce",
        "__rust_begin_short_backtrace",
        "__rust_try",
    ];
    // `<std::sys::thread::unix::Thread>::new::thread_start`, `<AssertUnwindSafe<F> as
    // core::ops::function::FnOnce<()>>::call_once`: the type path after the `<` counts.
    let g = f.strip_prefix('<').unwrap_or(f);
    STARTUP
        .iter()
        .any(|p| f == *p || (p.ends_with("::") || p.starts_with('<') || p.starts_with("__")) && f.starts_with(p))
        || STARTUP.iter().any(|p| p.ends_with("::") && g.starts_with(p))
        || (f.starts_with('<') && f.contains(" as core::ops::function::FnOnce<"))
        || f.starts_with("std::rt::lang_start")
        || f.ends_with("::main")
}

/// The fill colour of a stage (hex), one hue per stage, greys for what is not forwarding.
pub fn stage_colour(stage: &str) -> &'static str {
    match stage {
        "lookup" => "#4c78a8",
        "gc" => "#e45756",
        "slab" => "#f58518",
        "driver" => "#54a24b",
        "ip" => "#b279a2",
        "calib" => "#eeca3b",
        "nic" => "#9d755d",
        "shared" => "#72b7b2",
        "idle" => "#d8d8d8",
        "startup" => "#9e9ac8",
        "kernel-unknown" | "unlisted" => "#bab0ac",
        _ => "#c7c7c7",
    }
}

/// The colour's name for the legend.
fn stage_colour_name(stage: &str) -> &'static str {
    match stage_colour(stage) {
        "#4c78a8" => "blue",
        "#e45756" => "red",
        "#f58518" => "orange",
        "#54a24b" => "green",
        "#b279a2" => "purple",
        "#eeca3b" => "yellow",
        "#9d755d" => "brown",
        "#72b7b2" => "teal",
        "#d8d8d8" => "light grey",
        "#9e9ac8" => "lavender",
        "#bab0ac" => "warm grey",
        _ => "grey",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::Stack;

    fn stack(stage: &str, frames: &[&str], samples: u64) -> Stack {
        Stack {
            thread: "fwd-worker-0".into(),
            stage: stage.into(),
            by: crate::stages::By::Symbol,
            symbol: frames.last().unwrap_or(&"").to_string(),
            dso: "fwdscope".into(),
            frames: frames.iter().map(|f| f.to_string()).collect(),
            samples,
            period: samples * 250_000,
            addrs: Vec::new(),
            pid: 1,
        }
    }

    #[test]
    fn frames_are_coloured_by_stage_trimmed_and_cut() {
        let p = Profile {
            event: "cpu-clock".into(),
            unit: "nanoseconds".into(),
            stacks: vec![
                stack(
                    "lookup",
                    &["_start", "std::rt::lang_start_internal", "forwarder::worker::run", "fwd_lookup_fib_dir24"],
                    7,
                ),
                stack(
                    "driver",
                    &[
                        "start_thread",
                        "<std::sys::thread::unix::Thread>::new::thread_start",
                        "<std::panic::unwind_safe::AssertUnwindSafe<F> as core::ops::function::FnOnce<()>>::call_once",
                        "forwarder::worker::run",
                        "fwd_driver_rx",
                    ],
                    3,
                ),
                stack("gc", &["[unknown]+0x55aa", "[unknown]+0x55bb", "fwd_gc_rt_garbage_collect"], 2),
            ],
            maps: Vec::new(),
            labels: Vec::new(),
            start_unix_ns: None,
            duration_ns: None,
            warnings: Vec::new(),
            svg_options: SvgOptions::default(),
        };
        let svg = String::from_utf8(p.svg("t").unwrap()).unwrap();
        // Named with the stage, filled with its colour.
        assert!(svg.contains("fwd_lookup_fib_dir24 [lookup]"), "{svg}");
        let fill = |name: &str| {
            let at = svg.find(&format!("<title>{name}")).unwrap_or_else(|| panic!("{name} not drawn"));
            let rest = &svg[at..];
            let f = rest.find("fill=\"").unwrap() + 6;
            rest[f..f + rest[f..].find('"').unwrap()].to_string()
        };
        assert_eq!(fill("fwd_lookup_fib_dir24 [lookup]"), "rgb(76,120,168)");
        assert_eq!(fill("fwd_driver_rx [driver]"), "rgb(84,162,75)");
        // A frame under several stages takes the one with most samples (7 lookup, 3 driver).
        assert!(svg.contains("forwarder::worker::run [lookup]"));
        // Start-up frames trimmed; the broken unwind cut, counted; the legend in the subtitle.
        assert!(!svg.contains("lang_start") && !svg.contains("start_thread") && !svg.contains(">_start"));
        assert!(!svg.contains("thread_start") && !svg.contains("AssertUnwindSafe"), "{svg}");
        assert!(!svg.contains("[unknown]+0x55"), "{svg}");
        assert!(svg.contains("2 samples with their stacks cut at a broken unwind"), "{svg}");
        assert!(svg.contains("lookup blue") && svg.contains("gc red"), "{svg}");
        // Kept when asked.
        let kept = String::from_utf8(p.svg_with("t", &SvgOptions { keep_startup: true }).unwrap()).unwrap();
        assert!(kept.contains("std::rt::lang_start_internal"));
    }
}
