//! What the probe binaries (`src/bin/rig-*-probe.rs`) share: a root start that becomes
//! the unprivileged client it is meant to test.

use std::error::Error;

/// With `RIG_PROBE_UID=N` set, drops to uid N and gid `RIG_PROBE_GID` (default N) with
/// no supplementary groups, before the probe connects to rigd; without it, nothing.
///
/// # Errors
/// A value that is not a number, or a refused setgroups/setgid/setuid (not root).
pub fn drop_privileges() -> Result<(), Box<dyn Error>> {
    let Ok(uid) = std::env::var("RIG_PROBE_UID") else {
        return Ok(());
    };
    let id: u32 = uid.parse()?;
    let gid: u32 = match std::env::var("RIG_PROBE_GID") {
        Ok(g) => g.parse()?,
        Err(_) => id,
    };
    nix::unistd::setgroups(&[])?;
    nix::unistd::setgid(nix::unistd::Gid::from_raw(gid))?;
    nix::unistd::setuid(nix::unistd::Uid::from_raw(id))?;
    Ok(())
}
