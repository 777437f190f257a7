//! Serves NVIDIA GPUs through their own kernel driver: the RM objects rigd holds for
//! each RM-served GPU (root client, device, subdevice, usermode page) and for each
//! client of it (its own GPU address space, channel groups, channels), in the layouts
//! of the driver release it finds.
//!
//! Flow: `service` → `rig` → `channels` (who owns what, limits, reclaim) → `nvrm` →
//! `sys::nvrm`. A GPU that keeps its kernel driver is served, not taken: this stage
//! sits beside `take`, and a client's DMA leases map into its address space
//! ([`AddressSpace`] is `dma`'s `DeviceMap`).
//!
//! State: a [`Root`] (root client on `/dev/nvidiactl`, NV01_ROOT_NON_PRIV) asks the RM
//! for its release ([`Root::build_version`]); every later struct comes from that
//! release's [`layout`]. On it, [`SysRm`] (behind the small [`Rm`] trait, faked by
//! `FakeRm`) makes the calls; [`Gpu`] holds one GPU's device and usermode page;
//! [`AddressSpace`] one client's RM-owned FERMI_VASPACE_A (no UVM: `space` says why);
//! [`HostMem`] is sealed-memfd host memory at a GPU VA of a space, [`SharedPage`]
//! such memory mapped into several spaces ([`SharedView`]); [`ChannelGroup`]
//! and [`Channel`] a scheduled GPFIFO channel; [`NonStall`] the GPU's non-stall
//! interrupts as a pollable file; [`topo`] reads the GPUs' NVLink links
//! and P2P capabilities (read only, for `rigctl topo`). Each holds an `Arc` of what it lives in,
//! so teardown order follows from ownership, and each frees what it made in reverse,
//! also when its creation fails half-way.
//!
//! Reference: NVIDIA/open-gpu-kernel-modules 580.142 (headers cited per struct in
//! `layout`); the sequence, privilege and mapping rules in docs/hardware/nvidia-rm.md.
//! Not here: ioctls and escape envelopes (`sys::nvrm`); PCI discovery (`pci`); taken
//! GPUs (`take`); who may hold what (`channels`).

mod calls;
mod channel;
mod error;
mod events;
#[cfg(any(test, feature = "fakes"))]
mod fake;
#[cfg(test)]
mod fake_tests;
mod gpu;
pub mod layout;
mod mem;
mod shared;
mod space;
pub mod topo;
mod va;
mod vidmem;

use std::{
    fs::{File, OpenOptions},
    os::fd::{AsFd, BorrowedFd},
    path::Path,
};

use zerocopy::FromZeros;

use crate::sys::nvrm::{self as rm, AllocObject, NvHandle};
pub use calls::{
    Caching, Doorbell, EventFile, NVC361_NOTIFY_CHANNEL_PENDING, Rm, SysEvents, SysRm, SysUsermode,
    SysWindow, USERMODE_LEN, Window,
};
pub use channel::{
    Channel, ChannelFault, ChannelGroup, Engine, GroupEngine, Placement, RingMem, USERD_GP_GET,
    USERD_GP_PUT, ring_len, userd_offset, wake_offset,
};
pub use error::{CallError, NvrmError, Step};
pub use events::{NONSTALL_NOTIFY_INDEX, NonStall};
#[cfg(any(test, feature = "fakes"))]
pub use fake::{Call, FAKE_CLIENT, FAKE_GR_INFO, FAKE_TOKEN, FAKE_UUID, FakeEvents, FakeRm};
pub use gpu::{CopyEngine, GENERATION, Gpu, GpuUuid};
use layout::{DriverVersion, Release, r580};
pub use mem::HostMem;
pub use shared::{Access, SharedPage, SharedView};
pub use space::{AddressSpace, GPU_MEMORY_BASE, LEASE_BASE, OWN_BASE, Region, VA_END};
pub use va::VaAllocator;
pub use vidmem::{DeviceMem, DeviceView, HUGE_PAGE, Pages};

/// What GET_BUILD_VERSION_V2 said, and the layouts it selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildVersion {
    /// `driverVersionBuffer`, parsed.
    pub driver: DriverVersion,
    /// `driverBranch`, as text ("r580_00").
    pub branch: String,
    /// `changelistNumber`.
    pub changelist: u32,
    /// The release whose layouts rigd uses.
    pub release: Release,
}

/// A GPU the kernel driver holds (a valid CARD_INFO entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// `gpu_id`: the RM's id for GET_ID_INFO_V2.
    pub gpu_id: u32,
    /// `minor_number`: the N of `/dev/nvidiaN`.
    pub minor: u32,
    /// "dddd:bb:ss.f".
    pub bdf: String,
    pub vendor_id: u16,
    pub device_id: u16,
    /// `fb_size`: the size of BAR1 as the driver maps it.
    pub fb_size: u64,
}

/// A root client on `/dev/nvidiactl`, freed when dropped.
#[derive(Debug)]
pub struct Root {
    ctl: File,
    h_client: NvHandle,
    freed: bool,
}

