//! Shared mappings of sealed memfds: mmap(2) (optionally `MAP_POPULATE`/`MAP_LOCKED`),
//! munmap(2).
//!
//! Flow: rigd maps each DMA block it pins ([`Mapping::shared`]); a client maps the
//! blocks of a lease one after another at one aligned address ([`Mapping::shared_run`]).
//!
//! Invariants: a [`Mapping`] is device-visible memory — a device, a client process and
//! rigd may all write it at any time — so no `&`/`&mut` into it ever exists; access
//! goes through the volatile [`Mapping::read`] and [`Mapping::write`] (bytes) and the
//! aligned one-access [`Mapping::read_u32`]/[`Mapping::write_u64`] family (words a device
//! reads or writes whole). It maps only
//! [`SealedMemfd`]s, in full: the file cannot shrink under it, so every byte it covers
//! stays backed (no SIGBUS). It owns its address range and unmaps it once, on drop.
//!
//! Not here: which mappings are locked (`rigd::dma::block` picks [`Fill`]).

use std::{io, num::NonZeroUsize, os::fd::BorrowedFd, ptr::NonNull};

use nix::{
    libc,
    sys::mman::{MapFlags, ProtFlags, mmap, mmap_anonymous, munmap},
};

use crate::memfd::SealedMemfd;

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

impl Fill {
    fn flags(self) -> MapFlags {
        MapFlags::MAP_SHARED
            | match self {
                Self::Lazy => MapFlags::empty(),
                Self::Populate => MapFlags::MAP_POPULATE,
                Self::Locked => MapFlags::MAP_POPULATE | MapFlags::MAP_LOCKED,
            }
    }
}

const RW: ProtFlags = ProtFlags::PROT_READ.union(ProtFlags::PROT_WRITE);

/// A shared read-write mapping of whole sealed files, unmapped on drop.
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

fn len_of(file: &SealedMemfd) -> io::Result<NonZeroUsize> {
    usize::try_from(file.len())
        .ok()
        .and_then(NonZeroUsize::new)
        .ok_or_else(|| io::ErrorKind::InvalidInput.into())
}

impl Mapping {
    /// Maps all of `file` shared and read-write where the kernel chooses (a hugetlb
    /// file is aligned to its page size), its pages faulted in as `fill` says.
    ///
    /// # Errors
    /// `InvalidInput` for an empty file; the errno of mmap(2): `ENOMEM` when hugetlb
    /// pages run out, `EAGAIN` for [`Fill::Locked`] past `RLIMIT_MEMLOCK` without
    /// `CAP_IPC_LOCK`.
    pub fn shared(file: &SealedMemfd, fill: Fill) -> io::Result<Self> {
        let len = len_of(file)?;
        // SAFETY: a fresh mapping at an address the kernel picks (no MAP_FIXED), so no
        // existing memory is replaced; `file` is a valid open descriptor for the call,
        // and it is sealed at `len` bytes, so the whole range stays backed; the result
        // is checked by nix and owned by the returned `Mapping`, which unmaps it
        // exactly once.
        let ptr = unsafe { mmap(None, len, RW, fill.flags(), file, 0) }?;
        Ok(Self { ptr, len })
    }

