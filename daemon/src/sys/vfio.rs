//! VFIO type1 (legacy container) ioctls: one safe function per ioctl.
//!
//! Kernel ABI: include/uapi/linux/vfio.h (Linux 6.12), Documentation/driver-api/vfio.rst.
//! Only type1v2 containers: the kernels rig runs on have no no-IOMMU mode (Debian's
//! 6.1/6.12 lack CONFIG_VFIO_NOIOMMU) and 6.12 has no iommufd (qemu-tier.md §2).
//! Closing the device fd makes vfio-pci clear bus mastering, reload the saved config
//! and reset the function (vfio_pci_core_disable), which gives a crashed rigd a safe
//! device for free.

use std::{
    ffi::CString,
    fs::{File, OpenOptions},
    io,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::Path,
};

// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO's ioctls carry no size in the number.
const VFIO_TYPE: u32 = b';' as u32;
const VFIO_BASE: u32 = 100;
const fn vfio_io(n: u32) -> libc::c_ulong {
    ((VFIO_TYPE << 8) | (VFIO_BASE + n)) as libc::c_ulong
}
const VFIO_GET_API_VERSION: libc::c_ulong = vfio_io(0);
const VFIO_CHECK_EXTENSION: libc::c_ulong = vfio_io(1);
const VFIO_SET_IOMMU: libc::c_ulong = vfio_io(2);
const VFIO_GROUP_GET_STATUS: libc::c_ulong = vfio_io(3);
const VFIO_GROUP_SET_CONTAINER: libc::c_ulong = vfio_io(4);
const VFIO_GROUP_GET_DEVICE_FD: libc::c_ulong = vfio_io(6);
const VFIO_DEVICE_GET_INFO: libc::c_ulong = vfio_io(7);
const VFIO_DEVICE_GET_REGION_INFO: libc::c_ulong = vfio_io(8);
const VFIO_DEVICE_RESET: libc::c_ulong = vfio_io(11);
const VFIO_IOMMU_GET_INFO: libc::c_ulong = vfio_io(12);
const VFIO_IOMMU_MAP_DMA: libc::c_ulong = vfio_io(13);
const VFIO_IOMMU_UNMAP_DMA: libc::c_ulong = vfio_io(14);

pub const VFIO_API_VERSION: i32 = 0;
pub const VFIO_TYPE1V2_IOMMU: i32 = 3;
pub const VFIO_GROUP_FLAGS_VIABLE: u32 = 1 << 0;
pub const VFIO_DEVICE_FLAGS_RESET: u32 = 1 << 0;
pub const VFIO_REGION_INFO_FLAG_MMAP: u32 = 1 << 2;
const VFIO_DMA_MAP_FLAG_READ: u32 = 1 << 0;
const VFIO_DMA_MAP_FLAG_WRITE: u32 = 1 << 1;
const VFIO_IOMMU_INFO_PGSIZES: u32 = 1 << 0;
const VFIO_IOMMU_INFO_CAPS: u32 = 1 << 1;
const VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE: u16 = 1;

#[repr(C)]
#[derive(Default)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

/// `struct vfio_device_info`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DeviceInfo {
    argsz: u32,
    pub flags: u32,
    pub num_regions: u32,
    pub num_irqs: u32,
    cap_offset: u32,
    pad: u32,
}

/// `struct vfio_region_info` (without capabilities).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct RegionInfo {
    argsz: u32,
    pub flags: u32,
    pub index: u32,
    cap_offset: u32,
    pub size: u64,
    pub offset: u64,
}

#[repr(C)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

#[repr(C)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

/// What the IOMMU accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IommuInfo {
    /// Bitmap of supported page sizes.
    pub page_sizes: u64,
    /// Inclusive IOVA ranges; empty when the kernel reports none.
    pub ranges: Vec<(u64, u64)>,
}

