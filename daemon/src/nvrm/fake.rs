//! `FakeRm`: an [`Rm`] that hands out handles, records every call typed, answers the
//! controls the path reads (device instance, UUID, work submit token, class list) and
//! fails one chosen call with a chosen NV status. Tests and feature `fakes` only.

use std::sync::{Arc, Mutex, PoisonError};

use rig_sys::mman::Mapping;

use super::{
    Card,
    calls::{Caching, Doorbell, Rm, UnmapMemoryDma, Window},
    error::CallError,
    layout::{MapMemoryDma, Release, r580},
};
use crate::sys::{
    nvrm::{NvHandle, RmError},
    nvstatus::NvStatus,
};

/// The fake root client's handle.
pub const FAKE_CLIENT: NvHandle = 0xc1d0_0001;
/// The fake GPU's UUID.
pub const FAKE_UUID: [u8; 16] = *b"rig-fake-gpu-id!";
/// The fake channels' work submit token.
pub const FAKE_TOKEN: u32 = 0x7ee;

/// One call, as the fake saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Cards,
    OpenDevice {
        minor: u32,
    },
    Alloc {
        parent: NvHandle,
        class: u32,
        handle: NvHandle,
    },
    AllocOsDescriptor {
        parent: NvHandle,
        handle: NvHandle,
        len: usize,
    },
    Free {
        parent: NvHandle,
        object: NvHandle,
    },
    Control {
        object: NvHandle,
        cmd: u32,
        /// The params' first byte as sent (GPFIFO_SCHEDULE's bEnable).
        first: Option<u8>,
    },
    ClassList {
        device: NvHandle,
    },
    MapDma {
        /// The space's NV01_MEMORY_VIRTUAL.
        h_dma: NvHandle,
        h_memory: NvHandle,
        dma_offset: u64,
    },
    UnmapDma {
        h_dma: NvHandle,
        h_memory: NvHandle,
        dma_offset: u64,
    },
    MapUsermode {
        usermode: NvHandle,
    },
    UnmapUsermode,
    MapWindow {
        memory: NvHandle,
        len: usize,
        caching: Caching,
    },
    UnmapWindow {
        memory: NvHandle,
    },
    Doorbell {
        token: u32,
    },
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<Call>,
    next: NvHandle,
    /// Fail the call with this index (counting every call) with this status.
    fail_at: Option<(usize, NvStatus)>,
    classes: Option<Vec<u32>>,
    /// What SYSTEM_GET_PRIVILEGED_STATUS answers.
    privileged: u8,
}

/// A fake RM; clones share one log.
#[derive(Debug, Clone, Default)]
pub struct FakeRm {
    state: Arc<Mutex<State>>,
}

impl FakeRm {
    /// A fake whose GPU has every Hopper class.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fails the `index`-th call from now on (0-based, over all calls) with `status`.
    pub fn fail_at(&self, index: usize, status: NvStatus) {
        let mut s = self.lock();
        let at = s.calls.len() + index;
        s.fail_at = Some((at, status));
    }

    /// Answers GPU_GET_CLASSLIST with `classes`.
    pub fn set_classes(&self, classes: Vec<u32>) {
        self.lock().classes = Some(classes);
    }

    /// Answers SYSTEM_GET_PRIVILEGED_STATUS with `flags` (as a root rigd that kept
    /// CAP_SYS_ADMIN around its RM calls would get).
    pub fn set_privileged(&self, flags: u8) {
        self.lock().privileged = flags;
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `call`; the injected status if this is the one to fail.
    fn record(&self, call: Call) -> Result<(), NvStatus> {
        let mut s = self.lock();
        let i = s.calls.len();
        s.calls.push(call);
        match s.fail_at {
            Some((at, status)) if at == i => Err(status),
            _ => Ok(()),
        }
    }

    fn rm(&self, call: Call) -> Result<(), CallError> {
        self.record(call).map_err(|status| {
            CallError::Rm(RmError::Status {
                escape: "fake",
                status,
            })
        })
    }

    fn handle(&self) -> NvHandle {
        let mut s = self.lock();
        s.next += 1;
        0xcaf0_0000 + s.next
    }
}

/// The fake usermode page: rings are recorded in the fake's log.
#[derive(Debug)]
pub struct FakeUsermode {
    rm: FakeRm,
    /// Stands in for the page a client maps: what it writes lands here.
    page: rig_sys::memfd::SealedMemfd,
}

impl FakeUsermode {
    /// The word a client last wrote at `offset` of its mapping of the page.
    pub fn read_u32(&self, offset: usize) -> u32 {
        rig_sys::mman::Mapping::shared(&self.page, rig_sys::mman::Fill::Lazy)
            .and_then(|m| m.read_u32(offset))
            .expect("the fake usermode page maps")
    }
}

impl Doorbell for FakeUsermode {
    fn ring(&self, token: u32) {
        let _ = self.rm.record(Call::Doorbell { token });
    }

    fn share(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self.page.try_clone().map(Into::into)
    }
}

impl Drop for FakeUsermode {
    fn drop(&mut self) {
        let _ = self.rm.record(Call::UnmapUsermode);
    }
}

/// GPU memory's CPU view, standing in: host memory of the same length.
#[derive(Debug)]
pub struct FakeWindow {
    rm: FakeRm,
    memory: NvHandle,
    map: Mapping,
    file: rig_sys::memfd::SealedMemfd,
}

impl Window for FakeWindow {
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
        self.file.try_clone().map(Into::into)
    }
}

