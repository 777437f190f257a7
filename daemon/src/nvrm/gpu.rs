//! `Gpu`: one RM-served GPU as rigd holds it — device, subdevice, usermode page and
//! UUID — made in the order of docs/hardware/nvidia-rm.md, "The object sequence"
//! (steps 3–12), and freed in reverse. Opening also reads the graphics engine's
//! geometry once (step 12, GR_GET_INFO), which every session of the GPU is told; and
//! the GPU's clock boost is set and cleared here ([`Gpu::perf_boost`]), for `channels`
//! to decide when.
//!
//! State: the handles, the usermode mapping and the undo list. Every step that makes
//! something pushes how to unmake it, so a failed open frees what it made (the
//! half-made `Gpu` drops) and teardown is the list run backwards. Address spaces hold
//! an `Arc` of their `Gpu`, so it outlives them by construction; they, not the `Gpu`,
//! hold GPU VA (`space`).

use std::sync::atomic::{AtomicU32, Ordering};

use rig_model::nv::ComputeGeometry;
use zerocopy::IntoBytes;

use super::{
    Card,
    calls::{Rm, UnmapMemoryDma},
    error::{NvrmError, Step, at},
    layout::{Release, r580},
};
use crate::sys::nvrm::NvHandle;
use rig_nv::class::clc661::HOPPER_USERMODE_A;

/// A GPU's UUID, as GPU_GET_GID_INFO gives it in binary.
pub type GpuUuid = [u8; 16];

/// One copy engine, COPY0 + `index`, with its caps as CE_GET_ALL_CAPS gives them
/// (`NV2080_CTRL_CE_CAPS_CE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyEngine {
    pub index: u8,
    pub caps: [u8; r580::NV2080_CTRL_CE_CAPS_TBL_SIZE],
}

impl CopyEngine {
    /// Synchronous with graphics (`CE_GRCE`): its work waits behind kernels.
    #[must_use]
    pub fn grce(&self) -> bool {
        self.caps[0] & r580::NV2080_CTRL_CE_CAPS_CE_GRCE != 0
    }

    /// May move system memory (`CE_SYSMEM`): host leases are system memory.
    #[must_use]
    pub fn sysmem(&self) -> bool {
        self.caps[0] & r580::NV2080_CTRL_CE_CAPS_CE_SYSMEM != 0
    }

    /// Shares physical engines with another copy engine (`CE_SHARED`).
    #[must_use]
    pub fn shared(&self) -> bool {
        self.caps[0] & r580::NV2080_CTRL_CE_CAPS_CE_SHARED != 0
    }
}

/// Handles rigd picks for OS descriptors (the RM's own lie at RS_UNIQUE_HANDLE_BASE
/// 0xcaf00000, `resserv/rs_client.h`).
const OS_DESCRIPTOR_HANDLE_BASE: u32 = 0x5249_0000;

/// The GPU generation whose classes rigd allocates: Hopper, the one it has run on
/// (rig-nv's `generation` holds Blackwell's words too, never run; serving it means
/// choosing the generation from the class list here and telling clients which).
pub const GENERATION: rig_nv::Generation = rig_nv::generation::HOPPER;

/// The classes a GPU must have, with their names.
const NEEDED_CLASSES: [(u32, &str); 4] = [
    (GENERATION.host, "HOPPER_CHANNEL_GPFIFO_A"),
    (GENERATION.compute, "HOPPER_COMPUTE_A"),
    (GENERATION.copy, "HOPPER_DMA_COPY_A"),
    (HOPPER_USERMODE_A, "HOPPER_USERMODE_A"),
];

/// What GR_GET_INFO is asked for, in [`ComputeGeometry`]'s order.
const GR_INDICES: [u32; 6] = [
    r580::NV2080_CTRL_GR_INFO_INDEX_SM_VERSION,
    r580::NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_GPCS,
    r580::NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_TPC_PER_GPC,
    r580::NV2080_CTRL_GR_INFO_INDEX_LITTER_NUM_SM_PER_TPC,
    r580::NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_SUB_COUNT,
    r580::NV2080_CTRL_GR_INFO_INDEX_MAX_WARPS_PER_SM,
];

/// How to unmake one thing that was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undo {
    Free { parent: NvHandle, object: NvHandle },
    UnmapDma(UnmapMemoryDma),
    UnmapUsermode,
    ReleaseVa { base: u64, len: u64 },
}

/// One RM-served GPU.
#[derive(Debug)]
pub struct Gpu<R: Rm> {
    rm: R,
    card: Card,
    release: Release,
    h_device: NvHandle,
    h_subdevice: NvHandle,
    uuid: GpuUuid,
    /// What GR_GET_INFO said; `None` when it failed (logged: channels still serve).
    geometry: Option<ComputeGeometry>,
    usermode: Option<R::Usermode>,
    next_handle: AtomicU32,
    undo: Vec<Undo>,
}

