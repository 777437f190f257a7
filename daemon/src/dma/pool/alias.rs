//! Second device addresses for pages of a lease: a window of IOVA reserved from the
//! pool's allocator, and single pages of a lease mapped into it. The queue stage uses
//! them for NVMe shadow doorbells, which the controller finds by IOVA arithmetic
//! (`dbs + 8 × qid`), so client k's page must sit at one fixed place in the window
//! whatever IOVA its lease got (docs/hardware/queues.md, "QEMU's NVMe controller").
//!
//! Invariant: an alias is unmapped before its lease's blocks leave the lease
//! (`Pool::release`, `Pool` drop); one whose unmap fails keeps its lease's blocks out
//! of use, as a failed lease unmap does.

use super::{BLOCK_SIZE, DmaError, Iova, LeaseId, Pool, PoolMode, State};
use crate::dma::HostVa;

/// The page size aliases are made of.
pub const ALIAS_PAGE: u64 = 4096;

impl Pool {
    /// Reserves `len` bytes of IOVA (a multiple of the block) that no lease will get.
    ///
    /// # Errors
    /// [`DmaError::BadAlias`] outside vfio mode; [`DmaError::Iova`] when the space is
    /// full or `len` is not a multiple of its granule.
    pub fn reserve_window(&self, len: u64) -> Result<Iova, DmaError> {
        let mut st = self.shared.state();
        let space = st.iova.as_mut().ok_or(DmaError::BadAlias {
            iova: Iova(0),
            why: "only a pool behind an IOMMU has IOVA to reserve",
        })?;
        Ok(space.alloc(len)?)
    }

    /// Gives back a window from [`Pool::reserve_window`]; its aliases must be gone.
    ///
    /// # Errors
    /// [`DmaError::BadAlias`] while an alias lies inside it; [`DmaError::Iova`].
    pub fn free_window(&self, base: Iova, len: u64) -> Result<(), DmaError> {
        let mut st = self.shared.state();
        if st.aliases.range(base.0..base.0 + len).next().is_some() {
            return Err(DmaError::BadAlias {
                iova: base,
                why: "the window still holds aliases",
            });
        }
        let space = st.iova.as_mut().ok_or(DmaError::BadAlias {
            iova: base,
            why: "only a pool behind an IOMMU has IOVA to reserve",
        })?;
        Ok(space.free(base)?)
    }

    /// Maps the page at `offset` of lease `id` a second time, at `iova` (inside a window
    /// this pool reserved).
    ///
    /// # Errors
    /// [`DmaError::UnknownLease`], [`DmaError::OutOfLease`], [`DmaError::BadAlias`] for
    /// an unaligned offset or IOVA, or an IOVA already aliased; [`DmaError::Map`].
    #[expect(
        unsafe_code,
        reason = "IommuMap::map: the caller owes that the host memory outlives the mapping"
    )]
    pub fn alias(&self, id: LeaseId, offset: u64, iova: Iova) -> Result<(), DmaError> {
        let PoolMode::Vfio(iommu) = &self.shared.mode else {
            return Err(DmaError::BadAlias {
                iova,
                why: "only a pool behind an IOMMU can alias",
            });
        };
        let mut st = self.shared.state();
        if !offset.is_multiple_of(ALIAS_PAGE) || !iova.0.is_multiple_of(ALIAS_PAGE) {
            return Err(DmaError::BadAlias {
                iova,
                why: "aliases are whole 4 KiB pages",
            });
        }
        if st.aliases.contains_key(&iova.0) {
            return Err(DmaError::BadAlias {
                iova,
                why: "that IOVA is aliased already",
            });
        }
        let leased = st
            .leases
            .get(&id)
            .ok_or(DmaError::UnknownLease { lease: id })?;
        let block = usize::try_from(offset / BLOCK_SIZE)
            .ok()
            .and_then(|i| leased.blocks.get(i))
            .ok_or(DmaError::OutOfLease {
                lease: id,
                offset,
                len: ALIAS_PAGE,
            })?;
        let host = HostVa(block.va().0 + offset % BLOCK_SIZE);
        // SAFETY: the page lies inside `block`, which stays mapped in rigd while it is
        // in lease `id`; `release` and the pool's drop unmap every alias of a lease
        // before its blocks leave it, and keep them (quarantine) when that unmap fails.
        unsafe { iommu.map(iova, host, ALIAS_PAGE) }?;
        st.aliases.insert(iova.0, id);
        Ok(())
    }

    /// Unmaps an alias made by [`Pool::alias`].
    ///
    /// # Errors
    /// [`DmaError::BadAlias`] for an IOVA with no alias; [`DmaError::Unmap`] (the alias
    /// is kept: the device may still reach the page).
    pub fn unalias(&self, iova: Iova) -> Result<(), DmaError> {
        let PoolMode::Vfio(iommu) = &self.shared.mode else {
            return Err(DmaError::BadAlias {
                iova,
                why: "only a pool behind an IOMMU can alias",
            });
        };
        let mut st = self.shared.state();
        if !st.aliases.contains_key(&iova.0) {
            return Err(DmaError::BadAlias {
                iova,
                why: "no alias there",
            });
        }
        iommu.unmap(iova, ALIAS_PAGE)?;
        st.aliases.remove(&iova.0);
        Ok(())
    }

    /// Unmaps every alias of lease `id`; false when one could not be (the lease's
    /// blocks must then stay out of use).
    pub(super) fn drop_aliases(&self, st: &mut State, id: LeaseId) -> bool {
        let PoolMode::Vfio(iommu) = &self.shared.mode else {
            return true;
        };
        let mine: Vec<u64> = st
            .aliases
            .iter()
            .filter(|(_, l)| **l == id)
            .map(|(a, _)| *a)
            .collect();
        let mut all = true;
        for a in mine {
            match iommu.unmap(Iova(a), ALIAS_PAGE) {
                Ok(()) => {
                    st.aliases.remove(&a);
                }
                Err(e) => {
                    tracing::error!(pool = %self.shared.name, error = &e as &dyn std::error::Error, "an alias could not be unmapped: keeping its lease's blocks out of use");
                    all = false;
                }
            }
        }
        all
    }
}
