//! Build script of the lab: compiles fwdscope's XDP forwarder (bpf/xdp_fwd.c) with clang
//! for `lab up --mode xdp`, and a program the verifier refuses (bpf/xdp_refused.c, for the
//! test of how a refusal is reported). Without clang and the kernel and libbpf headers the
//! build goes on, says why in a warning, and `--mode xdp` refuses to start with that reason
//! (cfg `lab_xdp_fwd` unset).

fn main() {
    println!("cargo:rustc-check-cfg=cfg(lab_xdp_fwd)");
    println!("cargo:rerun-if-changed=bpf/xdp_fwd.c");
    println!("cargo:rerun-if-changed=bpf/xdp_refused.c");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-changed=../build-support/bpf.rs");
    let why = match compile_bpf("xdp_fwd").and_then(|_| compile_bpf("xdp_refused")) {
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

include!("../build-support/bpf.rs");
