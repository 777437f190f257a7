//! `DeviceMem`: GPU memory (vidmem) rigd makes for channels — an
//! NV01_MEMORY_LOCAL_USER allocation of one GPU, mapped for the CPU through BAR1 into
//! a fresh `/dev/nvidiaN` file (munmap, then RM_FREE) — and [`DeviceView`], its mapping
//! at a GPU VA of one client's [`AddressSpace`] (unmapped when the view drops). The
//! allocation outlives its views, so one allocation can serve a client's channel, then
//! the same owner's next one in another space, without its BAR1 range being freed and
//! handed to someone else in between.
//!
//! Why it exists: the GPU fetches a ring, USERD and command segments in its own memory
//! without crossing PCIe, which shortened an empty round trip by a third on the H200
//! (docs/hardware/nvidia-channels.md, "Where rings live"); the price is host time,
//! since stores through a write-combined BAR must be fenced before the doorbell
//! (docs/hardware/nvidia-channels.md, "Before a doorbell"). Lending such memory to
//! another process is the hazard of BAR PTEs that outlive RM_FREE
//! (docs/hardware/nvidia-rm.md, "Handing mappings to another process"): what may hold
//! a window is `channels`' business, not this file's.
//!
//! Reference: `nvos.h` (NV_MEMORY_ALLOCATION_PARAMS, NVOS32_ATTR*, NVOS32_ALLOC_FLAGS*,
//! NVOS33_FLAGS_CACHING_TYPE, NVOS46 flags), open-gpu-kernel-modules 580.142.

use std::sync::Arc;

use zerocopy::IntoBytes;

use super::{
    calls::{Caching, Rm},
    error::{NvrmError, Step, at},
    gpu::{Gpu, Undo, first_of},
    layout::r580,
    mem::{MAX_LEN, PAGE},
    space::{AddressSpace, Region},
};
use crate::sys::nvrm::NvHandle;

/// NVOS32_ATTR_PHYSICALITY_CONTIGUOUS (28:27 = 2): one BAR1 range, like the rings the
/// NVIDIA driver and tinygrad make.
const ATTR: u32 = 2 << 27;
/// NVOS32_ATTR2_ZBC_PREFER_NO_ZBC (1:0 = 1) | NVOS32_ATTR2_GPU_CACHEABLE_YES (3:2 = 1).
const ATTR2: u32 = 1 | (1 << 2);
/// NVOS32_ALLOC_FLAGS_IGNORE_BANK_PLACEMENT (0x1) | ALIGNMENT_FORCE (0x100) |
/// MAP_NOT_REQUIRED (0x8000) | PERSISTENT_VIDMEM (0x10000).
const ALLOC_FLAGS: u32 = 0x1 | 0x100 | 0x8000 | 0x1_0000;
/// NV_MMU_PTE_KIND_GENERIC_MEMORY: plain pitch memory.
const KIND_GENERIC: u32 = 6;
/// NVOS46 flags: PAGE_SIZE_4KB (11:8 = 1) | DMA_OFFSET_FIXED_TRUE (15:15); no snoop,
/// since the memory is the GPU's own.
const MAP_FLAGS: u32 = (1 << 8) | (1 << 15);

/// How GPU memory is paged, in its allocation and in a GPU address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// 4 KiB pages, physically contiguous (rings: one BAR1 range).
    Small,
    /// 2 MiB pages, not necessarily contiguous (NVOS32_ATTR_PAGE_SIZE_HUGE with
    /// NVOS32_ATTR2_PAGE_SIZE_HUGE_2MB; NVOS46 PAGE_SIZE_HUGE at a 2 MiB-aligned VA).
    Huge,
}

/// 2 MiB.
pub const HUGE_PAGE: u64 = 2 << 20;

