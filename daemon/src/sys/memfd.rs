//! Anonymous files for DMA blocks: memfd_create(2), their size, file seals
//! (fcntl(2) `F_ADD_SEALS`, `F_GET_SEALS`), allocation and hole punching (fallocate(2)).
//!
//! Everything here goes through nix's safe wrappers; the file is the kernel interface's
//! one home, as `sys/` keeps one file per interface.

use std::{
    ffi::CStr,
    io,
    os::fd::{AsFd, OwnedFd},
};

use nix::{
    fcntl::{FallocateFlags, FcntlArg, SealFlag, fallocate, fcntl},
    sys::memfd::{MFdFlags, memfd_create},
    unistd::ftruncate,
};

/// What a memfd is backed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// 2 MiB hugetlbfs pages (`MFD_HUGETLB | MFD_HUGE_2MB`).
    Huge2M,
    /// Ordinary shmem pages; for tests that must not touch the host's hugepages.
    Shmem,
}

/// The seals every shared block carries: no one may shrink or grow it, or change the
/// seals. Writes and hole punching stay allowed.
pub fn block_seals() -> SealFlag {
    SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL
}

/// Creates a close-on-exec memfd that allows sealing.
///
/// # Errors
/// The errno of memfd_create(2), e.g. `EINVAL` when hugetlb is unsupported.
pub fn create(name: &CStr, backing: Backing) -> io::Result<OwnedFd> {
    let mut flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
    if backing == Backing::Huge2M {
        flags |= MFdFlags::MFD_HUGETLB | MFdFlags::MFD_HUGE_2MB;
    }
    Ok(memfd_create(name, flags)?)
}

/// Sets the file's length (ftruncate(2)).
///
/// # Errors
/// `EINVAL` for a hugetlb length that is not a multiple of the page size; `EPERM` on
/// a file sealed against the change.
pub fn set_len(fd: impl AsFd, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    Ok(ftruncate(fd, len)?)
}

/// Allocates (and so clears) every page of `[0, len)` now (fallocate(2), mode 0).
///
/// Unlike faulting the pages in through a mapping (`MAP_POPULATE`), this never takes the
/// process's mmap lock: threads that allocate different files clear in parallel, where
/// populating mappings would queue behind each other's mmap and mlock.
///
/// # Errors
/// `ENOSPC` (hugetlbfs: no free hugepages) or `ENOMEM`.
pub fn allocate(fd: impl AsFd, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    fallocate(fd, FallocateFlags::empty(), 0, len)?;
    Ok(())
}

/// Adds `seals` (fcntl(2) `F_ADD_SEALS`).
///
/// # Errors
/// `EPERM` once `F_SEAL_SEAL` is set.
pub fn add_seals(fd: impl AsFd, seals: SealFlag) -> io::Result<()> {
    fcntl(fd, FcntlArg::F_ADD_SEALS(seals))?;
    Ok(())
}

/// The file's seals (fcntl(2) `F_GET_SEALS`).
///
/// # Errors
/// `EINVAL` for a file that does not support sealing.
pub fn seals(fd: impl AsFd) -> io::Result<SealFlag> {
    let bits = fcntl(fd, FcntlArg::F_GET_SEALS)?;
    Ok(SealFlag::from_bits_truncate(bits))
}

/// Frees the pages of `[0, len)` while keeping the size (`FALLOC_FL_PUNCH_HOLE |
/// FALLOC_FL_KEEP_SIZE`). The kernel first unmaps them from every process that maps
/// the file, so nobody can reach them through this file again.
///
/// # Errors
/// `EPERM` on a write-sealed file.
pub fn punch_hole(fd: impl AsFd, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    fallocate(
        fd,
        FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE,
        0,
        len,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_memfd_refuses_truncate_and_growth_but_not_punching() {
        let fd = create(c"rig-test", Backing::Shmem).expect("memfd");
        set_len(&fd, 1 << 16).expect("size");
        add_seals(&fd, block_seals()).expect("seal");
        assert_eq!(seals(&fd).expect("get seals"), block_seals());
        let shrink = set_len(&fd, 0).expect_err("shrink is sealed");
        assert_eq!(shrink.raw_os_error(), Some(libc::EPERM));
        let grow = set_len(&fd, 1 << 17).expect_err("growth is sealed");
        assert_eq!(grow.raw_os_error(), Some(libc::EPERM));
        let reseal = add_seals(&fd, SealFlag::F_SEAL_WRITE).expect_err("seals are sealed");
        assert_eq!(reseal.raw_os_error(), Some(libc::EPERM));
        punch_hole(&fd, 1 << 16).expect("punching keeps the size");
    }
}
