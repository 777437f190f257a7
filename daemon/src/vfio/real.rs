//! The kernel's VFIO: [`RealVfio`] opens `<dev>/vfio/vfio` and `<dev>/vfio/<group>` and
//! makes each call through one ioctl of `sys::vfio`.
//!
//! Flow: `take` → `vfio::open` → here → `sys::vfio`. `dev_vfio` comes from the
//! configuration (`paths.dev`), which is why rig opens these files itself (see
//! `sys::vfio` on vfio-ioctls). Kernel ABI: include/uapi/linux/vfio.h,
//! Documentation/driver-api/vfio.rst ("VFIO Usage Example"). Not here: the sequence
//! (`vfio::open`), `unsafe` (`sys::vfio`).

use std::{
    any::Any,
    ffi::CString,
    fs::{File, OpenOptions},
    io,
    path::PathBuf,
    sync::Arc,
};

use vfio_bindings::bindings::vfio::{
    VFIO_API_VERSION, VFIO_GROUP_FLAGS_VIABLE, VFIO_TYPE1v2_IOMMU,
};

use super::{
    Container, Device, DeviceInfo, EventFd, Group, IoEvent, IommuInfo, IrqIndex, IrqInfo,
    RegionInfo, VFIO_PCI_OFFSET_SHIFT, Vfio, VfioError, parse_iommu_info,
};
use crate::{
    dma::{HostVa, Iova},
    pci::{Bdf, SysfsRoot},
    sys::vfio as sys,
};

/// VFIO_PCI_CONFIG_REGION_INDEX (include/uapi/linux/vfio.h).
const CONFIG_REGION: u32 = 7;
/// IORESOURCE_MEM (include/linux/ioport.h): an I/O-port BAR does not map.
const IORESOURCE_MEM: u64 = 0x200;

/// VFIO under a `/dev` directory (`/dev/vfio` in production).
#[derive(Debug, Clone)]
pub struct RealVfio {
    dev_vfio: PathBuf,
}

impl RealVfio {
    /// VFIO's nodes under `dev_vfio` (the directory holding `vfio` and the groups).
    pub fn new(dev_vfio: impl Into<PathBuf>) -> Self {
        Self {
            dev_vfio: dev_vfio.into(),
        }
    }
}

fn open_rw(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

impl Vfio for RealVfio {
    fn open_container(&self) -> Result<Arc<dyn Container>, VfioError> {
        let path = self.dev_vfio.join("vfio");
        let file = open_rw(&path).map_err(|source| VfioError::OpenContainer { path, source })?;
        let api =
            sys::get_api_version(&file).map_err(|source| VfioError::GetApiVersion { source })?;
        if u32::try_from(api).ok() != Some(VFIO_API_VERSION) {
            return Err(VfioError::ApiVersion { got: api });
        }
        if !sys::check_extension(&file, VFIO_TYPE1v2_IOMMU)
            .map_err(|source| VfioError::CheckExtension { source })?
        {
            return Err(VfioError::NoType1v2);
        }
        Ok(Arc::new(RealContainer { file }))
    }

    fn open_group(&self, group: &str) -> Result<Box<dyn Group>, VfioError> {
        let path = self.dev_vfio.join(group);
        let file = open_rw(&path).map_err(|source| VfioError::OpenGroup { path, source })?;
        Ok(Box::new(RealGroup {
            file,
            name: group.to_owned(),
        }))
    }

    fn device_link(&self) -> &str {
        // anon_inode_getfile("[vfio-device]", …), drivers/vfio/group.c.
        "anon_inode:[vfio-device]"
    }

    fn layout(&self, root: &SysfsRoot, bdf: Bdf) -> io::Result<Vec<RegionInfo>> {
        let resources = root.read_resources(bdf).map_err(io::Error::other)?;
        Ok((0..6u32)
            .filter_map(|index| {
                let r = resources.get(index as usize)?;
                (r.size() > 0 && r.flags & IORESOURCE_MEM != 0).then(|| RegionInfo {
                    index,
                    // What vfio-pci may let map; the scan only asks where a BAR lies.
                    flags: vfio_bindings::bindings::vfio::VFIO_REGION_INFO_FLAG_MMAP,
                    size: r.size(),
                    offset: u64::from(index) << VFIO_PCI_OFFSET_SHIFT,
                })
            })
            .collect())
    }

    fn config_through(&self, file: &File) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let r = sys::region_info(file, CONFIG_REGION)?;
        let mut header = vec![0u8; 64];
        file.read_exact_at(&mut header, r.offset)?;
        Ok(header)
    }
}

/// `/dev/vfio/vfio`, set to type1v2 once a group is attached.
#[derive(Debug)]
struct RealContainer {
    file: File,
}

#[expect(unsafe_code, reason = "implements Container's unsafe map_dma")]
impl Container for RealContainer {
    fn set_iommu(&self) -> Result<(), VfioError> {
        sys::set_iommu(&self.file, VFIO_TYPE1v2_IOMMU)
            .map_err(|source| VfioError::SetIommu { source })
    }

    fn iommu_info(&self) -> Result<IommuInfo, VfioError> {
        let bytes =
            sys::iommu_info(&self.file).map_err(|source| VfioError::IommuInfo { source })?;
        Ok(parse_iommu_info(&bytes))
    }

