//! Maps a held device's memory BARs into rigd: through VFIO regions (vfio mode) or the
//! sysfs `resourceN` files (sysfs mode). The maps are what later stages lend to
//! clients; holding them here proves the BARs are reachable the moment rig holds the
//! device. Mapping reserves address space only: a 256 GiB VRAM BAR costs no memory.
//!
//! Access goes through volatile reads and writes only (seed: "arm64 Device memory
//! faults on the accesses memcpy makes"), so this module hands out no slices.

use std::fs::File;

use memmap2::{MmapOptions, MmapRaw};

use super::{TakeError, VfioHold};
use crate::{
    pci::{Bdf, SysfsRoot},
    sys::vfio::VFIO_REGION_INFO_FLAG_MMAP,
};

/// One mapped BAR.
#[derive(Debug)]
pub struct MappedBar {
    pub index: u8,
    pub size: u64,
    map: MmapRaw,
}

impl MappedBar {
    /// The mapping's address in rigd (for the lending stages).
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }
}

/// Maps every mappable memory BAR of a device held through VFIO.
///
/// # Errors
/// [`TakeError::Step`] naming the BAR whose region could not be read or mapped.
pub fn map_vfio(bdf: Bdf, v: &VfioHold) -> Result<Vec<MappedBar>, TakeError> {
    let mut out = Vec::new();
    for index in 0u8..6 {
        let r = v
            .device
            .region(index.into())
            .map_err(|source| TakeError::Step {
                bdf,
                step: "read a VFIO region",
                source,
            })?;
        if r.size == 0 || r.flags & VFIO_REGION_INFO_FLAG_MMAP == 0 {
            continue;
        }
        out.push(map(bdf, v.device.file(), index, r.offset, r.size)?);
    }
    Ok(out)
}

/// Maps every memory BAR of a driverless device through `resourceN`.
///
/// # Errors
/// [`TakeError::Step`] naming the BAR that could not be opened or mapped.
pub fn map_sysfs(bdf: Bdf, root: &SysfsRoot) -> Result<Vec<MappedBar>, TakeError> {
    let resources = root
        .read_resources(bdf)
        .map_err(|source| TakeError::Read { bdf, source })?;
    let mut out = Vec::new();
    for (i, res) in resources.iter().take(6).enumerate() {
        // IORESOURCE_MEM (include/linux/ioport.h): I/O-port BARs cannot be mapped.
        if res.size() == 0 || res.flags & 0x200 == 0 {
            continue;
        }
        let index = u8::try_from(i).expect("at most six BARs");
        let path = root.device_dir(bdf).join(format!("resource{index}"));
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| TakeError::Step {
                bdf,
                step: "open a resourceN file",
                source,
            })?;
        out.push(map(bdf, &file, index, 0, res.size())?);
    }
    Ok(out)
}

fn map(bdf: Bdf, file: &File, index: u8, offset: u64, size: u64) -> Result<MappedBar, TakeError> {
    let len = usize::try_from(size).map_err(|_| TakeError::Step {
        bdf,
        step: "map a BAR",
        source: std::io::Error::other(format!(
            "BAR{index} of {size} bytes does not fit this address space"
        )),
    })?;
    let map = MmapOptions::new()
        .offset(offset)
        .len(len)
        .map_raw(file)
        .map_err(|source| TakeError::Step {
            bdf,
            step: "map a BAR",
            source,
        })?;
    Ok(MappedBar { index, size, map })
}
