//! The sandbox process's root: a small read-only tmpfs holding only what
//! qvisor needs, entered with `pivot_root`; the host's mounts are gone
//! afterwards.
//!
//! ```text
//! /dev/kvm          bind of the host's /dev/kvm
//! /.qrun-rootfs     bind of the bundle rootfs (+ the config's bind and
//!                   tmpfs mounts; read-only if root.readonly)
//! /.qrun-state      bind of <state dir>/sandbox: control socket, exec
//!                   fifo, exit status, swap and REAP files
//! /proc/self        bind of the sandbox process's own /proc/<pid> (and
//!                   nothing else of /proc): the VMM names objects it
//!                   holds open as /proc/self/fd/N (AF_UNIX bind and
//!                   connect, chmod, chown, utimes, linkat)
//! /<program>        bind of the program file from the rootfs, at its path
//!                   inside the container (see below)
//! ```
//! The last entry bridges the VMM of today, which reads the program from
//! the *host* path `SandboxConfig::program`, and the VMM being built,
//! which resolves it inside `SandboxConfig::rootfs` (`/.qrun-rootfs`):
//! the program path is the container path, and it names the same file
//! both ways.

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::unistd::{chdir, pivot_root};

use super::IsolationError;
use crate::bundle::resolve;
use crate::plan::{MountKind, MountPlan, Plan};

/// Where the rootfs is, inside the sandbox process's root.
pub const ROOTFS: &str = "/.qrun-rootfs";
/// Where the container's sandbox directory is.
pub const STATE: &str = "/.qrun-state";

const NONE: Option<&str> = None;

fn bind(src: &Path, dst: &Path, flags: MsFlags) -> Result<(), IsolationError> {
    mount(Some(src), dst, NONE, MsFlags::MS_BIND | flags, NONE).map_err(IsolationError::sys(
        format!("bind {} on {}", src.display(), dst.display()),
    ))
}

fn remount_ro(dst: &Path, extra: MsFlags) -> Result<(), IsolationError> {
    let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | extra;
    mount(NONE, dst, NONE, flags, NONE).map_err(IsolationError::sys(format!(
        "read-only remount of {}",
        dst.display()
    )))
}

fn touch(path: &Path) -> Result<(), IsolationError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(IsolationError::io(format!("mkdir {}", dir.display())))?;
    }
    fs::File::create(path).map_err(IsolationError::io(format!("creating {}", path.display())))?;
    Ok(())
}

/// Builds the root in `<dir>/newroot` and pivots into it; `hooks` runs
/// once the rootfs view (its argument) has the config's mounts, before it
/// is made read-only and before pivot_root (where runc runs them).
pub fn pivot(
    plan: &Plan,
    dir: &Path,
    hooks: &mut dyn FnMut(&Path) -> Result<(), IsolationError>,
) -> Result<(), IsolationError> {
    // A shared volume's source is cloned while this namespace's copy of
    // it is still in the host's peer group: the clone stays a peer, so
    // what is mounted under it reaches the host (runc's `rshared`).
    let shared = plan
        .mounts
        .iter()
        .map(shared_clone)
        .collect::<Result<Vec<_>, _>>()?;
    // As runc's default root propagation: the host's new mounts reach
    // the sandbox's view, nothing mounted here reaches the host.
    mount(NONE, "/", NONE, MsFlags::MS_REC | MsFlags::MS_SLAVE, NONE)
        .map_err(IsolationError::sys("making / a slave"))?;
    let new = dir.join("newroot");
    mount(
        Some("tmpfs"),
        &new,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=755,size=64k"),
    )
    .map_err(IsolationError::sys("mounting the sandbox root"))?;

    let kvm = new.join("dev/kvm");
    touch(&kvm)?;
    bind(Path::new("/dev/kvm"), &kvm, MsFlags::empty())?;

    let rootfs = new.join(ROOTFS.trim_start_matches('/'));
    fs::create_dir(&rootfs).map_err(IsolationError::io("mkdir rootfs"))?;
    bind(&plan.rootfs, &rootfs, MsFlags::MS_REC)?;
    if let Some(p) = &plan.rootfs_propagation {
        // Inside the sandbox's namespace (its root is a slave of the
        // host's): `shared` makes the guest's bind mounts under the root
        // reach its own binds of the root, `unbindable` refuses those.
        mount(NONE, &rootfs, NONE, propagation(p), NONE)
            .map_err(IsolationError::sys(format!("making the rootfs {p}")))?;
    }
    for (m, clone) in plan.mounts.iter().zip(shared) {
        match guest_mount(&rootfs, m, clone) {
            // runc makes /dev/shm in its /dev tmpfs; here it is a
            // directory of the rootfs, which a read-only image may lack:
            // the container runs without POSIX shm rather than not at all.
            Err(e) if m.destination == crate::bundle::SHM => {
                eprintln!("qrun: warning: no /dev/shm: {e}");
            }
            r => r?,
        }
    }
    hooks(&rootfs)?;
    restrict_paths(&rootfs, plan)?;
    if plan.readonly_root {
        remount_ro(&rootfs, MsFlags::MS_REC)?;
    }

    let state = new.join(STATE.trim_start_matches('/'));
    fs::create_dir(&state).map_err(IsolationError::io("mkdir state"))?;
    bind(&dir.join("sandbox"), &state, MsFlags::empty())?;

    mount_proc_self(&new.join("proc"))?;

    let reserved = ["/dev/kvm", ROOTFS, STATE, "/proc"];
    if reserved
        .iter()
        .any(|r| plan.program == *r || plan.program.starts_with(&format!("{r}/")))
    {
        return Err(IsolationError::Setup(format!(
            "program path {} is reserved by qrun",
            plan.program
        )));
    }
    let shim = new.join(plan.program.trim_start_matches('/'));
    touch(&shim)?;
    bind(
        &resolve::host_path(&plan.rootfs, &plan.program),
        &shim,
        MsFlags::empty(),
    )?;
    remount_ro(&shim, MsFlags::empty())?;

    chdir(&new).map_err(IsolationError::sys("chdir to the new root"))?;
    pivot_root(".", ".").map_err(IsolationError::sys("pivot_root"))?;
    // The old root is now stacked on top of the new one: detach it.
    umount2(".", MntFlags::MNT_DETACH).map_err(IsolationError::sys("detaching the old root"))?;
    chdir("/").map_err(IsolationError::sys("chdir /"))?;
    let flags = MsFlags::MS_REMOUNT
        | MsFlags::MS_RDONLY
        | MsFlags::MS_NOSUID
        | MsFlags::MS_NODEV
        | MsFlags::MS_NOEXEC;
    mount(NONE, "/", NONE, flags, NONE).map_err(IsolationError::sys("read-only remount of /"))
}

