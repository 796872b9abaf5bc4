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
//!
//! What runc 1.1 does is the reference, cell by cell (the integration test
//! `lifecycle_table` drives both on the same bundles): `kill` of a stopped
//! container fails with "container not running" while `kill --all`
//! succeeds (containerd's exit handler relies on both), `delete` refuses a
//! running or paused container, `delete --force` of a missing one
//! succeeds, and `start` names why it cannot start. A container still
//! being created (its `state.json` not written yet) does not exist for any
//! command, as under runc.

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
    /// `kill --all`: as `Kill`, and a no-op on a stopped container.
    KillAll,
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
            Self::Kill | Self::KillAll => "signal",
            Self::Hibernation => "hibernate or wake",
            Self::Delete | Self::ForceDelete => "delete",
            Self::Pause => "pause",
            Self::Resume => "resume",
        }
    }
}

/// An operation refused in the container's current state; the message
/// carries runc's words for the same refusal.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{message}")]
pub struct IllegalMove {
    pub id: String,
    pub op: Op,
    pub status: Status,
    pub message: String,
}

/// Whether `op` is legal in `status`: the one place that says so.
pub fn allowed(op: Op, status: Status) -> bool {
    use Status::*;
    match op {
        Op::Start => status == Created,
        Op::Kill => matches!(status, Created | Running | Paused),
        Op::KillAll => true,
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
    let message = match (op, status) {
        (Op::Kill, Stopped) => format!("container not running: {id} is stopped"),
        (Op::Delete, Running | Paused) => {
            format!(
                "cannot delete container {id} that is not stopped: {status} (use delete --force)"
            )
        }
        (Op::Start, Running) => format!("cannot start an already running container {id}"),
        (Op::Start, Stopped) => format!("cannot start a container that has stopped ({id})"),
        (Op::Start, Paused) => {
            format!("cannot start a container in the paused state ({id})")
        }
        (Op::Pause, Created | Stopped) => format!("container not running: {id} is {status}"),
        (Op::Resume, _) => format!("container not paused: {id} is {status}"),
        _ => format!("cannot {} container {id}: it is {status}", op.verb()),
    };
    Err(IllegalMove {
        id: id.to_owned(),
        op,
        status,
        message,
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
        assert!(allowed(Op::KillAll, Stopped));
        assert!(!allowed(Op::Hibernation, Created));
        assert!(allowed(Op::Pause, Running) && allowed(Op::Resume, Paused));
        assert!(!allowed(Op::Resume, Running));
    }

    #[test]
    fn messages_name_the_container() {
        let e = check("c1", Op::Delete, Status::Running).expect_err("illegal");
        assert_eq!(
            e.to_string(),
            "cannot delete container c1 that is not stopped: running (use delete --force)"
        );
        let e = check("c1", Op::Kill, Status::Stopped).expect_err("illegal");
        assert!(e.to_string().starts_with("container not running"), "{e}");
    }
}