impl<R: Rm> Gpu<R> {
    /// Opens the GPU at `bdf` ("dddd:bb:ss.f"), or the first the RM drives.
    ///
    /// # Errors
    /// [`NvrmError::NoGpu`], [`NvrmError::MissingClasses`], or [`NvrmError::Call`]
    /// naming the step; what was made before is freed.
    pub fn open(rm: R, bdf: Option<&str>) -> Result<Self, NvrmError> {
        let cards = rm.cards().map_err(at(Step::Cards))?;
        let card = cards
            .into_iter()
            .find(|c| bdf.is_none_or(|b| c.bdf == b))
            .ok_or_else(|| NvrmError::NoGpu {
                bdf: bdf.map(str::to_owned),
            })?;
        let release = rm.release();
        let mut g = Self {
            rm,
            card,
            release,
            h_device: 0,
            h_subdevice: 0,
            uuid: [0; 16],
            geometry: None,
            usermode: None,
            next_handle: AtomicU32::new(OS_DESCRIPTOR_HANDLE_BASE),
            undo: Vec::new(),
        };
        g.open_device()?;
        g.open_usermode()?;
        g.read_uuid()?;
        g.check_privilege()?;
        g.geometry = match g.read_geometry() {
            Ok(geo) => Some(geo),
            Err(e) => {
                tracing::warn!(
                    gpu = %g.card.bdf,
                    error = &e as &dyn std::error::Error,
                    "no compute geometry for sessions: runtimes must size local memory themselves"
                );
                None
            }
        };
        Ok(g)
    }

    /// Step 12: the graphics engine's geometry (GR_GET_INFO on the subdevice).
    fn read_geometry(&self) -> Result<ComputeGeometry, NvrmError> {
        let v = self
            .rm
            .gr_info(self.h_subdevice, &GR_INDICES)
            .map_err(at(Step::GrInfo))?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(ComputeGeometry {
            sm_version: at(0),
            gpcs: at(1),
            max_tpcs_per_gpc: at(2),
            sms_per_tpc: at(3),
            tpcs: at(4),
            max_warps_per_sm: at(5),
        })
    }

    /// The graphics engine's geometry, read when the GPU was opened.
    pub fn geometry(&self) -> Option<ComputeGeometry> {
        self.geometry
    }

    /// Raises the GPU's clocks to their maximum until cleared (`on`), as CUDA does
    /// while it has work, or clears rigd's boost (NV2080_CTRL_CMD_PERF_BOOST on the
    /// subdevice; docs/hardware/nvidia-compute.md, "Clocks"). Without it the GPU stays
    /// at idle clocks: a third of the speed on the H200.
    ///
    /// # Errors
    /// [`NvrmError::Call`] at [`Step::PerfBoost`].
    pub fn perf_boost(&self, on: bool) -> Result<(), NvrmError> {
        let mut p = if on {
            r580::Nv2080CtrlPerfBoostParams {
                flags: r580::NV2080_CTRL_PERF_BOOST_FLAGS_CMD_BOOST_TO_MAX
                    | r580::NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES
                    | r580::NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_PRIORITY_HIGH,
                duration: r580::NV2080_CTRL_PERF_BOOST_DURATION_INFINITE,
            }
        } else {
            r580::Nv2080CtrlPerfBoostParams {
                flags: r580::NV2080_CTRL_PERF_BOOST_FLAGS_CMD_CLEAR
                    | r580::NV2080_CTRL_PERF_BOOST_FLAGS_CUDA_YES,
                duration: 0,
            }
        };
        self.rm
            .control(
                self.h_subdevice,
                r580::NV2080_CTRL_CMD_PERF_BOOST,
                p.as_mut_bytes(),
            )
            .map_err(at(Step::PerfBoost))
    }

    /// What the RM says the GPU needs before it works again
    /// (`NV2080_CTRL_GPU_RECOVERY_ACTION_*`: 0 none, 1 a GPU reset, 2 a reboot, 3 drain
    /// peer-to-peer, 4 drain and reset). A kernel-side read of the RM's own state: no GSP
    /// RPC, so it answers while the GSP is stuck (docs/hardware/nvidia-rm.md, "When the
    /// GPU needs a reset").
    ///
    /// # Errors
    /// [`NvrmError::Call`] (`RecoveryAction`): NV_ERR_GPU_IS_LOST for a GPU off the bus,
    /// NV_ERR_NOT_SUPPORTED on a driver without the control.
    pub fn recovery_action(&self) -> Result<u32, NvrmError> {
        let mut action = 0u32;
        self.rm
            .control(
                self.h_subdevice,
                r580::NV2080_CTRL_CMD_GPU_GET_RECOVERY_ACTION,
                action.as_mut_bytes(),
            )
            .map_err(at(Step::RecoveryAction))?;
        Ok(action)
    }

