//! One block: a sealed 2 MiB hugetlb memfd, mapped in rigd, faulted in (the kernel
//! clears the page) and locked, with its physical address when the pool needs one.
//!
//! A block's file is what a client receives. Once a client has had it, the block is
//! retired — the page is punched out of the file, which unmaps it everywhere — never
//! lent again.

use std::{fmt, io, os::fd::OwnedFd};

use rig_sys::{
    memfd::{Backing, Memfd, SealedMemfd},
    mman::{Fill, Mapping},
};

use super::{BLOCK_SIZE, DmaError, HostVa, PhysAddr};
use crate::sys::{
    memfd,
    pagemap::{self, Entry, PAGE_SIZE},
};

/// The step of making or retiring a block that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStep {
    Create,
    Size,
    Allocate,
    Seal,
    Map,
    Pagemap,
    Share,
}

impl fmt::Display for BlockStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Create => "create the memfd of",
            Self::Size => "size",
            Self::Allocate => "allocate the pages of",
            Self::Seal => "seal",
            Self::Map => "map, fault in and lock",
            Self::Pagemap => "read the physical address of",
            Self::Share => "duplicate the descriptor of",
        })
    }
}

fn step(step: BlockStep) -> impl FnOnce(io::Error) -> DmaError {
    move |source| DmaError::Block { step, source }
}

/// A pinned block.
#[derive(Debug)]
pub(crate) struct Block {
    // Field order is drop order: unmap before closing the file.
    map: Mapping,
    file: SealedMemfd,
    phys: Option<PhysAddr>,
}

impl Block {
    /// Makes a block: memfd, size, pages allocated (and so cleared), seals, a locked
    /// map with every page mapped; with `physical`, reads and checks its physical address.
    ///
    /// # Errors
    /// [`DmaError::Block`] naming the failed step (fallocate's `ENOSPC` when hugepages
    /// run out), [`DmaError::NoPhysicalAddress`], [`DmaError::NotHuge`].
    pub fn pin(backing: Backing, physical: bool) -> Result<Self, DmaError> {
        let file = Memfd::create(c"rig-dma", backing).map_err(step(BlockStep::Create))?;
        file.set_len(BLOCK_SIZE).map_err(step(BlockStep::Size))?;
        // The kernel clears the pages here, outside this process's mmap lock: pin
        // workers clear in parallel. Faulting them in through `MAP_POPULATE` instead
        // made every worker's mmap and mlock wait for the others' clearing (on the
        // 16-CPU H200 host, 16 workers pinned no faster than one).
        memfd::allocate(&file, BLOCK_SIZE).map_err(step(BlockStep::Allocate))?;
        let file = file.seal().map_err(step(BlockStep::Seal))?;
        // Shmem blocks are for tests without hugepages: not locked, so they also work
        // under a small RLIMIT_MEMLOCK.
        let fill = match backing {
            Backing::Huge2M => Fill::Locked,
            Backing::Shmem => Fill::Populate,
        };
        let map = Mapping::shared(&file, fill).map_err(step(BlockStep::Map))?;
        let mut block = Self {
            map,
            file,
            phys: None,
        };
        if physical {
            block.phys = Some(block.read_phys()?);
        }
        Ok(block)
    }

    /// Reads the block's physical address now and checks that its 512 small pages are
    /// one contiguous, 2 MiB-aligned page.
    ///
    /// # Errors
    /// [`DmaError::Block`] (`Pagemap`), [`DmaError::NoPhysicalAddress`],
    /// [`DmaError::NotHuge`].
    pub fn read_phys(&self) -> Result<PhysAddr, DmaError> {
        let pages = usize::try_from(BLOCK_SIZE / PAGE_SIZE).expect("512 fits");
        let entries =
            pagemap::read_entries(self.va().0, pages).map_err(step(BlockStep::Pagemap))?;
        let not_huge = || DmaError::NotHuge { va: self.va() };
        let first = match entries.first() {
            Some(Entry::Frame(pfn)) => *pfn,
            Some(Entry::Hidden) => return Err(DmaError::NoPhysicalAddress),
            _ => return Err(not_huge()),
        };
        let contiguous = entries
            .iter()
            .zip(first..)
            .all(|(e, want)| *e == Entry::Frame(want));
        let pa = first.checked_mul(PAGE_SIZE).ok_or_else(not_huge)?;
        if !contiguous || !pa.is_multiple_of(BLOCK_SIZE) {
            return Err(not_huge());
        }
        Ok(PhysAddr(pa))
    }