impl Root {
    /// Opens `<dev>/nvidiactl` and allocates a root client (NV01_ROOT_NON_PRIV, handle
    /// picked by the RM). The escape layer turns that class into NV01_ROOT_CLIENT for
    /// any user-space caller (`escape.c`), so what keeps rigd's channels at USER
    /// privilege is that it makes every RM call without CAP_SYS_ADMIN (`sys::caps`),
    /// checked when a GPU is opened (`Gpu::open`).
    ///
    /// # Errors
    /// [`NvrmError::Open`], [`NvrmError::AllocRoot`].
    pub fn open(dev: &Path) -> Result<Self, NvrmError> {
        let path = dev.join("nvidiactl");
        let ctl = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| NvrmError::Open { path, source })?;
        let obj = AllocObject {
            h_root: 0,
            h_object_parent: 0,
            h_object_new: 0,
            h_class: r580::NV01_ROOT_NON_PRIV,
        };
        let h_client =
            rm::rm_alloc::<[u8]>(ctl.as_fd(), obj, None).map_err(NvrmError::AllocRoot)?;
        Ok(Self {
            ctl,
            h_client,
            freed: false,
        })
    }

    /// The client's handle.
    pub fn handle(&self) -> NvHandle {
        self.h_client
    }

    /// The ctl file the client lives on.
    pub fn ctl(&self) -> BorrowedFd<'_> {
        self.ctl.as_fd()
    }

    /// NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2, and the release it selects. Its
    /// params are the same in every release read, so this call needs no layout yet.
    ///
    /// # Errors
    /// [`NvrmError::BuildVersion`]; [`NvrmError::Layout`] for a version that is
    /// malformed or of a release without layouts.
    pub fn build_version(&self) -> Result<BuildVersion, NvrmError> {
        let mut p = r580::Nv0000CtrlSystemGetBuildVersionV2Params::new_zeroed();
        rm::rm_control(
            self.ctl(),
            self.h_client,
            self.h_client,
            r580::NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2,
            &mut p,
        )
        .map_err(NvrmError::BuildVersion)?;
        let driver = layout::parse_version(&p.driver_version_buffer).map_err(NvrmError::Layout)?;
        let release = Release::for_version(&driver).map_err(NvrmError::Layout)?;
        Ok(BuildVersion {
            driver,
            branch: c_text(&p.driver_branch),
            changelist: p.changelist_number,
            release,
        })
    }

    /// The GPUs the kernel driver holds (NV_ESC_CARD_INFO).
    ///
    /// # Errors
    /// [`NvrmError::CardInfo`].
    pub fn cards(&self) -> Result<Vec<Card>, NvrmError> {
        let cards = rm::card_info(self.ctl()).map_err(NvrmError::CardInfo)?;
        Ok(cards
            .into_iter()
            .map(|c| Card {
                gpu_id: c.gpu_id,
                minor: c.minor_number,
                bdf: format!(
                    "{:04x}:{:02x}:{:02x}.{:x}",
                    c.pci_info.domain, c.pci_info.bus, c.pci_info.slot, c.pci_info.function
                ),
                vendor_id: c.pci_info.vendor_id,
                device_id: c.pci_info.device_id,
                fb_size: c.fb_size,
            })
            .collect())
    }

    /// Frees the root client, and with it every object under it.
    ///
    /// # Errors
    /// [`NvrmError::FreeRoot`].
    pub fn free(mut self) -> Result<(), NvrmError> {
        self.freed = true;
        let h = self.h_client;
        rm::rm_free(self.ctl(), h, h, h).map_err(|source| NvrmError::FreeRoot {
            h_client: h,
            source,
        })
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if !self.freed {
            let h = self.h_client;
            if let Err(e) = rm::rm_free(self.ctl.as_fd(), h, h, h) {
                // Closing the ctl file frees the client anyway (nvidia_close).
                tracing::debug!(h_client = h, error = %e, "freeing the RM root client on drop");
            }
        }
    }
}

/// A fixed C char buffer as text, up to its first NUL.
fn c_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(buf.get(..end).unwrap_or_default()).into_owned()
}

/// The bytes GET_BUILD_VERSION_V2 would answer with `driver` and `branch`, for tests.
#[cfg(test)]
fn build_version_answer(
    driver: &[u8],
    branch: &[u8],
) -> r580::Nv0000CtrlSystemGetBuildVersionV2Params {
    let mut p = r580::Nv0000CtrlSystemGetBuildVersionV2Params::new_zeroed();
    p.driver_version_buffer[..driver.len()].copy_from_slice(driver);
    p.driver_branch[..branch.len()].copy_from_slice(branch);
    p
}

#[cfg(test)]
mod tests {
    use zerocopy::IntoBytes;

    use super::*;

    #[test]
    fn the_build_version_answer_puts_the_branch_after_two_buffers() {
        let p = build_version_answer(b"580.159.04", b"r580_00");
        let b = p.as_bytes();
        assert_eq!(&b[..10], b"580.159.04");
        assert_eq!(&b[512..519], b"r580_00");
        assert_eq!(c_text(&p.driver_branch), "r580_00");
        assert_eq!(
            layout::parse_release(&p.driver_version_buffer),
            Ok(Release::R580)
        );
    }

    #[test]
    fn c_text_stops_at_the_first_nul_or_the_end() {
        assert_eq!(c_text(b"ab\0cd"), "ab");
        assert_eq!(c_text(b"abcd"), "abcd");
        assert_eq!(c_text(b""), "");
    }

    #[test]
    fn opening_a_missing_ctl_node_names_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = Root::open(dir.path()).expect_err("no nvidiactl there");
        assert!(e.to_string().ends_with("nvidiactl"), "{e}");
    }
}
