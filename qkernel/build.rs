//! Links the guest kernel with its linker script (upper half, see
//! `qlib::layout`) and builds the vDSO (`vdso/`, docs/vdso.md) that the
//! kernel embeds. Host builds of this crate are an empty stub.

use std::path::Path;
use std::process::Command;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo:rerun-if-changed={dir}/linker.ld");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{dir}/linker.ld");
        println!("cargo:rustc-link-arg-bins=-zmax-page-size=0x1000");
        println!("cargo:rustc-link-arg-bins=--no-pie");
        build_vdso(Path::new(&dir));
    }
}

/// Compiles `vdso/vdso.c` into `$OUT_DIR/vdso.so` (a whole number of
/// pages, zero padded) with gcc (`scripts/deps.sh` installs it).
fn build_vdso(dir: &Path) {
    let src = dir.join("vdso");
    for f in ["vdso.c", "vdso.lds", "vdso.map"] {
        println!("cargo:rerun-if-changed={}", src.join(f).display());
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("vdso.so");
    let cc = std::env::var("QRUN_VDSO_CC").unwrap_or_else(|_| "gcc".into());
    println!("cargo:rerun-if-env-changed=QRUN_VDSO_CC");
    let status = Command::new(&cc)
        .args([
            "-O2",
            "-fPIC",
            "-shared",
            "-nostdlib",
            "-ffreestanding",
            "-fno-builtin",
            "-fno-stack-protector",
            "-fcf-protection=none",
            "-mno-red-zone",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wl,--hash-style=both",
            "-Wl,-soname,linux-vdso.so.1",
            "-Wl,--eh-frame-hdr",
            "-Wl,-z,max-page-size=4096",
            "-Wl,--no-undefined",
            "-Wl,--build-id=none",
            "-Wl,-s",
        ])
        .arg(format!("-Wl,-T,{}", src.join("vdso.lds").display()))
        .arg(format!(
            "-Wl,--version-script={}",
            src.join("vdso.map").display()
        ))
        .arg("-o")
        .arg(&out)
        .arg(src.join("vdso.c"))
        .status()
        .unwrap_or_else(|e| panic!("cannot run {cc} to build the vDSO (scripts/deps.sh): {e}"));
    assert!(status.success(), "{cc} failed to build the vDSO");
    let mut image = std::fs::read(&out).expect("the vDSO just built");
    image.resize(image.len().div_ceil(4096) * 4096, 0);
    std::fs::write(&out, image).expect("OUT_DIR is writable");
}
