//! Build script of the lab: compiles fwdscope's XDP forwarder (bpf/xdp_fwd.c) with clang
//! for `lab up --mode xdp`, and a program the verifier refuses (bpf/xdp_refused.c, for the
//! test of how a refusal is reported). Without clang and the kernel and libbpf headers the
//! build goes on, says why in a warning, and `--mode xdp` refuses to start with that reason
//! (cfg `lab_xdp_fwd` unset).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(lab_xdp_fwd)");
    println!("cargo:rerun-if-changed=bpf/xdp_fwd.c");
    println!("cargo:rerun-if-changed=bpf/xdp_refused.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    let why = match compile("xdp_fwd").and_then(|_| compile("xdp_refused")) {
        Ok(()) => {
            println!("cargo:rustc-cfg=lab_xdp_fwd");
            String::new()
        }
        Err(e) => {
            println!("cargo:warning=no XDP forwarder for `lab up --mode xdp`: {e}");
            format!("this fwdscope was built without its XDP forwarder ({e}); rebuild with clang and libbpf's headers (Debian: apt install clang libbpf-dev)")
        }
    };
    println!("cargo:rustc-env=LAB_XDP_FWD_WHY={why}");
}

/// clang -O2 -g -target bpf -Wall -Werror bpf/NAME.c -> $OUT_DIR/NAME.o (with BTF).
fn compile(name: &str) -> Result<(), String> {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return Err("not a Linux target".into());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?).join(format!("{name}.o"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel's uapi headers include <asm/types.h> from the multiarch directory.
    let multiarch = match std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default().as_str() {
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
    c.arg("-c").arg(format!("bpf/{name}.c")).arg("-o").arg(&out);
    let r = c.output().map_err(|e| format!("running {clang}: {e}"))?;
    if !r.status.success() {
        let err = String::from_utf8_lossy(&r.stderr);
        let first = err.lines().find(|l| l.contains("error")).unwrap_or("failed");
        return Err(format!("{clang} -target bpf bpf/{name}.c: {first}"));
    }
    Ok(())
}
