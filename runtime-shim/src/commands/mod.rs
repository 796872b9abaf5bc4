//! One module per `qrun` command.

pub mod do_cmd;
mod size;
