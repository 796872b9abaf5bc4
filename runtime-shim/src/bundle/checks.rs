//! Checks on the strings of `process` and `hostname` that the guest gets
//! as C strings: a NUL byte would cut them short there (the program would
//! see another argument, variable or name than the config says), so they
//! are refused, with runc's rules for environment entries.

use super::BundleError;

/// Longest hostname (`HOST_NAME_MAX`); `sethostname` refuses more.
const MAX_HOSTNAME: usize = 64;

fn invalid(msg: String) -> BundleError {
    BundleError::Invalid(msg)
}

/// `process.args`: no NUL byte.
pub fn args(args: &[String]) -> Result<(), BundleError> {
    match args.iter().position(|a| a.contains('\0')) {
        Some(i) => Err(invalid(format!(
            "process.args[{i}] {:?} contains a NUL byte",
            args[i]
        ))),
        None => Ok(()),
    }
}

/// The first entry of `env` that is not `NAME=VALUE` with a non-empty
/// name and no NUL byte (runc's `populateProcessEnvironment` rules): its
/// index and what is wrong with it. Also used for hooks' `env`.
pub fn bad_env_entry(env: &[String]) -> Option<(usize, &'static str)> {
    env.iter().enumerate().find_map(|(i, e)| {
        let why = match e.split_once('=') {
            _ if e.contains('\0') => "contains a NUL byte",
            None => "has no '='",
            Some(("", _)) => "has an empty name",
            Some(_) => return None,
        };
        Some((i, why))
    })
}

/// `process.env`: every entry as [`bad_env_entry`] wants.
pub fn env(env: &[String]) -> Result<(), BundleError> {
    match bad_env_entry(env) {
        Some((i, why)) => Err(invalid(format!("process.env[{i}] {:?} {why}", env[i]))),
        None => Ok(()),
    }
}

/// `process.cwd`: absolute, no NUL byte.
pub fn cwd(cwd: &str) -> Result<(), BundleError> {
    if !cwd.starts_with('/') {
        return Err(invalid(format!("process.cwd {cwd:?} is not absolute")));
    }
    if cwd.contains('\0') {
        return Err(invalid(format!("process.cwd {cwd:?} contains a NUL byte")));
    }
    Ok(())
}

/// `hostname`: no NUL byte, at most 64 bytes.
pub fn hostname(name: &str) -> Result<(), BundleError> {
    if name.contains('\0') {
        return Err(invalid(format!("hostname {name:?} contains a NUL byte")));
    }
    if name.len() > MAX_HOSTNAME {
        return Err(invalid(format!(
            "hostname is {} bytes long (at most {MAX_HOSTNAME})",
            name.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn nul_bytes_are_refused() {
        assert!(args(&s(&["/bin/sh", "-c", "true"])).is_ok());
        let e = args(&s(&["/bin/sh", "a\0b"])).expect_err("NUL");
        assert_eq!(
            e.to_string(),
            "config.json: process.args[1] \"a\\0b\" contains a NUL byte"
        );
        assert!(env(&s(&["A=b\0c"])).is_err());
        assert!(env(&s(&["A\0=b"])).is_err());
        assert!(hostname("a\0").is_err());
        assert!(cwd("/a\0").is_err());
    }

    #[test]
    fn env_entries_follow_runcs_rules() {
        assert!(env(&s(&["PATH=/bin", "EMPTY=", "A=b=c"])).is_ok());
        assert!(env(&s(&["NOEQUALS"])).is_err());
        assert!(env(&s(&["=value"])).is_err());
    }

    #[test]
    fn hostnames() {
        assert!(hostname("qrun").is_ok());
        assert!(hostname(&"h".repeat(64)).is_ok());
        assert!(hostname(&"h".repeat(65)).is_err());
        assert!(cwd("relative").is_err());
    }
}
