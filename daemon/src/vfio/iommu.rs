//! A VFIO container as a DMA pool's IOMMU: [`Iommu`] implements `dma::IommuMap` over a
//! [`Container`], so `dma` never names VFIO. Also the pure parts of the container's
//! answers: the VFIO_IOMMU_GET_INFO capability chain ([`parse_iommu_info`]) and the
//! size check of an unmap ([`check_unmapped`]).
//!
//! Flow: `take` holds the container → `rig.rs` makes an [`Iommu`] of it → `dma::Pool`
//! maps and unmaps leases through it. Kernel ABI: include/uapi/linux/vfio.h
//! (`struct vfio_iommu_type1_info`, `VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE`,
//! `vfio_iommu_type1_dma_unmap.size`, written back with the bytes unmapped). Not here:
//! the ioctls (`sys::vfio`), the pool's bookkeeping (`dma`).

use std::{ops::RangeInclusive, sync::Arc};

use vfio_bindings::bindings::vfio::{
    VFIO_IOMMU_INFO_CAPS, VFIO_IOMMU_INFO_PGSIZES, VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE,
};

use super::{Container, VfioError};
use crate::dma::{DmaError, HostVa, IommuMap, Iova};

/// What the IOMMU accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IommuInfo {
    /// Bitmap of supported page sizes (`iova_pgsizes`).
    pub page_sizes: u64,
    /// Inclusive IOVA ranges; empty when the kernel reports none.
    pub ranges: Vec<(u64, u64)>,
}

/// The most capabilities followed in a chain (the kernel writes two or three): a loop
/// in a corrupt chain ends here.
const MAX_CAPS: usize = 16;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let bytes = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(8)?)?;
    Some(u64::from_ne_bytes(bytes.try_into().ok()?))
}

/// Decodes what VFIO_IOMMU_GET_INFO wrote: `struct vfio_iommu_type1_info` (argsz 0,
/// flags 4, iova_pgsizes 8, cap_offset 16) and, when `VFIO_IOMMU_INFO_CAPS` is set, the
/// chain of `vfio_info_cap_header`s (id u16, version u16, next u32) from `cap_offset`.
/// The IOVA-range capability is `nr_iovas` u32 at +8, then `{start, end}` u64 pairs
/// from +16. Every read is bounds-checked: a truncated or corrupt chain yields what
/// could be read, never a panic.
pub fn parse_iommu_info(bytes: &[u8]) -> IommuInfo {
    let flags = u32_at(bytes, 4).unwrap_or(0);
    let page_sizes = if flags & VFIO_IOMMU_INFO_PGSIZES != 0 {
        u64_at(bytes, 8).unwrap_or(0)
    } else {
        0
    };
    let mut ranges = Vec::new();
    let mut cap = if flags & VFIO_IOMMU_INFO_CAPS != 0 {
        u32_at(bytes, 16).map_or(0, |c| c as usize)
    } else {
        0
    };
    for _ in 0..MAX_CAPS {
        if cap == 0 {
            break;
        }
        let Some(header) = u32_at(bytes, cap) else {
            break;
        };
        let next = u32_at(bytes, cap + 4).map_or(0, |n| n as usize);
        if header & 0xffff == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE {
            let n = u32_at(bytes, cap + 8).map_or(0, |n| n as usize);
            for i in 0..n {
                let at = cap + 16 + 16 * i;
                match (u64_at(bytes, at), u64_at(bytes, at + 8)) {
                    (Some(s), Some(e)) => ranges.push((s, e)),
                    _ => break,
                }
            }
        }
        cap = next;
    }
    IommuInfo { page_sizes, ranges }
}

/// VFIO_IOMMU_UNMAP_DMA writes back how many bytes it unmapped: anything but `len`
/// means the IOMMU still maps part of the range (a mapping straddled it) or never did.
///
/// # Errors
/// [`VfioError::UnmapSize`] when `unmapped != len`.
pub fn check_unmapped(iova: Iova, len: u64, unmapped: u64) -> Result<(), VfioError> {
    if unmapped == len {
        Ok(())
    } else {
        Err(VfioError::UnmapSize {
            iova,
            len,
            unmapped,
        })
    }
}

/// A container as DMA pools see it. `rig.rs` makes one from a [`super::Handles`]; the
/// device's pool maps and unmaps its blocks through it.
#[derive(Debug)]
pub struct Iommu {
    container: Arc<dyn Container>,
    info: IommuInfo,
}

impl Iommu {
    /// Reads the IOMMU's page sizes and IOVA ranges once.
    ///
    /// # Errors
    /// [`VfioError::IommuInfo`].
    pub fn new(container: Arc<dyn Container>) -> Result<Self, VfioError> {
        let info = container.iommu_info()?;
        Ok(Self { container, info })
    }
}

/// The io::Error a DMA error carries: the ioctl's own, or the typed VFIO error when
/// the failure was rig's check (the unmap size), so the chain keeps it.
fn into_io(e: VfioError) -> std::io::Error {
    match e {
        VfioError::Map { source, .. } | VfioError::Unmap { source, .. } => source,
        other => std::io::Error::other(other),
    }
}

#[expect(unsafe_code, reason = "implements IommuMap's unsafe map")]
impl IommuMap for Iommu {
    fn iova_ranges(&self) -> Vec<RangeInclusive<u64>> {
        self.info.ranges.iter().map(|&(s, e)| s..=e).collect()
    }

    fn page_sizes(&self) -> u64 {
        self.info.page_sizes
    }

    unsafe fn map(&self, iova: Iova, host: HostVa, len: u64) -> Result<(), DmaError> {
        // SAFETY: the caller keeps `host..host+len` mapped until `unmap` of the same
        // range returns (this trait method's contract), which is what map_dma needs.
        unsafe { self.container.map_dma(iova, host, len) }.map_err(|e| DmaError::Map {
            iova,
            len,
            source: into_io(e),
        })
    }

    fn unmap(&self, iova: Iova, len: u64) -> Result<(), DmaError> {
        self.container
            .unmap_dma(iova, len)
            .map_err(|e| DmaError::Unmap {
                iova,
                len,
                source: into_io(e),
            })
    }
}
