//! `HostMem`: host memory the GPU reads and writes — a sealed memfd mapped in rigd,
//! registered with the RM as an OS descriptor and mapped at a GPU VA rigd picks, in
//! the order of nvidia-rm.md §1 ("Host memory takes four steps"), freed in reverse:
//! UVM_FREE, RM unmap, RM_FREE, munmap.
//!
//! The memfd is sealed SHRINK|GROW|SEAL but not WRITE: the RM pins it with FOLL_WRITE,
//! which a write seal forbids (nvidia-rm.md §4). Its GPU VA need not be its CPU VA in
//! rigd or in any client; whoever writes commands is told [`HostMem::gpu_va`].

use rig_sys::{
    memfd::{Backing, Memfd, SealedMemfd},
    mman::{Fill, Mapping},
};

use super::{
    calls::{Rm, UnmapMemoryDma, UvmCall},
    error::{NvrmError, Step, at},
    gpu::{Gpu, Undo, first_of},
    layout::MapMemoryDma,
};
use crate::sys::nvrm::NvHandle;

/// NVOS02 flags for an OS descriptor (`nvos.h`): PHYSICALITY_NONCONTIGUOUS (7:4 = 1),
/// COHERENCY_CACHED (15:12 = 1), MAPPING_NO_MAP (31:30 = 1): no RM CPU mapping, rigd
/// has its own.
pub const OS_DESCRIPTOR_FLAGS: u32 = (1 << 4) | (1 << 12) | (1 << 30);
/// NVOS46 flags (`nvos.h`): CACHE_SNOOP_ENABLE (4:4), PAGE_SIZE_4KB (11:8 = 1),
/// DMA_OFFSET_FIXED_TRUE (15:15): map at the VA rigd picked.
pub const MAP_DMA_FLAGS: u32 = (1 << 4) | (1 << 8) | (1 << 15);
/// The page size host memory is sized in.
pub const PAGE: u64 = 4096;
/// The most host memory one `HostMem` holds.
pub const MAX_LEN: u64 = 1 << 40;

/// Host memory mapped for one GPU, freed when dropped.
#[derive(Debug)]
pub struct HostMem<'g, R: Rm> {
    gpu: &'g Gpu<R>,
    undo: Vec<Undo>,
    h_memory: NvHandle,
    gpu_va: u64,
    // Field order: unmapped after `Drop` ran the undo list, then the file closes.
    map: Mapping,
    file: SealedMemfd,
}

impl<'g, R: Rm> HostMem<'g, R> {
    /// `len` bytes (rounded up to a page), zeroed, mapped for the GPU.
    ///
    /// # Errors
    /// [`NvrmError::HostMemSize`], [`NvrmError::Memfd`], [`NvrmError::MapHost`],
    /// [`NvrmError::VaExhausted`], or [`NvrmError::Call`] naming the step; what was
    /// made before is freed.
    pub fn new(gpu: &'g Gpu<R>, len: u64) -> Result<Self, NvrmError> {
        if len == 0 || len > MAX_LEN {
            return Err(NvrmError::HostMemSize { len });
        }
        let len = len.next_multiple_of(PAGE);
        let memfd_err = |source| NvrmError::Memfd { len, source };
        let fd = Memfd::create(c"rig-gpu-host", Backing::Shmem).map_err(memfd_err)?;
        fd.set_len(len).map_err(memfd_err)?;
        let file = fd.seal().map_err(memfd_err)?;
        let map = Mapping::shared(&file, Fill::Populate)
            .map_err(|source| NvrmError::MapHost { len, source })?;
        let mut m = Self {
            gpu,
            undo: Vec::new(),
            h_memory: 0,
            gpu_va: 0,
            map,
            file,
        };
        m.register(len)?;
        Ok(m)
    }

    fn register(&mut self, len: u64) -> Result<(), NvrmError> {
        let gpu = self.gpu;
        let rm = gpu.rm();
        let va = gpu.alloc_va(len)?;
        self.undo.push(Undo::ReleaseVa { base: va, len });
        let h = rm
            .alloc_os_descriptor(gpu.device(), gpu.pick_handle(), &self.map)
            .map_err(at(Step::AllocOsDescriptor))?;
        self.undo.push(Undo::Free {
            parent: gpu.device(),
            object: h,
        });
        self.h_memory = h;
        rm.uvm(UvmCall::CreateExternalRange {
            base: va,
            length: len,
        })
        .map_err(at(Step::CreateExternalRange))?;
        // UVM_FREE also undoes UVM_MAP_EXTERNAL_ALLOCATION, so it stays on top: the
        // teardown is UVM_FREE, RM unmap, RM_FREE, munmap.
        let uvm_free = Undo::Uvm(UvmCall::Free {
            base: va,
            length: len,
        });
        self.undo.push(uvm_free);
        rm.map_dma(MapMemoryDma {
            h_client: rm.client(),
            h_device: gpu.device(),
            h_dma: gpu.dma(),
            h_memory: h,
            offset: 0,
            length: len,
            flags: MAP_DMA_FLAGS,
            dma_offset: va,
        })
        .map_err(at(Step::MapDma))?;
        let top = self.undo.len() - 1;
        self.undo.insert(
            top,
            Undo::UnmapDma(UnmapMemoryDma {
                h_device: gpu.device(),
                h_dma: gpu.dma(),
                h_memory: h,
                dma_offset: va,
            }),
        );
        rm.uvm(UvmCall::MapExternalAllocation {
            base: va,
            length: len,
            h_memory: h,
            uuid: gpu.uuid(),
        })
        .map_err(at(Step::MapExternal))?;
        self.gpu_va = va;
        Ok(())
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
        let failed = self.gpu.unwind(&mut self.undo);
        first_of(failed, "host memory")
    }
}

impl<R: Rm> Drop for HostMem<'_, R> {
    fn drop(&mut self) {
        for e in self.gpu.unwind(&mut self.undo) {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "freeing host memory of the GPU"
            );
        }
    }
}
