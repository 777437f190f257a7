//! VFIO type1 (legacy container) ioctls: one safe function per ioctl, on the container,
//! group or device file it applies to. `vfio/` builds containers, groups and devices on
//! these; nothing else calls them.
//!
//! Built on rust-vmm: the argument structs and constants are `vfio-bindings`' (generated
//! from include/uapi/linux/vfio.h), the ioctl numbers come from `vmm-sys-util`'s
//! `ioctl_io_nr!` and the calls go through its `ioctl_with_*` wrappers. What stays rig's
//! own is the layer `vfio-ioctls` would have been, because its 0.10 API does not fit:
//! - it opens `/dev/vfio/vfio` and `/dev/vfio/<group>` at fixed paths, while rig's
//!   `paths.dev` is configurable (tests and the disposable machine point it elsewhere);
//! - its per-ioctl functions are private; only `VfioContainer`/`VfioDevice` are public,
//!   and they open the group and check viability inside `VfioDevice::new`, so rig
//!   could not refuse a non-viable group before attaching it, nor journal each step;
//! - `VfioDevice::reset` swallows the ioctl's error (rig must know whether the reset
//!   happened), its IRQ calls drop the errno, and its `Drop` unwraps a readlink of the
//!   sysfs path (a panic in rigd when the device has gone);
//! - it has no `VFIO_IOMMU_GET_INFO` (rig needs the IOVA-range capability chain to
//!   place DMA) and no `VFIO_DEVICE_IOEVENTFD` (the queue work's doorbells).
//!
//! Kernel ABI: include/uapi/linux/vfio.h (Linux 6.12), Documentation/driver-api/vfio.rst.
//! Only type1v2 containers: the kernels rig runs on have no no-IOMMU mode (Debian's
//! 6.1/6.12 lack CONFIG_VFIO_NOIOMMU) and 6.12 has no iommufd
//! (docs/hardware/qemu-tier.md, "vIOMMU and VFIO").
//! Not here: the sequence and its errors (`vfio`), capability-chain parsing
//! (`vfio::iommu`, pure).

use std::{
    ffi::CStr,
    fs::File,
    io,
    mem::size_of,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
};

use vfio_bindings::bindings::vfio::{
    VFIO_BASE, VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE, VFIO_TYPE, vfio_device_info,
    vfio_device_ioeventfd, vfio_group_status, vfio_iommu_type1_dma_map, vfio_iommu_type1_dma_unmap,
    vfio_irq_info, vfio_region_info,
};
use vmm_sys_util::{
    eventfd::EventFd,
    ioctl::{
        ioctl, ioctl_with_mut_ptr, ioctl_with_mut_ref, ioctl_with_ptr, ioctl_with_ref,
        ioctl_with_val,
    },
    ioctl_io_nr,
};

// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO's ioctls carry no size in the number.
ioctl_io_nr!(VFIO_GET_API_VERSION, VFIO_TYPE.into(), VFIO_BASE);
ioctl_io_nr!(VFIO_CHECK_EXTENSION, VFIO_TYPE.into(), VFIO_BASE + 1);
ioctl_io_nr!(VFIO_SET_IOMMU, VFIO_TYPE.into(), VFIO_BASE + 2);
ioctl_io_nr!(VFIO_GROUP_GET_STATUS, VFIO_TYPE.into(), VFIO_BASE + 3);
ioctl_io_nr!(VFIO_GROUP_SET_CONTAINER, VFIO_TYPE.into(), VFIO_BASE + 4);
ioctl_io_nr!(VFIO_GROUP_GET_DEVICE_FD, VFIO_TYPE.into(), VFIO_BASE + 6);
ioctl_io_nr!(VFIO_DEVICE_GET_INFO, VFIO_TYPE.into(), VFIO_BASE + 7);
ioctl_io_nr!(VFIO_DEVICE_GET_REGION_INFO, VFIO_TYPE.into(), VFIO_BASE + 8);
ioctl_io_nr!(VFIO_DEVICE_GET_IRQ_INFO, VFIO_TYPE.into(), VFIO_BASE + 9);
ioctl_io_nr!(VFIO_DEVICE_SET_IRQS, VFIO_TYPE.into(), VFIO_BASE + 10);
ioctl_io_nr!(VFIO_DEVICE_RESET, VFIO_TYPE.into(), VFIO_BASE + 11);
ioctl_io_nr!(VFIO_DEVICE_IOEVENTFD, VFIO_TYPE.into(), VFIO_BASE + 16);
ioctl_io_nr!(VFIO_IOMMU_GET_INFO, VFIO_TYPE.into(), VFIO_BASE + 12);
ioctl_io_nr!(VFIO_IOMMU_MAP_DMA, VFIO_TYPE.into(), VFIO_BASE + 13);
ioctl_io_nr!(VFIO_IOMMU_UNMAP_DMA, VFIO_TYPE.into(), VFIO_BASE + 14);

