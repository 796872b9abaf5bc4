//! The sandbox's UTS names (`uname`'s nodename and domainname, and
//! `/proc/sys/kernel/hostname`): the container's hostname from the boot
//! information until a program with `CAP_SYS_ADMIN` changes it with
//! `sethostname`, and "(none)" until `setdomainname`. The sandbox is
//! its own UTS namespace, so a change is seen by every process in it
//! and by nothing outside.

use alloc::vec::Vec;

use spin::Mutex;

/// Linux's `__NEW_UTS_LEN`: the longest name.
pub const MAX_LEN: usize = 64;

/// Names set since boot (`None`: the initial one).
static HOST: Mutex<Option<Vec<u8>>> = Mutex::new(None);
static DOMAIN: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// The hostname (at most [`MAX_LEN`] bytes).
pub fn hostname() -> Vec<u8> {
    HOST.lock().clone().unwrap_or_else(|| {
        let h = crate::boot_slice(crate::boot_info().hostname);
        h[..h.len().min(MAX_LEN)].to_vec()
    })
}

/// The NIS domain name.
pub fn domainname() -> Vec<u8> {
    DOMAIN.lock().clone().unwrap_or_else(|| b"(none)".to_vec())
}

/// `sethostname`'s effect (`name` checked by the caller).
pub fn set_hostname(name: &[u8]) {
    *HOST.lock() = Some(name.to_vec());
}

/// `setdomainname`'s effect.
pub fn set_domainname(name: &[u8]) {
    *DOMAIN.lock() = Some(name.to_vec());
}