    unsafe fn map_dma(&self, iova: Iova, host: HostVa, len: u64) -> Result<(), VfioError> {
        // SAFETY: the caller keeps `host..host+len` mapped until unmap_dma of the same
        // range returns (this trait method's contract), which is sys::map_dma's.
        unsafe { sys::map_dma(&self.file, iova.0, host.0, len) }.map_err(|source| VfioError::Map {
            iova,
            len,
            source,
        })
    }

    fn unmap_dma_bytes(&self, iova: Iova, len: u64) -> Result<u64, VfioError> {
        sys::unmap_dma(&self.file, iova.0, len).map_err(|source| VfioError::Unmap {
            iova,
            len,
            source,
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// `/dev/vfio/<group>`.
#[derive(Debug)]
struct RealGroup {
    file: File,
    name: String,
}

impl Group for RealGroup {
    fn name(&self) -> &str {
        &self.name
    }

    fn viable(&self) -> Result<bool, VfioError> {
        let flags = sys::group_status(&self.file).map_err(|source| VfioError::GroupStatus {
            group: self.name.clone(),
            source,
        })?;
        Ok(flags & VFIO_GROUP_FLAGS_VIABLE != 0)
    }

    fn set_container(&self, container: &dyn Container) -> Result<(), VfioError> {
        let c = container
            .as_any()
            .downcast_ref::<RealContainer>()
            .ok_or_else(|| VfioError::ContainerKind {
                group: self.name.clone(),
            })?;
        sys::group_set_container(&self.file, &c.file).map_err(|source| VfioError::SetContainer {
            group: self.name.clone(),
            source,
        })
    }

    fn open_device(&self, bdf: Bdf) -> Result<Box<dyn Device>, VfioError> {
        let name = CString::new(bdf.to_string()).expect("a PCI address has no NUL");
        let file = sys::group_get_device_fd(&self.file, &name)
            .map_err(|source| VfioError::OpenDevice { bdf, source })?;
        Ok(Box::new(RealDevice { file }))
    }
}

/// A VFIO device fd.
#[derive(Debug)]
struct RealDevice {
    file: File,
}

impl Device for RealDevice {
    fn info(&self) -> Result<DeviceInfo, VfioError> {
        let i = sys::device_info(&self.file).map_err(|source| VfioError::DeviceInfo { source })?;
        Ok(DeviceInfo {
            flags: i.flags,
            num_regions: i.num_regions,
            num_irqs: i.num_irqs,
        })
    }

    fn region(&self, index: u32) -> Result<RegionInfo, VfioError> {
        let r = sys::region_info(&self.file, index)
            .map_err(|source| VfioError::RegionInfo { index, source })?;
        Ok(RegionInfo {
            index,
            flags: r.flags,
            size: r.size,
            offset: r.offset,
        })
    }

    fn file(&self) -> &File {
        &self.file
    }

    fn irq(&self, index: IrqIndex) -> Result<IrqInfo, VfioError> {
        let i = sys::irq_info(&self.file, index.raw())
            .map_err(|source| VfioError::IrqInfo { index, source })?;
        Ok(IrqInfo {
            index,
            flags: i.flags,
            count: i.count,
        })
    }

    fn enable_irq(&self, index: IrqIndex, fds: &[&EventFd]) -> Result<(), VfioError> {
        let have = self.irq(index)?.count;
        if fds.is_empty() || fds.len() > have as usize {
            return Err(VfioError::IrqCount {
                index,
                want: fds.len(),
                have,
            });
        }
        sys::set_irq_eventfds(&self.file, index.raw(), 0, fds)
            .map_err(|source| VfioError::SetIrqs { index, source })
    }

    fn set_irq_vector(&self, index: IrqIndex, vector: u32, fd: &EventFd) -> Result<(), VfioError> {
        let have = self.irq(index)?.count;
        if vector >= have {
            return Err(VfioError::IrqCount {
                index,
                want: vector as usize + 1,
                have,
            });
        }
        sys::set_irq_eventfds(&self.file, index.raw(), vector, &[fd])
            .map_err(|source| VfioError::SetIrqs { index, source })
    }

    fn disable_irq(&self, index: IrqIndex) -> Result<(), VfioError> {
        sys::disable_irq(&self.file, index.raw())
            .map_err(|source| VfioError::SetIrqs { index, source })
    }

    fn set_ioeventfd(&self, event: &IoEvent, fd: &EventFd) -> Result<(), VfioError> {
        sys::device_ioeventfd(
            &self.file,
            event.size_flag(),
            event.offset,
            event.data,
            Some(fd),
        )
        .map_err(|source| VfioError::IoEventFd {
            offset: event.offset,
            source,
        })
    }

    fn clear_ioeventfd(&self, event: &IoEvent) -> Result<(), VfioError> {
        sys::device_ioeventfd(
            &self.file,
            event.size_flag(),
            event.offset,
            event.data,
            None,
        )
        .map_err(|source| VfioError::IoEventFd {
            offset: event.offset,
            source,
        })
    }

    fn reset(&self) -> Result<(), VfioError> {
        sys::device_reset(&self.file).map_err(|source| VfioError::Reset { source })
    }
}
