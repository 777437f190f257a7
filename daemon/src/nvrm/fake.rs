//! `FakeRm`: an [`Rm`] that hands out handles, records every call typed, answers the
//! controls the path reads (device instance, UUID, work submit token, class list, the
//! graphics engine's geometry as an H200's, and for `topo` the NVLink status and P2P
//! caps set with [`FakeRm::set_nvlink`] and [`FakeRm::set_p2p`]) and fails one chosen
//! call with a chosen NV status. It drives one GPU at 0000:00:06.0 unless
//! [`FakeRm::set_cards`] names others.
//!
//! It keeps the books the real RM would check: GPU memory (NV01_MEMORY_LOCAL_USER)
//! allocated and not freed, refused with NV_ERR_NO_MEMORY past
//! [`FakeRm::set_vidmem_capacity`]; and every NV_ESC_RM_MAP_MEMORY_DMA per DMA object,
//! refusing one that overlaps a live map of the same space (the RM's fixed-offset map
//! would) or touches the compute windows (rig_model::addr::layout), where rigd must
//! never map. Tests and feature `fakes` only.

use std::{
    collections::BTreeMap,
    os::fd::AsRawFd,
    sync::{Arc, Mutex, PoisonError},
};

use rig_model::addr::layout;
use rig_sys::mman::Mapping;

