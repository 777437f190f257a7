//! What only rigd does to a DMA block's memfd: allocating its pages now and punching
//! them out when the block retires (fallocate(2)).
//!
//! Flow: `dma::block` creates, sizes and seals the memfd with `rig_sys::memfd` (shared
//! with rig-client, which checks the seals of what it receives), fills it with
//! [`allocate`] before sealing and empties it with [`punch_hole`] on retirement.
//!
//! Everything here goes through nix's safe wrappers: no `unsafe`. Not here: memfd
//! creation, size and seals, mappings (`rig_sys::{memfd, mman}`).

use std::{io, os::fd::AsFd};

use nix::fcntl::{FallocateFlags, fallocate};

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
    use rig_sys::memfd::{Backing, Memfd};

    use super::*;

    #[test]
    fn a_sealed_memfd_still_allows_allocating_and_punching_within_its_size() {
        let fd = Memfd::create(c"rig-test", Backing::Shmem).expect("memfd");
        fd.set_len(1 << 16).expect("size");
        let fd = fd.seal().expect("seal");
        allocate(&fd, 1 << 16).expect("allocation keeps the size");
        punch_hole(&fd, 1 << 16).expect("punching keeps the size");
        let past = allocate(&fd, 1 << 17).expect_err("growth is sealed");
        assert_eq!(past.raw_os_error(), Some(libc::EPERM));
    }
}
