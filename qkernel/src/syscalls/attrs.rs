//! Per-process attributes that only syscalls read and write: the
//! supplementary groups, nice value, scheduling policy, I/O priority,
//! `prctl` state and personality. Kept here, beside their handlers, while
//! there is one process.

use alloc::vec::Vec;

use spin::Mutex;

/// The attributes.
pub struct Attrs {
    /// Supplementary group ids (none at start: no `additionalGids`).
    pub groups: Vec<u32>,
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
    groups: Vec::new(),
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

/// Whether the process acts with the capabilities a container's root
/// has (runc's default set: `CAP_SETUID`, `CAP_SETGID`, `CAP_CHOWN` …,
/// not `CAP_SYS_NICE`, `CAP_SYS_ADMIN`, `CAP_SYS_TIME`): euid 0.
pub fn container_root(ids: &[u32; 4]) -> bool {
    ids[1] == 0
}

/// runc's default capability set (bounding, and effective for root):
/// CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP,
/// NET_BIND_SERVICE, NET_RAW, SYS_CHROOT, MKNOD, AUDIT_WRITE, SETFCAP.
pub const DEFAULT_CAPS: u64 = (1 << 0)
    | (1 << 1)
    | (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 10)
    | (1 << 13)
    | (1 << 18)
    | (1 << 27)
    | (1 << 29)
    | (1 << 31);

/// The highest capability number Linux 6.x knows (`CAP_CHECKPOINT_RESTORE`).
pub const CAP_LAST_CAP: u64 = 40;
