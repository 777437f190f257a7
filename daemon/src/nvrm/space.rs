//! `AddressSpace`: one client's GPU virtual address space on an RM-served GPU — an
//! RM-owned FERMI_VASPACE_A, the NV01_MEMORY_VIRTUAL object that maps into it, and
//! the VA it hands out — and [`GpuMap`], host memory mapped into it.
//!
//! Why RM-owned: UVM registers one GPU address space per process and GPU (a second
//! one is refused with NV_ERR_INVALID_DEVICE: docs/hardware/nvidia-rm.md, "UVM
//! ioctls"), so one rigd could give all its clients only one. An
//! RM-owned space (flags 0) is allocated beside others on the same device (device
//! vaMode OPTIONAL_MULTIPLE_VASPACES), the RM fills its page tables itself through
//! NV_ESC_RM_MAP_MEMORY_DMA, and maps a channel's context buffers there when the
//! channel is made — no UVM call at all. A channel whose context share names this
//! space reaches only what is mapped here, so a client's pushbuffer cannot name
//! another client's memory: it is not in its page tables. The RM's own maps stopped at
//! about 39 GiB a GPU in 4 KiB pages, all processes together, on an RTX 5000 Ada
//! (docs/hardware/nvidia-rm.md, "The RM's own mapping limit"); the DMA quotas keep
//! rigd well below that.
//!
//! The layout (rig_model::addr::layout, docs/compute.md "The GPU address space"):
//! [`OWN_BASE`]..[`LEASE_BASE`] holds what rigd makes for a client's channels (rings,
//! USERD, notifiers, channel windows), [`LEASE_BASE`]..[`GPU_MEMORY_BASE`] the
//! client's DMA leases, whose addresses the lease pool picks, and
//! [`GPU_MEMORY_BASE`]..[`VA_END`] GPU memory lent to the client, in 2 MiB pages at
//! 2 MiB-aligned VAs ([`Region::GpuMemory`]). All of it lies below 2^40, where GPFIFO
//! entries and QMD pointers can point (clc86f.h GP_ENTRY1 GET_HI is 8 bits:
//! docs/hardware/nvidia-channels.md, "Ring entries"), and above the compute windows
//! (shared memory at 32 GiB, local memory just below it), where rigd never maps: the
//! only allocators here start at [`OWN_BASE`]. The RM's own mappings in the space (a
//! channel's context buffers) take the lowest free VA from the space's start
//! (docs/hardware/nvidia-rm.md, "Address spaces").
//!
//! Not here: the objects a space lives on (`gpu`), memory rigd owns (`mem`), channels
//! (`channel`), lease pools (`dma`, which calls [`AddressSpace`] through
//! [`dma::DeviceMap`]).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use rig_model::addr::layout;
use rig_sys::mman::Mapping;
use zerocopy::IntoBytes;

use super::{
    calls::{Rm, UnmapMemoryDma},
    error::{NvrmError, Step, at},
    gpu::{Gpu, Undo, first_of},
    layout::{MapMemoryDma, VaSpace, r580},
    va::VaAllocator,
};
use crate::{
    dma::{self, DmaError},
    sys::nvrm::NvHandle,
};

/// Where rigd's own allocations for a client start: 64 GiB.
pub const OWN_BASE: u64 = layout::OWN_BASE.get();
/// Where leases start: 256 GiB. They get 2^39 - 2^38 = 256 GiB of VA.
pub const LEASE_BASE: u64 = layout::LEASE_BASE.get();
/// Where lent GPU memory starts: 512 GiB. It gets 2^40 - 2^39 = 512 GiB of VA.
pub const GPU_MEMORY_BASE: u64 = layout::GPU_MEMORY_BASE.get();
/// The window's end: GPFIFO entries name 40-bit pushbuffer addresses.
pub const VA_END: u64 = layout::VA_END.get();
/// rigd's own ranges start on 64 KiB, the GPU's big page.
pub const OWN_ALIGN: u64 = 64 << 10;

/// FERMI_VASPACE_A's range: all of 2^40 from the first page; the RM refuses a page 0
/// (tinygrad's `ops_nv.py` starts its space at 0x1000 too).
const VASPACE_BASE: u64 = 0x1000;
const VASPACE_SIZE: u64 = VA_END - VASPACE_BASE;
/// NVOS46 flags (`nvos.h`): CACHE_SNOOP_ENABLE (4:4), PAGE_SIZE_4KB (11:8 = 1),
/// DMA_OFFSET_FIXED_TRUE (15:15): map at the VA rigd picked.
pub const MAP_DMA_FLAGS: u32 = (1 << 4) | (1 << 8) | (1 << 15);

/// Which of rigd's ranges of a space a mapping's VA comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// [`OWN_BASE`]..[`LEASE_BASE`]: what rigd makes for the client's channels.
    Own,
    /// [`GPU_MEMORY_BASE`]..[`VA_END`]: GPU memory lent to the client.
    GpuMemory,
}