    /// rigd's mapping of the block.
    pub fn mapping(&self) -> &Mapping {
        &self.map
    }

    /// Where rigd sees the first byte.
    pub fn va(&self) -> HostVa {
        // CAST: a usize address widens losslessly to u64 on every target rigd builds for.
        HostVa(self.map.addr() as u64)
    }

    /// The physical address read when the block was pinned (sysfs mode only).
    pub fn phys(&self) -> Option<PhysAddr> {
        self.phys
    }

    /// The block's file.
    #[cfg(test)]
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.file)
    }

    /// A second descriptor of the block's file, to send to a client.
    ///
    /// # Errors
    /// [`DmaError::Block`] (`Share`): dup(2) failed, e.g. `EMFILE`.
    pub fn share(&self) -> Result<OwnedFd, DmaError> {
        self.file
            .try_clone()
            .map(OwnedFd::from)
            .map_err(step(BlockStep::Share))
    }

    /// Volatile read of the block's bytes at `offset`.
    ///
    /// # Errors
    /// `InvalidInput` past the block's end.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.map.read(offset, buf)
    }

    /// Volatile write of `data` at `offset`.
    ///
    /// # Errors
    /// `InvalidInput` past the block's end.
    pub fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.map.write(offset, data)
    }

    /// Retires a block a client has had: unmaps it here, punches its page out of the
    /// file (unmapping it from every process that still maps it, and returning it to
    /// the kernel's hugepage pool) and closes the file.
    pub fn retire(self) {
        let Self { map, file, .. } = self;
        drop(map);
        if let Err(e) = memfd::punch_hole(&file, BLOCK_SIZE) {
            tracing::warn!("Failed to punch a retired DMA block out of its file: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a client does with a descriptor it received: check the seals, map it all.
    fn client_view(fd: OwnedFd) -> Mapping {
        let file = SealedMemfd::check(fd).expect("a sealed memfd");
        Mapping::shared(&file, Fill::Lazy).expect("map")
    }

    #[test]
    fn a_shmem_block_is_sealed_sized_and_shared_through_its_file() {
        let b = Block::pin(Backing::Shmem, false).expect("pin");
        assert!(b.phys().is_none());
        let st = nix::sys::stat::fstat(b.fd()).expect("fstat");
        assert_eq!(u64::try_from(st.st_size).expect("size"), BLOCK_SIZE);
        assert_eq!(
            rig_sys::memfd::seals(b.fd()).expect("seals"),
            rig_sys::memfd::block_seals()
        );
        let view = client_view(b.share().expect("dup"));
        b.write(100, b"abc").expect("write");
        let mut got = [0u8; 3];
        view.read(100, &mut got).expect("read");
        assert_eq!(&got, b"abc");
    }

    #[test]
    fn retiring_a_block_takes_its_memory_from_whoever_kept_the_file() {
        let b = Block::pin(Backing::Shmem, false).expect("pin");
        b.write(0, b"secret").expect("write");
        let kept = b.share().expect("a client's copy");
        b.retire();
        let view = client_view(kept);
        let mut got = [0xffu8; 6];
        view.read(0, &mut got).expect("read");
        assert_eq!(got, [0; 6], "the punched page reads as a fresh zero page");
    }
}