/// `/proc/self` at `dir/self`: a bind of this process's own directory of
/// the host's procfs, and nothing else of /proc (the VMM is this process:
/// `Sandbox::run` runs in it).
fn mount_proc_self(dir: &Path) -> Result<(), IsolationError> {
    let own = dir.join("self");
    fs::create_dir_all(&own).map_err(IsolationError::io("mkdir proc/self"))?;
    // The source is the magic link, resolved to /proc/<our pid>.
    bind(Path::new("/proc/self"), &own, MsFlags::empty())?;
    remount_ro(
        &own,
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
    )
}

/// `linux.maskedPaths` and `linux.readonlyPaths` in the rootfs view, as
/// runc applies them once the mounts are in place: a masked file gets
/// /dev/null bound over it, a masked directory an empty read-only tmpfs; a
/// read-only path is bound onto itself and remounted read-only. Paths are
/// resolved inside the rootfs; one that does not exist is skipped (as
/// runc does). Paths under /proc and /sys name the guest kernel's own
/// files, which the rootfs view does not hold: nothing to do there.
fn restrict_paths(view: &Path, plan: &Plan) -> Result<(), IsolationError> {
    let existing = |p: &str| {
        resolve::in_root(view, p)
            .map(|r| resolve::host_path(view, &r))
            .filter(|h| h.symlink_metadata().is_ok())
    };
    for p in &plan.masked_paths {
        let Some(host) = existing(p) else { continue };
        if host.is_dir() {
            mount(
                Some("tmpfs"),
                &host,
                Some("tmpfs"),
                MsFlags::MS_RDONLY,
                Some("size=0"),
            )
            .map_err(IsolationError::sys(format!("masking {p}")))?;
        } else {
            bind(Path::new("/dev/null"), &host, MsFlags::empty())?;
        }
    }
    for p in &plan.readonly_paths {
        let Some(host) = existing(p) else { continue };
        bind(&host, &host, MsFlags::MS_REC)?;
        remount_ro(&host, MsFlags::MS_REC)?;
    }
    Ok(())
}

/// The `mount` flags of propagation option `p` (one of
/// `bundle::mounts::PROPAGATION`).
fn propagation(p: &str) -> MsFlags {
    let rec = if p.starts_with('r') {
        MsFlags::MS_REC
    } else {
        MsFlags::empty()
    };
    rec | match p.trim_start_matches('r') {
        "shared" => MsFlags::MS_SHARED,
        "slave" => MsFlags::MS_SLAVE,
        "unbindable" => MsFlags::MS_UNBINDABLE,
        _ => MsFlags::MS_PRIVATE,
    }
}

