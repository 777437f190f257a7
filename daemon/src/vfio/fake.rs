//! A VFIO stand-in for tests (feature `fakes`): answers as the kernel would for the
//! fake sysfs tree a `FakeKernel` serves, records every call as a [`VfioCall`], and
//! fails any step with a scripted errno ([`FakeVfioScript::fail`]).
//!
//! What it models of the kernel (drivers/vfio/group.c, vfio_iommu_type1.c, vfio-pci):
//! a group's node exists only while a member is bound to vfio-pci, and opens once at a
//! time (EBUSY); a group is viable when every member is bound to vfio-pci, pci-stub,
//! pcieport or nothing; only a function bound to vfio-pci opens as a device (ENODEV);
//! while a device fd is open the fake kernel refuses to unbind vfio-pci from it (the
//! real remove waits forever); regions are served from a memfd, so BARs map; DMA goes
//! to a `dma::FakeIommu`. Not here: the real calls (`vfio::real`).

use std::{
    any::Any,
    collections::{HashMap, HashSet},
    fs::File,
    io,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use nix::sys::memfd::{MFdFlags, memfd_create};
use vfio_bindings::bindings::vfio::{
    VFIO_DEVICE_FLAGS_PCI, VFIO_DEVICE_FLAGS_RESET, VFIO_REGION_INFO_FLAG_MMAP,
    VFIO_REGION_INFO_FLAG_READ, VFIO_REGION_INFO_FLAG_WRITE,
};

use super::{
    Container, Device, DeviceInfo, EventFd, Group, IoEvent, IommuInfo, IrqIndex, IrqInfo,
    RegionInfo, Vfio, VfioError,
};
use crate::{
    dma::{DmaError, FakeIommu, HostVa, IommuMap, Iova},
    pci::{Bdf, SysfsRoot},
    sys::sysfs::{FakeKernel, PciSysfs},
};

/// A step the script can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VfioStep {
    OpenContainer,
    OpenGroup,
    GroupStatus,
    SetContainer,
    SetIommu,
    OpenDevice,
    DeviceInfo,
    RegionInfo,
    IrqInfo,
    SetIrqs,
    IoEventFd,
    Reset,
    IommuInfo,
    MapDma,
    UnmapDma,
}

/// One call the fake received, in order; closes are recorded when an object drops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VfioCall {
    OpenContainer,
    OpenGroup {
        group: String,
    },
    GroupStatus {
        group: String,
    },
    SetContainer {
        group: String,
    },
    SetIommu,
    OpenDevice {
        bdf: Bdf,
    },
    DeviceInfo {
        bdf: Bdf,
    },
    RegionInfo {
        bdf: Bdf,
        index: u32,
    },
    IrqInfo {
        bdf: Bdf,
        index: IrqIndex,
    },
    EnableIrq {
        bdf: Bdf,
        index: IrqIndex,
        vectors: usize,
    },
    SetIrqVector {
        bdf: Bdf,
        index: IrqIndex,
        vector: u32,
    },
    DisableIrq {
        bdf: Bdf,
        index: IrqIndex,
    },
    SetIoEventFd {
        bdf: Bdf,
        event: IoEvent,
    },
    ClearIoEventFd {
        bdf: Bdf,
        event: IoEvent,
    },
    Reset {
        bdf: Bdf,
    },
    IommuInfo,
    MapDma {
        iova: Iova,
        host: HostVa,
        len: u64,
    },
    UnmapDma {
        iova: Iova,
        len: u64,
    },
    CloseDevice {
        bdf: Bdf,
    },
    CloseGroup {
        group: String,
    },
    CloseContainer,
}

/// What a [`FakeVfio`] answers differently from the kernel's usual answer.
#[derive(Debug, Clone)]
pub struct FakeVfioScript {
    /// Errno for every call of each step (absent: the step succeeds).
    pub fail: HashMap<VfioStep, i32>,
    /// Overrides the viability read from the tree.
    pub viable: Option<bool>,
    /// `vfio_device_info.flags` (default: a PCI device that offers VFIO_DEVICE_RESET).
    pub device_flags: u32,
    /// Vectors per IRQ index (default: INTx 1, MSI 1, MSI-X 16, ERR 1, REQ 1).
    pub irq_counts: HashMap<IrqIndex, u32>,
    /// The next unmap reports this many bytes unmapped instead of what it removed.
    pub unmap_reports: Option<u64>,
}

