//! The RM calls the channel path makes, behind the small [`Rm`] trait: the real
//! [`SysRm`] on `sys::nvrm`, and `FakeRm` (tests, feature `fakes`)
//! that records them, so the order of creation and teardown is tested without a GPU.
//!
//! State: `SysRm` owns the files of one GPU's path: the root client's
//! `/dev/nvidiactl` and the registered `/dev/nvidiaN`; the usermode file and its
//! mapping are a
//! [`SysUsermode`] that `Gpu` owns. Objects and their order are `Gpu`'s, `HostMem`'s
//! and `Channel`'s business, not this file's.

use std::{
    fmt,
    fs::{File, OpenOptions},
    num::NonZeroUsize,
    os::fd::{AsFd, AsRawFd, BorrowedFd},
    path::{Path, PathBuf},
    sync::OnceLock,
};

use rig_sys::mman::{DeviceMapping, Mapping};

use super::{
    Card, NvrmError, Root,
    error::CallError,
    layout::{MapMemoryDma, Release},
};
use crate::sys::nvrm::{
    self as rm, AllocObject, MapMemory, NvHandle, Nvos02Parameters, Nvos47Parameters,
};

/// The usermode page's size (clc661.h: `NVC661` spans 64 KiB).
pub const USERMODE_LEN: usize = 0x1_0000;
/// NVC361_NOTIFY_CHANNEL_PENDING: the doorbell, written with a work submit token.
pub use rig_nv::gpfifo::USERMODE_NOTIFY_CHANNEL_PENDING as NVC361_NOTIFY_CHANNEL_PENDING;

/// NVOS02 flags for an OS descriptor (`nvos.h`): PHYSICALITY_NONCONTIGUOUS (7:4 = 1),
/// COHERENCY_CACHED (15:12 = 1), MAPPING_NO_MAP (31:30 = 1): no RM CPU mapping, rigd
/// has its own.
pub const OS_DESCRIPTOR_FLAGS: u32 = (1 << 4) | (1 << 12) | (1 << 30);

/// NV_ESC_RM_UNMAP_MEMORY_DMA's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnmapMemoryDma {
    pub h_device: NvHandle,
    pub h_dma: NvHandle,
    pub h_memory: NvHandle,
    pub dma_offset: u64,
}

/// A usermode page mapped for its doorbell.
pub trait Doorbell: fmt::Debug + Send + Sync {
    /// Writes `token` to NVC361_NOTIFY_CHANNEL_PENDING: the GPU then reads the
    /// channel's GP_PUT. The one register rig writes.
    fn ring(&self, token: u32);
    /// A descriptor a client maps the same page through ([`USERMODE_LEN`] bytes at
    /// offset 0): for the real RM a dup of the fresh, unregistered `/dev/nvidiaN`
    /// file that holds the page's mmap context (no pid, mm or uid check at mmap; a
    /// registered file would pin rigd's RM client: docs/hardware/nvidia-rm.md,
    /// "Handing mappings to another process").
    ///
    /// # Errors
    /// dup(2)'s.
    fn share(&self) -> std::io::Result<std::os::fd::OwnedFd>;
}

/// A file the RM marks readable when the GPU raises a non-stall interrupt: the one an
/// OS event (NV01_EVENT_OS_EVENT) is registered on (`nvrm::events`).
pub trait EventFile: fmt::Debug + Send + Sync {
    /// The key the event object's NV0005 `data` must name.
    fn key(&self) -> u32;
    /// What to poll (POLLIN | POLLPRI).
    fn fd(&self) -> BorrowedFd<'_>;
    /// After poll said readable: clears the mark where poll itself did not (the RM's
    /// file: poll consumes it, so nothing; the fake's eventfd: a read).
    fn consume(&self);
}