/// One client's GPU address space.
#[derive(Debug)]
pub struct AddressSpace<R: Rm> {
    gpu: Arc<Gpu<R>>,
    h_va_space: NvHandle,
    h_virtual: NvHandle,
    own: Mutex<VaAllocator>,
    /// VA for GPU memory lent to the client ([`Region::GpuMemory`]).
    lent: Mutex<VaAllocator>,
    /// Leases mapped through [`dma::DeviceMap`]: GPU VA → the host memory's handle
    /// and length, one entry per block.
    leased: Mutex<BTreeMap<u64, (NvHandle, u64)>>,
    undo: Vec<Undo>,
}

impl<R: Rm> AddressSpace<R> {
    /// Allocates an RM-owned FERMI_VASPACE_A under the GPU's device and the
    /// NV01_MEMORY_VIRTUAL object that maps into it.
    ///
    /// # Errors
    /// [`NvrmError::Call`] naming the step; what was made before is freed.
    pub fn new(gpu: &Arc<Gpu<R>>) -> Result<Self, NvrmError> {
        let mut s = Self {
            gpu: Arc::clone(gpu),
            h_va_space: 0,
            h_virtual: 0,
            own: Mutex::new(VaAllocator::new(OWN_BASE, LEASE_BASE - OWN_BASE)),
            lent: Mutex::new(VaAllocator::new(GPU_MEMORY_BASE, VA_END - GPU_MEMORY_BASE)),
            leased: Mutex::new(BTreeMap::new()),
            undo: Vec::new(),
        };
        let rm = gpu.rm();
        let mut vas = gpu.release().vaspace(VaSpace {
            va_base: VASPACE_BASE,
            va_size: VASPACE_SIZE,
            ..Default::default()
        });
        s.h_va_space = rm
            .alloc(
                gpu.device(),
                r580::FERMI_VASPACE_A,
                Some(vas.as_mut_bytes()),
            )
            .map_err(at(Step::AllocVaSpace))?;
        s.undo.push(Undo::Free {
            parent: gpu.device(),
            object: s.h_va_space,
        });
        let mut virt = r580::NvMemoryVirtualAllocationParams {
            limit: VA_END - 1,
            h_va_space: s.h_va_space,
            ..Default::default()
        };
        s.h_virtual = rm
            .alloc(
                gpu.device(),
                r580::NV01_MEMORY_VIRTUAL,
                Some(virt.as_mut_bytes()),
            )
            .map_err(at(Step::AllocVirtual))?;
        s.undo.push(Undo::Free {
            parent: gpu.device(),
            object: s.h_virtual,
        });
        Ok(s)
    }

    /// The GPU.
    pub fn gpu(&self) -> &Arc<Gpu<R>> {
        &self.gpu
    }

    /// The VA space's handle (a context share's `hVASpace`).
    pub fn handle(&self) -> NvHandle {
        self.h_va_space
    }

    /// `len` bytes of rigd's own VA in this space.
    pub(crate) fn alloc_va(&self, len: u64) -> Result<u64, NvrmError> {
        lock(&self.own)
            .alloc(len, OWN_ALIGN)
            .ok_or(NvrmError::VaExhausted { len })
    }

    /// `len` bytes of VA of `region` in this space, aligned to `align`.
    pub(crate) fn alloc_va_in(
        &self,
        region: Region,
        len: u64,
        align: u64,
    ) -> Result<u64, NvrmError> {
        lock(self.allocator(region))
            .alloc(len, align)
            .ok_or(NvrmError::VaExhausted { len })
    }

    fn allocator(&self, region: Region) -> &Mutex<VaAllocator> {
        match region {
            Region::Own => &self.own,
            Region::GpuMemory => &self.lent,
        }
    }

    /// Bytes of VA free for lent GPU memory.
    pub fn gpu_memory_va_free(&self) -> u64 {
        lock(&self.lent).free_bytes()
    }

    /// Registers all of `mem` with the RM as an OS descriptor and maps it at `va`;
    /// pushes how to undo both onto `undo`. Returns the descriptor's handle.
    pub(crate) fn map(
        &self,
        mem: &Mapping,
        va: u64,
        undo: &mut Vec<Undo>,
    ) -> Result<NvHandle, NvrmError> {
        let gpu = &self.gpu;
        let rm = gpu.rm();
        let h = rm
            .alloc_os_descriptor(gpu.device(), gpu.pick_handle(), mem)
            .map_err(at(Step::AllocOsDescriptor))?;
        undo.push(Undo::Free {
            parent: gpu.device(),
            object: h,
        });
        self.map_memory(h, mem.len() as u64, va, MAP_DMA_FLAGS, undo)?;
        Ok(h)
    }

