//! Stop requests from signals, for every command that runs until stopped (`forward`,
//! `record`, `stat`, `top`, the standalone forwarder): SIGINT, SIGTERM and SIGHUP all ask it
//! to stop as Ctrl-C does (stop the forwarder, flush, write how it ended, remove the stats
//! segment), and the signal that came is kept so the output can say so. A second SIGINT
//! while the first is being handled ends the process at once (status 130): a user who
//! presses Ctrl-C twice means it. SIGTERM and SIGHUP never do: a parent-death signal
//! (PR_SET_PDEATHSIG) comes again each time the child is handed to another dying thread
//! of its parent, and must still end in a clean stop.

use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The signals handled.
pub const STOP_SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The flag the handlers set, and which signal set it.
#[derive(Clone)]
pub struct StopSignals {
    /// Set by the first stop signal.
    pub flag: Arc<AtomicBool>,
    /// The number of the last stop signal (0 before any).
    pub which: Arc<AtomicUsize>,
}

impl StopSignals {
    /// Install the handlers for [`STOP_SIGNALS`].
    pub fn install() -> Result<StopSignals> {
        let s = StopSignals { flag: Arc::new(AtomicBool::new(false)), which: Arc::new(AtomicUsize::new(0)) };
        for sig in STOP_SIGNALS {
            let sys =
                |e: std::io::Error| Error::Sys { what: format!("installing the {} handler", name(sig)), source: e };
            // Registered first, so it sees the flag as it was before this signal.
            if sig == libc::SIGINT {
                signal_hook::flag::register_conditional_shutdown(sig, 130, s.flag.clone()).map_err(sys)?;
            }
            signal_hook::flag::register_usize(sig, s.which.clone(), sig as usize).map_err(sys)?;
            signal_hook::flag::register(sig, s.flag.clone()).map_err(sys)?;
        }
        Ok(s)
    }

    /// The exit status a command a signal cut short ends with, as a shell reports it:
    /// 130 after SIGINT, 143 after SIGTERM, 129 after SIGHUP; None when none came.
    pub fn exit_status(&self) -> Option<i32> {
        match self.which.load(Ordering::Relaxed) {
            0 => None,
            n => Some(128 + n as i32),
        }
    }

    /// The signal that asked to stop, if one did (`SIGTERM`).
    pub fn received(&self) -> Option<&'static str> {
        match self.which.load(Ordering::Relaxed) {
            0 => None,
            n => Some(name(n as i32)),
        }
    }
}

/// The name of a stop signal.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
