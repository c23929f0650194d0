// Compiling an XDP program of fwdscope's own with clang, shared by the build scripts of
// the forwarder (bpf/xdp_spread.c) and the lab (bpf/xdp_fwd.c, bpf/xdp_refused.c), which
// `include!` this file: the object lands in $OUT_DIR with its BTF (libxdp's dispatcher
// needs it). Without clang, or the kernel's and libbpf's headers, the error says why, and
// the build script turns it into a warning and a cfg left unset.

/// clang -O2 -g -target bpf -Wall -Werror bpf/NAME.c -> $OUT_DIR/NAME.o.
fn compile_bpf(name: &str) -> Result<(), String> {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return Err("not a Linux target".into());
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?)
        .join(format!("{name}.o"));
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    // The kernel's uapi headers include <asm/types.h> from the multiarch directory.
    let multiarch = match std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default().as_str() {
        "x86_64" => "x86_64-linux-gnu",
        "aarch64" => "aarch64-linux-gnu",
        "riscv64" => "riscv64-linux-gnu",
        "powerpc64" => "powerpc64le-linux-gnu",
        _ => "",
    };
    let mut c = std::process::Command::new(&clang);
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
