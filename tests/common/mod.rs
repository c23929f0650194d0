//! What the end-to-end tests share: one way to run the `fwdscope` binary, one perf probe
//! (the collector's own), and the checks for what a test needs (tools, namespaces), each
//! printing why it skips.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub use collector::perf_abi::Need;

/// The `fwdscope` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_fwdscope");

/// A command running `fwdscope`.
pub fn fwdscope() -> Command {
    Command::new(BIN)
}

/// Run `fwdscope ARGS` to the end; its output.
pub fn run(args: &[&str]) -> Output {
    fwdscope().args(args).output().expect("run fwdscope")
}

/// Whether perf allows `need` here; prints why not (the test then skips).
pub fn perf_allows(need: Need) -> bool {
    match collector::perf_abi::probe(need) {
        Ok(()) => true,
        Err(e) => {
            println!("SKIP: perf_event_open cannot {need:?} here: {e}");
            false
        }
    }
}

/// Whether `tool --version` (or `args`) runs; prints why not.
pub fn have(tool: &str, args: &[&str]) -> bool {
    let args = if args.is_empty() { &["--version"][..] } else { args };
    let ok = Command::new(tool).args(args).output().is_ok_and(|o| o.status.success());
    if !ok {
        println!("SKIP: {tool} is not installed");
    }
    ok
}

/// A fresh temporary directory path for this test process and `tag` (not created).
pub fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fwdscope-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}
