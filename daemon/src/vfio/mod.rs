//! VFIO: the container, group and device a vfio-mode device is held through, its
//! regions, its IRQs (MSI/MSI-X eventfds) and its ioeventfds (doorbells for the queue
//! work: provided here, not used by `take` yet).
//!
//! Flow: `pci` → `take` → `vfio` → `dma` → (`queue`) → `service`. `take` binds the
//! function to vfio-pci, then calls [`open`] and keeps the [`Handles`] for as long as
//! rig holds the device; `rig.rs` gives the pool of that device their container as its
//! IOMMU ([`Iommu`], which implements `dma::IommuMap`). Nothing here writes sysfs.
//!
//! State: a [`Handles`] owns the open device, group and container (in that drop order).
//! Closing the device fd makes vfio-pci clear bus mastering, reload the saved config
//! and reset the function (vfio_pci_core_disable), which gives a crashed rigd a safe
//! device for free; vfio-pci's remove waits for every open device fd, so the hold must
//! be dropped before vfio-pci is unbound. The container is an `Arc`: a DMA pool may
//! still unmap through it after the hold is gone. No locks: the caller (`rig.rs`'s
//! per-device mutex) serialises use.
//!
//! The seam: [`Vfio`] opens containers and groups, which yield [`Container`], [`Group`]
//! and [`Device`] trait objects. [`RealVfio`] makes the ioctls of `sys::vfio` (built on
//! rust-vmm's vfio-bindings and vmm-sys-util; why not vfio-ioctls is said there);
//! `FakeVfio` (feature `fakes`) answers from a fake sysfs tree, records typed calls and
//! fails steps with scripted errno values, so `take`'s vfio mode runs in unit tests.
//!
//! Kernel ABI: include/uapi/linux/vfio.h, Documentation/driver-api/vfio.rst. Not here:
//! binding vfio-pci (`take`), the ioctls and their `unsafe` (`sys::vfio`), DMA pools
//! (`dma`).

#[cfg(any(test, feature = "fakes"))]
mod fake;
mod iommu;
mod real;

use std::{any::Any, fmt, fs::File, io, path::PathBuf, sync::Arc};

use vfio_bindings::bindings::vfio::{
    VFIO_DEVICE_FLAGS_RESET, VFIO_DEVICE_IOEVENTFD_8, VFIO_DEVICE_IOEVENTFD_16,
    VFIO_DEVICE_IOEVENTFD_32, VFIO_DEVICE_IOEVENTFD_64, VFIO_PCI_ERR_IRQ_INDEX,
    VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
    VFIO_PCI_REQ_IRQ_INDEX, VFIO_REGION_INFO_FLAG_MMAP,
};
pub use vmm_sys_util::eventfd::EventFd;

#[cfg(any(test, feature = "fakes"))]
pub use fake::{FakeVfio, FakeVfioScript, VfioCall, VfioStep};
pub use iommu::{Iommu, IommuInfo, check_unmapped, parse_iommu_info};
pub use real::RealVfio;

use crate::{
    dma::{HostVa, Iova},
    pci::{Bdf, SysfsRoot},
    sys::mmio::Width,
};

