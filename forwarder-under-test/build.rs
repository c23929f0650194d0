//! Build script of the forwarder: its binary's debug sections (line tables of the
//! forwarder, which the analyzer reads for inline frames) are zlib-compressed by the
//! linker (addr2line, gimli, perf and binutils all read compressed sections; the binary is
//! a quarter smaller); and the flow-spreading XDP program (bpf/xdp_spread.c) is compiled
//! with clang for `--driver afxdp` on one-queue interfaces. Without clang and the kernel
//! and libbpf headers the build goes on, says why in a warning, and the forwarder refuses
//! more workers than rx queues with that reason (cfg `fwd_xdp_spread` unset).

fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    println!("cargo:rustc-check-cfg=cfg(fwd_xdp_spread)");
    println!("cargo:rerun-if-changed=bpf/xdp_spread.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-changed=../build-support/bpf.rs");
    let why = match compile_bpf("xdp_spread") {
        Ok(()) => {
            println!("cargo:rustc-cfg=fwd_xdp_spread");
            String::new()
        }
        Err(e) => {
            println!("cargo:warning=no flow-spreading XDP program: {e}");
            format!("this forwarder was built without its flow-spreading XDP program ({e}); rebuild with clang and libbpf's headers (Debian: apt install clang libbpf-dev)")
        }
    };
    println!("cargo:rustc-env=FWD_XDP_SPREAD_WHY={why}");
}

include!("../build-support/bpf.rs");
