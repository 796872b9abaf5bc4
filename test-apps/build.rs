//! Builds the test programs into `$OUT_DIR/bin`:
//! - every `c/*.c` with `musl-gcc -static -O2` (Debian: `musl-tools`);
//! - every `c-dyn/*.c` with the system `gcc -O2`: dynamically linked
//!   against glibc, PIE as Debian's gcc makes by default (Debian: `gcc`,
//!   `libc6-dev`), and again with `musl-gcc` (dynamic, musl's loader) as
//!   `NAME_musl`;
//! - the `c/*.c` named in `GLIBC_STATIC` again with `gcc -static
//!   -pthread -O2` against glibc, as `NAME_glibc` (Debian: `libc6-dev`
//!   has `libc.a`);
//! - every `asm/*.S` with `gcc -nostdlib -static`: bare programs whose
//!   first instruction is their own (no C library start-up);
//! - the `rust-hello` crate for `x86_64-unknown-linux-musl`, by a nested
//!   cargo with a scrubbed environment and its own target directory.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const RUST_TARGET: &str = "x86_64-unknown-linux-musl";

/// Variables the nested cargo may inherit. Everything else the outer cargo
/// sets (RUSTFLAGS, CARGO_ENCODED_RUSTFLAGS, CARGO_TARGET_DIR,
/// CARGO_BUILD_TARGET, RUSTC_WORKSPACE_WRAPPER, CARGO_MAKEFLAGS,
/// CARGO_CFG_*, CARGO_FEATURE_*, ...) describes the outer build and would
/// break or pollute the nested one.
const PASSED_TO_NESTED_CARGO: &[&str] = &[
    "PATH",
    "HOME",
    "RUSTUP_HOME",
    "CARGO_HOME",
    "RUSTUP_TOOLCHAIN",
    "RUSTC",
];

fn main() -> ExitCode {
    match build() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            // cargo shows a build script's stderr when it fails.
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn build() -> Result<(), String> {
    let manifest_dir = PathBuf::from(env_var("CARGO_MANIFEST_DIR")?);
    let out_dir = PathBuf::from(env_var("OUT_DIR")?);
    let bin_dir = out_dir.join("bin");
    fs::create_dir_all(&bin_dir).map_err(|e| format!("creating {}: {e}", bin_dir.display()))?;

    build_c_programs(&manifest_dir.join("c"), &bin_dir, &STATIC_MUSL)?;
    let glibc_static: Vec<PathBuf> = GLIBC_STATIC
        .iter()
        .map(|n| manifest_dir.join("c").join(format!("{n}.c")))
        .collect();
    compile_all(&glibc_static, &bin_dir, &STATIC_GLIBC)?;
    build_c_programs(&manifest_dir.join("c-dyn"), &bin_dir, &DYNAMIC_GLIBC)?;
    build_c_programs(&manifest_dir.join("c-dyn"), &bin_dir, &DYNAMIC_MUSL)?;
    build_c_programs(&manifest_dir.join("asm"), &bin_dir, &BARE_ASM)?;
    build_rust_hello(&manifest_dir.join("rust-hello"), &out_dir, &bin_dir)
}

fn env_var(name: &str) -> Result<String, String> {
    env::var(name).map_err(|e| format!("{name}: {e}"))
}

/// A C compiler and the flags a directory of programs is built with.
struct CCompiler {
    cc: &'static str,
    flags: &'static [&'static str],
    /// How to install `cc` when it is missing.
    install: &'static str,
    /// Appended to each program's name.
    suffix: &'static str,
    /// Extension of the sources built.
    ext: &'static str,
}

const STATIC_MUSL: CCompiler = CCompiler {
    cc: "musl-gcc",
    flags: &["-static", "-O2", "-Wall", "-Wextra"],
    install: "apt-get install musl-tools",
    suffix: "",
    ext: "c",
};

/// Programs of `c/` also built statically against glibc (`NAME_glibc`):
/// glibc's pthreads differ from musl's (cancellation by unwinding, its
/// own futex use, robust lists, rseq).
const GLIBC_STATIC: &[&str] = &["cloneshare", "hostid", "pthread_stress", "pty", "vdso"];

