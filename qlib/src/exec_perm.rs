//! Linux's permission check for running a file (`execve`, and the VMM's
//! start of the first program): shared so that both refuse the same files.

/// File type mask of a mode.
const S_IFMT: u32 = 0o170000;
/// Regular file.
const S_IFREG: u32 = 0o100000;

/// Whether a caller with effective ids `euid`/`egid` may execute a file of
/// `mode` owned by `owner` (uid, gid): a regular file with the owner's,
/// group's or others' x bit, whichever class the caller is in; root needs
/// any x bit.
pub fn may_exec(mode: u32, owner: (u32, u32), euid: u32, egid: u32) -> bool {
    if mode & S_IFMT != S_IFREG {
        return false;
    }
    let x = if euid == 0 {
        mode & 0o111
    } else if euid == owner.0 {
        mode & 0o100
    } else if egid == owner.1 {
        mode & 0o010
    } else {
        mode & 0o001
    };
    x != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const REG: u32 = S_IFREG;

    #[test]
    fn root_needs_any_x_bit_on_a_regular_file() {
        assert!(may_exec(REG | 0o001, (5, 5), 0, 0));
        assert!(!may_exec(REG | 0o644, (0, 0), 0, 0));
        assert!(!may_exec(0o040755, (0, 0), 0, 0), "a directory");
    }

    #[test]
    fn others_use_their_class_only() {
        assert!(may_exec(REG | 0o100, (7, 9), 7, 1));
        assert!(!may_exec(REG | 0o011, (7, 9), 7, 9), "owner class decides");
        assert!(may_exec(REG | 0o010, (7, 9), 8, 9));
        assert!(!may_exec(REG | 0o101, (7, 9), 8, 9), "group class decides");
        assert!(may_exec(REG | 0o001, (7, 9), 8, 1));
        assert!(!may_exec(REG | 0o110, (7, 9), 8, 1));
    }
}