/// The bytes `iommu_info` offers the kernel for the header and its capability chain:
/// 4 KiB holds 250+ IOVA ranges.
pub const IOMMU_INFO_BYTES: usize = 4096;
/// The most eventfds one `set_irq_eventfds` passes (MSI-X allows 2048 vectors).
pub const MAX_IRQ_EVENTFDS: usize = 2048;

/// A struct's size for its `argsz` field; every VFIO argument struct is a few words.
fn argsz<T>() -> u32 {
    u32::try_from(size_of::<T>()).expect("VFIO argument structs are a few words")
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// VFIO_GET_API_VERSION on a container.
///
/// # Errors
/// The ioctl's errno.
pub fn get_api_version(container: &File) -> io::Result<i32> {
    // SAFETY: the fd is open and owned by `container`; the ioctl takes no argument and
    // its result is checked.
    check(unsafe { ioctl(container, VFIO_GET_API_VERSION()) })
}

/// VFIO_CHECK_EXTENSION: whether the container supports IOMMU type `ext`.
///
/// # Errors
/// The ioctl's errno.
pub fn check_extension(container: &File, ext: u32) -> io::Result<bool> {
    // SAFETY: valid fd; the argument is an integer passed by value; result checked.
    let ret = check(unsafe { ioctl_with_val(container, VFIO_CHECK_EXTENSION(), ext.into()) })?;
    Ok(ret == 1)
}

/// VFIO_SET_IOMMU: selects IOMMU type `ty` (after the first group joined).
///
/// # Errors
/// The ioctl's errno.
pub fn set_iommu(container: &File, ty: u32) -> io::Result<()> {
    // SAFETY: valid fd; integer argument; result checked.
    check(unsafe { ioctl_with_val(container, VFIO_SET_IOMMU(), ty.into()) })?;
    Ok(())
}

/// VFIO_IOMMU_GET_INFO with its capability chain: the raw bytes the kernel wrote
/// (`vfio_iommu_type1_info` and the chain within `argsz`), for `vfio::iommu` to parse.
///
/// # Errors
/// The ioctl's errno.
pub fn iommu_info(container: &File) -> io::Result<Vec<u8>> {
    // u64 words keep the buffer 8-aligned, as the struct and its capabilities need.
    let mut buf = vec![0u64; IOMMU_INFO_BYTES / 8];
    let argsz = u32::try_from(IOMMU_INFO_BYTES).expect("4096 fits u32");
    // The first word holds argsz (u32) then flags (u32, 0), in native byte order.
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&argsz.to_ne_bytes());
    buf[0] = u64::from_ne_bytes(head);
    // SAFETY: valid fd; `buf` is IOMMU_INFO_BYTES long, 8-aligned and alive for the call,
    // and its first word (argsz) tells the kernel how much it may write; checked.
    check(unsafe { ioctl_with_mut_ptr(container, VFIO_IOMMU_GET_INFO(), buf.as_mut_ptr()) })?;
    Ok(buf.iter().flat_map(|w| w.to_ne_bytes()).collect())
}

/// VFIO_IOMMU_MAP_DMA: maps `len` bytes at host address `vaddr` to `iova`, read and write.
///
/// # Safety
/// `vaddr..vaddr+len` must stay mapped in this process until [`unmap_dma`] of the same
/// range returns: the device may access it until then.
///
/// # Errors
/// The ioctl's errno (EINVAL for misalignment, EEXIST for an overlap, ENOSPC…).
pub unsafe fn map_dma(container: &File, iova: u64, vaddr: u64, len: u64) -> io::Result<()> {
    let m = vfio_iommu_type1_dma_map {
        argsz: argsz::<vfio_iommu_type1_dma_map>(),
        flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
        vaddr,
        iova,
        size: len,
    };
    // SAFETY: valid fd; `m` is a correctly sized vfio_iommu_type1_dma_map alive for the
    // call; the caller keeps the memory mapped (this fn's contract); result checked.
    check(unsafe { ioctl_with_ref(container, VFIO_IOMMU_MAP_DMA(), &m) })?;
    Ok(())
}