/// A VFIO call that failed. Each variant names the ioctl or file; [`VfioError::step`]
/// says which step of rig's sequence it was.
#[derive(Debug, thiserror::Error)]
pub enum VfioError {
    #[error("{}", .path.display())]
    OpenContainer {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_GET_API_VERSION")]
    GetApiVersion {
        #[source]
        source: io::Error,
    },
    #[error("VFIO API {got}, expected 0")]
    ApiVersion { got: i32 },
    #[error("VFIO_CHECK_EXTENSION")]
    CheckExtension {
        #[source]
        source: io::Error,
    },
    #[error("the kernel's VFIO lacks the type1v2 IOMMU")]
    NoType1v2,
    #[error("{}", .path.display())]
    OpenGroup {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_GROUP_GET_STATUS on group {group}")]
    GroupStatus {
        group: String,
        #[source]
        source: io::Error,
    },
    #[error("IOMMU group {group} is not viable")]
    NotViable { group: String },
    #[error("VFIO_GROUP_SET_CONTAINER on group {group}")]
    SetContainer {
        group: String,
        #[source]
        source: io::Error,
    },
    #[error("group {group} and the container come from different VFIO implementations")]
    ContainerKind { group: String },
    #[error("VFIO_SET_IOMMU (type1v2)")]
    SetIommu {
        #[source]
        source: io::Error,
    },
    #[error("VFIO_GROUP_GET_DEVICE_FD for {bdf}")]
    OpenDevice {
        bdf: Bdf,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_DEVICE_GET_INFO")]
    DeviceInfo {
        #[source]
        source: io::Error,
    },
    #[error("VFIO_DEVICE_GET_REGION_INFO for region {index}")]
    RegionInfo {
        index: u32,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_DEVICE_GET_IRQ_INFO for {index:?}")]
    IrqInfo {
        index: IrqIndex,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_DEVICE_SET_IRQS for {index:?}")]
    SetIrqs {
        index: IrqIndex,
        #[source]
        source: io::Error,
    },
    #[error("{want} eventfds for {index:?}, which has {have} vectors")]
    IrqCount {
        index: IrqIndex,
        want: usize,
        have: u32,
    },
    #[error("VFIO_DEVICE_IOEVENTFD at {offset:#x}")]
    IoEventFd {
        offset: u64,
        #[source]
        source: io::Error,
    },
    #[error(
        "a {width:?} ioeventfd at {at:#x} of region {index} (of {size:#x} bytes) is outside it or misaligned"
    )]
    IoEventOutside {
        index: u32,
        at: u64,
        width: Width,
        size: u64,
    },
    #[error("VFIO_DEVICE_RESET")]
    Reset {
        #[source]
        source: io::Error,
    },
    #[error("VFIO_IOMMU_GET_INFO")]
    IommuInfo {
        #[source]
        source: io::Error,
    },
    #[error("VFIO_IOMMU_MAP_DMA of {len:#x} bytes at IOVA {iova}")]
    Map {
        iova: Iova,
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_IOMMU_UNMAP_DMA of {len:#x} bytes at IOVA {iova}")]
    Unmap {
        iova: Iova,
        len: u64,
        #[source]
        source: io::Error,
    },
    #[error("VFIO_IOMMU_UNMAP_DMA at IOVA {iova} unmapped {unmapped:#x} of {len:#x} bytes")]
    UnmapSize { iova: Iova, len: u64, unmapped: u64 },
}

impl VfioError {
    /// The step of rig's sequence that failed, as `take` names it ("Failed to {step}
    /// for {bdf}").
    pub fn step(&self) -> &'static str {
        match self {
            Self::OpenContainer { .. }
            | Self::GetApiVersion { .. }
            | Self::ApiVersion { .. }
            | Self::CheckExtension { .. }
            | Self::NoType1v2 => "open /dev/vfio/vfio",
            Self::OpenGroup { .. } | Self::NotViable { .. } => "open the VFIO group",
            Self::GroupStatus { .. } => "read the VFIO group status",
            Self::SetContainer { .. } | Self::ContainerKind { .. } => {
                "attach the group to a container"
            }
            Self::SetIommu { .. } => "select the type1v2 IOMMU",
            Self::OpenDevice { .. } => "open the VFIO device",
            Self::DeviceInfo { .. } => "read the VFIO device info",
            Self::RegionInfo { .. } => "read a VFIO region",
            Self::IrqInfo { .. } => "read a VFIO IRQ",
            Self::SetIrqs { .. } | Self::IrqCount { .. } => "set VFIO IRQs",
            Self::IoEventFd { .. } | Self::IoEventOutside { .. } => "set an ioeventfd",
            Self::Reset { .. } => "reset through VFIO",
            Self::IommuInfo { .. } => "read the IOMMU's ranges",
            Self::Map { .. } => "map DMA",
            Self::Unmap { .. } | Self::UnmapSize { .. } => "unmap DMA",
        }
    }
}

/// A VFIO-PCI IRQ index (`VFIO_PCI_*_IRQ_INDEX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IrqIndex {
    Intx,
    Msi,
    Msix,
    Err,
    Req,
}

impl IrqIndex {
    /// Every index vfio-pci defines, in order.
    pub const ALL: [Self; 5] = [Self::Intx, Self::Msi, Self::Msix, Self::Err, Self::Req];

    /// The index the ioctls take.
    pub fn raw(self) -> u32 {
        match self {
            Self::Intx => VFIO_PCI_INTX_IRQ_INDEX,
            Self::Msi => VFIO_PCI_MSI_IRQ_INDEX,
            Self::Msix => VFIO_PCI_MSIX_IRQ_INDEX,
            Self::Err => VFIO_PCI_ERR_IRQ_INDEX,
            Self::Req => VFIO_PCI_REQ_IRQ_INDEX,
        }
    }
}

/// `struct vfio_device_info`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceInfo {
    pub flags: u32,
    pub num_regions: u32,
    pub num_irqs: u32,
}

impl DeviceInfo {
    /// Whether VFIO_DEVICE_RESET is offered (`VFIO_DEVICE_FLAGS_RESET`).
    pub fn can_reset(&self) -> bool {
        self.flags & VFIO_DEVICE_FLAGS_RESET != 0
    }
}

/// `struct vfio_region_info` (without capabilities), decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionInfo {
    pub index: u32,
    pub flags: u32,
    pub size: u64,
    /// Where the region starts in the device fd (read, write and mmap there).
    pub offset: u64,
}

impl RegionInfo {
    /// Whether the region may be mapped (`VFIO_REGION_INFO_FLAG_MMAP`).
    pub fn mappable(&self) -> bool {
        self.flags & VFIO_REGION_INFO_FLAG_MMAP != 0
    }

