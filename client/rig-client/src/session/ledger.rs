//! The ledger of what a session leases: whole 2 MiB blocks rigd lends
//! ([`Session::lease`]), mapped here, and the buffers carved out of them
//! ([`Session::alloc`]) with no round trip; more blocks are leased only when none has
//! room. Handles ([`LeaseId`]) are valid in their own session only.
//!
//! Buffers are device-visible memory: the device (and rigd) may write them at any
//! time, so this API gives volatile copies ([`Buffer::read`], [`Buffer::write`]) and a
//! raw pointer, never a `&[u8]`. A buffer whose memory a device may still write after
//! it drops (a dropped channel's semaphore with work in flight) is kept out of use
//! until the session ends ([`Buffer::keep_out`]).
//!
//! State: [`Ledger`], behind the session's plain mutex (held for bookkeeping only,
//! never across a request). Not here: where the free bytes of a lease are (`arena`),
//! the requests' transport (the session's side socket).

use std::{io, os::fd::OwnedFd, sync::Arc};

use rig_model::addr::GpuVa;
use rig_proto::v1 as pb;
use rig_sys::{
    memfd::SealedMemfd,
    mman::{Fill, Mapping},
};

use super::{
    DeviceAddr, Inner, LeaseId, Reply, Request, Session, SessionError, SessionErrorKind,
    arena::Arena,
};

/// A lease as this process sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LeaseInfo {
    pub id: LeaseId,
    pub bytes: u64,
    /// Where the device reaches its first byte, of the session's kind (an IOVA, a
    /// physical address or a GPU VA); `None` in host mode.
    pub device_address: Option<DeviceAddr>,
    /// Where it is mapped here.
    pub host_address: usize,
}

#[derive(Debug)]
struct LocalLease {
    info: LeaseInfo,
    region: Arc<Mapping>,
    fds: Vec<SealedMemfd>,
    /// `Some` for leases `alloc` carves buffers from; `None` for raw leases.
    arena: Option<Arena>,
}

/// The leases a session holds, as this process mapped them.
#[derive(Debug)]
pub(super) struct Ledger {
    leases: Vec<LocalLease>,
    keep_empty: usize,
}

impl Ledger {
    pub(super) fn new() -> Self {
        Self {
            leases: Vec::new(),
            keep_empty: 1,
        }
    }

    /// Gives a buffer's space back; true when its lease is now empty.
    fn put_back(&mut self, lease: LeaseId, offset: u64, size: u64) -> bool {
        let Some(l) = self.leases.iter_mut().find(|l| l.info.id == lease) else {
            return false;
        };
        l.arena.as_mut().is_some_and(|a| {
            a.free(offset, size);
            a.is_empty()
        })
    }
}

/// A buffer inside a leased block: CPU address, device address, size. Dropping it
/// returns its space to the session (no round trip).
#[derive(Debug)]
pub struct Buffer {
    inner: Arc<Inner>,
    region: Arc<Mapping>,
    lease: LeaseId,
    offset: u64,
    size: u64,
    device: Option<DeviceAddr>,
    returned: bool,
}

impl Buffer {
    /// Its first byte in this process. Device-visible memory: access it with volatile
    /// or atomic operations, never through a reference.
    pub fn as_ptr(&self) -> *mut u8 {
        (self.region.addr() + usize::try_from(self.offset).unwrap_or(usize::MAX)) as *mut u8
    }

    /// Its first byte for the device, of the session's kind: an IOVA (vfio mode), a
    /// physical address (sysfs mode) or a GPU VA (an RM-served GPU); `None` in host
    /// mode.
    pub fn device_address(&self) -> Option<DeviceAddr> {
        self.device.and_then(|d| d.checked_add(self.offset))
    }

    /// Its first byte in the session's GPU address space: `None` unless the session's
    /// device is an RM-served GPU. What a GPU method, a cubin relocation or a QMD
    /// field takes.
    pub fn gpu_va(&self) -> Option<GpuVa> {
        self.device_address().and_then(DeviceAddr::gpu_va)
    }

    /// Bytes asked for.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Always false: buffers are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The lease it lives in, and its offset there.
    pub fn lease(&self) -> (LeaseId, u64) {
        (self.lease, self.offset)
    }

    fn at(&self, offset: u64, len: usize) -> Result<usize, SessionError> {
        let out = || SessionError::OutOfRange {
            offset,
            len: len as u64,
        };
        let end = offset.checked_add(len as u64).ok_or_else(out)?;
        if end > self.size {
            return Err(out());
        }
        usize::try_from(self.offset + offset).map_err(|_| out())
    }