/// VFIO_IOMMU_UNMAP_DMA: removes mappings inside `iova..iova+len`. Returns the bytes the
/// kernel says it unmapped (it writes them back into the struct's `size`).
///
/// # Errors
/// The ioctl's errno.
pub fn unmap_dma(container: &File, iova: u64, len: u64) -> io::Result<u64> {
    let mut m = vfio_iommu_type1_dma_unmap {
        argsz: argsz::<vfio_iommu_type1_dma_unmap>(),
        flags: 0,
        iova,
        size: len,
        ..Default::default()
    };
    // SAFETY: valid fd; `m` is a correctly sized vfio_iommu_type1_dma_unmap (no dirty
    // bitmap requested) that the kernel updates, alive for the call; result checked.
    check(unsafe { ioctl_with_mut_ref(container, VFIO_IOMMU_UNMAP_DMA(), &mut m) })?;
    Ok(m.size)
}

/// VFIO_GROUP_GET_STATUS: the group's flags (`VFIO_GROUP_FLAGS_VIABLE`, …).
///
/// # Errors
/// The ioctl's errno.
pub fn group_status(group: &File) -> io::Result<u32> {
    let mut s = vfio_group_status {
        argsz: argsz::<vfio_group_status>(),
        flags: 0,
    };
    // SAFETY: valid fd; `s` is a correctly sized vfio_group_status alive for the call;
    // result checked.
    check(unsafe { ioctl_with_mut_ref(group, VFIO_GROUP_GET_STATUS(), &mut s) })?;
    Ok(s.flags)
}

/// VFIO_GROUP_SET_CONTAINER: attaches the group to a container.
///
/// # Errors
/// The ioctl's errno.
pub fn group_set_container(group: &File, container: &File) -> io::Result<()> {
    let fd: libc::c_int = container.as_raw_fd();
    // SAFETY: valid group fd; the argument points at a live int holding the container's
    // open fd; result checked.
    check(unsafe { ioctl_with_ref(group, VFIO_GROUP_SET_CONTAINER(), &fd) })?;
    Ok(())
}