/// A struct's size for its `argsz` field; every VFIO argument struct is a few words.
const fn argsz<T>() -> u32 {
    // CAST: the structs here are at most 32 bytes.
    #[expect(clippy::cast_possible_truncation, reason = "structs of a few words")]
    let n = std::mem::size_of::<T>() as u32;
    n
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `/dev/vfio/vfio`, set to type1v2 once a group is attached.
#[derive(Debug)]
pub struct Container {
    file: File,
}

impl Container {
    /// Opens a container and checks the API version and type1v2 support.
    ///
    /// # Errors
    /// ENOENT when VFIO is not loaded; EINVAL-like errors for an unexpected API.
    pub fn open(dev_vfio: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(dev_vfio.join("vfio"))?;
        // SAFETY: the fd is open and owned by `file`; the ioctl takes no argument and
        // its result is checked.
        let api = check(unsafe { libc::ioctl(file.as_raw_fd(), VFIO_GET_API_VERSION) })?;
        if api != VFIO_API_VERSION {
            return Err(io::Error::other(format!(
                "VFIO API {api}, expected {VFIO_API_VERSION}"
            )));
        }
        // SAFETY: as above; the argument is an integer passed by value.
        let ok = check(unsafe {
            libc::ioctl(file.as_raw_fd(), VFIO_CHECK_EXTENSION, VFIO_TYPE1V2_IOMMU)
        })?;
        if ok != 1 {
            return Err(io::Error::other(
                "the kernel's VFIO lacks the type1v2 IOMMU",
            ));
        }
        Ok(Self { file })
    }

    /// Selects the type1v2 IOMMU (after the first group joined).
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn set_iommu(&self) -> io::Result<()> {
        // SAFETY: valid fd; integer argument; result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_SET_IOMMU, VFIO_TYPE1V2_IOMMU) })?;
        Ok(())
    }

    /// Page sizes and IOVA ranges (VFIO_IOMMU_GET_INFO with its capability chain).
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn iommu_info(&self) -> io::Result<IommuInfo> {
        // The header is 24 bytes (argsz, flags, iova_pgsizes, cap_offset, pad); the
        // capability chain follows within argsz. 4 KiB holds 250+ ranges.
        let mut buf = vec![0u64; 512];
        let argsz = u32::try_from(buf.len() * 8).unwrap_or(u32::MAX);
        buf[0] = u64::from(argsz);
        // SAFETY: valid fd; `buf` is 4096 bytes, 8-aligned, alive for the call, and its
        // first word says how much the kernel may write; result checked.
        check(unsafe {
            libc::ioctl(self.file.as_raw_fd(), VFIO_IOMMU_GET_INFO, buf.as_mut_ptr())
        })?;
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let u32_at = |o: usize| {
            bytes
                .get(o..o + 4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let u64_at = |o: usize| {
            bytes
                .get(o..o + 8)
                .map(|b| u64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        };
        let flags = u32_at(4).unwrap_or(0);
        let page_sizes = if flags & VFIO_IOMMU_INFO_PGSIZES != 0 {
            u64_at(8).unwrap_or(0)
        } else {
            0
        };
        let mut ranges = Vec::new();
        let mut cap = if flags & VFIO_IOMMU_INFO_CAPS != 0 {
            u32_at(16).unwrap_or(0) as usize
        } else {
            0
        };
        let mut hops = 0;
        while cap != 0 && hops < 16 {
            hops += 1;
            let Some(hdr) = u32_at(cap) else { break };
            let next = u32_at(cap + 4).unwrap_or(0) as usize;
            if hdr & 0xffff == u32::from(VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) {
                let n = u32_at(cap + 8).unwrap_or(0) as usize;
                for i in 0..n.min(255) {
                    let at = cap + 16 + 16 * i;
                    if let (Some(s), Some(e)) = (u64_at(at), u64_at(at + 8)) {
                        ranges.push((s, e));
                    }
                }
            }
            cap = next;
        }
        Ok(IommuInfo { page_sizes, ranges })
    }

    /// Maps `len` bytes at host address `vaddr` to `iova`, read and write.
    ///
    /// # Safety
    /// `vaddr..vaddr+len` must stay mapped in this process until [`Container::unmap_dma`]
    /// of the same range returns: the device may access it until then.
    ///
    /// # Errors
    /// The ioctl's errno (EINVAL for misalignment, EEXIST for an overlap, ENOSPC…).
    pub unsafe fn map_dma(&self, iova: u64, vaddr: u64, len: u64) -> io::Result<()> {
        let m = DmaMap {
            argsz: argsz::<DmaMap>(),
            flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            vaddr,
            iova,
            size: len,
        };
        // SAFETY: valid fd; `m` is a correctly sized vfio_iommu_type1_dma_map alive for
        // the call; the caller keeps the memory mapped (this fn's contract); checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_IOMMU_MAP_DMA, &m) })?;
        Ok(())
    }

    /// Removes a mapping made by [`Container::map_dma`].
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn unmap_dma(&self, iova: u64, len: u64) -> io::Result<()> {
        let mut m = DmaUnmap {
            argsz: argsz::<DmaUnmap>(),
            flags: 0,
            iova,
            size: len,
        };
        // SAFETY: valid fd; `m` is a correctly sized vfio_iommu_type1_dma_unmap that the
        // kernel may update (size unmapped), alive for the call; result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_IOMMU_UNMAP_DMA, &mut m) })?;
        Ok(())
    }
}

/// `/dev/vfio/<group>`.
#[derive(Debug)]
pub struct Group {
    file: File,
}

impl Group {
    /// Opens a group (one process at a time: EBUSY when another holds it).
    ///
    /// # Errors
    /// The open's errno.
    pub fn open(dev_vfio: &Path, group: &str) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(dev_vfio.join(group))?;
        Ok(Self { file })
    }

    /// Whether every function of the group is bound to vfio-pci or to nothing.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn viable(&self) -> io::Result<bool> {
        let mut s = GroupStatus {
            argsz: argsz::<GroupStatus>(),
            flags: 0,
        };
        // SAFETY: valid fd; `s` is a correctly sized vfio_group_status alive for the
        // call; result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_GROUP_GET_STATUS, &mut s) })?;
        Ok(s.flags & VFIO_GROUP_FLAGS_VIABLE != 0)
    }

    /// Attaches the group to a container.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn set_container(&self, c: &Container) -> io::Result<()> {
        let fd: libc::c_int = c.file.as_raw_fd();
        // SAFETY: valid group fd; the argument points at a live int holding the
        // container's open fd; result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_GROUP_SET_CONTAINER, &fd) })?;
        Ok(())
    }

    /// Opens the device `bdf` of this group.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn device(&self, bdf: &str) -> io::Result<Device> {
        let name = CString::new(bdf).map_err(io::Error::other)?;
        // SAFETY: valid group fd; `name` is NUL-terminated and alive for the call; the
        // return value is checked and is a new fd that we alone own.
        let fd = check(unsafe {
            libc::ioctl(
                self.file.as_raw_fd(),
                VFIO_GROUP_GET_DEVICE_FD,
                name.as_ptr(),
            )
        })?;
        // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Device {
            file: File::from(fd),
        })
    }
}

