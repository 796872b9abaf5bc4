//! The sandbox process as seen from the host: is it alive, is it the same
//! process (pids are reused), and waiting for it to go.

use std::time::{Duration, Instant};

/// The process's start time (field 22 of `/proc/PID/stat`, clock ticks
/// since boot) and its state letter, or `None` if there is no such process.
pub fn stat(pid: i32) -> Option<(u64, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain anything.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); field 22 is index 19.
    let state = fields.first()?.chars().next()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, state))
}

/// Whether `pid` is the live (not zombie) process that started at `start`.
pub fn alive(pid: i32, start: u64) -> bool {
    pid > 0 && matches!(stat(pid), Some((s, state)) if s == start && state != 'Z' && state != 'X')
}

/// Waits until [`alive`] is false, at most `timeout`; whether it went.
pub fn wait_gone(pid: i32, start: u64, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while alive(pid, start) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_is_alive() {
        let pid = i32::try_from(std::process::id()).expect("pid fits");
        let (start, _) = stat(pid).expect("we exist");
        assert!(alive(pid, start));
        assert!(!alive(pid, start + 1));
        assert!(!alive(0, 0));
    }
}