    /// An ioeventfd writing `data` of `width` at `at` inside this region.
    ///
    /// # Errors
    /// [`VfioError::IoEventOutside`] when the access leaves the region or is misaligned.
    pub fn ioevent(&self, at: u64, width: Width, data: u64) -> Result<IoEvent, VfioError> {
        let inside = at
            .checked_add(width.bytes())
            .is_some_and(|end| end <= self.size)
            && at.is_multiple_of(width.bytes());
        let offset = self.offset.checked_add(at).filter(|_| inside);
        offset
            .map(|offset| IoEvent {
                offset,
                width,
                data,
            })
            .ok_or(VfioError::IoEventOutside {
                index: self.index,
                at,
                width,
                size: self.size,
            })
    }
}

/// `struct vfio_irq_info`, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IrqInfo {
    pub index: IrqIndex,
    pub flags: u32,
    /// How many vectors the index has (0: not offered).
    pub count: u32,
}

/// One VFIO_DEVICE_IOEVENTFD: the kernel writes `data` of `width` at `offset` of the
/// device fd each time the eventfd is signalled. Make one with [`RegionInfo::ioevent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoEvent {
    pub offset: u64,
    pub width: Width,
    pub data: u64,
}

impl IoEvent {
    /// `VFIO_DEVICE_IOEVENTFD_{8,16,32,64}`.
    pub fn size_flag(&self) -> u32 {
        match self.width {
            Width::W8 => VFIO_DEVICE_IOEVENTFD_8,
            Width::W16 => VFIO_DEVICE_IOEVENTFD_16,
            Width::W32 => VFIO_DEVICE_IOEVENTFD_32,
            Width::W64 => VFIO_DEVICE_IOEVENTFD_64,
        }
    }
}

/// Opens VFIO containers and groups: [`RealVfio`] on `/dev/vfio`, `FakeVfio` in tests.
pub trait Vfio: Send + Sync + fmt::Debug {
    /// Opens a container and checks the API version and type1v2 support.
    ///
    /// # Errors
    /// [`VfioError::OpenContainer`] (ENOENT when VFIO is not loaded),
    /// [`VfioError::ApiVersion`], [`VfioError::NoType1v2`].
    fn open_container(&self) -> Result<Arc<dyn Container>, VfioError>;
    /// Opens group `group` (its number; one process at a time: EBUSY otherwise).
    ///
    /// # Errors
    /// [`VfioError::OpenGroup`].
    fn open_group(&self, group: &str) -> Result<Box<dyn Group>, VfioError>;
    /// What `/proc/PID/fd/N` links to and `/proc/PID/maps` names for a device file of
    /// this VFIO (`take`'s holder scan looks for it).
    fn device_link(&self) -> &str;
    /// Where the regions of `bdf` lie in a device file of it, without opening one: what
    /// a holder's mapping of it shows as its offset (`take`'s holder scan, after rigd
    /// lost its own file of the device).
    ///
    /// # Errors
    /// The device's `resource` file unreadable.
    fn layout(&self, root: &SysfsRoot, bdf: Bdf) -> io::Result<Vec<RegionInfo>>;
    /// The first 64 bytes of config space as read through `file`, a copy of another
    /// process's VFIO device file (pidfd_getfd(2)): what tells which device it is.
    ///
    /// # Errors
    /// The region info ioctl or the read (a file that is not a VFIO device's).
    fn config_through(&self, file: &File) -> io::Result<Vec<u8>>;
}

