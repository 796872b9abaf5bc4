//! Builds the guest kernel (`qkernel`, target `x86_64-unknown-none`) with a
//! nested cargo so that one `cargo build` builds everything; the image is
//! embedded in the VMM with `include_bytes!`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest
        .parent()
        .expect("qvisor lives in the workspace")
        .to_path_buf();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"));
    // A target dir of its own: the outer cargo holds the lock on its own.
    let target_dir = root.join("target").join("qkernel");
    for dir in ["qkernel", "qlib"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!("cargo:rerun-if-changed={}", root.join(".cargo").display());

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--release",
            "-p",
            "qkernel",
            "--target",
            "x86_64-unknown-none",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    // Nothing of the outer build may leak into the kernel's.
    for (key, _) in std::env::vars() {
        let leaks = key.starts_with("CARGO_")
            || key == "RUSTFLAGS"
            || key == "RUSTC_WRAPPER"
            || key == "RUSTC_WORKSPACE_WRAPPER"
            || key == "RUSTDOC"
            || key == "TARGET"
            || key == "HOST"
            || key == "OPT_LEVEL"
            || key == "PROFILE"
            || key == "DEBUG"
            || key == "OUT_DIR"
            || key == "NUM_JOBS"
            || key == "RUSTC_LINKER";
        if leaks && key != "CARGO_HOME" {
            cmd.env_remove(&key);
        }
    }
    let status = cmd.status().expect("failed to run cargo for qkernel");
    assert!(status.success(), "building qkernel failed");
    let image = target_dir.join("x86_64-unknown-none/release/qkernel");
    let dest = out.join("qkernel.elf");
    std::fs::copy(&image, &dest).expect("copy qkernel image");
    println!("cargo:rustc-env=QKERNEL_IMAGE={}", dest.display());
}
