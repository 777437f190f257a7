//! NVMe's side of queue lending: an `nvme::Controller` as a [`QueueDevice`], VFIO
//! ioeventfds as [`Kicks`], and a lease of the device's own pool as the controller's
//! admin memory ([`PoolMem`]).
//!
//! A lent pair's completion ring interrupts on an MSI-X vector of its own when rigd
//! has them ([`VfioKicks::with_vectors`]): rigd enables every vector at start with
//! eventfds of its own ("parked"), and lending a vector points it at a fresh eventfd
//! the client gets; taking it back points it at the parked one again.

use std::sync::Arc;

use super::{Doorbells, EventFd, Kicks, QueueDevice, Rings};
use crate::{
    dma::{DeviceAddr, DmaError, LeaseId, Pool},
    nvme::{Controller, CqSpec, DmaMem, SqSpec, regs::PAGE},
    sys::mmio::Width,
    vfio::{self, RegionInfo},
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl QueueDevice for Controller {
    fn max_qid(&self) -> u16 {
        self.max_qid()
    }

    fn ids_per_page(&self) -> u16 {
        // Both doorbells of an id: 2 × (4 << DSTRD) bytes.
        u16::try_from(PAGE / (2 * self.cap().stride())).unwrap_or(1)
    }

    fn max_entries(&self) -> u32 {
        self.cap().max_entries
    }

    fn create(
        &mut self,
        qid: u16,
        entries: u32,
        rings: &Rings,
        vector: Option<u16>,
    ) -> Result<Doorbells, BoxError> {
        self.create_cq(&CqSpec {
            qid,
            entries,
            addr: rings.cq,
            vector,
        })?;
        if let Err(e) = self.create_sq(&SqSpec {
            qid,
            entries,
            addr: rings.sq,
            cqid: qid,
        }) {
            if let Err(undo) = self.delete_cq(qid) {
                tracing::warn!(bdf = %self.bdf(), qid, error = &undo as &dyn std::error::Error, "a CQ whose SQ failed could not be deleted");
            }
            return Err(e.into());
        }
        Ok(Doorbells {
            sq_tail: self.sq_doorbell(qid),
            cq_head: self.cq_doorbell(qid),
        })
    }

    fn delete(&mut self, qid: u16) -> Result<(), BoxError> {
        self.delete_sq(qid)?;
        self.delete_cq(qid)?;
        Ok(())
    }
}

/// Kicks as VFIO ioeventfds on BAR0 of a held device, and its MSI-X vectors.
#[derive(Debug)]
pub struct VfioKicks<'a> {
    device: &'a dyn vfio::Device,
    bar0: RegionInfo,
    /// rigd's own eventfd of each enabled MSI-X vector (index = vector).
    parked: &'a [EventFd],
}

impl<'a> VfioKicks<'a> {
    /// Kicks only: queues are polled.
    ///
    /// # Errors
    /// [`vfio::VfioError::RegionInfo`].
    pub fn new(device: &'a dyn vfio::Device) -> Result<Self, vfio::VfioError> {
        Self::with_vectors(device, &[])
    }

    /// Kicks, and vectors 1.. of `parked` (enabled with [`enable_vectors`]) to lend.
    ///
    /// # Errors
    /// [`vfio::VfioError::RegionInfo`].
    pub fn with_vectors(
        device: &'a dyn vfio::Device,
        parked: &'a [EventFd],
    ) -> Result<Self, vfio::VfioError> {
        Ok(Self {
            bar0: device.region(0)?,
            device,
            parked,
        })
    }
}

/// Enables up to `most` MSI-X vectors of `device`, each signalling an eventfd rigd
/// keeps (vector 0 is the admin queue's, which rigd polls); returns them.
///
/// # Errors
/// [`vfio::VfioError`] from reading or setting the IRQs.
pub fn enable_vectors(device: &dyn vfio::Device, most: u32) -> Result<Vec<EventFd>, BoxError> {
    let n = device.irq(vfio::IrqIndex::Msix)?.count.min(most);
    let fds = (0..n)
        .map(|_| EventFd::new(libc::EFD_CLOEXEC | libc::EFD_NONBLOCK))
        .collect::<Result<Vec<_>, _>>()?;
    if n > 0 {
        device.enable_irq(vfio::IrqIndex::Msix, &fds.iter().collect::<Vec<_>>())?;
    }
    Ok(fds)
}

