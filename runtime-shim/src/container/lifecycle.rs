//! The container lifecycle: its states and, in one table, which operation
//! is legal in which state.
//!
//! ```text
//!   create ──> Created ──start──> Running ──(program exits, kill)──> Stopped ──delete──> (gone)
//!                 │                  │  ↑                               ↑
//!                 │                pause resume                         │
//!                 │                  ↓  │                               │
//!                 │                 Paused ──────kill -9 / delete -f────┘
//!                 └──── kill / delete (the program never ran) ──────────┘
//! ```
//! Hibernation (`kill SIGSTOP` / `SIGCONT`) happens inside `Running`; it is
//! reported as the `qrun.hibernation` annotation, not as an OCI status.

use serde::Serialize;
use thiserror::Error;

/// The OCI status of a container, as `state` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Created,
    Running,
    Paused,
    Stopped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An operation on an existing container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Start,
    Kill,
    /// Hibernate or wake (`kill SIGSTOP` / `SIGCONT`).
    Hibernation,
    Delete,
    ForceDelete,
    Pause,
    Resume,
}

impl Op {
    fn verb(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Kill => "signal",
            Self::Hibernation => "hibernate or wake",
            Self::Delete | Self::ForceDelete => "delete",
            Self::Pause => "pause",
            Self::Resume => "resume",
        }
    }
}

/// An operation refused in the container's current state.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("cannot {verb} container {id}: it is {status}{hint}")]
pub struct IllegalMove {
    pub id: String,
    pub verb: &'static str,
    pub status: Status,
    pub hint: &'static str,
}

/// Whether `op` is legal in `status`: the one place that says so.
pub fn allowed(op: Op, status: Status) -> bool {
    use Status::*;
    match op {
        Op::Start => status == Created,
        Op::Kill => matches!(status, Created | Running | Paused),
        Op::Hibernation => status == Running,
        Op::Delete => matches!(status, Created | Stopped),
        Op::ForceDelete => true,
        Op::Pause => status == Running,
        Op::Resume => status == Paused,
    }
}

/// [`allowed`], as a `Result` with a message naming the container.
pub fn check(id: &str, op: Op, status: Status) -> Result<(), IllegalMove> {
    if allowed(op, status) {
        return Ok(());
    }
    use Status::*;
    let hint = match (op, status) {
        (Op::Delete, Running | Paused) => " (use delete --force)",
        (Op::Start, Running | Paused) => " (already started)",
        _ => "",
    };
    Err(IllegalMove {
        id: id.to_owned(),
        verb: op.verb(),
        status,
        hint,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        use Status::*;
        assert!(allowed(Op::Start, Created));
        for s in [Running, Paused, Stopped] {
            assert!(!allowed(Op::Start, s));
        }
        assert!(!allowed(Op::Delete, Running));
        assert!(allowed(Op::ForceDelete, Running));
        assert!(allowed(Op::Delete, Stopped));
        assert!(!allowed(Op::Kill, Stopped));
        assert!(!allowed(Op::Hibernation, Created));
        assert!(allowed(Op::Pause, Running) && allowed(Op::Resume, Paused));
        assert!(!allowed(Op::Resume, Running));
    }

    #[test]
    fn messages_name_the_container() {
        let e = check("c1", Op::Delete, Status::Running).expect_err("illegal");
        assert_eq!(
            e.to_string(),
            "cannot delete container c1: it is running (use delete --force)"
        );
    }
}