use super::{
    Card,
    calls::{Caching, Doorbell, Rm, UnmapMemoryDma, Window},
    error::CallError,
    layout::{MapMemoryDma, Release, r580, topo},
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
    GrInfo {
        subdevice: NvHandle,
    },
    MapDma {
        /// The space's NV01_MEMORY_VIRTUAL.
        h_dma: NvHandle,
        h_memory: NvHandle,
        dma_offset: u64,
        /// NVOS46 flags: page size, fixed offset, access (1:0, 1 = read-only).
        flags: u32,
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
    OpenEvents,
    CloseEvents,
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
    /// What CARD_INFO lists, when set.
    cards: Option<Vec<Card>>,
    /// Device and subdevice handles → the device instance they were made for.
    instances: BTreeMap<NvHandle, u32>,
    /// NVLINK_GET_NVLINK_STATUS's answer per gpu_id (none: no links enabled).
    nvlink: BTreeMap<u32, Result<Box<topo::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams>, NvStatus>>,
    /// SYSTEM_GET_P2P_CAPS_V2's `p2pCaps` and `p2pCapsStatus` per ordered pair of
    /// gpu_ids (none: no caps, every status NOT_SUPPORTED).
    p2p: BTreeMap<(u32, u32), (u32, [u8; topo::NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE])>,
    /// GPU memory allocated and not freed: handle → bytes.
    vidmem: BTreeMap<NvHandle, u64>,
    /// The most GPU memory the fake GPU has, when set.
    vidmem_capacity: Option<u64>,
    /// Live maps: (DMA object, VA) → bytes.
    mapped: BTreeMap<(NvHandle, u64), u64>,
    /// What GR_GET_INFO answers per index, when set.
    gr_info: Option<BTreeMap<u32, u32>>,
    /// What GPU_GET_RECOVERY_ACTION answers (0: none).
    recovery_action: u32,
    /// What CE_GET_ALL_CAPS answers: (COPYn, caps) of each present engine; None: the
    /// control is left unanswered (no engine present).
    copy_engines: Option<Vec<(u8, [u8; r580::NV2080_CTRL_CE_CAPS_TBL_SIZE])>>,
    /// Every call but GPU_GET_RECOVERY_ACTION fails with this status, as the RM's do on
    /// a GPU that needs a reset.
    lost: Option<NvStatus>,
    /// The event files open: what [`FakeRm::interrupt`] signals.
    events: Vec<Arc<rig_sys::wake::Wake>>,
}

/// What the fake's GR_GET_INFO answers: an H200's shape (GH100: 8 GPCs of up to 9 TPCs,
/// 66 TPCs enabled, 2 SMs per TPC, 64 warps per SM, sm_90).
pub const FAKE_GR_INFO: [(u32, u32); 6] = [
    (r580::NV2080_CTRL_GR_INFO_INDEX_SM_VERSION, 0x900),
    (r580::NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS, 8),
    (r580::NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC, 9),
    (r580::NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC, 2),
    (r580::NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT, 66),
    (r580::NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM, 64),
];

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

    /// Answers GPU_GET_RECOVERY_ACTION with `action` (`NV2080_CTRL_GPU_RECOVERY_ACTION_*`).
    pub fn set_recovery_action(&self, action: u32) {
        self.lock().recovery_action = action;
    }

    /// From now on every call but GPU_GET_RECOVERY_ACTION fails with `status` (a GPU
    /// that needs a reset answers NV_ERR_RESET_REQUIRED); `None`: the GPU works again.
    pub fn set_lost(&self, status: Option<NvStatus>) {
        self.lock().lost = status;
    }

    /// Answers GPU_GET_CLASSLIST with `classes`.
    pub fn set_classes(&self, classes: Vec<u32>) {
        self.lock().classes = Some(classes);
    }

    /// What CE_GET_ALL_CAPS answers: each present copy engine (COPYn) with its caps.
    pub fn set_copy_engines(&self, engines: &[(u8, [u8; r580::NV2080_CTRL_CE_CAPS_TBL_SIZE])]) {
        self.lock().copy_engines = Some(engines.to_vec());
    }

    /// Answers SYSTEM_GET_PRIVILEGED_STATUS with `flags` (as a root rigd that kept
    /// CAP_SYS_ADMIN around its RM calls would get).
    pub fn set_privileged(&self, flags: u8) {
        self.lock().privileged = flags;
    }

    /// Lists `cards` in CARD_INFO; GET_ID_INFO_V2 answers each one's index as its
    /// device instance.
    pub fn set_cards(&self, cards: Vec<Card>) {
        self.lock().cards = Some(cards);
    }

    /// Answers NVLINK_GET_NVLINK_STATUS on a subdevice of the GPU `gpu_id` with
    /// `answer` (its bytes as the RM writes them), or fails it with the status.
    pub fn set_nvlink(
        &self,
        gpu_id: u32,
        answer: Result<Box<topo::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams>, NvStatus>,
    ) {
        self.lock().nvlink.insert(gpu_id, answer);
    }

    /// Answers SYSTEM_GET_P2P_CAPS_V2 for the pair (`a`, `b`) with `caps` and
    /// `status`.
    pub fn set_p2p(
        &self,
        a: u32,
        b: u32,
        caps: u32,
        status: [u8; topo::NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE],
    ) {
        self.lock().p2p.insert((a, b), (caps, status));
    }

    /// Refuses GPU memory allocations (NV_ERR_NO_MEMORY) that would take more than
    /// `bytes` in all.
    pub fn set_vidmem_capacity(&self, bytes: u64) {
        self.lock().vidmem_capacity = Some(bytes);
    }

    /// GPU memory allocated and not freed, in bytes.
    pub fn vidmem_in_use(&self) -> u64 {
        self.lock().vidmem.values().sum()
    }

    /// Maps made and not unmapped, over all spaces.
    pub fn live_maps(&self) -> usize {
        self.lock().mapped.len()
    }

    /// Answers GR_GET_INFO with `values` by index (an index not listed reads 0)
    /// instead of [`FAKE_GR_INFO`].
    pub fn set_gr_info(&self, values: &[(u32, u32)]) {
        self.lock().gr_info = Some(values.iter().copied().collect());
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// What a non-stall interrupt does: marks every event file open readable.
    pub fn interrupt(&self) {
        for e in &self.lock().events {
            let _ = e.signal();
        }
    }

    /// How many event files are open.
    pub fn event_files(&self) -> usize {
        self.lock().events.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `call`; the injected status if this is the one to fail.
    fn record(&self, call: Call) -> Result<(), NvStatus> {
        let mut s = self.lock();
        let i = s.calls.len();
        let probe = matches!(
            call,
            Call::Control {
                cmd: r580::NV2080_CTRL_CMD_GPU_GET_RECOVERY_ACTION,
                ..
            }
        );
        s.calls.push(call);
        match (s.fail_at, s.lost) {
            (Some((at, status)), _) if at == i => Err(status),
            (_, Some(status)) if !probe => Err(status),
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

/// An event file, standing in: an eventfd [`FakeRm::interrupt`] signals.
#[derive(Debug)]
pub struct FakeEvents {
    rm: FakeRm,
    wake: Arc<rig_sys::wake::Wake>,
}

impl super::calls::EventFile for FakeEvents {
    fn key(&self) -> u32 {
        // CAST: descriptor numbers are small and non-negative.
        self.wake.fd().as_raw_fd().unsigned_abs()
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.wake.fd()
    }

    fn consume(&self) {
        let _ = self.wake.drain();
    }
}

impl Drop for FakeEvents {
    fn drop(&mut self) {
        let _ = self.rm.record(Call::CloseEvents);
        self.rm
            .lock()
            .events
            .retain(|e| !Arc::ptr_eq(e, &self.wake));
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

fn get_u32(params: &[u8], at: usize) -> Option<u32> {
    let b = params.get(at..at + 4)?;
    Some(u32::from_ne_bytes(b.try_into().ok()?))
}

impl FakeRm {
    /// The GPU behind subdevice `object`, and the answer set for it.
    fn answer_nvlink(&self, object: NvHandle, params: &mut [u8]) -> Result<(), CallError> {
        use zerocopy::IntoBytes;
        let s = self.lock();
        let gpu_id = s.instances.get(&object).and_then(|&i| {
            let cards = s.cards.as_deref().unwrap_or_default();
            Some(cards.get(usize::try_from(i).ok()?)?.gpu_id)
        });
        let Some(answer) = gpu_id.and_then(|g| s.nvlink.get(&g)) else {
            return Ok(());
        };
        match answer {
            Ok(p) => {
                let b = p.as_bytes();
                if let Some(dst) = params.get_mut(..b.len()) {
                    dst.copy_from_slice(b);
                }
                Ok(())
            }
            Err(status) => Err(CallError::Rm(RmError::Status {
                escape: "fake",
                status: *status,
            })),
        }
    }

    /// gpuIds at 0 and 4; p2pCaps at 132, p2pCapsStatus at 144.
    fn answer_p2p(&self, params: &mut [u8]) {
        let (Some(a), Some(b)) = (get_u32(params, 0), get_u32(params, 4)) else {
            return;
        };
        let (caps, status) = self.lock().p2p.get(&(a, b)).copied().unwrap_or((
            0,
            [topo::NV0000_P2P_CAPS_STATUS_NOT_SUPPORTED;
                topo::NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE],
        ));
        put_u32(params, 132, caps);
        if let Some(dst) = params.get_mut(144..153) {
            dst.copy_from_slice(&status);
        }
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
    type Events = FakeEvents;

    fn client(&self) -> NvHandle {
        FAKE_CLIENT
    }

    fn release(&self) -> Release {
        Release::R580
    }

    fn cards(&self) -> Result<Vec<Card>, CallError> {
        self.rm(Call::Cards)?;
        if let Some(cards) = self.lock().cards.clone() {
            return Ok(cards);
        }
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
        params: Option<&mut [u8]>,
    ) -> Result<NvHandle, CallError> {
        let handle = self.handle();
        self.rm(Call::Alloc {
            parent,
            class,
            handle,
        })?;
        let mut s = self.lock();
        if class == r580::NV01_MEMORY_LOCAL_USER {
            // NV_MEMORY_ALLOCATION_PARAMS' size, at 64.
            let size = params
                .as_deref()
                .and_then(|p| p.get(64..72))
                .and_then(|b| b.try_into().ok())
                .map_or(0, u64::from_ne_bytes);
            let used: u64 = s.vidmem.values().sum();
            if s.vidmem_capacity.is_some_and(|cap| used + size > cap) {
                return Err(CallError::Rm(RmError::Status {
                    escape: "fake",
                    status: NvStatus::NoMemory,
                }));
            }
            s.vidmem.insert(handle, size);
        }
        let instance = match class {
            // NV0080_ALLOC_PARAMETERS' deviceId.
            r580::NV01_DEVICE_0 => params.as_deref().and_then(|p| get_u32(p, 0)),
            r580::NV20_SUBDEVICE_0 => s.instances.get(&parent).copied(),
            _ => None,
        };
        if let Some(i) = instance {
            s.instances.insert(handle, i);
        }
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
        self.rm(Call::Free { parent, object })?;
        self.lock().vidmem.remove(&object);
        Ok(())
    }

    fn control(&self, object: NvHandle, cmd: u32, params: &mut [u8]) -> Result<(), CallError> {
        self.rm(Call::Control {
            object,
            cmd,
            first: params.first().copied(),
        })?;
        match cmd {
            // gpuId at 0, deviceInstance at 8: the card's index.
            r580::NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2 => {
                let id = get_u32(params, 0);
                let s = self.lock();
                let index = s
                    .cards
                    .as_ref()
                    .and_then(|cs| cs.iter().position(|c| Some(c.gpu_id) == id))
                    .unwrap_or(0);
                put_u32(params, 8, u32::try_from(index).unwrap_or(u32::MAX));
            }
            topo::NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS => self.answer_nvlink(object, params)?,
            topo::NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2 => self.answer_p2p(params),
            // length at 8, data at 12.
            r580::NV2080_CTRL_CMD_GPU_GET_GID_INFO => {
                put_u32(params, 8, 16);
                if let Some(d) = params.get_mut(12..28) {
                    d.copy_from_slice(&FAKE_UUID);
                }
            }
            r580::NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN => put_u32(params, 0, FAKE_TOKEN),
            r580::NV2080_CTRL_CMD_GPU_GET_RECOVERY_ACTION => {
                let action = self.lock().recovery_action;
                put_u32(params, 0, action);
            }
            r580::NV2080_CTRL_CMD_CE_GET_ALL_CAPS => {
                if let Some(ces) = &self.lock().copy_engines {
                    // capsTbl[64][2] at 0, present (a u64) at 128.
                    let mut present = 0u64;
                    for &(n, caps) in ces {
                        let at = usize::from(n) * r580::NV2080_CTRL_CE_CAPS_TBL_SIZE;
                        if let Some(row) = params.get_mut(at..at + caps.len()) {
                            row.copy_from_slice(&caps);
                            present |= 1 << n;
                        }
                    }
                    if let Some(p) = params.get_mut(128..136) {
                        p.copy_from_slice(&present.to_ne_bytes());
                    }
                }
            }
            r580::NV0000_CTRL_CMD_SYSTEM_GET_PRIVILEGED_STATUS => {
                if let Some(b) = params.first_mut() {
                    *b = self.lock().privileged;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn gr_info(&self, subdevice: NvHandle, indices: &[u32]) -> Result<Vec<u32>, CallError> {
        self.rm(Call::GrInfo { subdevice })?;
        let s = self.lock();
        let answer = |i: &u32| match &s.gr_info {
            Some(set) => set.get(i).copied().unwrap_or(0),
            None => FAKE_GR_INFO
                .iter()
                .find(|(k, _)| k == i)
                .map_or(0, |&(_, v)| v),
        };
        Ok(indices.iter().map(answer).collect())
    }

    fn classlist(&self, device: NvHandle) -> Result<Vec<u32>, CallError> {
        self.rm(Call::ClassList { device })?;
        Ok(self.lock().classes.clone().unwrap_or_else(|| {
            vec![
                rig_nv::class::clc661::HOPPER_USERMODE_A,
                super::GENERATION.host,
                super::GENERATION.copy,
                super::GENERATION.compute,
                r580::KEPLER_CHANNEL_GROUP_A,
            ]
        }))
    }

    fn map_dma(&self, map: MapMemoryDma) -> Result<u64, CallError> {
        self.rm(Call::MapDma {
            h_dma: map.h_dma,
            h_memory: map.h_memory,
            dma_offset: map.dma_offset,
            flags: map.flags,
        })?;
        let (va, len) = (map.dma_offset, map.length.max(1));
        let mut s = self.lock();
        let overlaps = s
            .mapped
            .range((map.h_dma, 0)..(map.h_dma, va.saturating_add(len)))
            .any(|(&(_, at), &n)| at.saturating_add(n) > va);
        let windows =
            layout::LOCAL_WINDOW.get()..layout::SHARED_WINDOW.get() + layout::SHARED_WINDOW_BYTES;
        let in_windows = va < windows.end && va.saturating_add(len) > windows.start;
        if overlaps || in_windows {
            return Err(CallError::Rm(RmError::Status {
                escape: "fake",
                status: NvStatus::InvalidOffset,
            }));
        }
        s.mapped.insert((map.h_dma, va), len);
        Ok(va)
    }

    fn unmap_dma(&self, u: UnmapMemoryDma) -> Result<(), CallError> {
        self.rm(Call::UnmapDma {
            h_dma: u.h_dma,
            h_memory: u.h_memory,
            dma_offset: u.dma_offset,
        })?;
        self.lock().mapped.remove(&(u.h_dma, u.dma_offset));
        Ok(())
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

    fn open_events(&self) -> Result<FakeEvents, CallError> {
        self.rm(Call::OpenEvents)?;
        let (wake, _) = rig_sys::wake::Wake::pair().map_err(|source| CallError::Map {
            what: "the fake event file",
            source,
        })?;
        let wake = Arc::new(wake);
        self.lock().events.push(Arc::clone(&wake));
        Ok(FakeEvents {
            rm: self.clone(),
            wake,
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