    /// Maps each of `files` in full, one after another in order, at one range that
    /// starts on a multiple of `align` (a power of two, e.g. the block size).
    ///
    /// # Errors
    /// `InvalidInput` for no files, an empty one, one whose size `align` does not
    /// divide, or an `align` that is not a power of two; the errno of mmap(2) or
    /// munmap(2) (`ENOMEM`, `EINVAL` for an address the file's page size does not
    /// divide).
    pub fn shared_run(files: &[SealedMemfd], align: usize, fill: Fill) -> io::Result<Self> {
        if !align.is_power_of_two() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let mut total = 0usize;
        for file in files {
            let len = len_of(file)?.get();
            if !len.is_multiple_of(align) {
                return Err(io::ErrorKind::InvalidInput.into());
            }
            total = total.checked_add(len).ok_or(io::ErrorKind::InvalidInput)?;
        }
        let total = NonZeroUsize::new(total).ok_or(io::ErrorKind::InvalidInput)?;
        let start = reserve(total, align)?;
        // Owns the whole range from here: on an error below, its drop unmaps the
        // placeholder and whatever was already mapped over it.
        let run = Self {
            ptr: start,
            len: total,
        };
        let mut at = start.as_ptr() as usize;
        for file in files {
            let len = len_of(file)?;
            // SAFETY: `[at, at + len)` lies inside the range `reserve` just made and
            // `run` owns (a PROT_NONE placeholder or nothing yet mapped over it), so
            // MAP_FIXED replaces only our own placeholder; `file` is valid for the
            // call and sealed at `len` bytes, so the range stays backed; the result
            // is checked.
            unsafe {
                mmap(
                    NonZeroUsize::new(at),
                    len,
                    RW,
                    fill.flags() | MapFlags::MAP_FIXED,
                    file,
                    0,
                )
            }?;
            at += len.get();
        }
        Ok(run)
    }

    /// The mapping's start in this process.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> usize {
        self.len.get()
    }

    /// Always false: a mapping is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Copies `buf.len()` bytes from `offset` into `buf` in volatile reads: single bytes
    /// up to the first 8-byte boundary and after the last, aligned `u64`s between
    /// (eight times fewer accesses than byte by byte, and never a torn word).
    ///
    /// # Errors
    /// `InvalidInput` when the range is outside the mapping.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let base = self.at(offset, buf.len())?;
        let (head, words) = split_aligned(base as usize, buf.len());
        let (first, rest) = buf.split_at_mut(head);
        let (middle, last) = rest.split_at_mut(words * 8);
        for (i, b) in first.iter_mut().enumerate() {
            // SAFETY: `at` checked that `offset + buf.len()` lies inside the mapping,
            // which stays mapped while `self` lives; u8 has no alignment or validity
            // requirement, and a volatile read tolerates concurrent writers.
            *b = unsafe { base.add(i).read_volatile() };
        }
        for (i, chunk) in middle.chunks_exact_mut(8).enumerate() {
            // SAFETY: as above; `split_aligned` put `base + head` on an 8-byte boundary,
            // so each u64 here is aligned and inside the checked range.
            let w = unsafe { base.add(head + 8 * i).cast::<u64>().read_volatile() };
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        let at = head + words * 8;
        for (i, b) in last.iter_mut().enumerate() {
            // SAFETY: as for the first bytes.
            *b = unsafe { base.add(at + i).read_volatile() };
        }
        Ok(())
    }

    /// Copies `data` to `offset` in volatile writes, split as [`Mapping::read`] splits.
    ///
    /// # Errors
    /// `InvalidInput` when the range is outside the mapping.
    pub fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        let base = self.at(offset, data.len())?;
        let (head, words) = split_aligned(base as usize, data.len());
        let (first, rest) = data.split_at(head);
        let (middle, last) = rest.split_at(words * 8);
        for (i, b) in first.iter().enumerate() {
            // SAFETY: as in `read`; the mapping is PROT_WRITE.
            unsafe { base.add(i).write_volatile(*b) };
        }
        for (i, chunk) in middle.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(chunk.try_into().expect("chunks of 8"));
            // SAFETY: as in `read`'s words; the mapping is PROT_WRITE.
            unsafe { base.add(head + 8 * i).cast::<u64>().write_volatile(w) };
        }
        let at = head + words * 8;
        for (i, b) in last.iter().enumerate() {
            // SAFETY: as in `read`; the mapping is PROT_WRITE.
            unsafe { base.add(at + i).write_volatile(*b) };
        }
        Ok(())
    }

    /// Reads the naturally aligned `u32` at `offset` in one volatile load (a value
    /// the device or another process writes whole, such as a ring's GP_GET).
    ///
    /// # Errors
    /// `InvalidInput` when `offset` is outside the mapping or not 4-byte aligned.
    pub fn read_u32(&self, offset: usize) -> io::Result<u32> {
        let p = self.aligned::<u32>(offset)?;
        // SAFETY: `aligned` checked that the 4 bytes lie inside the mapping, which
        // stays mapped while `self` lives, and that `p` is 4-byte aligned; every bit
        // pattern is a u32, and a volatile load tolerates concurrent writers.
        Ok(unsafe { p.read_volatile() })
    }

    /// Writes `value` to the naturally aligned `u32` at `offset` in one volatile
    /// store, so a reader never sees it torn (e.g. GP_PUT).
    ///
    /// # Errors
    /// As [`Mapping::read_u32`].
    pub fn write_u32(&self, offset: usize, value: u32) -> io::Result<()> {
        let p = self.aligned::<u32>(offset)?;
        // SAFETY: as in `read_u32`; the mapping is PROT_WRITE.
        unsafe { p.write_volatile(value) };
        Ok(())
    }

    /// Reads the naturally aligned `u64` at `offset` in one volatile load (a 64-bit
    /// semaphore).
    ///
    /// # Errors
    /// `InvalidInput` when `offset` is outside the mapping or not 8-byte aligned.
    pub fn read_u64(&self, offset: usize) -> io::Result<u64> {
        let p = self.aligned::<u64>(offset)?;
        // SAFETY: as in `read_u32`, for 8 bytes at an 8-byte aligned address.
        Ok(unsafe { p.read_volatile() })
    }

    /// Writes the naturally aligned `u64` at `offset` in one volatile store (a ring
    /// entry).
    ///
    /// # Errors
    /// As [`Mapping::read_u64`].
    pub fn write_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        let p = self.aligned::<u64>(offset)?;
        // SAFETY: as in `read_u64`; the mapping is PROT_WRITE.
        unsafe { p.write_volatile(value) };
        Ok(())
    }

    fn aligned<T>(&self, offset: usize) -> io::Result<*mut T> {
        if !offset.is_multiple_of(std::mem::align_of::<T>()) {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // The mapping starts on a page, so an aligned offset is an aligned address.
        Ok(self.at(offset, std::mem::size_of::<T>())?.cast::<T>())
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
        // SAFETY: `ptr`/`len` are exactly the range this `Mapping` owns, unmapped only
        // here, and no reference into it exists (see the module's rule).
        let unmapped = unsafe { munmap(self.ptr, self.len.get()) };
        if let Err(e) = unmapped {
            tracing::warn!("munmap of a DMA mapping failed: {e}");
        }
    }
}

