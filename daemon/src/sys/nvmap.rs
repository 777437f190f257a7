//! The two mappings of rigd's RM path that are not memfds: a `/dev/nvidiaN` file's
//! mapping after NV_ESC_RM_MAP_MEMORY (the usermode page, whose doorbell is written
//! here), and the reservation of the GPU VA window in rigd's own address space.
//!
//! Kernel ABI: `kernel-open/nvidia/nv-mmap.c` (`nvidia_mmap`: offset 0, the size the
//! RM mapped, the context stored in the file by NV_ESC_RM_MAP_MEMORY); mmap(2)
//! `MAP_FIXED_NOREPLACE`. Not here: the escapes (`sys::nvrm`), memfd mappings
//! (`rig_sys::mman`).

use std::{io, num::NonZeroUsize, os::fd::BorrowedFd, ptr::NonNull};

use nix::sys::mman::{MapFlags, ProtFlags, mmap, mmap_anonymous, munmap};

/// A shared mapping of a `/dev/nvidiaN` file, e.g. HOPPER_USERMODE_A's page (BAR0
/// MMIO), unmapped on drop. Only its doorbell word is ever written.
#[derive(Debug)]
pub struct DeviceMapping {
    ptr: NonNull<libc::c_void>,
    len: NonZeroUsize,
}

// SAFETY: the mapping is owned (unmapped only in drop) and reached only through
// volatile word accesses, which are sound from any thread.
unsafe impl Send for DeviceMapping {}
// SAFETY: as for `Send`: no reference into the mapping is handed out.
unsafe impl Sync for DeviceMapping {}

impl DeviceMapping {
    /// Maps `len` bytes of `dev` at offset 0, read-write and shared, where the kernel
    /// chooses. `dev` must hold an RM mmap context of exactly `len` bytes.
    ///
    /// # Errors
    /// The errno of mmap(2): `EINVAL` for a file without a context or another size.
    pub fn map(dev: BorrowedFd<'_>, len: NonZeroUsize) -> io::Result<Self> {
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: a fresh mapping where the kernel picks (no MAP_FIXED), so nothing is
        // replaced; `dev` is open for the call; `nvidia_mmap` maps the RM's context or
        // refuses; the result is checked and owned by the returned value.
        let ptr = unsafe { mmap(None, len, rw, MapFlags::MAP_SHARED, dev, 0) }?;
        Ok(Self { ptr, len })
    }

    /// Writes `value` to the aligned u32 at `offset` in one volatile store.
    ///
    /// # Errors
    /// `InvalidInput` for an offset outside the mapping or not 4-byte aligned.
    pub fn write_u32(&self, offset: usize, value: u32) -> io::Result<()> {
        if !offset.is_multiple_of(4) || offset.checked_add(4).is_none_or(|e| e > self.len.get()) {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: the 4 bytes at `offset` lie inside the mapping (checked), which lives
        // as long as `self`; the address is 4-byte aligned (a page plus an aligned
        // offset); a volatile store is what MMIO needs.
        unsafe {
            self.ptr
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<u32>()
                .write_volatile(value);
        }
        Ok(())
    }

    /// The mapping's length.
    pub fn len(&self) -> usize {
        self.len.get()
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Drop for DeviceMapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned, unmapped only here; no reference
        // into it exists.
        if let Err(e) = unsafe { munmap(self.ptr, self.len.get()) } {
            tracing::warn!("munmap of an RM device mapping failed: {e}");
        }
    }
}

/// An inaccessible placeholder over `[base, base + len)` of this process's address
/// space (anonymous, `PROT_NONE`, `MAP_NORESERVE`), so that nothing else of rigd is
/// ever mapped at the addresses its GPU VA space uses. Unmapped on drop.
#[derive(Debug)]
pub struct VaReservation {
    ptr: NonNull<libc::c_void>,
    len: NonZeroUsize,
}

// SAFETY: the placeholder is owned and never accessed.
unsafe impl Send for VaReservation {}
// SAFETY: as for `Send`.
unsafe impl Sync for VaReservation {}

impl VaReservation {
    /// Reserves exactly `[base, base + len)`.
    ///
    /// # Errors
    /// `EEXIST` when anything is mapped there already (`MAP_FIXED_NOREPLACE`), the
    /// other errnos of mmap(2), `InvalidInput` for a null base.
    pub fn at(base: u64, len: NonZeroUsize) -> io::Result<Self> {
        let addr = usize::try_from(base)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping (the kernel
        // fails with EEXIST instead), so only free address space is taken; the result
        // is checked and owned by the returned value.
        let ptr = unsafe {
            mmap_anonymous(
                Some(addr),
                len,
                ProtFlags::PROT_NONE,
                MapFlags::MAP_PRIVATE | MapFlags::MAP_NORESERVE | MapFlags::MAP_FIXED_NOREPLACE,
            )
        }?;
        let r = Self { ptr, len };
        // Kernels before 4.17 ignore the flag and treat the address as a hint.
        if r.ptr.as_ptr() as usize != addr.get() {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        Ok(r)
    }
}

impl Drop for VaReservation {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned, unmapped only here; never accessed.
        if let Err(e) = unsafe { munmap(self.ptr, self.len.get()) } {
            tracing::warn!("munmap of the GPU VA reservation failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reservation_takes_free_space_and_refuses_taken_space() {
        let len = NonZeroUsize::new(1 << 21).expect("nonzero");
        let probe = VaReservation::at(0x3a_0000_0000, len).expect("free low space");
        let base = probe.ptr.as_ptr() as u64;
        let again = VaReservation::at(base, len).expect_err("taken");
        assert_eq!(again.raw_os_error(), Some(libc::EEXIST));
        drop(probe);
        VaReservation::at(base, len).expect("free again");
    }

    #[test]
    fn a_null_base_is_refused() {
        let len = NonZeroUsize::new(4096).expect("nonzero");
        let e = VaReservation::at(0, len).expect_err("null");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