/// A VFIO device fd.
#[derive(Debug)]
pub struct Device {
    file: File,
}

impl Device {
    /// The raw device file (regions are read, written and mapped through it).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// VFIO_DEVICE_GET_INFO.
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn info(&self) -> io::Result<DeviceInfo> {
        let mut i = DeviceInfo {
            argsz: argsz::<DeviceInfo>(),
            ..DeviceInfo::default()
        };
        // SAFETY: valid fd; `i` is a correctly sized vfio_device_info alive for the
        // call; result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_DEVICE_GET_INFO, &mut i) })?;
        Ok(i)
    }

    /// VFIO_DEVICE_GET_REGION_INFO for region `index` (BARs 0–5, ROM 6, config 7).
    ///
    /// # Errors
    /// The ioctl's errno.
    pub fn region(&self, index: u32) -> io::Result<RegionInfo> {
        let mut r = RegionInfo {
            argsz: argsz::<RegionInfo>(),
            index,
            ..RegionInfo::default()
        };
        // SAFETY: valid fd; `r` is a correctly sized vfio_region_info alive for the
        // call (the kernel writes capabilities only within argsz); result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_DEVICE_GET_REGION_INFO, &mut r) })?;
        Ok(r)
    }

    /// VFIO_DEVICE_RESET (only when `info().flags` has VFIO_DEVICE_FLAGS_RESET).
    ///
    /// # Errors
    /// The ioctl's errno; unlike vfio-ioctls, never swallowed.
    pub fn reset(&self) -> io::Result<()> {
        // SAFETY: valid fd; no argument; result checked.
        check(unsafe { libc::ioctl(self.file.as_raw_fd(), VFIO_DEVICE_RESET) })?;
        Ok(())
    }
}

/// A container as DMA pools see it: the IOMMU behind a device held through VFIO.
/// `take` makes one when it holds a device in vfio mode; the device's pool maps and
/// unmaps its blocks through it.
#[derive(Debug)]
pub struct VfioIommu {
    container: std::sync::Arc<Container>,
    info: IommuInfo,
}

impl VfioIommu {
    /// Reads the IOMMU's page sizes and IOVA ranges once.
    ///
    /// # Errors
    /// VFIO_IOMMU_GET_INFO's errno.
    pub fn new(container: std::sync::Arc<Container>) -> io::Result<Self> {
        let info = container.iommu_info()?;
        Ok(Self { container, info })
    }
}

impl crate::dma::IommuMap for VfioIommu {
    fn iova_ranges(&self) -> Vec<std::ops::RangeInclusive<u64>> {
        self.info.ranges.iter().map(|&(s, e)| s..=e).collect()
    }

    fn page_sizes(&self) -> u64 {
        self.info.page_sizes
    }

    unsafe fn map(
        &self,
        iova: crate::dma::Iova,
        host: crate::dma::HostVa,
        len: u64,
    ) -> Result<(), crate::dma::DmaError> {
        // SAFETY: the caller keeps `host..host+len` mapped until `unmap` of the same
        // range returns (this trait method's contract), which is what map_dma needs.
        unsafe { self.container.map_dma(iova.0, host.0, len) }
            .map_err(|source| crate::dma::DmaError::Map { iova, len, source })
    }

    fn unmap(&self, iova: crate::dma::Iova, len: u64) -> Result<(), crate::dma::DmaError> {
        self.container
            .unmap_dma(iova.0, len)
            .map_err(|source| crate::dma::DmaError::Unmap { iova, len, source })
    }
}
