//! Where a process started by the sandbox gets its capability sets and
//! groups from. An OCI process starts from its config's sets
//! (`BootInfo::creds`, the VMM's `qlib::abi::Creds`) transformed by one
//! `execve`, as runc sets them and then executes the program; `qrun do`
//! (no creds) starts from runc's default set.

use alloc::vec::Vec;

use qlib::abi::Creds;
pub use qlib::caps::*;

/// The OCI process's creds from the VMM, if it sent them.
pub fn boot_creds() -> Option<Creds> {
    let v = crate::boot_info().creds;
    if v.len == 0 {
        return None;
    }
    Creds::from_bytes(crate::boot_slice(v))
}

/// The sets a process started by the sandbox (the program, an exec'd
/// process) has, running as `ids`.
pub fn initial_caps(ids: &[u32; 4]) -> Caps {
    let before = match boot_creds() {
        Some(c) => Caps {
            bounding: c.caps[0] & ALL_CAPS,
            effective: c.caps[1] & ALL_CAPS,
            permitted: c.caps[2] & ALL_CAPS,
            inheritable: c.caps[3] & ALL_CAPS,
            ambient: c.caps[4] & ALL_CAPS,
        },
        None => Caps {
            bounding: DEFAULT_CAPS,
            effective: DEFAULT_CAPS,
            permitted: DEFAULT_CAPS,
            inheritable: 0,
            ambient: 0,
        },
    };
    before.after_exec(ids, crate::syscalls::no_new_privs())
}

/// The supplementary groups a process started by the sandbox has
/// (`process.user.additionalGids`), sorted as Linux keeps them.
pub fn initial_groups() -> Vec<u32> {
    let Some(c) = boot_creds() else {
        return Vec::new();
    };
    let mut g: Vec<u32> = c.groups[..c.ngroups as usize].to_vec();
    g.sort_unstable();
    g
}
