//! Memory mappings of DMA blocks: mmap(2) (locked with `MAP_LOCKED`), munmap(2).
//!
//! A [`Mapping`] is device-visible memory: a device, a client process and rigd may all
//! write it at any time, so no `&`/`&mut` into it ever exists; access goes through the
//! volatile [`Mapping::read`] and [`Mapping::write`].

use std::{io, num::NonZeroUsize, os::fd::AsFd, ptr::NonNull};

use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};

/// How a new mapping's pages are faulted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// On first access.
    Lazy,
    /// Now (`MAP_POPULATE`); for pages not yet in the file, this allocates and clears them.
    Populate,
    /// Now, and locked in memory (`MAP_POPULATE | MAP_LOCKED`): one call, one take of
    /// the process's mmap lock for writing, where mmap(2) then mlock(2) take it twice.
    Locked,
}

/// A shared read-write mapping of a whole file, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<libc::c_void>,
    len: NonZeroUsize,
}

// SAFETY: `Mapping` owns its address range (nothing else unmaps it) and only hands out
// its address as a number; the bytes are reached through volatile reads and writes,
// which are sound from any thread because shared memory can change under them anyway.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: no method gives out a reference into the mapping.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared and read-write, its pages faulted in as `fill`
    /// says.
    ///
    /// # Errors
    /// The errno of mmap(2): `ENOMEM` when hugetlb pages run out, `EINVAL` for a
    /// length the file's page size does not divide, `EAGAIN` for [`Fill::Locked`]
    /// past `RLIMIT_MEMLOCK` without `CAP_IPC_LOCK`.
    pub fn shared(fd: impl AsFd, len: usize, fill: Fill) -> io::Result<Self> {
        let len = NonZeroUsize::new(len).ok_or(io::ErrorKind::InvalidInput)?;
        let flags = MapFlags::MAP_SHARED
            | match fill {
                Fill::Lazy => MapFlags::empty(),
                Fill::Populate => MapFlags::MAP_POPULATE,
                Fill::Locked => MapFlags::MAP_POPULATE | MapFlags::MAP_LOCKED,
            };
        // SAFETY: a fresh mapping at an address the kernel picks (no MAP_FIXED), so no
        // existing memory is replaced; `fd` is a valid open file for the call; the
        // result is checked by nix and owned by the returned `Mapping`, which unmaps it
        // exactly once.
        let ptr = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                flags,
                fd,
                0,
            )
        }?;
        Ok(Self { ptr, len })
    }

    /// The mapping's start in this process.
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len.get()
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Copies `buf.len()` bytes from `offset` into `buf`, one volatile read each.
    ///
    /// # Errors
    /// `InvalidInput` when the range is outside the mapping.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let base = self.at(offset, buf.len())?;
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: `at` checked that `offset + buf.len()` lies inside the mapping,
            // which stays mapped while `self` lives; u8 has no alignment or validity
            // requirement, and a volatile read tolerates concurrent writers.
            *b = unsafe { base.add(i).read_volatile() };
        }
        Ok(())
    }

    /// Copies `data` to `offset`, one volatile write per byte.
    ///
    /// # Errors
    /// `InvalidInput` when the range is outside the mapping.
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
                // SAFETY: `offset <= len` of the mapping, so the result stays inside it
                // (or one past its end when `len` is 0).
                Ok(unsafe { self.ptr.as_ptr().cast::<u8>().add(offset) })
            }
            _ => Err(io::ErrorKind::InvalidInput.into()),
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly the range mmap returned, unmapped only here,
        // and no reference into it exists (see the module's rule).
        let unmapped = unsafe { munmap(self.ptr, self.len.get()) };
        if let Err(e) = unmapped {
            tracing::warn!("munmap of a DMA block failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::memfd::{self, Backing};

    #[test]
    fn two_mappings_of_one_file_see_each_others_writes() {
        let fd = memfd::create(c"rig-test", Backing::Shmem).expect("memfd");
        memfd::set_len(&fd, 8192).expect("size");
        let a = Mapping::shared(&fd, 8192, Fill::Populate).expect("map a");
        let b = Mapping::shared(&fd, 8192, Fill::Lazy).expect("map b");
        a.write(4000, b"hello").expect("write");
        let mut got = [0u8; 5];
        b.read(4000, &mut got).expect("read");
        assert_eq!(&got, b"hello");
    }

    #[test]
    fn access_past_the_end_is_refused() {
        let fd = memfd::create(c"rig-test", Backing::Shmem).expect("memfd");
        memfd::set_len(&fd, 4096).expect("size");
        let m = Mapping::shared(&fd, 4096, Fill::Lazy).expect("map");
        let past = m.write(4095, b"xy").expect_err("one byte past the end");
        assert_eq!(past.kind(), io::ErrorKind::InvalidInput);
        let wrap = m
            .read(usize::MAX, &mut [0u8; 2])
            .expect_err("offset overflows");
        assert_eq!(wrap.kind(), io::ErrorKind::InvalidInput);
        m.write(4094, b"xy").expect("last two bytes");
    }
}
