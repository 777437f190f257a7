//! The calling thread's capabilities: capget(2)/capset(2) with
//! `_LINUX_CAPABILITY_VERSION_3` (`include/uapi/linux/capability.h`), for one use:
//! making the NVIDIA RM see rigd as an ordinary user.
//!
//! Why: the RM decides a channel's privilege when it is allocated, from
//! `capable(CAP_SYS_ADMIN)` of the calling thread at that ioctl (`escape.c`:
//! `secInfo.privLevel = osIsAdministrator() ? RS_PRIV_LEVEL_USER_ROOT :
//! RS_PRIV_LEVEL_USER`; `NV_IS_SUSER()` is `capable(CAP_SYS_ADMIN)`), and the escape
//! layer rewrites a user-space NV01_ROOT_NON_PRIV allocation to NV01_ROOT_CLIENT, so
//! the class alone does not keep a root rigd's channels at USER level
//! (`kernel_channel.c`: `rmclientIsAdmin` → PRIVILEGE_ADMIN; open-gpu-kernel-modules
//! 580.142). Capabilities are per thread in Linux, so dropping CAP_SYS_ADMIN from the
//! effective set around an RM call touches no other thread of rigd, and the permitted
//! set keeps it for the take-over code.
//!
//! The calls are rustix's (`rustix::thread::capabilities`, `set_capabilities`: capget
//! and capset with version 3 for the calling thread), so no `unsafe` is here.

use std::io;

use rustix::thread::{CapabilitySet, CapabilitySets, capabilities, set_capabilities};

/// The calling thread's sets (`None`: this thread, not the process).
fn get() -> io::Result<CapabilitySets> {
    Ok(capabilities(None)?)
}

fn set(sets: CapabilitySets) -> io::Result<()> {
    Ok(set_capabilities(None, sets)?)
}

/// CAP_SYS_ADMIN out of the calling thread's effective set until dropped (a no-op for
/// a thread that does not have it). Keep it on the thread that made it.
#[derive(Debug)]
pub struct WithoutAdmin {
    restore: bool,
    // Not Send: capabilities belong to the thread.
    _thread: std::marker::PhantomData<*const ()>,
}

/// Drops CAP_SYS_ADMIN from this thread's effective set until the guard goes.
///
/// # Errors
/// capget(2)'s or capset(2)'s errno.
pub fn without_admin() -> io::Result<WithoutAdmin> {
    let mut sets = get()?;
    let had = sets.effective.contains(CapabilitySet::SYS_ADMIN);
    if had {
        sets.effective.remove(CapabilitySet::SYS_ADMIN);
        set(sets)?;
    }
    Ok(WithoutAdmin {
        restore: had,
        _thread: std::marker::PhantomData,
    })
}

/// Whether this thread has CAP_SYS_ADMIN in effect now.
///
/// # Errors
/// capget(2)'s errno.
pub fn has_admin() -> io::Result<bool> {
    Ok(get()?.effective.contains(CapabilitySet::SYS_ADMIN))
}

impl Drop for WithoutAdmin {
    fn drop(&mut self) {
        if !self.restore {
            return;
        }
        let restored = get().and_then(|mut sets| {
            sets.effective.insert(CapabilitySet::SYS_ADMIN);
            set(sets)
        });
        if let Err(e) = restored {
            tracing::error!("could not take CAP_SYS_ADMIN back after an RM call: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_drops_the_capability_on_its_thread_only_and_gives_it_back() {
        use std::sync::{Arc, Barrier};
        let before = has_admin().expect("capget");
        // A thread made before the guard (a new thread inherits its maker's set).
        let (taken, checked) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let other = {
            let (taken, checked) = (Arc::clone(&taken), Arc::clone(&checked));
            std::thread::spawn(move || {
                taken.wait();
                let seen = has_admin();
                checked.wait();
                seen
            })
        };
        {
            let _g = without_admin().expect("drop");
            assert!(!has_admin().expect("capget"), "dropped on this thread");
            taken.wait();
            checked.wait();
        }
        let beside = other.join().expect("thread").expect("capget");
        assert_eq!(beside, before, "another thread keeps what it had");
        assert_eq!(has_admin().expect("capget"), before, "given back");
    }
}
