//! Anonymous files for DMA blocks: memfd_create(2), their size (ftruncate(2),
//! fstat(2)) and file seals (fcntl(2) `F_ADD_SEALS`, `F_GET_SEALS`).
//!
//! Flow: rigd makes a [`Memfd`], sizes it, fills it (`rigd::sys::memfd::allocate`) and
//! [`Memfd::seal`]s it into a [`SealedMemfd`]; a client turns a descriptor it received
//! into one with [`SealedMemfd::check`]. Only a [`SealedMemfd`] can be mapped
//! ([`crate::mman::Mapping`]): its size is fixed for good, so a mapping of it can never
//! reach past the file's end (which would be SIGBUS, not an error).
//!
//! Invariants: a [`SealedMemfd`] carries at least [`block_seals`] and its `len` is the
//! file's size, read once the seals made it final.
//!
//! Everything here goes through nix's safe wrappers: no `unsafe`. Not here: hugetlb
//! allocation and hole punching (fallocate(2)), which only rigd does
//! (`rigd::sys::memfd`).

use std::{
    ffi::CStr,
    io,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
};

use nix::{
    fcntl::{FcntlArg, SealFlag, fcntl},
    sys::{
        memfd::{MFdFlags, memfd_create},
        stat::fstat,
    },
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

/// Why a descriptor is not a [`SealedMemfd`].
#[derive(Debug, thiserror::Error)]
pub enum MemfdError {
    /// `EINVAL`: the file does not support sealing, so it is no memfd.
    #[error("Failed to read the file's seals (F_GET_SEALS)")]
    GetSeals(#[source] io::Error),
    #[error("The file is not sealed against shrinking, growing and new seals (it has {found:?})")]
    Unsealed { found: SealFlag },
    #[error("Failed to read the sealed file's size (fstat)")]
    Stat(#[source] io::Error),
}

/// A memfd just made, not yet sealed: it may still be sized and filled.
#[derive(Debug)]
pub struct Memfd {
    fd: OwnedFd,
}

impl Memfd {
    /// Creates a close-on-exec memfd that allows sealing.
    ///
    /// # Errors
    /// The errno of memfd_create(2), e.g. `EINVAL` when hugetlb is unsupported.
    pub fn create(name: &CStr, backing: Backing) -> io::Result<Self> {
        let mut flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
        if backing == Backing::Huge2M {
            flags |= MFdFlags::MFD_HUGETLB | MFdFlags::MFD_HUGE_2MB;
        }
        Ok(Self {
            fd: memfd_create(name, flags)?,
        })
    }

    /// Sets the file's length (ftruncate(2)).
    ///
    /// # Errors
    /// `EINVAL` for a hugetlb length that is not a multiple of the page size.
    pub fn set_len(&self, len: u64) -> io::Result<()> {
        let len = i64::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(ftruncate(&self.fd, len)?)
    }

    /// A memfd of `len` bytes, sealed: [`Memfd::create`], [`Memfd::set_len`],
    /// [`Memfd::seal`]. Its pages are allocated as they are first touched.
    ///
    /// # Errors
    /// As those three.
    pub fn sealed(name: &CStr, backing: Backing, len: u64) -> io::Result<SealedMemfd> {
        let fd = Self::create(name, backing)?;
        fd.set_len(len)?;
        fd.seal()
    }

    /// Adds [`block_seals`] (fcntl(2) `F_ADD_SEALS`); from here on the size is final.
    ///
    /// # Errors
    /// The errno of fcntl(2) or of the fstat(2) that reads the final size.
    pub fn seal(self) -> io::Result<SealedMemfd> {
        fcntl(&self.fd, FcntlArg::F_ADD_SEALS(block_seals()))?;
        let len = size(&self.fd)?;
        Ok(SealedMemfd { fd: self.fd, len })
    }
}

impl AsFd for Memfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A memfd sealed with at least [`block_seals`]: its size can never change, so it is
/// safe to map in full.
///
/// Made only by [`Memfd::seal`] or [`SealedMemfd::check`].
#[derive(Debug)]
pub struct SealedMemfd {
    fd: OwnedFd,
    len: u64,
}

impl SealedMemfd {
    /// Takes `fd` (e.g. one received from rigd) when it carries [`block_seals`].
    ///
    /// # Errors
    /// [`MemfdError::GetSeals`] for a file that cannot be sealed (no memfd),
    /// [`MemfdError::Unsealed`] for one that lacks a seal, [`MemfdError::Stat`].
    pub fn check(fd: OwnedFd) -> Result<Self, MemfdError> {
        let found = seals(&fd).map_err(MemfdError::GetSeals)?;
        if !found.contains(block_seals()) {
            return Err(MemfdError::Unsealed { found });
        }
        let len = size(&fd).map_err(MemfdError::Stat)?;
        Ok(Self { fd, len })
    }

    /// The file's size in bytes, fixed by its seals.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for a sealed file of size 0 (which cannot be mapped).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A second descriptor of the same file (dup(2)), e.g. to send to a client.
    ///
    /// # Errors
    /// `EMFILE` and dup(2)'s other errors.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self {
            fd: self.fd.try_clone()?,
            len: self.len,
        })
    }

    /// A new, read-only open of the same file (through `/proc/self/fd`): whoever
    /// holds it can map the pages `PROT_READ` only, never write them, e.g. a client
    /// given a view of memory the GPU or rigd writes. The file's mode becomes 0444
    /// first: a `/proc/<pid>/fd` link is reopened by the inode's permissions, not the
    /// descriptor's, so without it the holder could reopen the file read-write. Only
    /// the file's owner (or root) can then write it through a new open; descriptors
    /// already open keep their access.
    ///
    /// # Errors
    /// fchmod(2)'s and open(2)'s (`/proc` not mounted, `EMFILE`).
    pub fn open_read_only(&self) -> io::Result<Self> {
        nix::sys::stat::fchmod(&self.fd, nix::sys::stat::Mode::from_bits_truncate(0o444))?;
        let path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        let f = std::fs::File::open(path)?;
        Ok(Self {
            fd: f.into(),
            len: self.len,
        })
    }
}

