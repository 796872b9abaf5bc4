//! Links the guest kernel with its linker script (upper half, see
//! `qlib::layout`). Host builds of this crate are an empty stub.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    println!("cargo:rerun-if-changed={dir}/linker.ld");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{dir}/linker.ld");
        println!("cargo:rustc-link-arg-bins=-zmax-page-size=0x1000");
        println!("cargo:rustc-link-arg-bins=--no-pie");
    }
}