impl Kicks for VfioKicks<'_> {
    fn vectors(&self) -> u16 {
        u16::try_from(self.parked.len().saturating_sub(1)).unwrap_or(u16::MAX)
    }

    fn lend_vector(&self, vector: u16) -> Result<EventFd, BoxError> {
        let fd = EventFd::new(libc::EFD_CLOEXEC)?;
        self.device
            .set_irq_vector(vfio::IrqIndex::Msix, vector.into(), &fd)?;
        Ok(fd)
    }

    fn take_vector(&self, vector: u16) -> Result<(), BoxError> {
        let parked = self
            .parked
            .get(usize::from(vector))
            .ok_or("no such vector")?;
        self.device
            .set_irq_vector(vfio::IrqIndex::Msix, vector.into(), parked)?;
        Ok(())
    }

    fn register(&self, offset: u64, data: u64) -> Result<EventFd, BoxError> {
        let event = self.bar0.ioevent(offset, Width::W32, data)?;
        let fd = EventFd::new(libc::EFD_CLOEXEC)?;
        self.device.set_ioeventfd(&event, &fd)?;
        Ok(fd)
    }

    fn unregister(&self, offset: u64, data: u64) -> Result<(), BoxError> {
        let event = self.bar0.ioevent(offset, Width::W32, data)?;
        self.device.clear_ioeventfd(&event)?;
        Ok(())
    }
}

/// A lease rigd takes from a device's pool for its own use (the admin queues). Its id
/// comes from the top of the id space, which client sessions (counting up from 1)
/// never reach. Dropping it releases the lease: drop it only once the controller is
/// disabled.
#[derive(Debug)]
pub struct PoolMem {
    pool: Arc<Pool>,
    lease: LeaseId,
    addr: u64,
    bytes: u64,
}

/// The first id of rigd's own leases (counting down).
const OWN_LEASES: u64 = u64::MAX;

impl PoolMem {
    /// Leases one block for rigd, under id `u64::MAX - n`.
    ///
    /// # Errors
    /// The pool's errors; [`DmaError::Config`] for a pool without device addresses.
    pub fn lease(pool: Arc<Pool>, n: u64) -> Result<Self, DmaError> {
        let lease = LeaseId(OWN_LEASES - n);
        let lent = pool.lease(lease, 1)?;
        let addr = match lent.addr {
            Some(DeviceAddr::Iova(a)) => a.0,
            Some(DeviceAddr::Phys(a)) => a.0,
            // Not an NVMe controller's pool: rig serves a GPU's there.
            Some(DeviceAddr::GpuVa(_)) | None => {
                let _ = pool.release(lease);
                return Err(DmaError::Config {
                    key: "pool",
                    why: "a host pool has no device address for a controller's queues".into(),
                });
            }
        };
        Ok(Self {
            pool,
            lease,
            addr,
            bytes: crate::dma::BLOCK_SIZE,
        })
    }
}

impl PoolMem {
    /// The lease's id in its pool.
    pub fn lease_id(&self) -> LeaseId {
        self.lease
    }
}

impl DmaMem for PoolMem {
    fn addr(&self) -> u64 {
        self.addr
    }

    fn size(&self) -> u64 {
        self.bytes
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.pool.read(self.lease, offset, buf)
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        self.pool.write(self.lease, offset, data)
    }
}

impl Drop for PoolMem {
    fn drop(&mut self) {
        if let Err(e) = self.pool.release(self.lease) {
            tracing::warn!(
                pool = self.pool.name(),
                error = &e as &dyn std::error::Error,
                "rigd's own lease could not be released"
            );
        }
    }
}
