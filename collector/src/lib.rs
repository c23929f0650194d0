//! fwdscope's collector: counts and samples CPU events with perf_event_open on the bundled
//! forwarder, a running process or the whole system, and turns what the kernel writes into
//! recordings and a live stream.
//!
//! Capture is kept apart from conversion, as samply does: [`perf_abi`] is the only module
//! that touches perf (events, ring buffers, kernel errors) and hands out plain
//! [`records`]; [`sample_decode`] is the one decoder of sample bodies, for live rings and
//! perf.data files alike; [`recording`] writes and reads recording directories without perf;
//! [`session`] runs a `record` (capture) and hands every record to its sink (one handler
//! per record type, feeding the writer and the live stream); [`counting`] opens and reads
//! counting groups for `record` and [`stat`] (interval counting); [`stream`] is the bounded
//! live channel for the TUI; [`child`] starts a target held at a gate so its first
//! instruction is already observed, and [`launch`] waits until a started forwarder runs
//! (every forwarder fwdscope starts is started and waited for there). The forwarder is seen only through its published ABI
//! (the `fwd-abi` crate: stats segment, counter names, thread names). With the `clap`
//! feature, `cli` holds the flags of `record` and `stat` and the target they share.

pub mod buildid;
pub mod child;
#[cfg(feature = "clap")]
pub mod cli;
pub mod contention;
pub mod counting;
mod error;
pub mod events;
pub mod files;
pub mod launch;
pub mod outdir;
pub mod output_file;
pub mod perf_abi;
pub mod recording;
pub mod records;
pub mod sample_decode;
pub mod session;
pub mod stat;
pub mod stream;
pub mod unwind;

pub use error::{Error, Result};

/// Text read from input (a file name in a recording, a thread's name) as it may be
/// printed: control characters (a terminal's escape sequences among them) escaped
/// (`\u{1b}`), never passed to the terminal raw.
pub fn printable(s: String) -> String {
    // Bidirectional-formatting characters (U+202E and its kin) reorder what follows.
    let hidden = |c: char| {
        c.is_control() || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if s.chars().any(hidden) {
        s.chars().flat_map(|c| if hidden(c) { c.escape_unicode().collect::<Vec<_>>() } else { vec![c] }).collect()
    } else {
        s
    }
}