/// How the CPU maps GPU memory through BAR1 (NVOS33_FLAGS_CACHING_TYPE, `nvos.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caching {
    /// Write-combined: stores may land late and out of order, so a writer fences and
    /// reads back through the BAR before a doorbell (docs/hardware/nvidia-channels.md,
    /// "Before a doorbell").
    WriteCombined,
    /// Uncached: stores are posted in order.
    Uncached,
}

impl Caching {
    /// NV_ESC_RM_MAP_MEMORY's flags: CACHING_TYPE (25:23), the rest default
    /// (read-write access).
    pub fn map_flags(self) -> u32 {
        let caching = match self {
            Self::WriteCombined => 2, // NVOS33_FLAGS_CACHING_TYPE_WRITECOMBINED
            Self::Uncached => 1,      // NVOS33_FLAGS_CACHING_TYPE_UNCACHED
        };
        caching << 23
    }
}

/// A CPU view of GPU memory through BAR1, in whole aligned words.
#[expect(
    clippy::missing_errors_doc,
    reason = "every access fails only for an offset outside or misaligned"
)]
pub trait Window: fmt::Debug + Send + Sync {
    /// One volatile 32-bit store.
    fn write_u32(&self, offset: usize, value: u32) -> std::io::Result<()>;
    /// One volatile 64-bit store.
    fn write_u64(&self, offset: usize, value: u64) -> std::io::Result<()>;
    /// One volatile 32-bit load; through a BAR it returns after earlier stores landed.
    fn read_u32(&self, offset: usize) -> std::io::Result<u32>;
    /// The length mapped.
    fn len(&self) -> usize;
    /// A descriptor a client maps the same memory through ([`Window::len`] bytes at
    /// offset 0): for the real RM a dup of the fresh, unregistered `/dev/nvidiaN` file
    /// that holds the mapping's context. The client's mapping outlives an RM_FREE
    /// (docs/hardware/nvidia-rm.md, "Handing mappings to another process"), so whoever
    /// lends it keeps the memory until it is sure.
    fn share(&self) -> std::io::Result<std::os::fd::OwnedFd>;
    /// Always false.
    fn is_empty(&self) -> bool {
        false
    }
}

/// The RM calls of one GPU's channel path, on the root client's behalf.
/// Handles of 0 ask the RM to pick one.
#[expect(
    clippy::missing_errors_doc,
    reason = "every call fails with its CallError"
)]
pub trait Rm: fmt::Debug + Send + Sync + 'static {
    /// The usermode page's mapping.
    type Usermode: Doorbell;
    /// A CPU view of GPU memory.
    type Window: Window;
    /// A file OS events are posted to.
    type Events: EventFile;

    /// The root client.
    fn client(&self) -> NvHandle;
    /// The release whose layouts the calls use.
    fn release(&self) -> Release;
    /// The GPUs the kernel driver holds.
    fn cards(&self) -> Result<Vec<Card>, CallError>;
    /// Opens `/dev/nvidia<minor>` and registers it to the ctl file, for RM_ALLOC_MEMORY.
    fn open_device(&self, minor: u32) -> Result<(), CallError>;
    /// RM_ALLOC under `parent`; `params` are the class's, written back.
    fn alloc(
        &self,
        parent: NvHandle,
        class: u32,
        params: Option<&mut [u8]>,
    ) -> Result<NvHandle, CallError>;
    /// RM_ALLOC_MEMORY of an OS descriptor over all of `mem`, as `handle` under `parent`.
    fn alloc_os_descriptor(
        &self,
        parent: NvHandle,
        handle: NvHandle,
        mem: &Mapping,
    ) -> Result<NvHandle, CallError>;
    /// RM_FREE of `object` under `parent` (and everything under it).
    fn free(&self, parent: NvHandle, object: NvHandle) -> Result<(), CallError>;
    /// RM_CONTROL `cmd` on `object`.
    fn control(&self, object: NvHandle, cmd: u32, params: &mut [u8]) -> Result<(), CallError>;
    /// GPU_GET_CLASSLIST on `device`.
    fn classlist(&self, device: NvHandle) -> Result<Vec<u32>, CallError>;
    /// GR_GET_INFO on `subdevice`: the value at each of `indices`, in order.
    fn gr_info(&self, subdevice: NvHandle, indices: &[u32]) -> Result<Vec<u32>, CallError>;
    /// RM_MAP_MEMORY_DMA; returns the GPU VA.
    fn map_dma(&self, map: MapMemoryDma) -> Result<u64, CallError>;
    /// RM_UNMAP_MEMORY_DMA.
    fn unmap_dma(&self, unmap: UnmapMemoryDma) -> Result<(), CallError>;
    /// RM_MAP_MEMORY of `usermode` into a fresh, unregistered `/dev/nvidiaN`, mmapped.
    fn map_usermode(
        &self,
        device: NvHandle,
        usermode: NvHandle,
    ) -> Result<Self::Usermode, CallError>;
    /// A fresh file for OS events of the root client: NV_ESC_ALLOC_OS_EVENT with the
    /// file's own descriptor number as its key. Dropping it frees the registration.
    fn open_events(&self) -> Result<Self::Events, CallError>;
    /// RM_MAP_MEMORY of `len` bytes of `memory` (GPU memory) into a fresh,
    /// unregistered `/dev/nvidiaN`, mmapped.
    fn map_window(
        &self,
        device: NvHandle,
        memory: NvHandle,
        len: usize,
        caching: Caching,
    ) -> Result<Self::Window, CallError>;
}