    /// Copies bytes out of the buffer (volatile reads).
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`].
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), SessionError> {
        let at = self.at(offset, buf.len())?;
        self.region.read(at, buf).map_err(SessionError::Map)
    }

    /// Copies bytes into the buffer (volatile writes).
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`].
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), SessionError> {
        let at = self.at(offset, data.len())?;
        self.region.write(at, data).map_err(SessionError::Map)
    }

    /// Writes the aligned `u32` at `offset` in one volatile store, so the device never
    /// reads it torn (a pushbuffer word, a shadow doorbell).
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`], also for an offset not 4-byte aligned.
    pub fn write_u32(&self, offset: u64, value: u32) -> Result<(), SessionError> {
        let at = self.at(offset, 4)?;
        self.region
            .write_u32(at, value)
            .map_err(|_| SessionError::OutOfRange { offset, len: 4 })
    }

    /// Reads the aligned `u32` at `offset` in one volatile load.
    ///
    /// # Errors
    /// As [`Buffer::write_u32`].
    pub fn read_u32(&self, offset: u64) -> Result<u32, SessionError> {
        let at = self.at(offset, 4)?;
        self.region
            .read_u32(at)
            .map_err(|_| SessionError::OutOfRange { offset, len: 4 })
    }

    /// Reads the aligned `u64` at `offset` in one volatile load (a 64-bit semaphore).
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`], also for an offset not 8-byte aligned.
    pub fn read_u64(&self, offset: u64) -> Result<u64, SessionError> {
        let at = self.at(offset, 8)?;
        self.region
            .read_u64(at)
            .map_err(|_| SessionError::OutOfRange { offset, len: 8 })
    }

    /// Writes the aligned `u64` at `offset` in one volatile store.
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`], also for an offset not 8-byte aligned.
    pub fn write_u64(&self, offset: u64, value: u64) -> Result<(), SessionError> {
        let at = self.at(offset, 8)?;
        self.region
            .write_u64(at, value)
            .map_err(|_| SessionError::OutOfRange { offset, len: 8 })
    }
}

impl Buffer {
    /// Keeps the buffer's space out of the session's use after it drops (until the
    /// session ends): for memory a device may still write, such as a dropped
    /// channel's semaphore with work in flight.
    pub fn keep_out(&mut self) {
        self.returned = true;
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if !self.returned {
            self.inner
                .ledger()
                .put_back(self.lease, self.offset, self.size);
        }
    }
}

impl Session {
    /// How many empty single-block leases to keep for the fast path (default 1);
    /// more are given back to rigd on the next `free`, `alloc` lease or `trim`.
    pub fn set_keep_empty(&self, n: usize) {
        self.inner.ledger().keep_empty = n;
    }

    fn check(&self, size: u64, align: u64) -> Result<(), SessionError> {
        use SessionErrorKind as K;
        if size == 0 {
            return Err(SessionError::refused(
                K::ZeroSize,
                "A buffer of zero bytes was asked for",
            ));
        }
        if !align.is_power_of_two() || align > self.inner.block {
            return Err(SessionError::refused(
                K::Misaligned,
                format!(
                    "Alignment {align} is not a power of two up to {}",
                    self.inner.block
                ),
            ));
        }
        let max = u64::from(self.inner.max_lease_blocks) * self.inner.block;
        if size > max {
            return Err(SessionError::refused(
                K::Oversized,
                format!("{size} bytes is more than {max}, the most one lease may hold"),
            ));
        }
        Ok(())
    }

    /// A buffer from blocks already leased: the fast path, no round trip. `None`
    /// when none has room.
    ///
    /// # Errors
    /// [`SessionError::Refused`] for a zero size, a bad alignment or an oversized request.
    pub fn try_alloc(&self, size: u64, align: u64) -> Result<Option<Buffer>, SessionError> {
        self.check(size, align)?;
        Ok(self.carve(size, align, None))
    }

    fn carve(&self, size: u64, align: u64, only: Option<LeaseId>) -> Option<Buffer> {
        let mut ledger = self.inner.ledger();
        ledger.leases.iter_mut().find_map(|l| {
            if only.is_some_and(|id| id != l.info.id) {
                return None;
            }
            let offset = l.arena.as_mut()?.alloc(size, align)?;
            Some(Buffer {
                inner: Arc::clone(&self.inner),
                region: Arc::clone(&l.region),
                lease: l.info.id,
                offset,
                size,
                device: l.info.device_address,
                returned: false,
            })
        })
    }

    /// A buffer of `size` bytes at a multiple of `align` (a power of two, up to 2 MiB):
    /// from blocks already leased when one has room, else from a fresh lease.
    ///
    /// # Errors
    /// [`SessionError::Refused`] (size, alignment, quota, exhausted pool, no contiguous
    /// run), [`SessionError::Side`], [`SessionError::Ended`], [`SessionError::Map`].
    pub async fn alloc(&self, size: u64, align: u64) -> Result<Buffer, SessionError> {
        if let Some(b) = self.try_alloc(size, align)? {
            return Ok(b);
        }
        self.release_spare().await?;
        let bytes = size.div_ceil(self.inner.block).max(1) * self.inner.block;
        let info = self.lease_inner(bytes, true).await?;
        self.carve(size, align, Some(info.id))
            .ok_or(SessionError::Protocol(
                "a fresh lease has no room for its buffer",
            ))
    }

    /// Frees a buffer now; when its lease becomes empty and is not kept for the fast
    /// path, gives the lease back to rigd.
    ///
    /// # Errors
    /// As [`Session::release`].
    pub async fn free(&self, mut buf: Buffer) -> Result<(), SessionError> {
        buf.returned = true;
        let empty = self
            .inner
            .ledger()
            .put_back(buf.lease, buf.offset, buf.size);
        if empty {
            self.release_spare().await?;
        }
        Ok(())
    }

    /// Gives back every empty lease beyond those kept for the fast path; returns how
    /// many.
    ///
    /// # Errors
    /// As [`Session::release`].
    pub async fn trim(&self) -> Result<usize, SessionError> {
        self.release_spare().await
    }

    async fn release_spare(&self) -> Result<usize, SessionError> {
        let spare: Vec<LeaseId> = {
            let ledger = self.inner.ledger();
            let block = self.inner.block;
            let mut kept = 0;
            ledger
                .leases
                .iter()
                .filter(|l| l.arena.as_ref().is_some_and(Arena::is_empty))
                .filter(|l| {
                    let keep = l.info.bytes == block && kept < ledger.keep_empty;
                    kept += usize::from(keep);
                    !keep
                })
                .map(|l| l.info.id)
                .collect()
        };
        for id in &spare {
            self.release(*id).await?;
        }
        Ok(spare.len())
    }

    /// Leases `bytes` (a multiple of the block size, which rigd checks) as one lease,
    /// mapped here and not used by `alloc`. Kept until [`Session::release`].
    ///
    /// # Errors
    /// [`SessionError::Refused`] with rigd's reason, [`SessionError::Side`],
    /// [`SessionError::Ended`], [`SessionError::Map`].
    pub async fn lease(&self, bytes: u64) -> Result<LeaseInfo, SessionError> {
        self.lease_inner(bytes, false).await
    }

    async fn lease_inner(&self, bytes: u64, carve: bool) -> Result<LeaseInfo, SessionError> {
        let (reply, fds) = self.call(Request::Lease(pb::DmaLease { bytes })).await?;
        let Reply::Leased(l) = reply else {
            return Err(SessionError::Protocol("a lease must be answered `leased`"));
        };
        if fds.len() != usize::try_from(l.blocks).unwrap_or(usize::MAX) || fds.is_empty() {
            return Err(SessionError::Protocol(
                "a lease's reply must carry one descriptor per block",
            ));
        }
        let block =
            usize::try_from(self.inner.block).map_err(|_| SessionError::Protocol("block size"))?;
        let fds = fds
            .into_iter()
            .map(SealedMemfd::check)
            .collect::<Result<Vec<_>, _>>()
            .map_err(SessionError::Unsealed)?;
        if fds.iter().any(|f| f.len() != self.inner.block) {
            return Err(SessionError::Protocol(
                "a lease's blocks must be one block long each",
            ));
        }
        let region = map_blocks(&fds, block).map_err(SessionError::Map)?;
        let device_address =
            rig_proto::convert::dma::device_addr(self.inner.addressing, l.device_address)
                .map_err(|_| SessionError::Protocol("a device address in host mode"))?;
        let info = LeaseInfo {
            id: LeaseId(l.lease),
            bytes: l.bytes,
            device_address,
            host_address: region.addr(),
        };
        self.inner.ledger().leases.push(LocalLease {
            info,
            region: Arc::new(region),
            fds,
            arena: carve.then(|| Arena::new(l.bytes)),
        });
        Ok(info)
    }

    /// Gives a lease back to rigd. Its mapping here goes first; buffers still in it
    /// keep their address but read zeros from then on. A handle that is not this
    /// session's is sent anyway and refused by rigd ([`SessionErrorKind::UnknownLease`]).
    ///
    /// # Errors
    /// [`SessionError::Refused`], [`SessionError::Side`], [`SessionError::Ended`].
    pub async fn release(&self, id: LeaseId) -> Result<(), SessionError> {
        drop(self.take_local(id));
        match self
            .call(Request::Release(pb::DmaRelease { lease: id.0 }))
            .await?
        {
            (Reply::Released(_), _) => Ok(()),
            _ => Err(SessionError::Protocol(
                "a release must be answered `released`",
            )),
        }
    }

    fn take_local(&self, id: LeaseId) -> Option<LocalLease> {
        let mut ledger = self.inner.ledger();
        let i = ledger.leases.iter().position(|l| l.info.id == id)?;
        Some(ledger.leases.swap_remove(i))
    }

    /// The leases this session holds.
    pub fn leases(&self) -> Vec<LeaseInfo> {
        self.inner.ledger().leases.iter().map(|l| l.info).collect()
    }

    /// Second descriptors of a lease's blocks (sealed hugetlb memfds, one per block),
    /// e.g. to hand to another API. `None` for a lease this session does not hold.
    ///
    /// # Errors
    /// dup(2) failures.
    pub fn lease_fds(&self, id: LeaseId) -> io::Result<Option<Vec<OwnedFd>>> {
        let ledger = self.inner.ledger();
        let Some(l) = ledger.leases.iter().find(|l| l.info.id == id) else {
            return Ok(None);
        };
        l.fds
            .iter()
            .map(|f| f.try_clone().map(OwnedFd::from))
            .collect::<io::Result<_>>()
            .map(Some)
    }

    /// Volatile read of a lease's bytes.
    ///
    /// # Errors
    /// [`SessionError::Refused`] (`UnknownLease`), [`SessionError::OutOfRange`].
    pub fn read_lease(&self, id: LeaseId, offset: u64, buf: &mut [u8]) -> Result<(), SessionError> {
        self.with_region(id, offset, buf.len(), |r, at| r.read(at, buf))
    }

    /// Volatile write into a lease.
    ///
    /// # Errors
    /// [`SessionError::Refused`] (`UnknownLease`), [`SessionError::OutOfRange`].
    pub fn write_lease(&self, id: LeaseId, offset: u64, data: &[u8]) -> Result<(), SessionError> {
        self.with_region(id, offset, data.len(), |r, at| r.write(at, data))
    }

    fn with_region(
        &self,
        id: LeaseId,
        offset: u64,
        len: usize,
        f: impl FnOnce(&Mapping, usize) -> io::Result<()>,
    ) -> Result<(), SessionError> {
        let region = {
            let ledger = self.inner.ledger();
            let l = ledger
                .leases
                .iter()
                .find(|l| l.info.id == id)
                .ok_or_else(|| {
                    SessionError::refused(
                        SessionErrorKind::UnknownLease,
                        format!("Lease {} is not held here", id.0),
                    )
                })?;
            let out = SessionError::OutOfRange {
                offset,
                len: len as u64,
            };
            if offset
                .checked_add(len as u64)
                .is_none_or(|e| e > l.info.bytes)
            {
                return Err(out);
            }
            Arc::clone(&l.region)
        };
        let at = usize::try_from(offset).map_err(|_| SessionError::OutOfRange {
            offset,
            len: len as u64,
        })?;
        f(&region, at).map_err(SessionError::Map)
    }
}

/// Maps a lease's blocks one after another at one `block`-aligned address, with page
/// tables filled in (`MAP_POPULATE`).
fn map_blocks(files: &[SealedMemfd], block: usize) -> io::Result<Mapping> {
    match files {
        // One block: the kernel aligns a hugetlb mapping to its page size (the block
        // size) itself, in one mmap(2) rather than a reservation and a fixed map.
        [one] => Mapping::shared(one, Fill::Populate),
        _ => Mapping::shared_run(files, block, Fill::Populate),
    }
}
