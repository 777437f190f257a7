//! A fake IOMMU for tests (feature `fakes`; never in the shipped rigd): records every
//! map and unmap as an [`IommuCall`], answers as a device would see memory
//! (`translate`), and fails the next call with a scripted errno.
//!
//! It lives beside the trait it fakes: [`IommuMap`] is `dma`'s, and `dma`'s own tests
//! use it, which they could not if it sat in `vfio` (a layer above). The real
//! implementation is `vfio::Iommu`, over a VFIO container; `vfio::FakeVfio`'s
//! containers map through one of these.

use std::{
    collections::BTreeMap,
    io,
    ops::RangeInclusive,
    sync::{Mutex, MutexGuard, PoisonError},
};

use crate::dma::{DmaError, HostVa, IommuMap, Iova};

/// One call the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IommuCall {
    Map { iova: Iova, host: HostVa, len: u64 },
    Unmap { iova: Iova, len: u64 },
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<IommuCall>,
    /// IOVA start → (host address, length).
    mapped: BTreeMap<u64, (u64, u64)>,
    fail_map: Option<i32>,
    fail_unmap: Option<i32>,
}

/// An IOMMU that exists only in memory.
#[derive(Debug)]
pub struct FakeIommu {
    ranges: Vec<RangeInclusive<u64>>,
    page_sizes: u64,
    state: Mutex<State>,
}

impl FakeIommu {
    /// An IOMMU accepting `ranges` with the page-size bitmap `page_sizes`.
    pub fn new(ranges: Vec<RangeInclusive<u64>>, page_sizes: u64) -> Self {
        Self {
            ranges,
            page_sizes,
            state: Mutex::new(State::default()),
        }
    }

    /// Intel VT-d's usual answer: 4 KiB, 2 MiB and 1 GiB pages below 2^39, with the
    /// MSI window at 0xfee00000 carved out.
    pub fn typical() -> Self {
        Self::new(
            vec![0..=0xfedf_ffff, 0xfef0_0000..=((1 << 39) - 1)],
            0x4020_1000,
        )
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<IommuCall> {
        self.state().calls.clone()
    }

    /// What the device can reach now: (IOVA, host address, length).
    pub fn mapped(&self) -> Vec<(Iova, HostVa, u64)> {
        self.state()
            .mapped
            .iter()
            .map(|(i, (h, l))| (Iova(*i), HostVa(*h), *l))
            .collect()
    }

    /// The host address the device reaches at `iova`, or `None`: an IOMMU fault.
    pub fn translate(&self, iova: Iova) -> Option<HostVa> {
        let s = self.state();
        let (start, (host, len)) = s.mapped.range(..=iova.0).next_back()?;
        let off = iova.0 - start;
        (off < *len).then(|| HostVa(host + off))
    }

    /// The next map fails with `errno`.
    pub fn fail_next_map(&self, errno: i32) {
        self.state().fail_map = Some(errno);
    }

    /// The next unmap fails with `errno`.
    pub fn fail_next_unmap(&self, errno: i32) {
        self.state().fail_unmap = Some(errno);
    }
}

#[expect(unsafe_code, reason = "implements IommuMap's unsafe map")]
impl IommuMap for FakeIommu {
    fn iova_ranges(&self) -> Vec<RangeInclusive<u64>> {
        self.ranges.clone()
    }

    fn page_sizes(&self) -> u64 {
        self.page_sizes
    }

    unsafe fn map(&self, iova: Iova, host: HostVa, len: u64) -> Result<(), DmaError> {
        let mut s = self.state();
        s.calls.push(IommuCall::Map { iova, host, len });
        let fail = |errno| DmaError::Map {
            iova,
            len,
            source: io::Error::from_raw_os_error(errno),
        };
        if let Some(errno) = s.fail_map.take() {
            return Err(fail(errno));
        }
        let inside = self.ranges.iter().any(|r| {
            r.contains(&iova.0)
                && iova
                    .0
                    .checked_add(len - 1)
                    .is_some_and(|end| r.contains(&end))
        });
        let overlaps = s
            .mapped
            .range(..iova.0 + len)
            .next_back()
            .is_some_and(|(st, (_, l))| st + l > iova.0);
        if !inside || overlaps || len == 0 {
            // VFIO answers EINVAL outside the ranges and EEXIST over a mapping.
            return Err(fail(if overlaps { libc::EEXIST } else { libc::EINVAL }));
        }
        s.mapped.insert(iova.0, (host.0, len));
        Ok(())
    }

    fn unmap(&self, iova: Iova, len: u64) -> Result<(), DmaError> {
        let mut s = self.state();
        s.calls.push(IommuCall::Unmap { iova, len });
        let fail = |errno| DmaError::Unmap {
            iova,
            len,
            source: io::Error::from_raw_os_error(errno),
        };
        if let Some(errno) = s.fail_unmap.take() {
            return Err(fail(errno));
        }
        // The fake takes only whole mappings inside [iova, iova + len).
        let inside: Vec<u64> = s
            .mapped
            .range(iova.0..iova.0.saturating_add(len))
            .filter(|(st, (_, l))| *st + *l <= iova.0 + len)
            .map(|(st, _)| *st)
            .collect();
        if inside.is_empty() {
            return Err(fail(libc::EINVAL));
        }
        for st in inside {
            s.mapped.remove(&st);
        }
        Ok(())
    }
}

#[cfg(test)]
#[expect(
    unsafe_code,
    reason = "IommuMap::map is unsafe; the fake touches no memory"
)]
mod tests {
    use super::*;

    #[test]
    fn the_device_reaches_only_what_is_mapped() {
        let f = FakeIommu::typical();
        // SAFETY: the fake never touches host memory.
        unsafe { f.map(Iova(0x20_0000), HostVa(0x7000_0000), 0x20_0000) }.expect("map");
        assert_eq!(f.translate(Iova(0x20_0010)), Some(HostVa(0x7000_0010)));
        assert_eq!(f.translate(Iova(0x40_0000)), None);
        f.unmap(Iova(0x20_0000), 0x20_0000).expect("unmap");
        assert_eq!(f.translate(Iova(0x20_0010)), None, "a fault after unmap");
        assert_eq!(f.calls().len(), 2);
    }

    #[test]
    fn overlapping_or_out_of_range_maps_and_scripted_errors_fail() {
        let f = FakeIommu::typical();
        // SAFETY: the fake never touches host memory.
        unsafe { f.map(Iova(0x20_0000), HostVa(1), 0x20_0000) }.expect("map");
        // SAFETY: as above.
        let over = unsafe { f.map(Iova(0x30_0000), HostVa(1), 0x20_0000) };
        assert!(matches!(over, Err(DmaError::Map { .. })));
        // SAFETY: as above; the MSI window is outside every range.
        let msi = unsafe { f.map(Iova(0xfee0_0000), HostVa(1), 0x1000) };
        assert!(matches!(msi, Err(DmaError::Map { .. })));
        f.fail_next_unmap(libc::EIO);
        assert!(matches!(
            f.unmap(Iova(0x20_0000), 0x20_0000),
            Err(DmaError::Unmap { .. })
        ));
        f.unmap(Iova(0x20_0000), 0x20_0000).expect("second try");
    }
}
