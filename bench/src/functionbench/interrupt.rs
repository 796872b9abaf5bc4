//! Ctrl-C and SIGTERM: a flag the run checks between steps, so that it
//! stops, deletes its containers and exits instead of dying with them
//! still running.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; no Rust invariant depends on the previous
        // disposition.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// An error once interrupted.
pub fn check() -> Result<(), String> {
    if interrupted() {
        Err("interrupted".to_owned())
    } else {
        Ok(())
    }
}
