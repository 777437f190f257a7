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

use std::io;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const VERSION_3: u32 = 0x2008_0522;
/// `CAP_SYS_ADMIN`.
const CAP_SYS_ADMIN: u32 = 21;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn get() -> io::Result<[Data; 2]> {
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget reads the header and writes two `__user_cap_data_struct`s (the
    // v3 size) into `d`, which is that long and alive for the call; pid 0 is the
    // calling thread; the return value is checked.
    let r = unsafe { libc::syscall(libc::SYS_capget, &raw mut h, d.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(d)
}

fn set(d: &[Data; 2]) -> io::Result<()> {
    let mut h = Header {
        version: VERSION_3,
        pid: 0,
    };
    // SAFETY: capset reads the header and two data structs, both alive and of the v3
    // size; pid 0 is the calling thread only; the return value is checked.
    let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut h, d.as_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
    let mut d = get()?;
    let bit = 1 << CAP_SYS_ADMIN;
    let had = d[0].effective & bit != 0;
    if had {
        d[0].effective &= !bit;
        set(&d)?;
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
    Ok(get()?[0].effective & (1 << CAP_SYS_ADMIN) != 0)
}

impl Drop for WithoutAdmin {
    fn drop(&mut self) {
        if !self.restore {
            return;
        }
        let restored = get().and_then(|mut d| {
            d[0].effective |= 1 << CAP_SYS_ADMIN;
            set(&d)
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
