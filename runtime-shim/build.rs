//! Opt-in link setting: `QRUN_NO_PIE=1 cargo build` links `qrun` as a
//! non-PIE executable. Its relocated constants (`.data.rel.ro`, ~280 KiB)
//! are then clean page-cache pages shared by every sandbox instead of
//! private dirty memory in each (docs/memory.md, "What a hibernated Python
//! hello keeps"), at the cost of address randomisation for the qrun binary
//! itself (libraries, heap, stacks and guest RAM stay randomised). Off by
//! default.

fn main() {
    println!("cargo:rerun-if-env-changed=QRUN_NO_PIE");
    if std::env::var_os("QRUN_NO_PIE").is_some_and(|v| v == "1") {
        println!("cargo:rustc-link-arg-bin=qrun=-no-pie");
    }
}
