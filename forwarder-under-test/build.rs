//! Build script of the forwarder: its binary's debug sections (line tables of the
//! forwarder, which the analyzer reads for inline frames) are zlib-compressed by the
//! linker (addr2line, gimli, perf and binutils all read compressed sections; the binary is
//! a quarter smaller); and the flow-spreading XDP program (bpf/xdp_spread.c) is compiled
//! with clang for `--driver afxdp` on one-queue interfaces. Without clang and the kernel
//! and libbpf headers the build goes on, says why in a warning, and the forwarder refuses
//! more workers than rx queues with that reason (cfg `fwd_xdp_spread` unset).
//!
//! Where DPDK's development files are installed (`pkg-config libdpdk`), a small C shim over
//! rte_lpm and rte_fib (benches/dpdk/lpm_shim.c) is compiled and linked into the
//! benchmarks only (cfg `fwd_dpdk_bench`), for `cargo bench --bench fib_vs_dpdk`; the
//! library and the binaries never link DPDK.

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
    println!("cargo:rustc-check-cfg=cfg(fwd_dpdk_bench)");
    println!("cargo:rerun-if-changed=benches/dpdk/lpm_shim.c");
    let why = match dpdk_shim() {
        Ok(()) => {
            println!("cargo:rustc-cfg=fwd_dpdk_bench");
            String::new()
        }
        Err(e) => e,
    };
    println!("cargo:rustc-env=FWD_DPDK_BENCH_WHY={why}");
}

/// Compile the rte_lpm/rte_fib shim against the installed DPDK and link it (and DPDK) into
/// the benchmarks; Err says why not (no pkg-config, no libdpdk, the compile failed).
fn dpdk_shim() -> Result<(), String> {
    let pc = |arg: &str| -> Result<Vec<String>, String> {
        let out = std::process::Command::new("pkg-config")
            .args([arg, "libdpdk"])
            .output()
            .map_err(|e| format!("pkg-config: {e}"))?;
        if !out.status.success() {
            return Err("pkg-config finds no libdpdk (Debian: apt install libdpdk-dev)".into());
        }
        Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect())
    };
    let cflags = pc("--cflags")?;
    let libs = pc("--libs")?;
    let mut b = cc::Build::new();
    b.file("benches/dpdk/lpm_shim.c").cargo_metadata(false).warnings(false).opt_level(3);
    // `-include rte_config.h` is two words; the rest are -I and -march flags.
    let mut it = cflags.iter();
    while let Some(f) = it.next() {
        if f == "-include" {
            if let Some(h) = it.next() {
                b.flag("-include").flag(h);
            }
        } else if let Some(dir) = f.strip_prefix("-I") {
            b.include(dir);
        } else {
            b.flag(f);
        }
    }
    b.try_compile("fwd_dpdk_shim").map_err(|e| format!("compiling the DPDK shim: {e}"))?;
    let out = std::env::var("OUT_DIR").map_err(|e| e.to_string())?;
    println!("cargo:rustc-link-arg-benches=-L{out}");
    println!("cargo:rustc-link-arg-benches=-lfwd_dpdk_shim");
    for l in libs {
        println!("cargo:rustc-link-arg-benches={l}");
    }
    Ok(())
}

include!("../build-support/bpf.rs");