/// `VFIO_PCI_OFFSET_SHIFT` (include/linux/vfio_pci_core.h, Linux 6.12): vfio-pci puts
/// region N at N << 40 of the device file, for read, write and mmap alike.
pub const VFIO_PCI_OFFSET_SHIFT: u32 = 40;

/// A VFIO container: the IOMMU domain a held device's DMA goes through.
#[expect(unsafe_code, reason = "map_dma's caller owes the mapping's lifetime")]
pub trait Container: Send + Sync + fmt::Debug + Any {
    /// Selects the type1v2 IOMMU (after the first group joined).
    ///
    /// # Errors
    /// [`VfioError::SetIommu`].
    fn set_iommu(&self) -> Result<(), VfioError>;
    /// Page sizes and IOVA ranges (VFIO_IOMMU_GET_INFO with its capability chain).
    ///
    /// # Errors
    /// [`VfioError::IommuInfo`].
    fn iommu_info(&self) -> Result<IommuInfo, VfioError>;
    /// Maps `len` bytes at `host` so the device reaches them at `iova`, read and write.
    ///
    /// # Safety
    /// `host..host+len` must stay mapped in this process until [`Container::unmap_dma`]
    /// of the same range returns: the device may access it until then.
    ///
    /// # Errors
    /// [`VfioError::Map`] (EINVAL for misalignment, EEXIST for an overlap, ENOSPC…).
    unsafe fn map_dma(&self, iova: Iova, host: HostVa, len: u64) -> Result<(), VfioError>;
    /// VFIO_IOMMU_UNMAP_DMA as the kernel answers it: the bytes it unmapped. Callers use
    /// [`Container::unmap_dma`], which checks them.
    ///
    /// # Errors
    /// [`VfioError::Unmap`].
    fn unmap_dma_bytes(&self, iova: Iova, len: u64) -> Result<u64, VfioError>;
    /// Removes a mapping made by [`Container::map_dma`], and checks that the kernel
    /// unmapped exactly `len` bytes.
    ///
    /// # Errors
    /// [`VfioError::Unmap`], or [`VfioError::UnmapSize`] when the kernel unmapped more
    /// or less than asked (a mapping straddled the range, or none was there).
    fn unmap_dma(&self, iova: Iova, len: u64) -> Result<(), VfioError> {
        let unmapped = self.unmap_dma_bytes(iova, len)?;
        check_unmapped(iova, len, unmapped)
    }
    /// For a group of the same implementation to find the container's fd.
    fn as_any(&self) -> &dyn Any;
}

/// A VFIO group: the unit of ownership (every function of the IOMMU group).
pub trait Group: Send + Sync + fmt::Debug {
    /// The group's number, as in `/dev/vfio/<group>`.
    fn name(&self) -> &str;
    /// Whether every function of the group is bound to vfio-pci or to nothing.
    ///
    /// # Errors
    /// [`VfioError::GroupStatus`].
    fn viable(&self) -> Result<bool, VfioError>;
    /// Attaches the group to `container`.
    ///
    /// # Errors
    /// [`VfioError::SetContainer`], [`VfioError::ContainerKind`].
    fn set_container(&self, container: &dyn Container) -> Result<(), VfioError>;
    /// Opens the device `bdf` of this group.
    ///
    /// # Errors
    /// [`VfioError::OpenDevice`].
    fn open_device(&self, bdf: Bdf) -> Result<Box<dyn Device>, VfioError>;
}

