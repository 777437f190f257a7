//! Maps a held device's memory BARs into rigd: through VFIO regions (vfio mode, from a
//! `vfio::Handles`'s device) or the sysfs `resourceN` files (sysfs mode). Holding them here proves the BARs are
//! reachable the moment rig holds the device, and serves an admin's register reads and
//! writes (`rigctl mmio`). Mapping reserves address space only: a 256 GiB VRAM BAR
//! costs no memory.
//!
//! Access goes through `sys::mmio`'s volatile reads and writes only (arm64 Device
//! memory faults on the accesses `memcpy` makes: docs/hardware/pci-takeover.md,
//! "Register access"), so this module hands out no slices.

use std::fs::File;

use memmap2::MmapOptions;

use super::{TakeError, Taken};
use crate::{
    pci::{Bdf, SysfsRoot},
    sys::mmio::{Mmio, Width},
    vfio,
};

/// One mapped BAR.
#[derive(Debug)]
pub struct MappedBar {
    pub index: u8,
    pub size: u64,
    pub regs: Mmio,
}

/// The most registers one read returns.
pub const MAX_READ_COUNT: u32 = 4096;

impl Taken {
    fn mapped_bar(&self, bar: u32) -> Result<&MappedBar, TakeError> {
        let bars = self.hold.bars();
        bars.iter()
            .find(|b| u32::from(b.index) == bar)
            .ok_or_else(|| TakeError::NoBar {
                bdf: self.bdf,
                bar,
                mapped: bars.iter().map(|b| b.index).collect(),
            })
    }

    /// Reads `count` consecutive registers of `width` from `offset` in BAR `bar`.
    /// Every access is checked before the first one is made.
    ///
    /// # Errors
    /// [`TakeError::NoBar`] for a BAR rig has not mapped, [`TakeError::Mmio`] for an
    /// access outside it, misaligned, or a count of 0 or above [`MAX_READ_COUNT`].
    pub fn read_bar(
        &self,
        bar: u32,
        offset: u64,
        width: Width,
        count: u32,
    ) -> Result<Vec<u64>, TakeError> {
        let b = self.mapped_bar(bar)?;
        let refuse = |source| TakeError::Mmio {
            bdf: self.bdf,
            bar: b.index,
            source,
        };
        if count == 0 || count > MAX_READ_COUNT {
            return Err(refuse(crate::sys::mmio::MmioError::Count {
                count,
                max: MAX_READ_COUNT,
            }));
        }
        // The last access decides whether all fit (they are contiguous).
        let last = (u64::from(count) - 1)
            .checked_mul(width.bytes())
            .and_then(|d| offset.checked_add(d))
            .ok_or(crate::sys::mmio::MmioError::OutOfRange {
                offset,
                width,
                len: b.regs.len(),
            })
            .map_err(refuse)?;
        b.regs.check(last, width).map_err(refuse)?;
        (0..u64::from(count))
            .map(|i| {
                b.regs
                    .read(offset + i * width.bytes(), width)
                    .map_err(refuse)
            })
            .collect()
    }

    /// Writes one register of `width` at `offset` in BAR `bar`.
    ///
    /// # Errors
    /// As [`Taken::read_bar`], and a value wider than the access.
    pub fn write_bar(
        &self,
        bar: u32,
        offset: u64,
        width: Width,
        value: u64,
    ) -> Result<(), TakeError> {
        let b = self.mapped_bar(bar)?;
        b.regs
            .write(offset, width, value)
            .map_err(|source| TakeError::Mmio {
                bdf: self.bdf,
                bar: b.index,
                source,
            })
    }
}

/// Maps every mappable memory BAR of a device held through VFIO (regions 0–5 of the
/// device fd, `VFIO_PCI_BAR0_REGION_INDEX`…).
///
/// # Errors
/// [`TakeError::Vfio`] for a region that could not be read, [`TakeError::Step`] for one
/// that could not be mapped.
pub fn map_vfio(bdf: Bdf, v: &vfio::Handles) -> Result<Vec<MappedBar>, TakeError> {
    let mut out = Vec::new();
    for index in 0u8..6 {
        let r = v
            .device
            .region(index.into())
            .map_err(|source| TakeError::Vfio { bdf, source })?;
        if r.size == 0 || !r.mappable() {
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
    Ok(MappedBar {
        index,
        size,
        regs: Mmio::new(map),
    })
}