/// The real RM path: [`Root`] and the files of one GPU.
#[derive(Debug)]
pub struct SysRm {
    root: Root,
    release: Release,
    dev_dir: PathBuf,
    /// The GPU's minor and its registered `/dev/nvidiaN`.
    device: OnceLock<(u32, File)>,
}

fn open_rw(path: PathBuf) -> Result<File, CallError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|source| CallError::Open { path, source })
}

impl SysRm {
    /// Opens `<dev_dir>/nvidiactl` with a root client and reads the release.
    ///
    /// # Errors
    /// As [`Root::open`] and [`Root::build_version`].
    pub fn open(dev_dir: &Path) -> Result<Self, NvrmError> {
        let root = Root::open(dev_dir)?;
        let release = root.build_version()?.release;
        Ok(Self {
            root,
            release,
            dev_dir: dev_dir.to_path_buf(),
            device: OnceLock::new(),
        })
    }

    fn ctl(&self) -> BorrowedFd<'_> {
        self.root.ctl()
    }

    fn opened(&self) -> Result<&(u32, File), CallError> {
        self.device.get().ok_or_else(|| CallError::Map {
            what: "the GPU before its /dev/nvidiaN was opened",
            source: std::io::ErrorKind::NotConnected.into(),
        })
    }

    fn device(&self) -> Result<BorrowedFd<'_>, CallError> {
        Ok(self.opened()?.1.as_fd())
    }

    fn device_path(&self) -> Result<PathBuf, CallError> {
        let minor = self.opened()?.0;
        Ok(self.dev_dir.join(format!("nvidia{minor}")))
    }
}

/// The usermode page: the fresh `/dev/nvidiaN` file that holds its mmap context (what
/// a client will receive by SCM_RIGHTS) and rigd's mapping of it.
#[derive(Debug)]
pub struct SysUsermode {
    // Field order: the mapping goes before the file closes.
    map: DeviceMapping,
    file: File,
}