    /// The GPU's copy engines as the RM describes them (CE_GET_ALL_CAPS), in COPYn
    /// order, each one the RM marks present. `channels` picks the asynchronous ones
    /// for sessions' copy channels (docs/hardware/nvidia-channels.md, "Which copy
    /// engine").
    ///
    /// # Errors
    /// [`NvrmError::Call`] (`CopyEngineCaps`): a driver without the control.
    pub fn copy_engines(&self) -> Result<Vec<CopyEngine>, NvrmError> {
        let mut p = r580::Nv2080CtrlCeGetAllCapsParams {
            caps_tbl: [[0; r580::NV2080_CTRL_CE_CAPS_TBL_SIZE]; r580::NV2080_CTRL_MAX_CES],
            present: 0,
        };
        self.rm
            .control(
                self.h_subdevice,
                r580::NV2080_CTRL_CMD_CE_GET_ALL_CAPS,
                p.as_mut_bytes(),
            )
            .map_err(at(Step::CopyEngineCaps))?;
        Ok((0..r580::NV2080_CTRL_MAX_CES)
            .filter(|&n| p.present & (1 << n) != 0)
            .filter_map(|n| {
                Some(CopyEngine {
                    index: u8::try_from(n).ok()?,
                    caps: p.caps_tbl[n],
                })
            })
            .collect())
    }

    /// Refuses to serve when the RM would count rigd's client as an administrator:
    /// its channels would then be privileged, and clients would feed them
    /// (`sys::caps` says how rigd keeps CAP_SYS_ADMIN out of its RM calls).
    fn check_privilege(&self) -> Result<(), NvrmError> {
        let mut flags = [0u8; 1];
        self.rm
            .control(
                self.rm.client(),
                r580::NV0000_CTRL_CMD_SYSTEM_GET_PRIVILEGED_STATUS,
                &mut flags,
            )
            .map_err(at(Step::PrivilegedStatus))?;
        let admin = r580::NV0000_CTRL_SYSTEM_GET_PRIVILEGED_STATUS_PRIV_HANDLE_FLAG
            | r580::NV0000_CTRL_SYSTEM_GET_PRIVILEGED_STATUS_PRIV_USER_FLAG;
        if flags[0] & admin != 0 {
            return Err(NvrmError::Privileged { flags: flags[0] });
        }
        Ok(())
    }

    /// Steps 4–8: the device file, the device and subdevice, and the class check.
    fn open_device(&mut self) -> Result<(), NvrmError> {
        let client = self.rm.client();
        let mut dev = device_params(&self.rm, &self.card)?;
        self.h_device = self.alloc(
            client,
            r580::NV01_DEVICE_0,
            Some(dev.as_mut_bytes()),
            Step::AllocDevice,
        )?;
        let mut sub = r580::Nv2080AllocParameters { sub_device_id: 0 };
        self.h_subdevice = self.alloc(
            self.h_device,
            r580::NV20_SUBDEVICE_0,
            Some(sub.as_mut_bytes()),
            Step::AllocSubdevice,
        )?;
        let classes = self
            .rm
            .classlist(self.h_device)
            .map_err(at(Step::ClassList))?;
        check_classes(&classes)
    }

    /// Step 9: the usermode page (NULL params: BAR0's non-privileged page), mapped
    /// through a fresh, unregistered `/dev/nvidiaN`.
    fn open_usermode(&mut self) -> Result<(), NvrmError> {
        let h = self.alloc(
            self.h_subdevice,
            HOPPER_USERMODE_A,
            None,
            Step::AllocUsermode,
        )?;
        let map = self
            .rm
            .map_usermode(self.h_device, h)
            .map_err(at(Step::MapUsermode))?;
        self.usermode = Some(map);
        self.undo.push(Undo::UnmapUsermode);
        Ok(())
    }

    /// Step 10: the UUID, which `rigctl channels` shows.
    fn read_uuid(&mut self) -> Result<(), NvrmError> {
        let mut gid = r580::Nv2080CtrlGpuGetGidInfoParams {
            index: 0,
            flags: r580::NV2080_GPU_CMD_GPU_GET_GID_FLAGS_FORMAT_BINARY,
            length: 0,
            data: [0; r580::NV2080_GPU_MAX_GID_LENGTH],
        };
        self.rm
            .control(
                self.h_subdevice,
                r580::NV2080_CTRL_CMD_GPU_GET_GID_INFO,
                gid.as_mut_bytes(),
            )
            .map_err(at(Step::GidInfo))?;
        self.uuid.copy_from_slice(&gid.data[..16]);
        Ok(())
    }