impl Pages {
    fn attr(self) -> (u32, u32) {
        match self {
            Self::Small => (ATTR, ATTR2),
            // PHYSICALITY_ALLOW_NONCONTIG (28:27 = 3) | PAGE_SIZE_HUGE (24:23 = 3);
            // attr2 PAGE_SIZE_HUGE_2MB (21:20 = 1).
            Self::Huge => ((3 << 27) | (3 << 23), ATTR2 | (1 << 20)),
        }
    }

    fn size(self) -> u64 {
        match self {
            Self::Small => PAGE,
            Self::Huge => HUGE_PAGE,
        }
    }

    fn map_flags(self) -> u32 {
        match self {
            Self::Small => MAP_FLAGS,
            // PAGE_SIZE_HUGE (11:8 = 4) | DMA_OFFSET_FIXED_TRUE.
            Self::Huge => (4 << 8) | (1 << 15),
        }
    }
}

/// GPU memory with rigd's CPU view through BAR1, freed when dropped.
#[derive(Debug)]
pub struct DeviceMem<R: Rm> {
    gpu: Arc<Gpu<R>>,
    // Field order: the CPU window goes before `Drop` frees the memory, so no PTE of
    // rigd's points at BAR1 once the RM frees the range.
    window: Option<R::Window>,
    h_memory: NvHandle,
    len: u64,
}

impl<R: Rm> DeviceMem<R> {
    /// `len` bytes (rounded up to a page) of contiguous GPU memory on `gpu`, mapped
    /// for the CPU with `caching`. Not zeroed: the caller writes what the GPU must not
    /// read stale.
    ///
    /// # Errors
    /// [`NvrmError::HostMemSize`] for a size of 0 or over 2^38, or
    /// [`NvrmError::Call`] naming the step; what was made before is freed.
    pub fn new(gpu: &Arc<Gpu<R>>, len: u64, caching: Caching) -> Result<Self, NvrmError> {
        Self::paged(gpu, len, Pages::Small, Some(caching))
    }

    /// `len` bytes (rounded up to `pages`' size) of GPU memory, with a CPU window
    /// through BAR1 only if `caching` is given.
    ///
    /// # Errors
    /// As [`DeviceMem::new`].
    pub fn paged(
        gpu: &Arc<Gpu<R>>,
        len: u64,
        pages: Pages,
        caching: Option<Caching>,
    ) -> Result<Self, NvrmError> {
        if len == 0 || len > MAX_LEN {
            return Err(NvrmError::HostMemSize { len });
        }
        let len = len.next_multiple_of(pages.size());
        let (attr, attr2) = pages.attr();
        let n = usize::try_from(len).map_err(|_| NvrmError::HostMemSize { len })?;
        let rm = gpu.rm();
        let mut p = r580::NvMemoryAllocationParams {
            owner: rm.client(),
            type_: 0, // NVOS32_TYPE_IMAGE
            flags: ALLOC_FLAGS,
            attr,
            attr2,
            format: KIND_GENERIC,
            size: len,
            alignment: pages.size(),
            limit: len - 1,
            ..Default::default()
        };
        let h_memory = rm
            .alloc(
                gpu.device(),
                r580::NV01_MEMORY_LOCAL_USER,
                Some(p.as_mut_bytes()),
            )
            .map_err(at(Step::AllocVidmem))?;
        let mut m = Self {
            gpu: Arc::clone(gpu),
            window: None,
            h_memory,
            len,
        };
        if let Some(caching) = caching {
            m.window = Some(
                rm.map_window(gpu.device(), h_memory, n, caching)
                    .map_err(at(Step::MapWindow))?,
            );
        }
        Ok(m)
    }

    /// The length in bytes (a multiple of the page).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: GPU memory here is at least a page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The RM's handle of the allocation.
    pub fn handle(&self) -> NvHandle {
        self.h_memory
    }

    /// The GPU it is on.
    pub fn gpu(&self) -> &Arc<Gpu<R>> {
        &self.gpu
    }