impl SysUsermode {
    /// The file a client mmaps (offset 0, [`USERMODE_LEN`] bytes). It is not
    /// REGISTER_FD'd, so holding it does not keep rigd's RM client alive.
    pub fn file(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Doorbell for SysUsermode {
    fn share(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.file.as_fd().try_clone_to_owned()
    }

    fn ring(&self, token: u32) {
        let written = self.map.write_u32(NVC361_NOTIFY_CHANNEL_PENDING, token);
        debug_assert!(written.is_ok(), "0x90 lies inside the 64 KiB page");
    }
}

/// GPU memory mapped through BAR1: rigd's mapping and the fresh `/dev/nvidiaN` file
/// that holds its mmap context.
#[derive(Debug)]
pub struct SysWindow {
    // Field order: the mapping goes before the file closes.
    map: DeviceMapping,
    file: File,
}

impl SysWindow {
    /// The file that holds the mapping's context.
    pub fn file(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Window for SysWindow {
    fn write_u32(&self, offset: usize, value: u32) -> std::io::Result<()> {
        self.map.write_u32(offset, value)
    }

    fn write_u64(&self, offset: usize, value: u64) -> std::io::Result<()> {
        self.map.write_u64(offset, value)
    }

    fn read_u32(&self, offset: usize) -> std::io::Result<u32> {
        self.map.read_u32(offset)
    }

    fn len(&self) -> usize {
        self.map.len()
    }

    fn share(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.file.as_fd().try_clone_to_owned()
    }
}

/// A fresh `/dev/nvidiactl`, holding no client, that OS events are posted to. Opened
/// blocking: the driver's poll waits on the file's queue only without O_NONBLOCK
/// (docs/hardware/nvidia-rm.md, "Non-stall interrupts and OS events").
#[derive(Debug)]
pub struct SysEvents {
    file: File,
    client: NvHandle,
    key: u32,
}

impl EventFile for SysEvents {
    fn key(&self) -> u32 {
        self.key
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    fn consume(&self) {}
}

impl Drop for SysEvents {
    fn drop(&mut self) {
        // Closing the file frees the registration too (nvidia_close); this says so
        // first, while the client is known to be alive.
        if let Err(e) = rm::free_os_event(self.file.as_fd(), self.client, self.key) {
            tracing::debug!(error = %e, "freeing the OS event registration on drop");
        }
    }
}

impl SysRm {
    /// RM_MAP_MEMORY of `object` into a fresh `/dev/nvidiaN` file (never
    /// REGISTER_FD'd: docs/hardware/nvidia-rm.md, "Handing mappings to another
    /// process"), then mmap of `len` bytes at offset 0.
    fn map_object(
        &self,
        device: NvHandle,
        object: NvHandle,
        len: usize,
        flags: u32,
        what: &'static str,
    ) -> Result<(DeviceMapping, File), CallError> {
        let file = open_rw(self.device_path()?)?;
        let map = MapMemory {
            h_client: self.client(),
            h_device: device,
            h_memory: object,
            offset: 0,
            length: len as u64,
            flags,
        };
        rm::rm_map_memory(self.ctl(), map, file.as_fd())?;
        let n = NonZeroUsize::new(len).ok_or_else(|| CallError::Map {
            what,
            source: std::io::ErrorKind::InvalidInput.into(),
        })?;
        let map = DeviceMapping::map(file.as_fd(), n)
            .map_err(|source| CallError::Map { what, source })?;
        Ok((map, file))
    }
}

impl Rm for SysRm {
    type Usermode = SysUsermode;
    type Window = SysWindow;
    type Events = SysEvents;

    fn client(&self) -> NvHandle {
        self.root.handle()
    }

    fn release(&self) -> Release {
        self.release
    }

    fn cards(&self) -> Result<Vec<Card>, CallError> {
        self.root.cards().map_err(|e| match e {
            NvrmError::CardInfo(e) => CallError::Rm(e),
            other => CallError::Map {
                what: "the card list",
                source: std::io::Error::other(other.to_string()),
            },
        })
    }

    fn open_device(&self, minor: u32) -> Result<(), CallError> {
        let dev = open_rw(self.dev_dir.join(format!("nvidia{minor}")))?;
        rm::register_fd(dev.as_fd(), self.ctl())?;
        // A second open keeps the first file; Gpu opens one device per SysRm.
        let _ = self.device.set((minor, dev));
        Ok(())
    }

    fn alloc(
        &self,
        parent: NvHandle,
        class: u32,
        params: Option<&mut [u8]>,
    ) -> Result<NvHandle, CallError> {
        let obj = AllocObject {
            h_root: self.client(),
            h_object_parent: parent,
            h_object_new: 0,
            h_class: class,
        };
        Ok(rm::rm_alloc(self.ctl(), obj, params)?)
    }

    fn alloc_os_descriptor(
        &self,
        parent: NvHandle,
        handle: NvHandle,
        mem: &Mapping,
    ) -> Result<NvHandle, CallError> {
        let params = Nvos02Parameters {
            h_root: self.client(),
            h_object_parent: parent,
            h_object_new: handle,
            h_class: super::layout::r580::NV01_MEMORY_SYSTEM_OS_DESCRIPTOR,
            flags: OS_DESCRIPTOR_FLAGS,
            ..Default::default()
        };
        Ok(rm::rm_alloc_os_descriptor(self.device()?, params, mem)?)
    }

    fn free(&self, parent: NvHandle, object: NvHandle) -> Result<(), CallError> {
        Ok(rm::rm_free(self.ctl(), self.client(), parent, object)?)
    }

    fn control(&self, object: NvHandle, cmd: u32, params: &mut [u8]) -> Result<(), CallError> {
        Ok(rm::rm_control(
            self.ctl(),
            self.client(),
            object,
            cmd,
            params,
        )?)
    }

    fn classlist(&self, device: NvHandle) -> Result<Vec<u32>, CallError> {
        Ok(rm::gpu_get_classlist(self.ctl(), self.client(), device)?)
    }

    fn gr_info(&self, subdevice: NvHandle, indices: &[u32]) -> Result<Vec<u32>, CallError> {
        Ok(rm::gr_get_info(
            self.ctl(),
            self.client(),
            subdevice,
            indices,
        )?)
    }

    fn map_dma(&self, map: MapMemoryDma) -> Result<u64, CallError> {
        Ok(self.release.map_memory_dma(map).issue(self.ctl())?)
    }

    fn unmap_dma(&self, u: UnmapMemoryDma) -> Result<(), CallError> {
        let mut p = Nvos47Parameters {
            h_client: self.client(),
            h_device: u.h_device,
            h_dma: u.h_dma,
            h_memory: u.h_memory,
            dma_offset: u.dma_offset,
            ..Default::default()
        };
        Ok(rm::rm_unmap_memory_dma(self.ctl(), &mut p)?)
    }

    fn map_usermode(&self, device: NvHandle, usermode: NvHandle) -> Result<SysUsermode, CallError> {
        let (map, file) =
            self.map_object(device, usermode, USERMODE_LEN, 0, "the usermode page")?;
        Ok(SysUsermode { map, file })
    }

    fn open_events(&self) -> Result<SysEvents, CallError> {
        let file = open_rw(self.dev_dir.join("nvidiactl"))?;
        // The key is the file's own number, as CUDA's are (docs/hardware/nvidia-rm.md):
        // unique among rigd's open files, so unique per client.
        let key = u32::try_from(file.as_raw_fd()).map_err(|_| CallError::Map {
            what: "an event file's number",
            source: std::io::ErrorKind::InvalidData.into(),
        })?;
        rm::alloc_os_event(file.as_fd(), self.client(), key)?;
        Ok(SysEvents {
            file,
            client: self.client(),
            key,
        })
    }

    fn map_window(
        &self,
        device: NvHandle,
        memory: NvHandle,
        len: usize,
        caching: Caching,
    ) -> Result<SysWindow, CallError> {
        let (map, file) = self.map_object(
            device,
            memory,
            len,
            caching.map_flags(),
            "GPU memory through BAR1",
        )?;
        Ok(SysWindow { map, file })
    }
}