impl AsFd for SealedMemfd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl From<SealedMemfd> for OwnedFd {
    fn from(file: SealedMemfd) -> Self {
        file.fd
    }
}

/// The file's seals (fcntl(2) `F_GET_SEALS`).
///
/// # Errors
/// `EINVAL` for a file that does not support sealing.
pub fn seals(fd: impl AsFd) -> io::Result<SealFlag> {
    let bits = fcntl(fd, FcntlArg::F_GET_SEALS)?;
    Ok(SealFlag::from_bits_truncate(bits))
}

/// A sealed shmem memfd of `len` bytes, for this crate's tests.
#[cfg(test)]
pub(crate) fn sealed_for_test(len: u64) -> SealedMemfd {
    Memfd::sealed(c"rig-test", Backing::Shmem, len).expect("sealed memfd")
}

#[cfg(test)]
fn sized_for_test(len: u64) -> Memfd {
    let fd = Memfd::create(c"rig-test", Backing::Shmem).expect("memfd");
    fd.set_len(len).expect("size");
    fd
}

/// The file's size (fstat(2) `st_size`).
fn size(fd: impl AsFd) -> io::Result<u64> {
    let st = fstat(fd)?;
    u64::try_from(st.st_size).map_err(|_| io::ErrorKind::InvalidData.into())
}

#[cfg(test)]
mod tests {
    use super::{sized_for_test as sized, *};

    #[test]
    fn sealed_memfd_refuses_truncate_growth_and_new_seals() {
        let fd = sized(1 << 16).seal().expect("seal");
        assert_eq!(seals(&fd).expect("get seals"), block_seals());
        assert_eq!(fd.len(), 1 << 16);
        let shrink = ftruncate(&fd, 0).expect_err("shrink is sealed");
        assert_eq!(shrink, nix::errno::Errno::EPERM);
        let grow = ftruncate(&fd, 1 << 17).expect_err("growth is sealed");
        assert_eq!(grow, nix::errno::Errno::EPERM);
        let reseal = fcntl(&fd, FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_WRITE))
            .expect_err("seals are sealed");
        assert_eq!(reseal, nix::errno::Errno::EPERM);
    }

    #[test]
    fn a_received_sealed_memfd_is_taken_with_its_size() {
        let sent = sized(8192).seal().expect("seal");
        let got = SealedMemfd::check(sent.try_clone().expect("dup").into()).expect("sealed");
        assert_eq!(got.len(), 8192);
    }

    #[test]
    fn an_unsealed_memfd_is_refused() {
        let fd = sized(4096);
        let e = SealedMemfd::check(fd.fd).expect_err("no seals");
        assert!(
            matches!(e, MemfdError::Unsealed { found } if found.is_empty()),
            "{e:?}"
        );
    }

    #[test]
    fn a_memfd_that_may_still_shrink_or_grow_is_refused() {
        for (kept, missing) in [
            (SealFlag::F_SEAL_GROW, SealFlag::F_SEAL_SHRINK),
            (SealFlag::F_SEAL_SHRINK, SealFlag::F_SEAL_GROW),
        ] {
            let fd = sized(4096);
            fcntl(&fd, FcntlArg::F_ADD_SEALS(kept | SealFlag::F_SEAL_SEAL)).expect("seal");
            let e = SealedMemfd::check(fd.fd).expect_err("one seal missing");
            assert!(
                matches!(e, MemfdError::Unsealed { found } if !found.contains(missing)),
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_descriptor_that_cannot_be_sealed_is_refused() {
        // A pipe, not a temp file: on a tmpfs /tmp a plain file reports F_SEAL_SEAL.
        let (read, _write) = nix::unistd::pipe().expect("pipe");
        let e = SealedMemfd::check(read).expect_err("not sealable");
        assert!(matches!(e, MemfdError::GetSeals(_)), "{e:?}");
    }
}