impl Default for FakeVfioScript {
    fn default() -> Self {
        Self {
            fail: HashMap::new(),
            viable: None,
            device_flags: VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET,
            irq_counts: [
                (IrqIndex::Intx, 1),
                (IrqIndex::Msi, 1),
                (IrqIndex::Msix, 16),
                (IrqIndex::Err, 1),
                (IrqIndex::Req, 1),
            ]
            .into(),
            unmap_reports: None,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<VfioCall>,
    open_groups: HashSet<String>,
    /// Vectors with an eventfd, per device and index.
    irqs: HashMap<(Bdf, IrqIndex), usize>,
    ioevents: Vec<(Bdf, IoEvent)>,
    /// The device each fake device file (a memfd, by device and inode number) is.
    files: HashMap<(u64, u64), Bdf>,
}

/// VFIO over a fake kernel's tree.
#[derive(Debug, Clone)]
pub struct FakeVfio {
    root: SysfsRoot,
    /// Shared with the fake kernel: functions whose VFIO device fd is open.
    vfio_open: Arc<Mutex<HashSet<Bdf>>>,
    pub script: Arc<Mutex<FakeVfioScript>>,
    state: Arc<Mutex<State>>,
    iommu: Arc<FakeIommu>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn errno(e: i32) -> io::Error {
    io::Error::from_raw_os_error(e)
}

/// VFIO treats these drivers as harmless in a group (drivers/vfio/group.c,
/// vfio_dev_driver_allowed, plus vfio-pci itself).
const VIABLE_DRIVERS: [&str; 3] = ["vfio-pci", "pci-stub", "pcieport"];

impl FakeVfio {
    /// VFIO for the devices `kernel` serves; the IOMMU is `FakeIommu::typical()`.
    pub fn new(kernel: &FakeKernel) -> Self {
        Self {
            root: kernel.root().clone(),
            vfio_open: Arc::clone(&kernel.vfio_open),
            script: Arc::new(Mutex::new(FakeVfioScript::default())),
            state: Arc::new(Mutex::new(State::default())),
            iommu: Arc::new(FakeIommu::typical()),
        }
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<VfioCall> {
        lock(&self.state).calls.clone()
    }

    /// The IOMMU behind every container: what the device can reach.
    pub fn iommu(&self) -> &FakeIommu {
        &self.iommu
    }

    /// Functions whose device fd is open now.
    pub fn open_devices(&self) -> Vec<Bdf> {
        let mut v: Vec<Bdf> = lock(&self.vfio_open).iter().copied().collect();
        v.sort();
        v
    }

    /// Vectors of `index` that signal an eventfd on `bdf`.
    pub fn irq_vectors(&self, bdf: Bdf, index: IrqIndex) -> usize {
        lock(&self.state)
            .irqs
            .get(&(bdf, index))
            .copied()
            .unwrap_or(0)
    }

    /// The ioeventfds registered on `bdf`.
    pub fn ioevents(&self, bdf: Bdf) -> Vec<IoEvent> {
        lock(&self.state)
            .ioevents
            .iter()
            .filter(|(b, _)| *b == bdf)
            .map(|(_, e)| *e)
            .collect()
    }

    /// Fails every later call of `step` with `errno`.
    pub fn fail(&self, step: VfioStep, errno: i32) {
        lock(&self.script).fail.insert(step, errno);
    }

    fn log(&self, call: VfioCall) {
        lock(&self.state).calls.push(call);
    }

    /// Records `call`, then answers the scripted errno of `step`, if any.
    fn enter(&self, call: VfioCall, step: VfioStep) -> io::Result<()> {
        self.log(call);
        match lock(&self.script).fail.get(&step) {
            Some(e) => Err(errno(*e)),
            None => Ok(()),
        }
    }

    fn members(&self, group: &str) -> Vec<Bdf> {
        let dir = self
            .root
            .path()
            .join("kernel/iommu_groups")
            .join(group)
            .join("devices");
        let mut v: Vec<Bdf> = std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    fn driver(&self, bdf: Bdf) -> Option<String> {
        self.root.link_name(bdf, "driver")
    }
}

impl Vfio for FakeVfio {
    fn open_container(&self) -> Result<Arc<dyn Container>, VfioError> {
        self.enter(VfioCall::OpenContainer, VfioStep::OpenContainer)
            .map_err(|source| VfioError::OpenContainer {
                path: "/dev/vfio/vfio".into(),
                source,
            })?;
        Ok(Arc::new(FakeContainer { vfio: self.clone() }))
    }

    fn open_group(&self, group: &str) -> Result<Box<dyn Group>, VfioError> {
        let fail = |source| VfioError::OpenGroup {
            path: format!("/dev/vfio/{group}").into(),
            source,
        };
        self.enter(
            VfioCall::OpenGroup {
                group: group.to_owned(),
            },
            VfioStep::OpenGroup,
        )
        .map_err(fail)?;
        let bound = self
            .members(group)
            .into_iter()
            .any(|m| self.driver(m).as_deref() == Some("vfio-pci"));
        if !bound {
            // vfio-pci creates the group's node when it binds the first member.
            return Err(fail(errno(libc::ENOENT)));
        }
        if !lock(&self.state).open_groups.insert(group.to_owned()) {
            return Err(fail(errno(libc::EBUSY)));
        }
        Ok(Box::new(FakeGroup {
            vfio: self.clone(),
            name: group.to_owned(),
        }))
    }

    fn device_link(&self) -> &str {
        "/memfd:rig-fake-vfio-device (deleted)"
    }

    fn layout(&self, _root: &SysfsRoot, bdf: Bdf) -> io::Result<Vec<RegionInfo>> {
        Ok(self.layout_of(bdf)?.0)
    }

    fn config_through(&self, file: &File) -> io::Result<Vec<u8>> {
        let id = file_id(file)?;
        let bdf = lock(&self.state)
            .files
            .get(&id)
            .copied()
            .ok_or_else(|| errno(libc::ENOTTY))?;
        let (config, _) = self.root.read_config(bdf).map_err(io::Error::other)?;
        Ok(config.into_iter().take(64).collect())
    }
}

#[derive(Debug)]
struct FakeContainer {
    vfio: FakeVfio,
}

impl Drop for FakeContainer {
    fn drop(&mut self) {
        self.vfio.log(VfioCall::CloseContainer);
    }
}

fn dma_source(e: DmaError) -> io::Error {
    match e {
        DmaError::Map { source, .. } | DmaError::Unmap { source, .. } => source,
        other => io::Error::other(other.to_string()),
    }
}

#[expect(unsafe_code, reason = "implements Container's unsafe map_dma")]
impl Container for FakeContainer {
    fn set_iommu(&self) -> Result<(), VfioError> {
        self.vfio
            .enter(VfioCall::SetIommu, VfioStep::SetIommu)
            .map_err(|source| VfioError::SetIommu { source })
    }

    fn iommu_info(&self) -> Result<IommuInfo, VfioError> {
        self.vfio
            .enter(VfioCall::IommuInfo, VfioStep::IommuInfo)
            .map_err(|source| VfioError::IommuInfo { source })?;
        let iommu = &self.vfio.iommu;
        Ok(IommuInfo {
            page_sizes: iommu.page_sizes(),
            ranges: iommu
                .iova_ranges()
                .into_iter()
                .map(|r| (*r.start(), *r.end()))
                .collect(),
        })
    }

    unsafe fn map_dma(&self, iova: Iova, host: HostVa, len: u64) -> Result<(), VfioError> {
        let fail = |source| VfioError::Map { iova, len, source };
        self.vfio
            .enter(VfioCall::MapDma { iova, host, len }, VfioStep::MapDma)
            .map_err(fail)?;
        // SAFETY: the fake IOMMU never touches host memory.
        unsafe { self.vfio.iommu.map(iova, host, len) }.map_err(|e| fail(dma_source(e)))
    }

    fn unmap_dma_bytes(&self, iova: Iova, len: u64) -> Result<u64, VfioError> {
        let fail = |source| VfioError::Unmap { iova, len, source };
        self.vfio
            .enter(VfioCall::UnmapDma { iova, len }, VfioStep::UnmapDma)
            .map_err(fail)?;
        self.vfio
            .iommu
            .unmap(iova, len)
            .map_err(|e| fail(dma_source(e)))?;
        Ok(lock(&self.vfio.script).unmap_reports.take().unwrap_or(len))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[derive(Debug)]
struct FakeGroup {
    vfio: FakeVfio,
    name: String,
}

impl Drop for FakeGroup {
    fn drop(&mut self) {
        lock(&self.vfio.state).open_groups.remove(&self.name);
        self.vfio.log(VfioCall::CloseGroup {
            group: self.name.clone(),
        });
    }
}

impl Group for FakeGroup {
    fn name(&self) -> &str {
        &self.name
    }

    fn viable(&self) -> Result<bool, VfioError> {
        self.vfio
            .enter(
                VfioCall::GroupStatus {
                    group: self.name.clone(),
                },
                VfioStep::GroupStatus,
            )
            .map_err(|source| VfioError::GroupStatus {
                group: self.name.clone(),
                source,
            })?;
        if let Some(v) = lock(&self.vfio.script).viable {
            return Ok(v);
        }
        Ok(self.vfio.members(&self.name).into_iter().all(|m| {
            self.vfio
                .driver(m)
                .is_none_or(|d| VIABLE_DRIVERS.contains(&d.as_str()))
        }))
    }

    fn set_container(&self, container: &dyn Container) -> Result<(), VfioError> {
        let group = self.name.clone();
        self.vfio
            .enter(
                VfioCall::SetContainer {
                    group: group.clone(),
                },
                VfioStep::SetContainer,
            )
            .map_err(|source| VfioError::SetContainer {
                group: group.clone(),
                source,
            })?;
        container
            .as_any()
            .downcast_ref::<FakeContainer>()
            .map(|_| ())
            .ok_or(VfioError::ContainerKind { group })
    }

    fn open_device(&self, bdf: Bdf) -> Result<Box<dyn Device>, VfioError> {
        let fail = |source| VfioError::OpenDevice { bdf, source };
        self.vfio
            .enter(VfioCall::OpenDevice { bdf }, VfioStep::OpenDevice)
            .map_err(fail)?;
        let in_group = self.vfio.members(&self.name).contains(&bdf);
        if !in_group || self.vfio.driver(bdf).as_deref() != Some("vfio-pci") {
            return Err(fail(errno(libc::ENODEV)));
        }
        let (regions, file) = self.regions(bdf).map_err(fail)?;
        lock(&self.vfio.vfio_open).insert(bdf);
        Ok(Box::new(FakeDevice {
            vfio: self.vfio.clone(),
            bdf,
            regions,
            file,
        }))
    }
}

impl FakeGroup {
    /// The regions of [`FakeVfio::layout_of`], served from one memfd of that size;
    /// the fake remembers which device each memfd is (`config_through`).
    fn regions(&self, bdf: Bdf) -> io::Result<(Vec<RegionInfo>, File)> {
        let (regions, len) = self.vfio.layout_of(bdf)?;
        let fd = memfd_create(FAKE_DEVICE_FILE, MFdFlags::MFD_CLOEXEC)?;
        let file = File::from(fd);
        file.set_len(len)?;
        let id = file_id(&file)?;
        lock(&self.vfio.state).files.insert(id, bdf);
        Ok((regions, file))
    }
}

/// A file's device and inode numbers.
fn file_id(f: &File) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = f.metadata()?;
    Ok((m.dev(), m.ino()))
}

/// The name of the memfd behind a fake device file.
const FAKE_DEVICE_FILE: &std::ffi::CStr = c"rig-fake-vfio-device";

impl FakeVfio {
    /// Regions 0–5 are the memory BARs of `resource` (mappable), 6 the ROM (absent
    /// here), 7 the config space; all laid end to end, page-aligned; and their length.
    fn layout_of(&self, bdf: Bdf) -> io::Result<(Vec<RegionInfo>, u64)> {
        let resources = self.root.read_resources(bdf).map_err(io::Error::other)?;
        let mut regions = Vec::new();
        let mut offset = 0u64;
        for index in 0..8u32 {
            let (size, flags) = match index {
                0..=5 => resources
                    .get(index as usize)
                    // IORESOURCE_MEM (include/linux/ioport.h): I/O-port BARs do not map.
                    .filter(|r| r.size() > 0 && r.flags & 0x200 != 0)
                    .map_or((0, 0), |r| {
                        (
                            r.size(),
                            VFIO_REGION_INFO_FLAG_READ
                                | VFIO_REGION_INFO_FLAG_WRITE
                                | VFIO_REGION_INFO_FLAG_MMAP,
                        )
                    }),
                7 => (
                    4096,
                    VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE,
                ),
                _ => (0, 0),
            };
            regions.push(RegionInfo {
                index,
                flags,
                size,
                offset,
            });
            offset += size.next_multiple_of(4096);
        }
        Ok((regions, offset))
    }
}

#[derive(Debug)]
struct FakeDevice {
    vfio: FakeVfio,
    bdf: Bdf,
    regions: Vec<RegionInfo>,
    file: File,
}

impl Drop for FakeDevice {
    fn drop(&mut self) {
        lock(&self.vfio.vfio_open).remove(&self.bdf);
        let mut s = lock(&self.vfio.state);
        // Closing the fd releases its IRQs and ioeventfds.
        s.irqs.retain(|(b, _), _| *b != self.bdf);
        s.ioevents.retain(|(b, _)| *b != self.bdf);
        s.calls.push(VfioCall::CloseDevice { bdf: self.bdf });
    }
}

impl Device for FakeDevice {
    fn info(&self) -> Result<DeviceInfo, VfioError> {
        self.vfio
            .enter(VfioCall::DeviceInfo { bdf: self.bdf }, VfioStep::DeviceInfo)
            .map_err(|source| VfioError::DeviceInfo { source })?;
        Ok(DeviceInfo {
            flags: lock(&self.vfio.script).device_flags,
            num_regions: 9,
            num_irqs: 5,
        })
    }

    fn region(&self, index: u32) -> Result<RegionInfo, VfioError> {
        let fail = |source| VfioError::RegionInfo { index, source };
        self.vfio
            .enter(
                VfioCall::RegionInfo {
                    bdf: self.bdf,
                    index,
                },
                VfioStep::RegionInfo,
            )
            .map_err(fail)?;
        self.regions
            .get(index as usize)
            .copied()
            .ok_or_else(|| fail(errno(libc::EINVAL)))
    }

    fn file(&self) -> &File {
        &self.file
    }

    fn irq(&self, index: IrqIndex) -> Result<IrqInfo, VfioError> {
        self.vfio
            .enter(
                VfioCall::IrqInfo {
                    bdf: self.bdf,
                    index,
                },
                VfioStep::IrqInfo,
            )
            .map_err(|source| VfioError::IrqInfo { index, source })?;
        let count = lock(&self.vfio.script)
            .irq_counts
            .get(&index)
            .copied()
            .unwrap_or(0);
        Ok(IrqInfo {
            index,
            flags: 0,
            count,
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
        self.vfio
            .enter(
                VfioCall::EnableIrq {
                    bdf: self.bdf,
                    index,
                    vectors: fds.len(),
                },
                VfioStep::SetIrqs,
            )
            .map_err(|source| VfioError::SetIrqs { index, source })?;
        lock(&self.vfio.state)
            .irqs
            .insert((self.bdf, index), fds.len());
        Ok(())
    }

    fn set_irq_vector(&self, index: IrqIndex, vector: u32, _fd: &EventFd) -> Result<(), VfioError> {
        let have = self.irq(index)?.count;
        let enabled = lock(&self.vfio.state)
            .irqs
            .get(&(self.bdf, index))
            .copied()
            .unwrap_or(0);
        if vector >= have || vector as usize >= enabled {
            return Err(VfioError::IrqCount {
                index,
                want: vector as usize + 1,
                have: u32::try_from(enabled).unwrap_or(u32::MAX).min(have),
            });
        }
        self.vfio
            .enter(
                VfioCall::SetIrqVector {
                    bdf: self.bdf,
                    index,
                    vector,
                },
                VfioStep::SetIrqs,
            )
            .map_err(|source| VfioError::SetIrqs { index, source })
    }

    fn disable_irq(&self, index: IrqIndex) -> Result<(), VfioError> {
        self.vfio
            .enter(
                VfioCall::DisableIrq {
                    bdf: self.bdf,
                    index,
                },
                VfioStep::SetIrqs,
            )
            .map_err(|source| VfioError::SetIrqs { index, source })?;
        lock(&self.vfio.state).irqs.remove(&(self.bdf, index));
        Ok(())
    }

    fn set_ioeventfd(&self, event: &IoEvent, _fd: &EventFd) -> Result<(), VfioError> {
        let fail = |source| VfioError::IoEventFd {
            offset: event.offset,
            source,
        };
        self.vfio
            .enter(
                VfioCall::SetIoEventFd {
                    bdf: self.bdf,
                    event: *event,
                },
                VfioStep::IoEventFd,
            )
            .map_err(fail)?;
        let mut s = lock(&self.vfio.state);
        // vfio_pci_ioeventfd: the same offset, width and data twice is EEXIST.
        if s.ioevents.contains(&(self.bdf, *event)) {
            return Err(fail(errno(libc::EEXIST)));
        }
        s.ioevents.push((self.bdf, *event));
        Ok(())
    }

    fn clear_ioeventfd(&self, event: &IoEvent) -> Result<(), VfioError> {
        let fail = |source| VfioError::IoEventFd {
            offset: event.offset,
            source,
        };
        self.vfio
            .enter(
                VfioCall::ClearIoEventFd {
                    bdf: self.bdf,
                    event: *event,
                },
                VfioStep::IoEventFd,
            )
            .map_err(fail)?;
        let mut s = lock(&self.vfio.state);
        let before = s.ioevents.len();
        s.ioevents.retain(|e| *e != (self.bdf, *event));
        if s.ioevents.len() == before {
            // Removing one that is not there: ENODEV, as vfio_pci_ioeventfd answers.
            return Err(fail(errno(libc::ENODEV)));
        }
        Ok(())
    }

    fn reset(&self) -> Result<(), VfioError> {
        self.vfio
            .enter(VfioCall::Reset { bdf: self.bdf }, VfioStep::Reset)
            .map_err(|source| VfioError::Reset { source })
    }
}