/// VFIO_GROUP_GET_DEVICE_FD: opens the device `name` (its PCI address) of the group.
///
/// # Errors
/// The ioctl's errno.
pub fn group_get_device_fd(group: &File, name: &CStr) -> io::Result<File> {
    // SAFETY: valid group fd; `name` is NUL-terminated and alive for the call; the
    // return value is checked and is a new fd that we alone own.
    let fd = check(unsafe { ioctl_with_ptr(group, VFIO_GROUP_GET_DEVICE_FD(), name.as_ptr()) })?;
    // SAFETY: `fd` was just returned by the kernel and nothing else owns it.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// VFIO_DEVICE_GET_INFO.
///
/// # Errors
/// The ioctl's errno.
pub fn device_info(device: &File) -> io::Result<vfio_device_info> {
    let mut i = vfio_device_info {
        argsz: argsz::<vfio_device_info>(),
        ..Default::default()
    };
    // SAFETY: valid fd; `i` is a correctly sized vfio_device_info alive for the call;
    // result checked.
    check(unsafe { ioctl_with_mut_ref(device, VFIO_DEVICE_GET_INFO(), &mut i) })?;
    Ok(i)
}

/// VFIO_DEVICE_GET_REGION_INFO for region `index` (BARs 0–5, ROM 6, config 7).
///
/// # Errors
/// The ioctl's errno.
pub fn region_info(device: &File, index: u32) -> io::Result<vfio_region_info> {
    let mut r = vfio_region_info {
        argsz: argsz::<vfio_region_info>(),
        index,
        ..Default::default()
    };
    // SAFETY: valid fd; `r` is a correctly sized vfio_region_info alive for the call (the
    // kernel writes capabilities only within argsz, which covers none); result checked.
    check(unsafe { ioctl_with_mut_ref(device, VFIO_DEVICE_GET_REGION_INFO(), &mut r) })?;
    Ok(r)
}

/// VFIO_DEVICE_GET_IRQ_INFO for IRQ index `index` (INTx 0, MSI 1, MSI-X 2, …).
///
/// # Errors
/// The ioctl's errno.
pub fn irq_info(device: &File, index: u32) -> io::Result<vfio_irq_info> {
    let mut i = vfio_irq_info {
        argsz: argsz::<vfio_irq_info>(),
        index,
        ..Default::default()
    };
    // SAFETY: valid fd; `i` is a correctly sized vfio_irq_info alive for the call;
    // result checked.
    check(unsafe { ioctl_with_mut_ref(device, VFIO_DEVICE_GET_IRQ_INFO(), &mut i) })?;
    Ok(i)
}

/// VFIO_DEVICE_SET_IRQS with DATA_EVENTFD | ACTION_TRIGGER: vectors `start..` of IRQ
/// index `index` signal `fds` (one eventfd each, in order).
///
/// # Errors
/// EINVAL for more than [`MAX_IRQ_EVENTFDS`]; otherwise the ioctl's errno.
pub fn set_irq_eventfds(device: &File, index: u32, start: u32, fds: &[&EventFd]) -> io::Result<()> {
    if fds.len() > MAX_IRQ_EVENTFDS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let count = u32::try_from(fds.len()).expect("at most MAX_IRQ_EVENTFDS");
    // struct vfio_irq_set is five u32 words followed by `count` s32 fds: a u32 buffer
    // has its layout and alignment.
    let mut set: Vec<u32> = Vec::with_capacity(5 + fds.len());
    let words = u32::try_from(5 + fds.len()).expect("at most 2053 words");
    set.extend([
        words * 4,
        VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
        index,
        start,
        count,
    ]);
    // CAST: an fd is a non-negative c_int; the kernel reads these words as s32.
    set.extend(fds.iter().map(|fd| fd.as_raw_fd().cast_unsigned()));
    // SAFETY: valid fd; `set` is a vfio_irq_set whose argsz covers exactly its header and
    // `count` fds, alive for the call; each fd is borrowed, so open; result checked.
    check(unsafe { ioctl_with_ptr(device, VFIO_DEVICE_SET_IRQS(), set.as_ptr()) })?;
    Ok(())
}

/// VFIO_DEVICE_SET_IRQS with DATA_NONE | ACTION_TRIGGER and count 0: disables every
/// vector of IRQ index `index` and releases their eventfds.
///
/// # Errors
/// The ioctl's errno.
pub fn disable_irq(device: &File, index: u32) -> io::Result<()> {
    let set: [u32; 5] = [
        5 * 4,
        VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER,
        index,
        0,
        0,
    ];
    // SAFETY: valid fd; `set` is a 20-byte vfio_irq_set with no data, alive for the call;
    // result checked.
    check(unsafe { ioctl_with_ptr(device, VFIO_DEVICE_SET_IRQS(), set.as_ptr()) })?;
    Ok(())
}

/// VFIO_DEVICE_RESET (only when the device info has VFIO_DEVICE_FLAGS_RESET).
///
/// # Errors
/// The ioctl's errno; unlike vfio-ioctls, never swallowed.
pub fn device_reset(device: &File) -> io::Result<()> {
    // SAFETY: valid fd; no argument; result checked.
    check(unsafe { ioctl(device, VFIO_DEVICE_RESET()) })?;
    Ok(())
}

/// VFIO_DEVICE_IOEVENTFD: a write of `data` (`size_flag`: VFIO_DEVICE_IOEVENTFD_8..64)
/// at `offset` of the device fd is made by the kernel each time `fd` is signalled. An
/// `fd` of `None` removes the one registered for the same offset, size and data.
///
/// # Errors
/// The ioctl's errno.
pub fn device_ioeventfd(
    device: &File,
    size_flag: u32,
    offset: u64,
    data: u64,
    fd: Option<&EventFd>,
) -> io::Result<()> {
    let e = vfio_device_ioeventfd {
        argsz: argsz::<vfio_device_ioeventfd>(),
        flags: size_flag,
        offset,
        data,
        fd: fd.map_or(-1, AsRawFd::as_raw_fd),
        reserved: 0,
    };
    // SAFETY: valid fd; `e` is a correctly sized vfio_device_ioeventfd alive for the
    // call; its fd is open (the caller lends it for the call) or -1; result checked.
    check(unsafe { ioctl_with_ref(device, VFIO_DEVICE_IOEVENTFD(), &e) })?;
    Ok(())
}

/// An eventfd as an owned descriptor, to send over SCM_RIGHTS (a lent kick).
pub fn eventfd_into_owned(fd: vmm_sys_util::eventfd::EventFd) -> std::os::fd::OwnedFd {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let raw = fd.into_raw_fd();
    // SAFETY: `into_raw_fd` gave up the `EventFd`'s ownership of `raw`, an open
    // descriptor nothing else owns or closes, so the `OwnedFd` becomes its one owner.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_are_the_uapi_headers() {
        // _IO(';', 100 + n) from include/uapi/linux/vfio.h.
        assert_eq!(VFIO_GET_API_VERSION(), 0x3b64);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD(), 0x3b6a);
        assert_eq!(VFIO_DEVICE_RESET(), 0x3b6f);
        assert_eq!(VFIO_IOMMU_GET_INFO(), 0x3b70);
        assert_eq!(VFIO_IOMMU_UNMAP_DMA(), 0x3b72);
        assert_eq!(VFIO_DEVICE_IOEVENTFD(), 0x3b74);
    }
}
