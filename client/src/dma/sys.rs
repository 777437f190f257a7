//! The client's kernel interfaces for DMA memory, and its only `unsafe`: mapping the
//! blocks rigd sends (mmap(2)), owning the descriptors that arrive with them
//! (`SCM_RIGHTS`), and registering the side socket with tokio.
//!
//! A [`Region`] is device-visible memory — the device and rigd may write it at any
//! time — so no `&`/`&mut` into it ever exists here; access is by volatile copies.

use std::{
    io::{self, IoSlice, IoSliceMut},
    num::NonZeroUsize,
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd},
    path::Path,
    ptr::NonNull,
};

use nix::sys::{
    mman::{MapFlags, ProtFlags, mmap, mmap_anonymous, munmap},
    socket::{self, AddressFamily, ControlMessageOwned, MsgFlags, SockFlag, SockType, UnixAddr},
};
use tokio::io::unix::AsyncFd;

/// The most descriptors one packet may carry (`SCM_MAX_FD`).
const MAX_FDS: usize = 253;

/// Connects a non-blocking `SOCK_SEQPACKET` socket to `path` and registers it with
/// tokio.
///
/// # Errors
/// socket(2)/connect(2) failures (`ENOENT`, `EACCES`, `ECONNREFUSED`).
pub fn connect(path: &Path) -> io::Result<AsyncFd<OwnedFd>> {
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    socket::connect(fd.as_raw_fd(), &UnixAddr::new(path)?)?;
    // SAFETY: `fd` is a valid open descriptor owned by the `OwnedFd`, which the
    // `AsyncFd` takes; `OwnedFd::as_raw_fd` returns that same descriptor until the
    // `AsyncFd` drops it.
    Ok(unsafe { AsyncFd::register(fd) }?)
}

/// Sends one packet.
///
/// # Errors
/// `EAGAIN` when the socket buffer is full, `EPIPE` when rigd is gone.
pub fn send(fd: impl AsFd, data: &[u8]) -> io::Result<()> {
    let sent = socket::sendmsg::<()>(
        fd.as_fd().as_raw_fd(),
        &[IoSlice::new(data)],
        &[],
        MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if sent == data.len() {
        Ok(())
    } else {
        Err(io::ErrorKind::WriteZero.into())
    }
}

/// Receives one packet into `buf`: its length (0 at EOF), whether it was cut, and the
/// descriptors it carried, now owned here.
///
/// # Errors
/// `EAGAIN` when none is waiting.
pub fn recv(fd: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, bool, Vec<OwnedFd>)> {
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = socket::recvmsg::<()>(
        fd.as_fd().as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            fds.extend(raw.into_iter().map(|fd| {
                // SAFETY: the kernel has just installed `fd` in this process's table
                // for this SCM_RIGHTS message (close-on-exec); nothing else knows it,
                // so this is its one owner.
                unsafe { OwnedFd::from_raw_fd(fd) }
            }));
        }
    }
    Ok((msg.bytes, msg.flags.contains(MsgFlags::MSG_TRUNC), fds))
}

/// A lease's blocks mapped one after another at one address, aligned to a block.
#[derive(Debug)]
pub struct Region {
    ptr: NonNull<nix::libc::c_void>,
    len: NonZeroUsize,
}

// SAFETY: `Region` owns its address range and only hands out its address as a number;
// its bytes are reached by volatile copies, which are sound from any thread since
// shared memory can change under them anyway.
unsafe impl Send for Region {}
// SAFETY: as for `Send`: nothing gives out a reference into the region.
unsafe impl Sync for Region {}