impl Drop for FakeWindow {
    fn drop(&mut self) {
        let _ = self.rm.record(Call::UnmapWindow {
            memory: self.memory,
        });
    }
}

fn put_u32(params: &mut [u8], at: usize, v: u32) {
    if let Some(b) = params.get_mut(at..at + 4) {
        b.copy_from_slice(&v.to_ne_bytes());
    }
}

impl Rm for FakeRm {
    type Usermode = FakeUsermode;
    type Window = FakeWindow;

    fn client(&self) -> NvHandle {
        FAKE_CLIENT
    }

    fn release(&self) -> Release {
        Release::R580
    }

    fn cards(&self) -> Result<Vec<Card>, CallError> {
        self.rm(Call::Cards)?;
        Ok(vec![Card {
            gpu_id: 0x600,
            minor: 0,
            bdf: "0000:00:06.0".into(),
            vendor_id: 0x10de,
            device_id: 0x2335,
            fb_size: 1 << 38,
        }])
    }

    fn open_device(&self, minor: u32) -> Result<(), CallError> {
        self.rm(Call::OpenDevice { minor })
    }

    fn alloc(
        &self,
        parent: NvHandle,
        class: u32,
        _params: Option<&mut [u8]>,
    ) -> Result<NvHandle, CallError> {
        let handle = self.handle();
        self.rm(Call::Alloc {
            parent,
            class,
            handle,
        })?;
        Ok(handle)
    }

    fn alloc_os_descriptor(
        &self,
        parent: NvHandle,
        handle: NvHandle,
        mem: &Mapping,
    ) -> Result<NvHandle, CallError> {
        self.rm(Call::AllocOsDescriptor {
            parent,
            handle,
            len: mem.len(),
        })?;
        Ok(handle)
    }

    fn free(&self, parent: NvHandle, object: NvHandle) -> Result<(), CallError> {
        self.rm(Call::Free { parent, object })
    }

    fn control(&self, object: NvHandle, cmd: u32, params: &mut [u8]) -> Result<(), CallError> {
        self.rm(Call::Control {
            object,
            cmd,
            first: params.first().copied(),
        })?;
        match cmd {
            // deviceInstance at 8.
            r580::NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 => put_u32(params, 8, 0),
            // length at 8, data at 12.
            r580::NV2080_CTRL_CMD_GPU_GET_GID_INFO => {
                put_u32(params, 8, 16);
                if let Some(d) = params.get_mut(12..28) {
                    d.copy_from_slice(&FAKE_UUID);
                }
            }
            r580::NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN => put_u32(params, 0, FAKE_TOKEN),
            r580::NV0000_CTRL_CMD_SYSTEM_GET_PRIVILEGED_STATUS => {
                if let Some(b) = params.first_mut() {
                    *b = self.lock().privileged;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn classlist(&self, device: NvHandle) -> Result<Vec<u32>, CallError> {
        self.rm(Call::ClassList { device })?;
        Ok(self.lock().classes.clone().unwrap_or_else(|| {
            vec![
                r580::HOPPER_USERMODE_A,
                r580::HOPPER_CHANNEL_GPFIFO_A,
                r580::HOPPER_DMA_COPY_A,
                r580::HOPPER_COMPUTE_A,
                r580::KEPLER_CHANNEL_GROUP_A,
            ]
        }))
    }

    fn map_dma(&self, map: MapMemoryDma) -> Result<u64, CallError> {
        self.rm(Call::MapDma {
            h_dma: map.h_dma,
            h_memory: map.h_memory,
            dma_offset: map.dma_offset,
        })?;
        Ok(map.dma_offset)
    }

    fn unmap_dma(&self, u: UnmapMemoryDma) -> Result<(), CallError> {
        self.rm(Call::UnmapDma {
            h_dma: u.h_dma,
            h_memory: u.h_memory,
            dma_offset: u.dma_offset,
        })
    }

    fn map_usermode(
        &self,
        _device: NvHandle,
        usermode: NvHandle,
    ) -> Result<FakeUsermode, CallError> {
        self.rm(Call::MapUsermode { usermode })?;
        let page = rig_sys::memfd::Memfd::sealed(
            c"rig-fake-usermode",
            rig_sys::memfd::Backing::Shmem,
            super::calls::USERMODE_LEN as u64,
        )
        .map_err(|source| CallError::Map {
            what: "the fake usermode page",
            source,
        })?;
        Ok(FakeUsermode {
            rm: self.clone(),
            page,
        })
    }

    fn map_window(
        &self,
        _device: NvHandle,
        memory: NvHandle,
        len: usize,
        caching: Caching,
    ) -> Result<FakeWindow, CallError> {
        self.rm(Call::MapWindow {
            memory,
            len,
            caching,
        })?;
        let map = |source| CallError::Map {
            what: "the fake GPU memory",
            source,
        };
        let file = rig_sys::memfd::Memfd::sealed(
            c"rig-fake-vidmem",
            rig_sys::memfd::Backing::Shmem,
            len as u64,
        )
        .map_err(map)?;
        let m = Mapping::shared(&file, rig_sys::mman::Fill::Populate).map_err(map)?;
        Ok(FakeWindow {
            rm: self.clone(),
            memory,
            map: m,
            file,
        })
    }
}
