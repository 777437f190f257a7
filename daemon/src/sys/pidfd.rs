//! pidfd_open(2): a descriptor for a process that becomes readable when it exits.
//! `service::dma` waits on one for a session's opener, so that a client killed between
//! `OpenSession` and its claim on the side socket has its session dropped at once
//! rather than after the claim timeout (the clients-killed campaign found those);
//! `rig` waits on the holders of a device that outlived an earlier rigd. And
//! pidfd_getfd(2): a copy of another process's descriptor, which `take`'s holder scan
//! reads a VFIO device file through to tell which device it is.
//!
//! Kernel ABI: pidfd_open(2) (Linux 5.3; `flags` 0), poll(2) on a pidfd reports
//! `POLLIN` once the process has terminated (its zombie counts as terminated);
//! pidfd_getfd(2) (Linux 5.6; `flags` 0; PTRACE_MODE_ATTACH_REALCREDS over the
//! process: root with CAP_SYS_PTRACE). Not here: the waiting (tokio's `AsyncFd`,
//! registered by `rig_sys::scm::register`, in the service; poll(2) in `rig`).
//!
//! The calls are rustix's (`rustix::process::pidfd_open`, `pidfd_getfd`), which return
//! owned descriptors: no `unsafe` is here.

use std::{
    io,
    os::fd::{BorrowedFd, OwnedFd},
};

use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};

/// A pidfd for process `pid`, close-on-exec (pidfds always are).
///
/// # Errors
/// `ESRCH` (no such process: it is gone already), `EINVAL` (not a process id: 0 or
/// less), `ENOSYS` (a kernel before 5.3), `EMFILE`.
pub fn open(pid: i32) -> io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(pidfd_open(pid, PidfdFlags::empty())?)
}

/// A copy, close-on-exec, of descriptor `fd` of the process `pidfd` refers to.
///
/// # Errors
/// `EBADF` (no such descriptor there), `ESRCH` (the process exited), `EPERM` (no
/// ptrace access, or a seccomp filter), `ENOSYS` (a kernel before 5.6).
pub fn get_fd(pidfd: BorrowedFd<'_>, fd: i32) -> io::Result<OwnedFd> {
    Ok(pidfd_getfd(pidfd, fd, PidfdGetfdFlags::empty())?)
}

#[cfg(test)]
mod tests {
    use std::{
        os::fd::{AsFd, AsRawFd},
        time::Duration,
    };

    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

    use super::*;

    fn readable(fd: &OwnedFd, ms: u16) -> bool {
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(ms)).expect("poll") == 1
    }

    #[test]
    fn a_pidfd_becomes_readable_when_its_process_exits_and_not_before() {
        let mut child = std::process::Command::new("sleep")
            .arg("0.3")
            .spawn()
            .expect("sleep");
        let fd = open(i32::try_from(child.id()).expect("pid")).expect("pidfd");
        assert!(!readable(&fd, 50), "still running");
        std::thread::sleep(Duration::from_millis(400));
        assert!(readable(&fd, 1000), "exited");
        child.wait().expect("reap");
    }

    #[test]
    fn get_fd_copies_a_childs_descriptor_of_the_same_file() {
        let f = tempfile::tempfile().expect("file");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(f.try_clone().expect("dup"))
            .spawn()
            .expect("sleep");
        let pidfd = open(i32::try_from(child.id()).expect("pid")).expect("pidfd");

        let copy = get_fd(pidfd.as_fd(), 0);
        let none = get_fd(pidfd.as_fd(), 1 << 20);
        child.kill().expect("kill");
        child.wait().expect("reap");

        let copy = copy.expect("pidfd_getfd");
        let pid = std::process::id().cast_signed();
        assert!(
            super::super::kcmp::same_file(f.as_fd(), pid, copy.as_raw_fd()).expect("kcmp"),
            "the copy is the child's stdin, which is our file"
        );
        assert_eq!(none.expect_err("no fd").raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn no_such_process_is_esrch() {
        // Above the kernel's PID_MAX_LIMIT (4 Mi), so never a live process.
        let e = open(1 << 23).expect_err("no process");
        assert_eq!(e.raw_os_error(), Some(libc::ESRCH));
    }
}