    fn alloc(
        &mut self,
        parent: NvHandle,
        class: u32,
        params: Option<&mut [u8]>,
        step: Step,
    ) -> Result<NvHandle, NvrmError> {
        let object = self.rm.alloc(parent, class, params).map_err(at(step))?;
        self.undo.push(Undo::Free { parent, object });
        Ok(object)
    }

    /// The RM calls.
    pub fn rm(&self) -> &R {
        &self.rm
    }

    /// The card.
    pub fn card(&self) -> &Card {
        &self.card
    }

    /// The release the calls use.
    pub fn release(&self) -> Release {
        self.release
    }

    /// The device's handle.
    pub fn device(&self) -> NvHandle {
        self.h_device
    }

    /// The subdevice's handle.
    pub fn subdevice(&self) -> NvHandle {
        self.h_subdevice
    }

    /// The GPU's UUID.
    pub fn uuid(&self) -> GpuUuid {
        self.uuid
    }

    /// The usermode page (its doorbell; for the real RM also the file a client maps).
    pub fn usermode(&self) -> &R::Usermode {
        self.usermode
            .as_ref()
            .expect("an open Gpu has its usermode page until it drops")
    }

    /// A handle for an object rigd names itself.
    pub(crate) fn pick_handle(&self) -> NvHandle {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs one undo step of this GPU's or of an object on it. VA goes back to the
    /// address space that lent it, which runs that step itself.
    pub(crate) fn run(&self, u: Undo) -> Result<(), NvrmError> {
        match u {
            Undo::Free { parent, object } => self.rm.free(parent, object).map_err(at(Step::Free)),
            Undo::UnmapDma(m) => self.rm.unmap_dma(m).map_err(at(Step::UnmapDma)),
            // Only a Gpu's own list holds it; `teardown` handles it.
            Undo::UnmapUsermode => Ok(()),
            Undo::ReleaseVa { base, len } => {
                unreachable!("{len:#x} bytes of VA at {base:#x} on a GPU's own undo list")
            }
        }
    }

    fn teardown(&mut self) -> Vec<NvrmError> {
        let mut failed = Vec::new();
        while let Some(u) = self.undo.pop() {
            if u == Undo::UnmapUsermode {
                // Unmapped before the object goes: freeing leaves BAR PTEs in place
                // (docs/hardware/nvidia-rm.md, "Handing mappings to another process").
                self.usermode = None;
            } else if let Err(e) = self.run(u) {
                failed.push(e);
            }
        }
        failed
    }

    /// Frees everything, in reverse order of creation.
    ///
    /// # Errors
    /// The first step that failed; every later step still ran, and their failures
    /// are logged.
    pub fn close(mut self) -> Result<(), NvrmError> {
        first_of(self.teardown(), "GPU")
    }
}

impl<R: Rm> Drop for Gpu<R> {
    fn drop(&mut self) {
        for e in self.teardown() {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "freeing an RM-served GPU"
            );
        }
    }
}

fn check_classes(classes: &[u32]) -> Result<(), NvrmError> {
    let missing: Vec<String> = NEEDED_CLASSES
        .iter()
        .filter(|(c, _)| !classes.contains(c))
        .map(|&(class, name)| format!("{name} ({class:#06x})"))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(NvrmError::MissingClasses { missing })
    }
}

/// The first failure, the others logged.
pub(crate) fn first_of(mut failed: Vec<NvrmError>, what: &str) -> Result<(), NvrmError> {
    if failed.is_empty() {
        return Ok(());
    }
    let first = failed.remove(0);
    for e in failed {
        tracing::warn!(
            error = &e as &dyn std::error::Error,
            "freeing {what}, after an earlier failure"
        );
    }
    Err(first)
}

/// Opens the GPU's file and asks the RM for its device instance: the parameters of
/// the `NV01_DEVICE_0` a caller allocates under the root client.
pub(super) fn device_params<R: Rm>(
    rm: &R,
    card: &Card,
) -> Result<r580::Nv0080AllocParameters, NvrmError> {
    let client = rm.client();
    rm.open_device(card.minor).map_err(at(Step::OpenDevice))?;
    let mut id = r580::Nv0000CtrlGpuGetIdInfoV2Params {
        gpu_id: card.gpu_id,
        ..Default::default()
    };
    rm.control(
        client,
        r580::NV0000_CTRL_CMD_GPU_GET_ID_INFO_V2,
        id.as_mut_bytes(),
    )
    .map_err(at(Step::IdInfo))?;
    Ok(r580::Nv0080AllocParameters {
        device_id: id.device_instance,
        h_client_share: client,
        va_mode: r580::NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES,
        ..Default::default()
    })
}
