//! A guarded scratch mapping for ioctls whose kernel side, not the caller, decides how
//! many bytes it copies: the NVIDIA RM's RM_ALLOC (`sys::nvrm`). The call gets a private copy of its parameters at the start of a fresh
//! anonymous mapping followed by a `PROT_NONE` page, so a kernel struct larger than the
//! caller's reads zeros and writes into the copy, or fails with `EFAULT` at the guard,
//! and never touches memory past the caller's parameters.

use std::{io, num::NonZeroUsize, ptr::NonNull};

use nix::sys::mman::{MapFlags, ProtFlags, mmap_anonymous, mprotect, munmap};

/// A private anonymous mapping holding a copy of a call's parameters, followed by a
/// `PROT_NONE` guard page, unmapped on drop: for calls where the kernel, not the
/// caller, decides how many bytes it copies (RM_ALLOC). Only `sys` reaches its bytes.
pub(crate) struct Scratch {
    ptr: NonNull<libc::c_void>,
    /// Bytes of the caller's parameters at the start.
    len: usize,
    /// The whole mapping, guard page included.
    map_len: usize,
}

impl Scratch {
    /// A mapping whose first `data.len()` bytes are `data` and the rest zeros.
    pub(crate) fn with(data: &[u8]) -> io::Result<Self> {
        let page = page_size()?;
        let body = data.len().div_ceil(page).max(1) * page;
        let map_len = body + page;
        let nz = NonZeroUsize::new(map_len).ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: a fresh private anonymous mapping at an address the kernel picks (no
        // MAP_FIXED), so no existing memory is replaced; the result is checked and owned
        // by the returned `Scratch`, which unmaps it exactly once.
        let ptr = unsafe {
            mmap_anonymous(
                None,
                nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
        }
        .map_err(io::Error::from)?;
        let s = Self {
            ptr,
            len: data.len(),
            map_len,
        };
        // SAFETY: the last page lies inside the mapping just made, which nothing else
        // uses; making it inaccessible affects only this mapping.
        unsafe { mprotect(s.ptr.byte_add(body), page, ProtFlags::PROT_NONE) }
            .map_err(io::Error::from)?;
        // SAFETY: the first `body >= data.len()` bytes are mapped read-write, zeroed,
        // and owned by `s`; no other reference into them exists.
        let dst = unsafe { std::slice::from_raw_parts_mut(s.ptr.as_ptr().cast::<u8>(), s.len) };
        dst.copy_from_slice(data);
        Ok(s)
    }

    /// The user address of the copy, as the kernel is given it.
    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// The first `data.len()` bytes, as the kernel left them.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the first `len` bytes are mapped readable for the life of `self`, and
        // only written through the kernel during an ioctl that `&self` outlives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<u8>(), self.len) }
    }
}

/// The system's page size (sysconf(_SC_PAGESIZE)).
fn page_size() -> io::Result<usize> {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .map_err(io::Error::from)?
        .and_then(|p| usize::try_from(p).ok())
        .ok_or_else(|| io::Error::other("sysconf(_SC_PAGESIZE) has no answer"))
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned, unmapped only here; nothing refers
        // into it once `self` is dropped.
        let _ = unsafe { munmap(self.ptr, self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_copies_the_parameters_and_reads_zero_past_them() {
        let s = Scratch::with(&[1, 2, 3]).expect("mmap");
        assert_eq!(s.bytes(), [1, 2, 3]);
        // SAFETY: the test reads within the first, read-write page of the mapping.
        let tail = unsafe {
            std::slice::from_raw_parts(s.ptr.as_ptr().cast::<u8>(), page_size().expect("page size"))
        };
        assert!(tail[3..].iter().all(|&b| b == 0));
    }
}
