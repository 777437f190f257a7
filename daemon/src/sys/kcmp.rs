//! kcmp(2) with `KCMP_FILE`: whether two descriptors, of this process or another,
//! refer to the same open file description. `take` uses it to find processes that
//! still hold a VFIO device file rigd lent (a whole-device lease's copy, kept past the
//! lease), which no path or inode can tell apart: every VFIO device fd is
//! `anon_inode:[vfio-device]`.
//!
//! Kernel ABI: kcmp(2), include/uapi/linux/kcmp.h (`KCMP_FILE` = 0). Needs
//! `PTRACE_MODE_READ_REALCREDS` over both processes (root has it). Not here: walking
//! /proc (`take::lease`).

use std::{
    io,
    os::fd::{AsRawFd, BorrowedFd},
};

/// `KCMP_FILE` (include/uapi/linux/kcmp.h).
const KCMP_FILE: libc::c_long = 0;

/// Whether descriptor `their_fd` of process `pid` is the same open file as `ours` in
/// this process.
///
/// # Errors
/// `ESRCH` (no such process), `EBADF` (no such descriptor there: it was closed in
/// between), `EPERM` (no ptrace access).
pub fn same_file(ours: BorrowedFd<'_>, pid: i32, their_fd: i32) -> io::Result<bool> {
    let me = libc::c_long::from(std::process::id().cast_signed());
    // SAFETY: kcmp takes plain integers (two pids, a type, two descriptor numbers) and
    // touches no memory of ours; `ours` is open for the call. The result is checked:
    // 0 means the same file, 1 to 3 different ones, -1 an error.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            me,
            libc::c_long::from(pid),
            KCMP_FILE,
            libc::c_long::from(ours.as_raw_fd()),
            libc::c_long::from(their_fd),
        )
    };
    match r {
        0 => Ok(true),
        // 1 and 2 order two different files; 3 says different without an order.
        1..=3 => Ok(false),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn a_dup_is_the_same_file_and_a_second_open_is_not() {
        let f = tempfile::tempfile().expect("file");
        let dup = f.try_clone().expect("dup");
        let other = tempfile::tempfile().expect("other");
        let pid = std::process::id().cast_signed();

        assert!(same_file(f.as_fd(), pid, dup.as_raw_fd()).expect("kcmp"));
        assert!(!same_file(f.as_fd(), pid, other.as_raw_fd()).expect("kcmp"));
        let e = same_file(f.as_fd(), pid, 1 << 20).expect_err("no such fd");
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
    }
}
