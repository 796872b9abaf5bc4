//! One module per `qrun` command.

pub mod ctl;
pub mod do_cmd;
mod size;
