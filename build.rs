//! Build script of the `fwdscope` binary: its debug sections (line tables of the
//! forwarder, which the analyzer reads for inline frames) are zlib-compressed by the
//! linker. addr2line, gimli, perf and binutils all read compressed sections; the binary is
//! a quarter smaller.

fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
}