/// For a bind mount whose propagation is `shared` or `rshared`: a
/// detached clone of its source (`open_tree`), a peer of the host's mount
/// when that is shared.
fn shared_clone(m: &MountPlan) -> Result<Option<OwnedFd>, IsolationError> {
    use rustix::mount::{OpenTreeFlags, open_tree};
    let MountKind::Bind { source, recursive } = &m.kind else {
        return Ok(None);
    };
    if !matches!(m.propagation.as_deref(), Some("shared" | "rshared")) {
        return Ok(None);
    }
    // A clone only matters when the source is the host's shared mount;
    // it is made now, before the mounts listed ahead of it in the
    // config, so it is listed before them in mountinfo: an ordinary
    // bind otherwise keeps the config's order there.
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let host = source.canonicalize().unwrap_or_else(|_| source.clone());
    if !super::mountinfo::on_shared_mount(&info, &host) {
        return Ok(None);
    }
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
    if *recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    open_tree(rustix::fs::CWD, source.as_path(), flags)
        .map(Some)
        .map_err(|e| {
            IsolationError::Setup(format!("cloning the mount of {}: {e}", source.display()))
        })
}

/// One of the config's mounts, inside the private view of the rootfs; a
/// shared volume is its clone (`shared_clone`), attached there.
fn guest_mount(view: &Path, m: &MountPlan, clone: Option<OwnedFd>) -> Result<(), IsolationError> {
    let is_file = matches!(&m.kind, MountKind::Bind { source, .. } if !source.is_dir());
    let target = mount_point(view, &m.destination, is_file)?;
    let mut flags = MsFlags::empty();
    for (on, f) in [
        (m.nosuid, MsFlags::MS_NOSUID),
        (m.nodev, MsFlags::MS_NODEV),
        (m.noexec, MsFlags::MS_NOEXEC),
    ] {
        if on {
            flags |= f;
        }
    }
    match &m.kind {
        MountKind::Bind { source, recursive } => {
            let rec = if *recursive {
                MsFlags::MS_REC
            } else {
                MsFlags::empty()
            };
            match clone {
                Some(fd) => {
                    use rustix::mount::{MoveMountFlags, move_mount};
                    move_mount(
                        &fd,
                        "",
                        rustix::fs::CWD,
                        target.as_path(),
                        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
                    )
                    .map_err(|e| {
                        IsolationError::Setup(format!("attaching {}: {e}", m.destination))
                    })?;
                }
                None => bind(source, &target, rec)?,
            }
            if let Some(p) = &m.propagation {
                mount(NONE, &target, NONE, propagation(p), NONE)
                    .map_err(IsolationError::sys(format!("making {} {p}", m.destination)))?;
            }
            if m.readonly || !flags.is_empty() {
                let f = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | flags;
                let f = if m.readonly {
                    f | MsFlags::MS_RDONLY
                } else {
                    f
                };
                mount(NONE, &target, NONE, f, NONE)
                    .map_err(IsolationError::sys(format!("remounting {}", m.destination)))?;
            }
        }
        MountKind::Tmpfs => {
            if m.readonly {
                flags |= MsFlags::MS_RDONLY;
            }
            let data = (!m.data.is_empty()).then_some(m.data.as_str());
            mount(Some("tmpfs"), &target, Some("tmpfs"), flags, data)
                .map_err(IsolationError::sys(format!("tmpfs on {}", m.destination)))?;
        }
    }
    Ok(())
}

/// The mount point for container path `dest` under `view`, made if
/// missing. Existing components are resolved inside the rootfs (a symlink
/// cannot point the mount outside); only missing ones are created.
fn mount_point(view: &Path, dest: &str, is_file: bool) -> Result<PathBuf, IsolationError> {
    let parts: Vec<&str> = dest.split('/').filter(|p| !p.is_empty()).collect();
    let mut existing = String::from("/");
    let mut rest = parts.as_slice();
    while let Some((first, tail)) = rest.split_first() {
        let next = format!("{}/{first}", existing.trim_end_matches('/'));
        match resolve::in_root(view, &next) {
            Some(r) => {
                existing = r;
                rest = tail;
            }
            None => break,
        }
    }
    let mut path = resolve::host_path(view, &existing);
    for (i, part) in rest.iter().enumerate() {
        if *part == ".." || *part == "." {
            return Err(IsolationError::Setup(format!(
                "mount destination {dest}: bad path"
            )));
        }
        path.push(part);
        if i + 1 == rest.len() && is_file {
            fs::File::create(&path)
        } else {
            fs::create_dir(&path)
                .map(|_| fs::File::open(&path))
                .and_then(|r| r)
        }
        .map_err(IsolationError::io(format!(
            "making mount point {}",
            path.display()
        )))?;
    }
    Ok(path)
}
