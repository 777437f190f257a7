//! The session's GPU address space as this process sees it: which lease holds an
//! address. One lookup ([`find_region`], after vm-memory's `find_region`) over both
//! ledgers, the host leases ([`Session::leases`]) and the GPU memory
//! ([`GpuMemory::leases`]), so every check that memory is the session's (the
//! runtime's `held_by`, the Python bindings' copies by address, tinygrad's buffers
//! named by symbolic addresses) asks the same question the same way.
//!
//! Not here: the ledgers themselves (`session::ledger`, `gpumem`), and what may be
//! done with a region (rig-runtime's `Memory`). A region is a snapshot: a lease given
//! back after the lookup is no longer the session's, and the runtime asks again right
//! before it submits.

use rig_model::addr::GpuVa;

use crate::{
    gpumem::{GpuMemId, GpuMemory},
    session::{LeaseId, Session},
};

/// Which lease a region is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Holder {
    /// A host lease ([`Session::lease`] or a block [`Session::alloc`] carves): memory
    /// the GPU reaches across PCIe.
    Host(LeaseId),
    /// A lease of the GPU's own memory ([`GpuMemory::alloc`]).
    Gpu(GpuMemId),
}

/// One lease's range of the session's GPU address space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// Its first byte for the GPU.
    pub va: GpuVa,
    /// Its length in bytes.
    pub bytes: u64,
    /// The lease.
    pub holder: Holder,
    /// Where a host lease is mapped in this process; `None` for GPU memory.
    pub host_address: Option<usize>,
}

impl Region {
    /// Whether `len` bytes from `va` lie inside it (an empty range at its end does
    /// not: nothing is there).
    pub fn contains(&self, va: GpuVa, len: u64) -> bool {
        let (start, end) = (self.va.get(), self.va.get().saturating_add(self.bytes));
        va.get() >= start && va.get().checked_add(len.max(1)).is_some_and(|e| e <= end)
    }

    /// Where `va` (inside it) is mapped in this process: `None` for GPU memory or an
    /// address outside it.
    pub fn host_address_of(&self, va: GpuVa) -> Option<usize> {
        let off = usize::try_from(va.get().checked_sub(self.va.get())?).ok()?;
        (self.contains(va, 1))
            .then_some(self.host_address?)
            .and_then(|h| h.checked_add(off))
    }

    /// The GPU address of the byte a host lease maps at `addr` in this process.
    pub fn va_of_host(&self, addr: usize) -> Option<GpuVa> {
        let off = u64::try_from(addr.checked_sub(self.host_address?)?).ok()?;
        (off < self.bytes).then(|| GpuVa(self.va.get() + off))
    }
}

/// Every region of `session`'s address space, host leases with a GPU address and GPU
/// memory, in address order. Host leases of a session with no GPU address space
/// (vfio, sysfs or host mode) are not in it.
pub fn regions(session: &Session) -> Vec<Region> {
    let mut all: Vec<Region> = unordered(session).collect();
    all.sort_unstable_by_key(|r| r.va);
    all
}

/// Both ledgers' regions, as they come.
fn unordered(session: &Session) -> impl Iterator<Item = Region> {
    let host = session.leases().into_iter().filter_map(|l| {
        Some(Region {
            va: l.device_address?.gpu_va()?,
            bytes: l.bytes,
            holder: Holder::Host(l.id),
            host_address: Some(l.host_address),
        })
    });
    let gpu = GpuMemory::leases(session).into_iter().map(|l| Region {
        va: l.va,
        bytes: l.bytes,
        holder: Holder::Gpu(l.id),
        host_address: None,
    });
    host.chain(gpu)
}

/// The region of `session`'s address space that holds `va`, if any. Regions never
/// overlap (rigd places every lease in the session's one address space), so at most
/// one does; a session holds tens of leases, so a scan beats keeping an index.
pub fn find_region(session: &Session, va: GpuVa) -> Option<Region> {
    unordered(session).find(|r| r.contains(va, 1))
}

/// The host lease mapped at `addr` in this process, if any (a buffer handed to code
/// that names host memory by its CPU address, as tinygrad does).
pub fn find_host_region(session: &Session, addr: usize) -> Option<Region> {
    unordered(session).find(|r| r.va_of_host(addr).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(va: u64, bytes: u64, host: Option<usize>) -> Region {
        Region {
            va: GpuVa(va),
            bytes,
            holder: Holder::Gpu(GpuMemId(1)),
            host_address: host,
        }
    }

    #[test]
    fn contains_is_half_open_and_never_wraps() {
        let r = region(0x20_0000, 0x20_0000, None);
        assert!(r.contains(GpuVa(0x20_0000), 0x20_0000));
        assert!(r.contains(GpuVa(0x3f_ffff), 1));
        assert!(
            !r.contains(GpuVa(0x40_0000), 0),
            "an empty range at the end"
        );
        assert!(!r.contains(GpuVa(0x1f_ffff), 1));
        assert!(!r.contains(GpuVa(0x20_0000), 0x20_0001));
        assert!(!r.contains(GpuVa(0x20_0000), u64::MAX));
        assert!(!region(u64::MAX - 1, 2, None).contains(GpuVa(u64::MAX), 2));
    }

    #[test]
    fn host_addresses_map_both_ways_inside_only() {
        let r = region(0x20_0000, 0x1000, Some(0x7f00_0000_0000));
        assert_eq!(r.host_address_of(GpuVa(0x20_0010)), Some(0x7f00_0000_0010));
        assert_eq!(r.host_address_of(GpuVa(0x20_1000)), None);
        assert_eq!(r.va_of_host(0x7f00_0000_0fff), Some(GpuVa(0x20_0fff)));
        assert_eq!(r.va_of_host(0x7f00_0000_1000), None);
        assert_eq!(r.va_of_host(0x7eff_ffff_ffff), None);
        assert_eq!(region(0x20_0000, 0x1000, None).va_of_host(0), None);
    }
}
