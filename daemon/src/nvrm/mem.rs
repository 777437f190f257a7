//! `HostMem`: host memory rigd makes for a client's channels (ring, USERD, error
//! notifier) — a sealed memfd mapped in rigd, registered with the RM as an OS
//! descriptor and mapped at a GPU VA of the client's [`AddressSpace`] — freed in
//! reverse: RM unmap, RM_FREE, munmap.
//!
//! The memfd is sealed SHRINK|GROW|SEAL but not WRITE: the RM pins it with FOLL_WRITE,
//! which a write seal forbids (docs/hardware/nvidia-rm.md, "Host memory the GPU uses
//! directly"). Its GPU VA need not be its CPU VA in rigd or in any client; whoever
//! writes commands is told [`HostMem::gpu_va`]. A client's DMA leases are mapped into
//! the same space by `dma` (`AddressSpace` is its `DeviceMap`), not here.

use std::sync::Arc;

use rig_sys::{
    memfd::{Backing, Memfd, SealedMemfd},
    mman::{Fill, Mapping},
};

use super::{
    calls::Rm,
    error::NvrmError,
    gpu::{Undo, first_of},
    space::AddressSpace,
};
use crate::sys::nvrm::NvHandle;

/// The page size host memory is sized in.
pub const PAGE: u64 = 4096;
/// The most host memory one `HostMem` holds.
pub const MAX_LEN: u64 = 1 << 38;

/// `len` bytes (rounded up to a page) of zeroed shmem in a memfd sealed as the RM needs
/// it (module docs), and rigd's mapping of it, populated.
///
/// # Errors
/// [`NvrmError::HostMemSize`], [`NvrmError::Memfd`], [`NvrmError::MapHost`].
pub(super) fn sealed_mapped(
    name: &std::ffi::CStr,
    len: u64,
) -> Result<(SealedMemfd, Mapping), NvrmError> {
    if len == 0 || len > MAX_LEN {
        return Err(NvrmError::HostMemSize { len });
    }
    let len = len.next_multiple_of(PAGE);
    let file = Memfd::sealed(name, Backing::Shmem, len)
        .map_err(|source| NvrmError::Memfd { len, source })?;
    let map = Mapping::shared(&file, Fill::Populate)
        .map_err(|source| NvrmError::MapHost { len, source })?;
    Ok((file, map))
}

/// Host memory mapped in one address space, freed when dropped.
#[derive(Debug)]
pub struct HostMem<R: Rm> {
    space: Arc<AddressSpace<R>>,
    undo: Vec<Undo>,
    h_memory: NvHandle,
    gpu_va: u64,
    // Field order: unmapped after `Drop` ran the undo list, then the file closes.
    map: Mapping,
    file: SealedMemfd,
}

impl<R: Rm> HostMem<R> {
    /// `len` bytes (rounded up to a page), zeroed, mapped for the GPU in `space`.
    ///
    /// # Errors
    /// [`NvrmError::HostMemSize`], [`NvrmError::Memfd`], [`NvrmError::MapHost`],
    /// [`NvrmError::VaExhausted`], or [`NvrmError::Call`] naming the step; what was
    /// made before is freed.
    pub fn new(space: &Arc<AddressSpace<R>>, len: u64) -> Result<Self, NvrmError> {
        let (file, map) = sealed_mapped(c"rig-gpu-host", len)?;
        let len = file.len();
        let mut m = Self {
            space: Arc::clone(space),
            undo: Vec::new(),
            h_memory: 0,
            gpu_va: 0,
            map,
            file,
        };
        let va = space.alloc_va(len)?;
        m.undo.push(Undo::ReleaseVa { base: va, len });
        m.h_memory = space.map(&m.map, va, &mut m.undo)?;
        m.gpu_va = va;
        Ok(m)
    }

    /// Where the GPU sees the first byte.
    pub fn gpu_va(&self) -> u64 {
        self.gpu_va
    }

    /// The length in bytes (a multiple of the page).
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Always false: host memory is at least a page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The RM's handle of the OS descriptor.
    pub fn handle(&self) -> NvHandle {
        self.h_memory
    }

    /// rigd's mapping (volatile access only).
    pub fn mapping(&self) -> &Mapping {
        &self.map
    }

    /// The memfd (what a client will map).
    pub fn file(&self) -> &SealedMemfd {
        &self.file
    }

    /// Unmaps and frees everything, in reverse order.
    ///
    /// # Errors
    /// The first step that failed; the later ones still ran.
    pub fn close(mut self) -> Result<(), NvrmError> {
        let failed = self.space.unwind(&mut self.undo);
        first_of(failed, "host memory")
    }
}

impl<R: Rm> Drop for HostMem<R> {
    fn drop(&mut self) {
        for e in self.space.unwind(&mut self.undo) {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "freeing host memory of the GPU"
            );
        }
    }
}