    /// Maps `len` bytes of the memory object `h` at `va` with NVOS46 `flags`; pushes
    /// the unmap onto `undo`.
    pub(crate) fn map_memory(
        &self,
        h: NvHandle,
        len: u64,
        va: u64,
        flags: u32,
        undo: &mut Vec<Undo>,
    ) -> Result<(), NvrmError> {
        let gpu = &self.gpu;
        let rm = gpu.rm();
        rm.map_dma(MapMemoryDma {
            h_client: rm.client(),
            h_device: gpu.device(),
            h_dma: self.h_virtual,
            h_memory: h,
            offset: 0,
            length: len,
            flags,
            dma_offset: va,
        })
        .map_err(at(Step::MapDma))?;
        undo.push(Undo::UnmapDma(self.unmap_request(h, va)));
        Ok(())
    }

    fn unmap_request(&self, h_memory: NvHandle, va: u64) -> UnmapMemoryDma {
        UnmapMemoryDma {
            h_device: self.gpu.device(),
            h_dma: self.h_virtual,
            h_memory,
            dma_offset: va,
        }
    }

    /// Runs one undo step of an object in this space.
    pub(crate) fn run(&self, u: Undo) -> Result<(), NvrmError> {
        match u {
            Undo::ReleaseVa { base, len } => {
                let region = if base >= GPU_MEMORY_BASE {
                    Region::GpuMemory
                } else {
                    Region::Own
                };
                let freed = lock(self.allocator(region)).free(base, len);
                debug_assert!(freed, "{len:#x} bytes at {base:#x} came from alloc_va");
                Ok(())
            }
            other => self.gpu.run(other),
        }
    }

    /// Runs `undo` backwards to the end, whatever fails; returns the failures.
    pub(crate) fn unwind(&self, undo: &mut Vec<Undo>) -> Vec<NvrmError> {
        let mut failed = Vec::new();
        while let Some(u) = undo.pop() {
            if let Err(e) = self.run(u) {
                failed.push(e);
            }
        }
        failed
    }

    /// How many lease blocks are mapped here now.
    pub fn leased_blocks(&self) -> usize {
        lock(&self.leased).len()
    }

    fn teardown(&mut self) -> Vec<NvrmError> {
        // Lease blocks go with their leases; any left (their pool was dropped without
        // a release) are unmapped here, before the space that holds them.
        let left: Vec<(u64, (NvHandle, u64))> = std::mem::take(&mut *lock(&self.leased))
            .into_iter()
            .collect();
        let mut failed: Vec<NvrmError> = left
            .into_iter()
            .filter_map(|(va, (h, _))| self.unmap_block(va, h).err())
            .collect();
        let mut undo = std::mem::take(&mut self.undo);
        failed.extend(self.unwind(&mut undo));
        failed
    }

    fn unmap_block(&self, va: u64, h: NvHandle) -> Result<(), NvrmError> {
        let mut undo = vec![
            Undo::Free {
                parent: self.gpu.device(),
                object: h,
            },
            Undo::UnmapDma(self.unmap_request(h, va)),
        ];
        first_of(self.unwind(&mut undo), "a lease block")
    }

    /// Frees the space; whatever is still mapped in it goes first.
    ///
    /// # Errors
    /// The first step that failed; the later ones still ran.
    pub fn close(mut self) -> Result<(), NvrmError> {
        first_of(self.teardown(), "an address space")
    }
}

impl<R: Rm> Drop for AddressSpace<R> {
    fn drop(&mut self) {
        for e in self.teardown() {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "freeing a GPU address space"
            );
        }
    }
}

/// A client's DMA lease blocks, mapped at the addresses its pool picked.
impl<R: Rm> dma::DeviceMap for AddressSpace<R> {
    fn va_range(&self) -> std::ops::RangeInclusive<u64> {
        LEASE_BASE..=GPU_MEMORY_BASE - 1
    }

    fn map_block(&self, va: u64, block: &Mapping) -> Result<(), DmaError> {
        let mut undo = Vec::new();
        match self.map(block, va, &mut undo) {
            Ok(h) => {
                lock(&self.leased).insert(va, (h, block.len() as u64));
                Ok(())
            }
            Err(e) => {
                for u in self.unwind(&mut undo) {
                    tracing::warn!(
                        error = &u as &dyn std::error::Error,
                        "rolling back a lease block's map"
                    );
                }
                Err(DmaError::DeviceMap {
                    va,
                    source: Box::new(e),
                })
            }
        }
    }

    fn unmap(&self, va: u64, len: u64) -> Result<(), DmaError> {
        let blocks: Vec<(u64, NvHandle)> = {
            let mut leased = lock(&self.leased);
            let keys: Vec<u64> = leased
                .range(va..va.saturating_add(len))
                .map(|(&k, _)| k)
                .collect();
            keys.into_iter()
                .filter_map(|k| leased.remove(&k).map(|(h, _)| (k, h)))
                .collect()
        };
        let mut first = None;
        for (at_va, h) in blocks {
            if let Err(e) = self.unmap_block(at_va, h) {
                first.get_or_insert(DmaError::DeviceUnmap {
                    va: at_va,
                    source: Box::new(e),
                });
            }
        }
        first.map_or(Ok(()), Err)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps hold plain numbers: a panic under the lock leaves them usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
