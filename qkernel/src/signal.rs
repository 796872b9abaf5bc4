//! Signals sent to the program from outside (the VMM forwards `kill`).
//!
//! Handlers are recorded by `rt_sigaction` but not yet run, so a signal
//! whose disposition is not "ignore" takes its default action; for a handled
//! signal that is an approximation, and it is logged. The ignore set is kept
//! in an atomic so the check needs no process lock (control requests are
//! served from inside host calls, which may run under it).

use core::sync::atomic::{AtomicU64, Ordering};

use crate::hostcall;

/// Bit `n - 1` set: signal `n` is `SIG_IGN`.
static IGNORED: AtomicU64 = AtomicU64::new(0);
/// Bit `n - 1` set: a handler is installed for signal `n`.
static HANDLED: AtomicU64 = AtomicU64::new(0);

/// Signals whose default action is to do nothing: SIGCHLD, SIGCONT,
/// SIGURG, SIGWINCH.
const DEFAULT_IGNORE: u64 = bit(17) | bit(18) | bit(23) | bit(28);

const fn bit(sig: u64) -> u64 {
    1 << (sig - 1)
}

/// Records the disposition `handler` (`SIG_DFL` 0, `SIG_IGN` 1, or an
/// address) of signal `sig` (1..=64).
pub fn set_disposition(sig: u64, handler: u64) {
    let b = bit(sig);
    let (ign, hnd) = match handler {
        0 => (false, false),
        1 => (true, false),
        _ => (false, true),
    };
    for (set, on) in [(&IGNORED, ign), (&HANDLED, hnd)] {
        if on {
            set.fetch_or(b, Ordering::Relaxed);
        } else {
            set.fetch_and(!b, Ordering::Relaxed);
        }
    }
}

/// Acts on the signals in `mask` (bit `n - 1` = signal `n`): the program
/// ends with status 128 + the first one that is not ignored.
pub fn deliver_from_host(mask: u64) {
    let ignored = IGNORED.load(Ordering::Relaxed) | DEFAULT_IGNORE;
    let live = mask & !ignored;
    if live == 0 {
        return;
    }
    let sig = live.trailing_zeros() + 1;
    if HANDLED.load(Ordering::Relaxed) & bit(u64::from(sig)) != 0 {
        log::warn!("signal {sig}: handlers do not run yet; taking the default action");
    }
    log::info!("program killed by signal {sig} sent from the host");
    hostcall::exit(128 + sig as i32)
}

/// `SIGPIPE` for a write to a pipe or socket whose reader is gone: the
/// program ends (status 141) unless it ignores or handles the signal, in
/// which case the write just fails with `EPIPE`.
pub fn raise_sigpipe() {
    const SIGPIPE: u64 = 13;
    let b = bit(SIGPIPE);
    if (IGNORED.load(Ordering::Relaxed) | HANDLED.load(Ordering::Relaxed)) & b == 0 {
        log::debug!("program killed by SIGPIPE");
        hostcall::exit(128 + SIGPIPE as i32);
    }
}