/// Reserves `total` bytes starting on a multiple of `align` as an inaccessible
/// placeholder (anonymous, `PROT_NONE`, `MAP_NORESERVE`), for the caller to map over.
fn reserve(total: NonZeroUsize, align: usize) -> io::Result<NonNull<libc::c_void>> {
    let padded = total
        .checked_add(align)
        .ok_or(io::ErrorKind::InvalidInput)?;
    // SAFETY: a fresh anonymous PROT_NONE mapping where the kernel chooses, replacing
    // nothing; its unused head and tail are unmapped below, the rest is the caller's.
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
        // SAFETY: `[base, start)` is the unused head of the mapping just made, which
        // nothing else knows.
        unsafe { munmap(raw, head) }?;
    }
    if tail > 0 {
        let end = NonNull::new((start + total.get()) as *mut libc::c_void)
            .ok_or(io::ErrorKind::InvalidInput)?;
        // SAFETY: `[start + total, base + padded)` is the unused tail of it.
        unsafe { munmap(end, tail) }?;
    }
    NonNull::new(start as *mut libc::c_void).ok_or_else(|| io::ErrorKind::InvalidInput.into())
}

/// How a copy of `len` bytes at address `addr` splits for 8-byte volatile accesses: the
/// bytes before the first 8-byte boundary (all of them when the range never reaches
/// one), then how many whole `u64`s follow; the rest are single bytes.
fn split_aligned(addr: usize, len: usize) -> (usize, usize) {
    let head = addr.next_multiple_of(8).saturating_sub(addr).min(len);
    (head, (len - head) / 8)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memfd::sealed_for_test as sealed;

    #[test]
    fn two_mappings_of_one_file_see_each_others_writes() {
        let fd = sealed(8192);
        let a = Mapping::shared(&fd, Fill::Populate).expect("map a");
        let b = Mapping::shared(&fd, Fill::Lazy).expect("map b");
        assert_eq!(a.len(), 8192);
        a.write(4000, b"hello").expect("write");
        let mut got = [0u8; 5];
        b.read(4000, &mut got).expect("read");
        assert_eq!(&got, b"hello");
    }

    #[test]
    fn copies_at_every_alignment_and_length_move_exactly_their_bytes() {
        let fd = sealed(4096);
        let m = Mapping::shared(&fd, Fill::Populate).expect("map");
        let pattern: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for offset in 0..17 {
            for len in 0..41 {
                m.write(0, &[0xee; 128]).expect("clear");
                m.write(offset, &pattern[..len]).expect("write");
                let mut all = [0u8; 128];
                m.read(0, &mut all).expect("read all");
                assert!(
                    all[..offset].iter().all(|&b| b == 0xee),
                    "{offset}+{len}: before"
                );
                assert_eq!(
                    &all[offset..offset + len],
                    &pattern[..len],
                    "{offset}+{len}"
                );
                assert!(
                    all[offset + len..].iter().all(|&b| b == 0xee),
                    "{offset}+{len}: after"
                );
                let mut back = vec![0u8; len];
                m.read(offset, &mut back).expect("read back");
                assert_eq!(back, &pattern[..len], "{offset}+{len}: read at the offset");
            }
        }
        assert_eq!(split_aligned(0x1003, 3), (3, 0));
        assert_eq!(split_aligned(0x1003, 20), (5, 1));
        assert_eq!(split_aligned(0x1000, 16), (0, 2));
    }

    #[test]
    fn access_past_the_end_is_refused() {
        let fd = sealed(4096);
        let m = Mapping::shared(&fd, Fill::Lazy).expect("map");
        let past = m.write(4095, b"xy").expect_err("one byte past the end");
        assert_eq!(past.kind(), io::ErrorKind::InvalidInput);
        let wrap = m
            .read(usize::MAX, &mut [0u8; 2])
            .expect_err("offset overflows");
        assert_eq!(wrap.kind(), io::ErrorKind::InvalidInput);
        m.write(4094, b"xy").expect("last two bytes");
    }

    #[test]
    fn word_accessors_round_trip_and_refuse_misaligned_or_outside_offsets() {
        let fd = sealed(4096);
        let m = Mapping::shared(&fd, Fill::Lazy).expect("map");
        m.write_u64(4088, 0x0102_0304_0506_0708).expect("last word");
        assert_eq!(m.read_u64(4088).expect("read"), 0x0102_0304_0506_0708);
        m.write_u32(8, 0xdead_beef).expect("aligned");
        assert_eq!(m.read_u32(8).expect("read"), 0xdead_beef);
        let mut b = [0u8; 4];
        m.read(8, &mut b).expect("bytes");
        assert_eq!(b, 0xdead_beefu32.to_ne_bytes());
        for e in [
            m.read_u32(2).expect_err("misaligned"),
            m.read_u64(4092).expect_err("misaligned"),
            m.read_u64(4096).expect_err("outside"),
            m.write_u32(4096, 0).expect_err("outside"),
        ] {
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn an_empty_sealed_file_is_not_mapped() {
        let e = Mapping::shared(&sealed(0), Fill::Lazy).expect_err("nothing to map");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn a_run_maps_its_files_in_order_at_an_aligned_address() {
        const BLOCK: u64 = 1 << 21;
        let files = [sealed(BLOCK), sealed(BLOCK), sealed(BLOCK)];
        let block = usize::try_from(BLOCK).expect("2 MiB fits");
        for (i, f) in files.iter().enumerate() {
            let one = Mapping::shared(f, Fill::Lazy).expect("map one");
            one.write(10, &[u8::try_from(i).expect("small")])
                .expect("mark");
        }
        let run = Mapping::shared_run(&files, block, Fill::Populate).expect("run");
        assert_eq!(run.addr() % block, 0);
        assert_eq!(run.len(), 3 * block);
        for i in 0..3 {
            let mut got = [0xffu8];
            run.read(i * block + 10, &mut got).expect("read");
            assert_eq!(usize::from(got[0]), i);
        }
    }

    #[test]
    fn a_run_refuses_files_its_alignment_does_not_divide() {
        let files = [sealed(1 << 21), sealed(4096)];
        let e = Mapping::shared_run(&files, 1 << 21, Fill::Lazy).expect_err("short file");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = Mapping::shared_run(&[], 4096, Fill::Lazy).expect_err("no files");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = Mapping::shared_run(&files[..1], 3 << 12, Fill::Lazy).expect_err("not 2^n");
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}

/// A read-only shared mapping of a whole sealed file (`PROT_READ`), for memory another
/// party writes: a channel's error notifier, which a client may read and never write.
/// It maps a descriptor opened read-only too (`SealedMemfd::open_read_only`).
#[derive(Debug)]
pub struct ReadMapping {
    ptr: NonNull<libc::c_void>,
    len: NonZeroUsize,
}

// SAFETY: as for `Mapping`: owned, reached only by volatile reads.
unsafe impl Send for ReadMapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for ReadMapping {}

impl ReadMapping {
    /// Maps all of `file` shared and read-only where the kernel chooses.
    ///
    /// # Errors
    /// `InvalidInput` for an empty file; mmap(2)'s errno.
    pub fn shared(file: &SealedMemfd) -> io::Result<Self> {
        let len = len_of(file)?;
        // SAFETY: as in `Mapping::shared`: a fresh mapping the kernel places, of a
        // sealed file whose size cannot change, owned by the returned value.
        let ptr = unsafe {
            mmap(
                None,
                len,
                ProtFlags::PROT_READ,
                MapFlags::MAP_SHARED,
                file,
                0,
            )
        }?;
        Ok(Self { ptr, len })
    }

    /// Reads the naturally aligned `u64` at `offset` in one volatile load.
    ///
    /// # Errors
    /// `InvalidInput` when `offset` is outside the mapping or not 8-byte aligned.
    pub fn read_u64(&self, offset: usize) -> io::Result<u64> {
        if !offset.is_multiple_of(8) || offset.checked_add(8).is_none_or(|e| e > self.len.get()) {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: the 8 bytes lie inside the mapping (checked), which lives as long as
        // `self`, at an 8-byte aligned address (page + aligned offset); any bits are a
        // u64; a volatile load tolerates concurrent writers.
        Ok(unsafe {
            self.ptr
                .as_ptr()
                .cast::<u8>()
                .add(offset)
                .cast::<u64>()
                .read_volatile()
        })
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

impl Drop for ReadMapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned, unmapped only here.
        if let Err(e) = unsafe { munmap(self.ptr, self.len.get()) } {
            tracing::warn!("munmap of a read-only mapping failed: {e}");
        }
    }
}

/// A shared read-write mapping of a device file at offset 0 and exactly `len` bytes,
/// e.g. HOPPER_USERMODE_A's page (BAR0 MMIO) through a `/dev/nvidiaN` file that holds
/// the RM's mmap context (`kernel-open/nvidia/nv-mmap.c`, `nvidia_mmap`: offset 0,
/// the size the RM mapped). Only whole aligned words are written: its doorbell.
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
    /// chooses.
    ///
    /// # Errors
    /// The errno of mmap(2): `EINVAL` for a file without an mmap context or of
    /// another size.
    pub fn map(dev: BorrowedFd<'_>, len: NonZeroUsize) -> io::Result<Self> {
        Self::map_at(dev, 0, len)
    }

    /// Maps `len` bytes of `dev` from `offset` (page-aligned), read-write and shared:
    /// a BAR through a VFIO device fd (at its region's offset) or a `resourceN` file.
    ///
    /// # Errors
    /// `InvalidInput` for an offset past `off_t`; the errno of mmap(2) (`EINVAL` for
    /// a misaligned offset or a range outside the region).
    pub fn map_at(dev: BorrowedFd<'_>, offset: u64, len: NonZeroUsize) -> io::Result<Self> {
        let offset = libc::off_t::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        // SAFETY: a fresh mapping where the kernel picks (no MAP_FIXED), so nothing is
        // replaced; `dev` is open for the call; the driver maps the range or refuses;
        // the result is checked and owned by the returned value.
        let ptr = unsafe { mmap(None, len, RW, MapFlags::MAP_SHARED, dev, offset) }?;
        Ok(Self { ptr, len })
    }

    /// The address of the aligned word of `width` bytes at `offset`, checked to lie
    /// inside the mapping.
    fn word(&self, offset: usize, width: usize) -> io::Result<*mut u8> {
        if !offset.is_multiple_of(width)
            || offset.checked_add(width).is_none_or(|e| e > self.len.get())
        {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: `offset + width` is inside the mapping (checked just above), so the
        // pointer stays within the one object mmap returned.
        Ok(unsafe { self.ptr.as_ptr().cast::<u8>().add(offset) })
    }

    /// Writes `value` to the aligned u32 at `offset` in one volatile store.
    ///
    /// # Errors
    /// `InvalidInput` for an offset outside the mapping or not 4-byte aligned.
    pub fn write_u32(&self, offset: usize, value: u32) -> io::Result<()> {
        let p = self.word(offset, 4)?;
        // SAFETY: the 4 bytes at `p` lie inside the mapping (checked by `word`), which
        // lives as long as `self`; the address is 4-byte aligned (a page plus an
        // aligned offset); a volatile store is what MMIO needs.
        unsafe { p.cast::<u32>().write_volatile(value) };
        Ok(())
    }

    /// Reads the aligned u32 at `offset` in one volatile load.
    ///
    /// # Errors
    /// As [`DeviceMapping::write_u32`].
    pub fn read_u32(&self, offset: usize) -> io::Result<u32> {
        let p = self.word(offset, 4)?;
        // SAFETY: as for `write_u32`: inside, aligned, alive; a volatile load.
        Ok(unsafe { p.cast::<u32>().read_volatile() })
    }

    /// Writes `value` to the aligned u64 at `offset` in one volatile store.
    ///
    /// # Errors
    /// `InvalidInput` for an offset outside the mapping or not 8-byte aligned.
    pub fn write_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        let p = self.word(offset, 8)?;
        // SAFETY: as for `write_u32`, with 8 bytes 8-byte aligned.
        unsafe { p.cast::<u64>().write_volatile(value) };
        Ok(())
    }

    /// Reads the aligned u64 at `offset` in one volatile load.
    ///
    /// # Errors
    /// As [`DeviceMapping::write_u64`].
    pub fn read_u64(&self, offset: usize) -> io::Result<u64> {
        let p = self.word(offset, 8)?;
        // SAFETY: as for `write_u64`: inside, aligned, alive; a volatile load.
        Ok(unsafe { p.cast::<u64>().read_volatile() })
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
            tracing::warn!("munmap of a device mapping failed: {e}");
        }
    }
}

/// Orders every earlier store before every later one, stores to write-combined
/// mappings (GPU memory through BAR1) included, which a compiler fence does not:
/// `sfence` on x86_64 (Linux's `wmb()`), a full fence elsewhere.
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence takes no operands and touches no memory; SSE is part of the
    // x86_64 baseline, so the instruction exists on every machine this runs on.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}