impl Region {
    /// Maps each of `fds` (`block` bytes each) shared and read-write, in order, at one
    /// `block`-aligned range, with page tables filled in (`MAP_POPULATE`).
    ///
    /// # Errors
    /// mmap(2) failures: `ENOMEM`, `EINVAL` for a file shorter than `block`.
    pub fn map(fds: &[OwnedFd], block: usize) -> io::Result<Self> {
        let total = fds
            .len()
            .checked_mul(block)
            .and_then(NonZeroUsize::new)
            .ok_or(io::ErrorKind::InvalidInput)?;
        let block_nz = NonZeroUsize::new(block).ok_or(io::ErrorKind::InvalidInput)?;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        let shared = MapFlags::MAP_SHARED | MapFlags::MAP_POPULATE;
        if let [fd] = fds {
            // One block: the kernel aligns a hugetlb mapping to its page size itself.
            // SAFETY: a fresh mapping where the kernel chooses (no MAP_FIXED), of a
            // valid descriptor; owned by the returned `Region`, unmapped once on drop.
            let ptr = unsafe { mmap(None, block_nz, rw, shared, fd, 0) }?;
            return Ok(Self { ptr, len: total });
        }
        let start = Self::reserve(total, block)?;
        let region = Self {
            ptr: start,
            len: total,
        };
        for (i, fd) in fds.iter().enumerate() {
            let at = start.as_ptr() as usize + i * block;
            // SAFETY: `at` lies in the range `reserve` just made and `region` owns (a
            // PROT_NONE placeholder nothing else uses), so MAP_FIXED replaces only
            // our own placeholder; `fd` is valid for the call; the result is checked.
            // On error `region` drops and unmaps the whole range.
            unsafe {
                mmap(
                    NonZeroUsize::new(at),
                    block_nz,
                    rw,
                    shared | MapFlags::MAP_FIXED,
                    fd,
                    0,
                )
            }?;
        }
        Ok(region)
    }

    /// Reserves `total` bytes aligned to `align` as an inaccessible placeholder.
    fn reserve(total: NonZeroUsize, align: usize) -> io::Result<NonNull<nix::libc::c_void>> {
        let padded = total
            .checked_add(align)
            .ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: a fresh anonymous PROT_NONE mapping where the kernel chooses; its
        // unused head and tail are unmapped below, the rest is owned by the caller.
        let raw = unsafe {
            mmap_anonymous(
                None,
                padded,
                ProtFlags::PROT_NONE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE,
            )
        }?;
        let base = raw.as_ptr() as usize;
        let start = base.next_multiple_of(align);
        let head = start - base;
        let tail = padded.get() - head - total.get();
        if head > 0 {
            // SAFETY: `[base, start)` is the unused head of the mapping just made.
            unsafe { munmap(raw, head) }?;
        }
        if tail > 0 {
            let end = NonNull::new((start + total.get()) as *mut nix::libc::c_void)
                .ok_or(io::ErrorKind::InvalidInput)?;
            // SAFETY: `[start + total, base + padded)` is the unused tail of it.
            unsafe { munmap(end, tail) }?;
        }
        NonNull::new(start as *mut nix::libc::c_void)
            .ok_or_else(|| io::ErrorKind::InvalidInput.into())
    }

    /// The region's address in this process.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Copies `buf.len()` bytes from `offset`, one volatile read each.
    ///
    /// # Errors
    /// `InvalidInput` when the range is outside the region.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let base = self.at(offset, buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: `at` checked the range is inside the live mapping; u8 has no
            // alignment or validity requirement; volatile tolerates other writers.
            *b = unsafe { base.add(i).read_volatile() };
        }
        Ok(())
    }

    /// Copies `data` to `offset`, one volatile write each.
    ///
    /// # Errors
    /// `InvalidInput` when the range is outside the region.
    pub fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        let base = self.at(offset, data.len())?;
        for (i, b) in data.iter().enumerate() {
            // SAFETY: as in `read`; the mapping is PROT_WRITE.
            unsafe { base.add(i).write_volatile(*b) };
        }
        Ok(())
    }

    fn at(&self, offset: usize, len: usize) -> io::Result<*mut u8> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len.get() => {
                // SAFETY: `offset <= len`, so the pointer stays inside the mapping (or
                // one past its end for an empty copy).
                Ok(unsafe { self.ptr.as_ptr().cast::<u8>().add(offset) })
            }
            _ => Err(io::ErrorKind::InvalidInput.into()),
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: exactly the range this `Region` mapped, unmapped only here; no
        // reference into it exists.
        let _ = unsafe { munmap(self.ptr, self.len.get()) };
    }
}