    /// rigd's CPU view through BAR1.
    pub fn window(&self) -> &R::Window {
        self.window
            .as_ref()
            .expect("a DeviceMem that was made has its window until dropped")
    }

    fn teardown(&mut self) -> Result<(), NvrmError> {
        drop(self.window.take());
        if self.h_memory == 0 {
            return Ok(());
        }
        let u = Undo::Free {
            parent: self.gpu.device(),
            object: std::mem::take(&mut self.h_memory),
        };
        self.gpu.run(u)
    }

    /// Unmaps and frees it.
    ///
    /// # Errors
    /// RM_FREE's.
    pub fn close(mut self) -> Result<(), NvrmError> {
        self.teardown()
    }
}

impl<R: Rm> Drop for DeviceMem<R> {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            tracing::warn!(error = &e as &dyn std::error::Error, "freeing GPU memory");
        }
    }
}

/// A [`DeviceMem`] mapped at a GPU VA of one address space, unmapped when dropped.
#[derive(Debug)]
pub struct DeviceView<R: Rm> {
    space: Arc<AddressSpace<R>>,
    undo: Vec<Undo>,
    gpu_va: u64,
    // Field order: unmapped (Drop) before this reference to the memory goes.
    mem: Arc<DeviceMem<R>>,
}

impl<R: Rm> DeviceView<R> {
    /// Maps all of `mem` at a VA of rigd's own range in `space`.
    ///
    /// # Errors
    /// [`NvrmError::VaExhausted`], [`NvrmError::Call`] (MapDma); nothing stays mapped.
    pub fn map(space: &Arc<AddressSpace<R>>, mem: Arc<DeviceMem<R>>) -> Result<Self, NvrmError> {
        Self::map_paged(space, mem, Pages::Small)
    }

    /// Maps all of `mem` in `pages` (2 MiB pages need a 2 MiB-aligned VA, which this
    /// picks) in rigd's own range.
    ///
    /// # Errors
    /// As [`DeviceView::map`].
    pub fn map_paged(
        space: &Arc<AddressSpace<R>>,
        mem: Arc<DeviceMem<R>>,
        pages: Pages,
    ) -> Result<Self, NvrmError> {
        Self::map_in(space, mem, pages, Region::Own)
    }

    /// Maps all of `mem` in `pages` at a VA of `region` (GPU memory lent to a client:
    /// [`Region::GpuMemory`], in 2 MiB pages).
    ///
    /// # Errors
    /// As [`DeviceView::map`].
    pub fn map_in(
        space: &Arc<AddressSpace<R>>,
        mem: Arc<DeviceMem<R>>,
        pages: Pages,
        region: Region,
    ) -> Result<Self, NvrmError> {
        let mut v = Self {
            space: Arc::clone(space),
            undo: Vec::new(),
            gpu_va: 0,
            mem,
        };
        let len = v.mem.len();
        let va = space.alloc_va_in(region, len, pages.size().max(super::space::OWN_ALIGN))?;
        v.undo.push(Undo::ReleaseVa { base: va, len });
        space.map_memory(v.mem.handle(), len, va, pages.map_flags(), &mut v.undo)?;
        v.gpu_va = va;
        Ok(v)
    }

    /// Where the GPU sees the first byte.
    pub fn gpu_va(&self) -> u64 {
        self.gpu_va
    }

    /// The memory.
    pub fn mem(&self) -> &Arc<DeviceMem<R>> {
        &self.mem
    }

    /// Unmaps it.
    ///
    /// # Errors
    /// The first step that failed; the later ones still ran.
    pub fn close(mut self) -> Result<(), NvrmError> {
        let failed = self.space.unwind(&mut self.undo);
        first_of(failed, "a view of GPU memory")
    }
}

impl<R: Rm> Drop for DeviceView<R> {
    fn drop(&mut self) {
        for e in self.space.unwind(&mut self.undo) {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "unmapping GPU memory from a client's space"
            );
        }
    }
}