const STATIC_GLIBC: CCompiler = CCompiler {
    cc: "gcc",
    flags: &["-static", "-pthread", "-O2", "-Wall", "-Wextra"],
    install: "apt-get install gcc libc6-dev",
    suffix: "_glibc",
    ext: "c",
};

const DYNAMIC_GLIBC: CCompiler = CCompiler {
    cc: "gcc",
    flags: &["-O2", "-Wall", "-Wextra", "-pie", "-fPIE"],
    install: "apt-get install gcc libc6-dev",
    suffix: "",
    ext: "c",
};

/// Bare programs in assembly: no C library, `_start` is the first
/// instruction the program runs.
const BARE_ASM: CCompiler = CCompiler {
    cc: "gcc",
    flags: &["-nostdlib", "-static", "-Wall"],
    install: "apt-get install gcc",
    suffix: "",
    ext: "S",
};

const DYNAMIC_MUSL: CCompiler = CCompiler {
    cc: "musl-gcc",
    flags: &["-O2", "-Wall", "-Wextra", "-pie", "-fPIE"],
    install: "apt-get install musl-tools",
    suffix: "_musl",
    ext: "c",
};

fn build_c_programs(c_dir: &Path, bin_dir: &Path, cc: &CCompiler) -> Result<(), String> {
    // Watching the directory also catches added and removed sources.
    println!("cargo:rerun-if-changed={}", c_dir.display());
    let mut sources: Vec<PathBuf> = fs::read_dir(c_dir)
        .map_err(|e| format!("reading {}: {e}", c_dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<io::Result<_>>()
        .map_err(|e| format!("reading {}: {e}", c_dir.display()))?;
    sources.retain(|p| p.extension().is_some_and(|e| e == cc.ext));
    sources.sort();
    compile_all(&sources, bin_dir, cc)
}

/// Compiles each source into `bin_dir`, named by its stem and `cc.suffix`.
fn compile_all(sources: &[PathBuf], bin_dir: &Path, cc: &CCompiler) -> Result<(), String> {
    for src in sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let name = src
            .file_stem()
            .ok_or_else(|| format!("{}: no file name", src.display()))?;
        let mut name = name.to_os_string();
        name.push(cc.suffix);
        let exe = bin_dir.join(name);
        let output = Command::new(cc.cc)
            .args(cc.flags)
            .arg("-o")
            .arg(&exe)
            .arg(src)
            .output()
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => format!("{} not found: {}", cc.cc, cc.install),
                _ => format!("running {}: {e}", cc.cc),
            })?;
        if !output.status.success() {
            return Err(format!(
                "{} failed on {} ({}):\n{}",
                cc.cc,
                src.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        // Surface compiler warnings; cargo hides a passing script's stderr.
        for line in String::from_utf8_lossy(&output.stderr).lines() {
            println!("cargo:warning={line}");
        }
    }
    Ok(())
}

fn build_rust_hello(crate_dir: &Path, out_dir: &Path, bin_dir: &Path) -> Result<(), String> {
    for watched in ["Cargo.toml", "Cargo.lock", "src"] {
        println!(
            "cargo:rerun-if-changed={}",
            crate_dir.join(watched).display()
        );
    }
    let target_dir = out_dir.join("rust-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));

    let mut cmd = Command::new(&cargo);
    cmd.env_clear()
        // rustup picks the toolchain from rust-toolchain.toml above this dir.
        .current_dir(crate_dir)
        .args([
            "build",
            "--release",
            "--locked",
            "--offline",
            "--quiet",
            "--target",
            RUST_TARGET,
        ])
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    for name in PASSED_TO_NESTED_CARGO {
        if let Some(value) = env::var_os(name) {
            cmd.env(name, value);
        }
    }
    let output = cmd
        .output()
        .map_err(|e| format!("running {}: {e}", Path::new(&cargo).display()))?;
    if !output.status.success() {
        return Err(format!(
            "building rust-hello for {RUST_TARGET} failed ({}); is the target installed \
             (rustup target add {RUST_TARGET})?\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }

    let built = target_dir
        .join(RUST_TARGET)
        .join("release")
        .join("rust-hello");
    let dest = bin_dir.join("rust-hello");
    fs::copy(&built, &dest)
        .map_err(|e| format!("copying {} to {}: {e}", built.display(), dest.display()))?;
    Ok(())
}
