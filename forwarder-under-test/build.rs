//! Build script of the forwarder: its binary's debug sections (line tables of the
//! forwarder, which the analyzer reads for inline frames) are zlib-compressed by the
//! linker (addr2line, gimli, perf and binutils all read compressed sections; the binary is
//! a quarter smaller); and the flow-spreading XDP program (bpf/xdp_spread.c) is compiled
//! with clang for `--driver afxdp` on one-queue interfaces. Without clang and the kernel
//! and libbpf headers the build goes on, says why in a warning, and the forwarder refuses
//! more workers than rx queues with that reason (cfg `fwd_xdp_spread` unset).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    println!("cargo:rustc-check-cfg=cfg(fwd_xdp_spread)");
    println!("cargo:rerun-if-changed=bpf/xdp_spread.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    let why = match compile_spread() {
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

/// clang -O2 -g -target bpf bpf/xdp_spread.c -> $OUT_DIR/xdp_spread.o (BTF included, which
/// libxdp's dispatcher needs).
fn compile_spread() -> Result<(), String> {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return Err("not a Linux target".into());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?).join("xdp_spread.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel's uapi headers include <asm/types.h> from the multiarch directory.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = match arch.as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        _ => "",
    };
    let mut c = Command::new(&clang);
    c.args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror"]);
    if !multiarch.is_empty() {
        c.arg(format!("-I/usr/include/{multiarch}"));
    }
    c.args(["-c", "bpf/xdp_spread.c", "-o"]).arg(&out);
    let r = c.output().map_err(|e| format!("running {clang}: {e}"))?;
    if !r.status.success() {
        let err = String::from_utf8_lossy(&r.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or("failed");
        return Err(format!("{clang} -target bpf: {first}"));
    }
    Ok(())
}
