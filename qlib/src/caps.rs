//! Capability sets and the rules Linux changes them by (capabilities(7)):
//! at `execve` of a file without file capabilities or set-id bits, and
//! when `setuid` and friends move the ids to or from 0. The guest kernel
//! keeps one [`Caps`] per process.

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

/// Every capability Linux knows.
pub const ALL_CAPS: u64 = (1 << (CAP_LAST_CAP + 1)) - 1;

pub const CAP_SETGID: u32 = 6;
pub const CAP_SETUID: u32 = 7;
pub const CAP_SETPCAP: u32 = 8;
pub const CAP_NET_ADMIN: u32 = 12;
pub const CAP_SYS_CHROOT: u32 = 18;
pub const CAP_SYS_ADMIN: u32 = 21;
pub const CAP_SYS_NICE: u32 = 23;
pub const CAP_SYS_RESOURCE: u32 = 24;

/// The five sets, bit n = capability n.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    pub bounding: u64,
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
    pub ambient: u64,
}

impl Caps {
    /// Whether `cap` is effective.
    pub fn has(&self, cap: u32) -> bool {
        self.effective >> cap & 1 == 1
    }

    /// The sets after `execve` of an ordinary file (no file capabilities,
    /// no set-id bits) by a process with `ids` (uid, euid, gid, egid):
    /// root's permitted set becomes bounding | inheritable, and effective
    /// with euid 0; anyone else keeps only the ambient set. Under
    /// `no_new_privs` nothing is gained: the new permitted set is cut to
    /// the old one.
    pub fn after_exec(self, ids: &[u32; 4], no_new_privs: bool) -> Caps {
        let root = ids[0] == 0 || ids[1] == 0;
        let mut permitted = if root {
            self.bounding | self.inheritable
        } else {
            0
        };
        permitted |= self.ambient;
        if no_new_privs && permitted & !self.permitted != 0 {
            permitted &= self.permitted;
        }
        let effective = if ids[1] == 0 { permitted } else { self.ambient };
        Caps {
            permitted,
            effective,
            ..self
        }
    }

    /// The sets after the uids moved from `old` to `new` (uid, euid
    /// first): leaving every root id drops permitted and effective
    /// (unless `keepcaps`) and ambient; leaving euid 0 drops effective;
    /// coming to euid 0 makes effective the permitted set.
    pub fn after_setuid(self, old: &[u32; 4], new: &[u32; 4], keepcaps: bool) -> Caps {
        let mut c = self;
        let was_root = old[0] == 0 || old[1] == 0;
        let is_root = new[0] == 0 || new[1] == 0;
        if was_root && !is_root {
            if !keepcaps {
                c.permitted = 0;
                c.effective = 0;
            }
            c.ambient = 0;
        }
        if old[1] == 0 && new[1] != 0 {
            c.effective = 0;
        }
        if old[1] != 0 && new[1] == 0 {
            c.effective = c.permitted;
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(b: u64, e: u64, p: u64, i: u64, a: u64) -> Caps {
        Caps {
            bounding: b,
            effective: e,
            permitted: p,
            inheritable: i,
            ambient: a,
        }
    }

    #[test]
    fn exec_as_root_gets_bounding() {
        let c = caps(0b1110, 0b10, 0b10, 0b1, 0).after_exec(&[0; 4], false);
        assert_eq!((c.permitted, c.effective), (0b1111, 0b1111));
        let n = caps(0b1110, 0b10, 0b110, 0b1, 0).after_exec(&[0; 4], true);
        assert_eq!((n.permitted, n.effective), (0b110, 0b110));
    }

    #[test]
    fn exec_as_user_keeps_ambient() {
        let c = caps(0b1110, 0b110, 0b110, 0b100, 0b100).after_exec(&[1000; 4], false);
        assert_eq!((c.permitted, c.effective), (0b100, 0b100));
    }

    #[test]
    fn setuid_away_from_root_drops() {
        let c = caps(7, 7, 7, 0, 1);
        let d = c.after_setuid(&[0; 4], &[5, 5, 0, 0], false);
        assert_eq!((d.permitted, d.effective, d.ambient), (0, 0, 0));
        let k = c.after_setuid(&[0; 4], &[5, 5, 0, 0], true);
        assert_eq!((k.permitted, k.effective), (7, 0));
        let back = k.after_setuid(&[5, 5, 0, 0], &[5, 0, 0, 0], true);
        assert_eq!(back.effective, 7);
    }
}
