//! `SharedPage`: host memory rigd makes once on a GPU and maps into several clients'
//! address spaces, each through a [`SharedView`] of its own, read-write or read-only:
//! the page of an event one session exports and others import (`events`).
//!
//! Why one OS descriptor for all: every client's space is on the same device of
//! rigd's RM client (`space`), so the descriptor registered once under the device maps
//! into each space with NV_ESC_RM_MAP_MEMORY_DMA, as a lease block does into one. A
//! read-only view sets NVOS46's ACCESS field (1:0) to READ_ONLY: the RM writes the
//! page's PTEs read-only, so a channel of that space that writes there faults
//! (docs/hardware/nvidia-rm.md, "Read-only mappings"). The memfd is sealed as
//! `HostMem`'s is (the RM pins it for writing, so no write seal).
//!
//! Order: every view unmaps before the page is freed (each view holds an `Arc` of
//! the page); the page frees its descriptor, then rigd's mapping, then the file.
//!
//! Not here: one space's own host memory (`mem`), who may map what (`events`).

use std::sync::Arc;

use rig_sys::{memfd::SealedMemfd, mman::Mapping};

use super::{
    calls::Rm,
    error::{NvrmError, Step, at},
    gpu::{Gpu, Undo, first_of},
    mem::sealed_mapped,
    space::{AddressSpace, MAP_DMA_FLAGS},
};
use crate::sys::nvrm::NvHandle;

/// NVOS46_FLAGS_ACCESS (1:0) = READ_ONLY (`src/common/sdk/nvidia/inc/nvos.h`).
const ACCESS_READ_ONLY: u32 = 1;

/// How a view lets the GPU use the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    ReadWrite,
    /// The space's channels may read it only: a write faults their channel.
    ReadOnly,
}

impl Access {
    fn map_flags(self) -> u32 {
        match self {
            Self::ReadWrite => MAP_DMA_FLAGS,
            Self::ReadOnly => MAP_DMA_FLAGS | ACCESS_READ_ONLY,
        }
    }
}

/// Host memory registered once with the RM, to be mapped into several spaces.
#[derive(Debug)]
pub struct SharedPage<R: Rm> {
    gpu: Arc<Gpu<R>>,
    h_memory: NvHandle,
    // Field order: the descriptor is freed in `Drop`, then rigd's mapping goes, then
    // the file closes.
    map: Mapping,
    file: SealedMemfd,
}

impl<R: Rm> SharedPage<R> {
    /// `len` bytes (rounded up to a page), zeroed, registered with the RM as an OS
    /// descriptor under `gpu`'s device.
    ///
    /// # Errors
    /// [`NvrmError::HostMemSize`], [`NvrmError::Memfd`], [`NvrmError::MapHost`],
    /// [`NvrmError::Call`] (AllocOsDescriptor).
    pub fn new(gpu: &Arc<Gpu<R>>, len: u64) -> Result<Self, NvrmError> {
        let (file, map) = sealed_mapped(c"rig-shared-page", len)?;
        let h_memory = gpu
            .rm()
            .alloc_os_descriptor(gpu.device(), gpu.pick_handle(), &map)
            .map_err(at(Step::AllocOsDescriptor))?;
        Ok(Self {
            gpu: Arc::clone(gpu),
            h_memory,
            map,
            file,
        })
    }

    /// The length in bytes (a multiple of the page).
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Always false: a page at least.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// rigd's mapping (volatile access only).
    pub fn mapping(&self) -> &Mapping {
        &self.map
    }

    /// The memfd (what a client maps).
    pub fn file(&self) -> &SealedMemfd {
        &self.file
    }

    /// The RM's handle of the OS descriptor.
    pub fn handle(&self) -> NvHandle {
        self.h_memory
    }
}

impl<R: Rm> Drop for SharedPage<R> {
    fn drop(&mut self) {
        let u = Undo::Free {
            parent: self.gpu.device(),
            object: self.h_memory,
        };
        if let Err(e) = self.gpu.run(u) {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "freeing a page shared between sessions"
            );
        }
    }
}

/// A [`SharedPage`] mapped at a GPU VA of one space (rigd's own range), unmapped when
/// dropped.
#[derive(Debug)]
pub struct SharedView<R: Rm> {
    space: Arc<AddressSpace<R>>,
    undo: Vec<Undo>,
    gpu_va: u64,
    access: Access,
    // Field order: unmapped (Drop) before this reference to the page goes.
    page: Arc<SharedPage<R>>,
}

impl<R: Rm> SharedView<R> {
    /// Maps all of `page` into `space` with `access`.
    ///
    /// # Errors
    /// [`NvrmError::VaExhausted`], [`NvrmError::Call`] (MapDma); nothing stays mapped.
    pub fn map(
        space: &Arc<AddressSpace<R>>,
        page: &Arc<SharedPage<R>>,
        access: Access,
    ) -> Result<Self, NvrmError> {
        let mut v = Self {
            space: Arc::clone(space),
            undo: Vec::new(),
            gpu_va: 0,
            access,
            page: Arc::clone(page),
        };
        let len = page.len();
        let va = space.alloc_va(len)?;
        v.undo.push(Undo::ReleaseVa { base: va, len });
        space.map_memory(page.handle(), len, va, access.map_flags(), &mut v.undo)?;
        v.gpu_va = va;
        Ok(v)
    }

    /// Where this space's GPU sees the first byte.
    pub fn gpu_va(&self) -> u64 {
        self.gpu_va
    }

    /// How it is mapped.
    pub fn access(&self) -> Access {
        self.access
    }

    /// The page.
    pub fn page(&self) -> &Arc<SharedPage<R>> {
        &self.page
    }

    /// Unmaps it.
    ///
    /// # Errors
    /// The first step that failed; the later ones still ran.
    pub fn close(mut self) -> Result<(), NvrmError> {
        let failed = self.space.unwind(&mut self.undo);
        first_of(failed, "a view of a shared page")
    }
}

impl<R: Rm> Drop for SharedView<R> {
    fn drop(&mut self) {
        for e in self.space.unwind(&mut self.undo) {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "unmapping a shared page from a client's space"
            );
        }
    }
}
