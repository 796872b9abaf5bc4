//! Dropping privileges: the user and groups of `process.user` (the VMM
//! runs as the container's user, so host files keep their permissions for
//! it, and the guest program sees those ids; /dev/kvm is opened before,
//! see `isolation::prepare`), a capability
//! bounding set and sets reduced to what the VMM uses on the guest's
//! behalf (as far as the config grants it, see `bundle::VMM_CAPS`), and
//! `no_new_privs` (qvisor never executes anything).

use std::str::FromStr;

use caps::{CapSet, Capability, CapsHashSet};
use nix::unistd::{Gid, Uid, setgroups, setresgid, setresuid};

use super::IsolationError;
use crate::plan::Plan;

fn caps_err(what: &'static str) -> impl FnOnce(caps::errors::CapsError) -> IsolationError {
    move |e| IsolationError::Setup(format!("{what}: {e}"))
}

pub fn drop(plan: &Plan) -> Result<(), IsolationError> {
    let keep: CapsHashSet = plan
        .capabilities
        .iter()
        .filter_map(|c| Capability::from_str(c).ok())
        .collect();
    // The bounding set first: dropping from it needs CAP_SETPCAP, which
    // goes with the rest below.
    for cap in caps::all() {
        if !keep.contains(&cap) {
            // A capability this kernel does not know is not in the set.
            let _ = caps::drop(None, CapSet::Bounding, cap);
        }
    }
    let groups: Vec<Gid> = plan
        .additional_gids
        .iter()
        .map(|g| Gid::from_raw(*g))
        .collect();
    setgroups(&groups).map_err(IsolationError::sys("setgroups"))?;
    let gid = Gid::from_raw(plan.gid);
    setresgid(gid, gid, gid).map_err(IsolationError::sys("setresgid"))?;
    let uid = Uid::from_raw(plan.uid);
    setresuid(uid, uid, uid).map_err(IsolationError::sys("setresuid"))?;
    caps::clear(None, CapSet::Ambient).map_err(caps_err("clearing ambient capabilities"))?;
    caps::clear(None, CapSet::Inheritable)
        .map_err(caps_err("clearing inheritable capabilities"))?;
    let permitted =
        caps::read(None, CapSet::Permitted).map_err(caps_err("reading capabilities"))?;
    let kept: CapsHashSet = keep.intersection(&permitted).copied().collect();
    caps::set(None, CapSet::Effective, &kept)
        .map_err(caps_err("setting effective capabilities"))?;
    caps::set(None, CapSet::Permitted, &kept)
        .map_err(caps_err("setting permitted capabilities"))?;
    nix::sys::prctl::set_no_new_privs().map_err(IsolationError::sys("no_new_privs"))
}
