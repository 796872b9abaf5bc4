//! Per-process attributes that only syscalls read and write: the
//! nice value, scheduling policy, I/O priority,
//! `prctl` state and personality. Kept here, beside their handlers, while
//! there is one process.

use spin::Mutex;

/// The attributes.
pub struct Attrs {
    /// Nice value, -20..=19.
    pub nice: i32,
    /// `sched_setscheduler` policy (with `SCHED_RESET_ON_FORK`).
    pub policy: u32,
    /// `ioprio_set` value (0: `IOPRIO_CLASS_NONE`, never set).
    pub ioprio: u32,
    /// `PR_SET_PDEATHSIG`.
    pub pdeathsig: u32,
    /// `PR_SET_DUMPABLE`.
    pub dumpable: u32,
    /// `PR_SET_NO_NEW_PRIVS`.
    pub no_new_privs: bool,
    /// `PR_SET_CHILD_SUBREAPER`.
    pub subreaper: bool,
    /// `PR_SET_KEEPCAPS`.
    pub keepcaps: bool,
    /// `PR_SET_TIMERSLACK` in ns.
    pub timerslack: u64,
    /// `personality`.
    pub personality: u32,
}

/// The one process's attributes.
pub static ATTRS: Mutex<Attrs> = Mutex::new(Attrs {
    nice: 0,
    policy: 0,
    ioprio: 0,
    pdeathsig: 0,
    dumpable: 1,
    no_new_privs: false,
    subreaper: false,
    keepcaps: false,
    timerslack: 50_000,
    personality: 0,
});

/// Whether `PR_SET_NO_NEW_PRIVS` is set, or the config set
/// `process.noNewPrivileges` (`qlib::abi::BOOT_NO_NEW_PRIVS`).
pub fn no_new_privs() -> bool {
    ATTRS.lock().no_new_privs || crate::boot_info().flags & qlib::abi::BOOT_NO_NEW_PRIVS != 0
}
