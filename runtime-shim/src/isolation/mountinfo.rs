//! The mounts made inside the rootfs view (the config's tmpfs and bind
//! mounts, masked and read-only paths), read back from the sandbox
//! process's own `/proc/self/mountinfo` after `pivot_root`, for the
//! guest's mountinfo (`qlib::abi::BootInfo::mounts`): what a program
//! under runc finds there, in mount order, with the host's fields.

use super::rootfs::ROOTFS;

/// Mount points the guest kernel lists itself (`/dev/shm`: it checks the
/// rootfs view for the runtime's tmpfs).
const GUEST_LISTED: &[&str] = &["/dev/shm"];

/// `mountpoint root fstype source options super-options major:minor`
/// records for every mount below [`ROOTFS`] in `mountinfo` (the text of
/// a `/proc/PID/mountinfo`), mount points made container paths.
pub fn below_rootfs(mountinfo: &str) -> Vec<String> {
    let prefix = format!("{ROOTFS}/");
    mountinfo
        .lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let h: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            let (dev, root, point, opts) = (h.get(2)?, h.get(3)?, h.get(4)?, h.get(5)?);
            let (fstype, source, super_opts) = (t.first()?, t.get(1)?, t.get(2)?);
            let dir = format!("/{}", point.strip_prefix(&prefix)?);
            (!GUEST_LISTED.contains(&dir.as_str()))
                .then(|| format!("{dir} {root} {fstype} {source} {opts} {super_opts} {dev}"))
        })
        .collect()
}

/// [`below_rootfs`] of this process's mount namespace (none when it
/// cannot be read).
pub fn own() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| below_rootfs(&t))
        .unwrap_or_default()
}

/// Whether host path `path` (absolute, symlinks resolved) lies on a
/// shared mount in `mountinfo`: the last-listed mount whose mount point
/// is the longest prefix of it has a `shared:N` optional field.
pub fn on_shared_mount(mountinfo: &str, path: &std::path::Path) -> bool {
    let mut best: Option<(usize, bool)> = None;
    for line in mountinfo.lines() {
        let Some((head, _)) = line.split_once(" - ") else {
            continue;
        };
        let h: Vec<&str> = head.split(' ').collect();
        let Some(point) = h.get(4) else { continue };
        if !path.starts_with(point) {
            continue;
        }
        let shared = h.iter().skip(6).any(|f| f.starts_with("shared:"));
        if best.is_none_or(|(len, _)| point.len() >= len) {
            best = Some((point.len(), shared));
        }
    }
    best.is_some_and(|(_, shared)| shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_covering_mount_says_whether_a_path_is_shared() {
        let mi = "22 1 8:1 / / rw shared:1 - ext4 /dev/sda rw\n\
                  30 22 0:40 / /srv rw - tmpfs tmpfs rw\n\
                  31 30 0:41 / /srv/vol rw shared:7 master:1 - ext4 /dev/sdb rw\n";
        assert!(on_shared_mount(mi, std::path::Path::new("/etc")));
        assert!(!on_shared_mount(mi, std::path::Path::new("/srv/x")));
        assert!(on_shared_mount(mi, std::path::Path::new("/srv/vol/a")));
        assert!(!on_shared_mount(mi, std::path::Path::new("/srv/volume")));
    }

    #[test]
    fn mounts_below_the_rootfs_become_container_paths() {
        let text = "\
100 90 0:50 / / rw - tmpfs tmpfs rw
101 100 8:1 /bundle/rootfs /.qrun-rootfs rw,relatime shared:1 - ext4 /dev/sda1 rw
102 101 0:60 / /.qrun-rootfs/tmp/test-shared rw,nosuid shared:7 - tmpfs tmpfs rw,size=4k,mode=755
103 101 0:61 / /.qrun-rootfs/dev/shm rw - tmpfs shm rw
104 101 8:1 /etc /.qrun-rootfs/mnt/etc\\040x rw master:1 - ext4 /dev/sda1 rw
105 100 0:5 /1 /proc/self ro - proc proc rw
";
        assert_eq!(
            below_rootfs(text),
            [
                "/tmp/test-shared / tmpfs tmpfs rw,nosuid rw,size=4k,mode=755 0:60",
                "/mnt/etc\\040x /etc ext4 /dev/sda1 rw rw 8:1",
            ]
        );
    }
}