/// An open VFIO device fd: regions, IRQs, ioeventfds and reset.
pub trait Device: Send + Sync + fmt::Debug {
    /// VFIO_DEVICE_GET_INFO.
    ///
    /// # Errors
    /// [`VfioError::DeviceInfo`].
    fn info(&self) -> Result<DeviceInfo, VfioError>;
    /// VFIO_DEVICE_GET_REGION_INFO for region `index` (BARs 0–5, ROM 6, config 7).
    ///
    /// # Errors
    /// [`VfioError::RegionInfo`].
    fn region(&self, index: u32) -> Result<RegionInfo, VfioError>;
    /// The device file: regions are read, written and mapped through it, at
    /// [`RegionInfo::offset`].
    fn file(&self) -> &File;
    /// VFIO_DEVICE_GET_IRQ_INFO.
    ///
    /// # Errors
    /// [`VfioError::IrqInfo`].
    fn irq(&self, index: IrqIndex) -> Result<IrqInfo, VfioError>;
    /// Vectors `0..fds.len()` of `index` signal `fds` (MSI, MSI-X: one eventfd each).
    ///
    /// # Errors
    /// [`VfioError::IrqCount`] for more eventfds than vectors, [`VfioError::SetIrqs`].
    fn enable_irq(&self, index: IrqIndex, fds: &[&EventFd]) -> Result<(), VfioError>;
    /// Vector `vector` of `index`, already enabled, signals `fd` from now on instead
    /// of the eventfd it had (VFIO_DEVICE_SET_IRQS with start = `vector`, count 1).
    ///
    /// # Errors
    /// [`VfioError::IrqCount`] for a vector past the index's, [`VfioError::SetIrqs`].
    fn set_irq_vector(&self, index: IrqIndex, vector: u32, fd: &EventFd) -> Result<(), VfioError>;
    /// Disables every vector of `index` and lets go of their eventfds.
    ///
    /// # Errors
    /// [`VfioError::SetIrqs`].
    fn disable_irq(&self, index: IrqIndex) -> Result<(), VfioError>;
    /// Registers `fd` for `event` (the kernel makes the write when `fd` is signalled).
    ///
    /// # Errors
    /// [`VfioError::IoEventFd`].
    fn set_ioeventfd(&self, event: &IoEvent, fd: &EventFd) -> Result<(), VfioError>;
    /// Removes the eventfd registered for `event`.
    ///
    /// # Errors
    /// [`VfioError::IoEventFd`].
    fn clear_ioeventfd(&self, event: &IoEvent) -> Result<(), VfioError>;
    /// VFIO_DEVICE_RESET (only when [`DeviceInfo::can_reset`]).
    ///
    /// # Errors
    /// [`VfioError::Reset`]; never swallowed.
    fn reset(&self) -> Result<(), VfioError>;
}

/// What a device held through VFIO keeps open. Fields drop in order: the device fd
/// closes first (vfio-pci then clears bus mastering and resets the function), then the
/// group, then these handles' share of the container.
#[derive(Debug)]
pub struct Handles {
    pub device: Box<dyn Device>,
    pub group: Box<dyn Group>,
    /// Shared with the device's DMA pool, which maps through it ([`Iommu`]).
    pub container: Arc<dyn Container>,
}

impl Handles {
    /// The IOMMU group's number.
    pub fn group_name(&self) -> &str {
        self.group.name()
    }

    /// The container as a DMA pool's IOMMU (reads its page sizes and ranges once).
    ///
    /// # Errors
    /// [`VfioError::IommuInfo`].
    pub fn iommu(&self) -> Result<Iommu, VfioError> {
        Iommu::new(Arc::clone(&self.container))
    }
}

/// Opens the container, group and device of `bdf` (bound to vfio-pci, in IOMMU group
/// `group`), in the order the kernel needs: container, group, viability, the group
/// into the container, the type1v2 IOMMU, the device.
///
/// # Errors
/// The step that failed; [`VfioError::NotViable`] for a group with a member bound to a
/// host driver. What was opened is closed again.
pub fn open(vfio: &dyn Vfio, bdf: Bdf, group: &str) -> Result<Handles, VfioError> {
    let container = vfio.open_container()?;
    let g = vfio.open_group(group)?;
    if !g.viable()? {
        return Err(VfioError::NotViable {
            group: group.to_owned(),
        });
    }
    g.set_container(container.as_ref())?;
    container.set_iommu()?;
    let device = g.open_device(bdf)?;
    Ok(Handles {
        device,
        group: g,
        container,
    })
}

#[cfg(test)]
mod tests;
