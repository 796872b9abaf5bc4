//! Finding the program inside the rootfs the way the container would see
//! it: `$PATH` search for a bare name, `cwd` for a relative path, and
//! symlinks followed *inside* the rootfs (an absolute link target or `..`
//! never leaves it).

use std::path::{Component, Path, PathBuf};

/// Symlinks followed before giving up, as Linux's `MAXSYMLINKS`.
const MAX_LINKS: usize = 40;
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Resolves `path` (absolute, inside the container) within `root`,
/// following symlinks inside it; the result is an absolute container path
/// with no symlinks left, or `None` if a component is missing.
pub fn in_root(root: &Path, path: &str) -> Option<String> {
    let mut done: Vec<String> = Vec::new();
    let mut todo: Vec<String> = components(path).into_iter().rev().collect();
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "." => continue,
            ".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let host = root.join(done.join("/")).join(&c);
        let meta = std::fs::symlink_metadata(&host).ok()?;
        if meta.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return None;
            }
            let target = std::fs::read_link(&host).ok()?;
            let target = target.to_string_lossy();
            if target.starts_with('/') {
                done.clear();
            }
            todo.extend(components(&target).into_iter().rev());
        } else {
            done.push(c);
        }
    }
    Some(format!("/{}", done.join("/")))
}

fn components(path: &str) -> Vec<String> {
    Path::new(path)
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect()
}

/// The program `arg0` as the container would exec it: `PATH` (from `env`)
/// is searched for a bare name, a relative path is taken from `cwd`. Only
/// regular files count.
pub fn program(root: &Path, arg0: &str, env: &[String], cwd: &str) -> Option<String> {
    let candidates: Vec<String> = if arg0.starts_with('/') {
        vec![arg0.to_owned()]
    } else if arg0.contains('/') {
        vec![format!("{cwd}/{arg0}")]
    } else {
        let path = env
            .iter()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or(DEFAULT_PATH);
        path.split(':')
            .filter(|d| d.starts_with('/'))
            .map(|d| format!("{d}/{arg0}"))
            .collect()
    };
    candidates.iter().find_map(|c| {
        let resolved = in_root(root, c)?;
        let host = host_path(root, &resolved);
        std::fs::metadata(&host)
            .ok()
            .filter(|m| m.is_file())
            .map(|_| resolved)
    })
}

/// The host path of container path `path` (already resolved).
pub fn host_path(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_links_inside_the_root() {
        let root = std::env::temp_dir().join(format!("qrun-resolve-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).expect("mkdir");
        std::fs::write(root.join("bin/busybox"), b"x").expect("write");
        std::os::unix::fs::symlink("/bin/busybox", root.join("bin/sh")).expect("symlink");
        std::os::unix::fs::symlink("../../../../bin/busybox", root.join("bin/up"))
            .expect("symlink");
        let env = vec!["PATH=/usr/bin:/bin".to_string()];
        assert_eq!(
            program(&root, "sh", &env, "/").as_deref(),
            Some("/bin/busybox")
        );
        assert_eq!(
            program(&root, "/bin/up", &[], "/").as_deref(),
            Some("/bin/busybox")
        );
        assert_eq!(
            program(&root, "bin/sh", &[], "/").as_deref(),
            Some("/bin/busybox")
        );
        assert_eq!(program(&root, "nope", &env, "/"), None);
        assert_eq!(program(&root, "/bin", &env, "/"), None);
        let _ = std::fs::remove_dir_all(&root);
    }
}
