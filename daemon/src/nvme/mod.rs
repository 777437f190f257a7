//! Drives an NVMe controller rig holds: reset, the admin queue pair in rigd's own DMA
//! memory, enable, Identify, Number of Queues, Create/Delete I/O CQ and SQ, and
//! Doorbell Buffer Config (shadow doorbells). This is the one device module of the
//! queue work; the rings lent to clients and their bookkeeping are `queue`'s.
//!
//! Flow: `take` holds the function through `vfio` → `rig.rs` maps BAR0 ([`map_bar0`])
//! and gives this module the registers ([`Regs`]) and a lease of the device's DMA pool
//! ([`DmaMem`]) → [`Controller`] → `queue` asks it for I/O queue pairs whose rings are
//! in a client's lease. Nothing here lends anything or knows about clients.
//!
//! State: a [`Controller`] owns the admin queue (its tail, head, phase and command
//! ids) and the memory it lives in; the caller serialises use (`&mut self`, under the
//! device's lock in `rig.rs`). Only this module writes CC, AQA, ASQ, ACQ and the admin
//! doorbells; I/O doorbells belong to whoever `queue` lends them to. Who writes the
//! admin memory: rigd the SQ entries and the data buffer, the controller the CQ
//! entries (and the data buffer for Identify). An admin command that does not
//! complete in time leaves the queue's state unknown, so the controller refuses
//! further commands ([`NvmeError::Wedged`]) until [`Controller::start`] resets it.
//!
//! Reference: NVMe Base Specification 1.4: §3.1 registers, §4.2/§4.6 queue entries,
//! §5 admin commands, §7.6.1 "Initialization" (the order of [`Controller::start`]).
//! QEMU's controller (hw/nvme/ctrl.c; docs/hardware/queues.md, "QEMU's NVMe
//! controller"): DSTRD 0, MQES 0x7ff, CQR 1, sparse queue ids up to `max_ioqpairs`, page-aligned
//! contiguous queues, and DBBUF re-reading tails from the shadow buffer. Not here: the
//! MMIO accesses and their `unsafe` (`sys::mmio`), DMA pools (`dma`), MSI-X eventfds
//! and ioeventfds (`vfio`), the generic ring arithmetic (`rig_client::queue`).

pub mod cmd;
mod error;
pub mod regs;

#[cfg(test)]
pub(crate) mod fake;
#[cfg(test)]
mod tests;

use std::{
    fmt,
    sync::atomic::{Ordering, fence},
    thread,
    time::{Duration, Instant},
};

use memmap2::MmapOptions;

pub use cmd::{Cqe, IdentifyController, IdentifyNamespace, Sqe, Status};
pub use error::NvmeError;
use regs::{Cap, PAGE};

use crate::{
    dma::DmaError,
    pci::Bdf,
    sys::mmio::{Mmio, MmioError, Width},
    vfio,
};

/// BAR0 of a controller: the real one is a [`Mmio`] mapping, tests use a fake model.
pub trait Regs: Send + Sync + fmt::Debug {
    /// One naturally aligned read.
    ///
    /// # Errors
    /// [`MmioError`] for an access outside the BAR or misaligned.
    fn read(&self, offset: u64, width: Width) -> Result<u64, MmioError>;
    /// One naturally aligned write.
    ///
    /// # Errors
    /// [`MmioError`] for an access outside the BAR, misaligned or too wide.
    fn write(&self, offset: u64, width: Width, value: u64) -> Result<(), MmioError>;
}

impl Regs for Mmio {
    fn read(&self, offset: u64, width: Width) -> Result<u64, MmioError> {
        Mmio::read(self, offset, width)
    }

    fn write(&self, offset: u64, width: Width, value: u64) -> Result<(), MmioError> {
        Mmio::write(self, offset, width, value)
    }
}

/// DMA memory rigd owns and the controller reaches: a lease of the device's pool in
/// rigd, a fake bus in tests. Reads and writes are volatile copies (the device may
/// write it at any time).
pub trait DmaMem: Send + Sync + fmt::Debug {
    /// The device address of byte 0.
    fn addr(&self) -> u64;
    /// Its length in bytes.
    fn size(&self) -> u64;
    /// Copies `buf.len()` bytes at `offset` out.
    ///
    /// # Errors
    /// [`DmaError`] for bytes outside the memory.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), DmaError>;
    /// Copies `data` in at `offset`.
    ///
    /// # Errors
    /// [`DmaError`] for bytes outside the memory.
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), DmaError>;
}

/// Maps BAR0 (VFIO region 0) of a controller held through VFIO. The mapping holds the
/// device file open: drop it before the hold is given back.
///
/// # Errors
/// [`NvmeError::Unsupported`] when region 0 is absent or cannot be mapped.
pub fn map_bar0(bdf: Bdf, device: &dyn vfio::Device) -> Result<Mmio, NvmeError> {
    let unsupported = |why: String| NvmeError::Unsupported { bdf, why };
    let r = device
        .region(0)
        .map_err(|e| unsupported(format!("BAR0 cannot be read ({e})")))?;
    if r.size < 2 * PAGE || !r.mappable() {
        return Err(unsupported(format!(
            "BAR0 is {:#x} bytes and {}mappable",
            r.size,
            if r.mappable() { "" } else { "not " }
        )));
    }
    let len = usize::try_from(r.size).map_err(|_| unsupported("BAR0 is too large".into()))?;
    MmapOptions::new()
        .offset(r.offset)
        .len(len)
        .map_raw(device.file())
        .map(Mmio::new)
        .map_err(|e| unsupported(format!("BAR0 cannot be mapped ({e})")))
}

/// Tunables of a [`Controller`].
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Admin queue entries (2 to 64: the SQ fills at most one page).
    pub admin_entries: u16,
    /// How long one admin command may take.
    pub admin_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            admin_entries: 32,
            // TIMEOUT: Linux waits 60 s for an admin command (nvme_admin_timeout); QEMU
            // answers within milliseconds even under TCG, and a controller that takes
            // seconds to create a queue is one rig should report, not wait on.
            admin_timeout: Duration::from_secs(5),
        }
    }
}

/// Where the admin queues and the data buffer sit in the admin memory.
const ASQ_AT: u64 = 0;
const ACQ_AT: u64 = PAGE;
const DATA_AT: u64 = 2 * PAGE;
/// The admin memory rig needs: ASQ page, ACQ page, one data page.
pub const ADMIN_MEMORY: u64 = 3 * PAGE;

/// An I/O completion queue to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqSpec {
    pub qid: u16,
    /// Entries (2 to CAP.MQES + 1).
    pub entries: u32,
    /// Device address of the ring: page-aligned, physically contiguous.
    pub addr: u64,
    /// The MSI-X vector it interrupts on; `None` for a polled queue (IEN = 0).
    pub vector: Option<u16>,
}

/// An I/O submission queue to create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqSpec {
    pub qid: u16,
    pub entries: u32,
    pub addr: u64,
    /// The completion queue its entries complete on (created first).
    pub cqid: u16,
}

#[derive(Debug)]
struct Admin {
    entries: u16,
    sq_tail: u16,
    cq_head: u16,
    phase: bool,
    next_cid: u16,
}

impl Admin {
    fn new(entries: u16) -> Self {
        Self {
            entries,
            sq_tail: 0,
            cq_head: 0,
            // The controller writes its first pass with phase 1 (NVMe 1.4 §4.6).
            phase: true,
            next_cid: 0,
        }
    }
}

/// One NVMe controller driven by rigd through its admin queue.
#[derive(Debug)]
pub struct Controller {
    bdf: Bdf,
    regs: Box<dyn Regs>,
    mem: Box<dyn DmaMem>,
    cap: Cap,
    options: Options,
    admin: Admin,
    enabled: bool,
    wedged: bool,
    identity: Option<IdentifyController>,
    /// The highest I/O queue id, from Number of Queues (0 before start).
    max_qid: u16,
}

impl Controller {
    /// Reads CAP and checks that rig can drive the controller: the NVM command set,
    /// 4 KiB pages, and admin memory of [`ADMIN_MEMORY`] page-aligned bytes. Touches
    /// nothing else; [`Controller::start`] resets and enables it.
    ///
    /// # Errors
    /// [`NvmeError::Register`], [`NvmeError::Unsupported`].
    pub fn new(
        bdf: Bdf,
        regs: Box<dyn Regs>,
        mem: Box<dyn DmaMem>,
        options: Options,
    ) -> Result<Self, NvmeError> {
        let cap = Cap::parse(read64(regs.as_ref(), regs::NVME_REG_CAP).map_err(|source| {
            NvmeError::Register {
                bdf,
                step: "read CAP",
                source,
            }
        })?);
        let unsupported = |why: String| Err(NvmeError::Unsupported { bdf, why });
        if !cap.nvm_command_set {
            return unsupported("it lacks the NVM command set (CAP.CSS bit 0)".into());
        }
        if cap.mps_min != 0 {
            return unsupported(format!(
                "its smallest page is {} KiB (CAP.MPSMIN {}); rig uses 4 KiB",
                4u32 << cap.mps_min,
                cap.mps_min
            ));
        }
        if mem.size() < ADMIN_MEMORY || !mem.addr().is_multiple_of(PAGE) {
            return unsupported(format!(
                "admin memory at {:#x} of {:#x} bytes is not {ADMIN_MEMORY:#x} page-aligned bytes",
                mem.addr(),
                mem.size()
            ));
        }
        if !(2..=64).contains(&options.admin_entries) {
            return unsupported(format!(
                "{} admin entries asked for; 2 to 64 fit a page",
                options.admin_entries
            ));
        }
        Ok(Self {
            bdf,
            regs,
            mem,
            cap,
            options,
            admin: Admin::new(options.admin_entries),
            enabled: false,
            wedged: false,
            identity: None,
            max_qid: 0,
        })
    }

    pub fn bdf(&self) -> Bdf {
        self.bdf
    }

    /// CAP as read at [`Controller::new`].
    pub fn cap(&self) -> Cap {
        self.cap
    }

    /// The Identify Controller data read by the last [`Controller::start`].
    pub fn identity(&self) -> Option<&IdentifyController> {
        self.identity.as_ref()
    }

    /// Whether Doorbell Buffer Config can be used (OACS bit 8 of the last Identify).
    pub fn has_dbbuf(&self) -> bool {
        self.identity
            .as_ref()
            .is_some_and(IdentifyController::dbbuf)
    }

    /// BAR0 offset of queue `qid`'s SQ tail doorbell.
    pub fn sq_doorbell(&self, qid: u16) -> u64 {
        self.cap.sq_tail_doorbell(qid)
    }

    /// BAR0 offset of queue `qid`'s CQ head doorbell.
    pub fn cq_doorbell(&self, qid: u16) -> u64 {
        self.cap.cq_head_doorbell(qid)
    }

    /// Resets and enables the controller in the order of NVMe 1.4 §7.6.1: disable and
    /// wait for CSTS.RDY = 0, program AQA/ASQ/ACQ, enable and wait for CSTS.RDY = 1,
    /// then Identify Controller, then Number of Queues asking for as many as the field
    /// allows (the controller answers with what it has). Every I/O queue the
    /// controller had is gone after it.
    ///
    /// # Errors
    /// [`NvmeError::ReadyTimeout`], [`NvmeError::Fatal`], [`NvmeError::Register`],
    /// [`NvmeError::Memory`], and the two commands' errors.
    pub fn start(&mut self) -> Result<&IdentifyController, NvmeError> {
        self.max_qid = 0;
        self.disable()?;
        self.enable()?;
        let id = self.identify()?;
        let (sq, cq) = self.set_queue_count(u16::MAX, u16::MAX)?;
        self.max_qid = u16::try_from(sq.min(cq)).unwrap_or(u16::MAX);
        Ok(self.identity.insert(id))
    }

    /// The highest I/O queue id the controller allocated at start (0 before).
    pub fn max_qid(&self) -> u16 {
        self.max_qid
    }

    /// Clears CC.EN and waits up to CAP.TO for CSTS.RDY = 0 (a controller reset: every
    /// queue is deleted, NVMe 1.4 §7.3.2).
    ///
    /// # Errors
    /// [`NvmeError::ReadyTimeout`], [`NvmeError::Register`].
    pub fn disable(&mut self) -> Result<(), NvmeError> {
        const STEP: &str = "disable the controller";
        let cc = self.read32(regs::NVME_REG_CC, STEP)?;
        if cc & regs::NVME_CC_ENABLE != 0 {
            self.write32(regs::NVME_REG_CC, cc & !regs::NVME_CC_ENABLE, STEP)?;
        }
        self.enabled = false;
        // CFS is not checked here: clearing CC.EN is how a controller in fatal status
        // is recovered (NVMe 1.4 §7.3.2 controller level reset).
        self.wait_ready(false, STEP)?;
        self.admin = Admin::new(self.options.admin_entries);
        self.wedged = false;
        Ok(())
    }

    /// Programs the admin queues and sets CC.EN; the controller must be disabled.
    fn enable(&mut self) -> Result<(), NvmeError> {
        const STEP: &str = "enable the controller";
        let zero = vec![0u8; usize::try_from(2 * PAGE).expect("two pages")];
        self.mem_write(ASQ_AT, &zero, STEP)?;
        let entries = self.admin.entries;
        self.write32(regs::NVME_REG_AQA, regs::aqa(entries, entries), STEP)?;
        self.write64(regs::NVME_REG_ASQ, self.mem.addr() + ASQ_AT, STEP)?;
        self.write64(regs::NVME_REG_ACQ, self.mem.addr() + ACQ_AT, STEP)?;
        self.write32(regs::NVME_REG_CC, regs::cc_enable(), STEP)?;
        self.wait_ready(true, STEP)?;
        self.enabled = true;
        Ok(())
    }

    /// Polls CSTS until RDY is `want`, for at most CAP.TO.
    fn wait_ready(&self, want: bool, step: &'static str) -> Result<(), NvmeError> {
        // TIMEOUT: CAP.TO is the controller's own worst case for RDY to follow EN.
        let limit = self.cap.ready_timeout();
        let start = Instant::now();
        loop {
            let csts = self.read32(regs::NVME_REG_CSTS, step)?;
            if want && csts & regs::NVME_CSTS_CFS != 0 {
                return Err(NvmeError::Fatal {
                    bdf: self.bdf,
                    step,
                });
            }
            if (csts & regs::NVME_CSTS_RDY != 0) == want {
                return Ok(());
            }
            if start.elapsed() >= limit {
                return Err(NvmeError::ReadyTimeout {
                    bdf: self.bdf,
                    step,
                    want,
                    waited: limit,
                });
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Identify Controller (CNS 01h) into the data page.
    fn identify(&mut self) -> Result<IdentifyController, NvmeError> {
        const STEP: &str = "identify the controller";
        let prp = self.mem.addr() + DATA_AT;
        self.mem_write(DATA_AT, &[0u8; cmd::IDENTIFY_BYTES], STEP)?;
        self.command(
            Sqe::admin(cmd::NVME_ADMIN_IDENTIFY, prp, cmd::NVME_ID_CNS_CTRL, 0),
            STEP,
        )?;
        let mut b = [0u8; cmd::IDENTIFY_BYTES];
        self.mem_read(DATA_AT, &mut b, STEP)?;
        Ok(IdentifyController::parse(&b))
    }

    /// Identify Namespace (CNS 00h) of `nsid`.
    ///
    /// # Errors
    /// [`NvmeError::Unsupported`] for a namespace that is not attached (size 0) or a
    /// format rig cannot address (a block size outside 512 B – 64 KiB); the admin
    /// queue's errors (an unknown NSID is the controller's Invalid Namespace status).
    pub fn identify_namespace(&mut self, nsid: u32) -> Result<IdentifyNamespace, NvmeError> {
        const STEP: &str = "identify the namespace";
        let prp = self.mem.addr() + DATA_AT;
        self.mem_write(DATA_AT, &[0u8; cmd::IDENTIFY_BYTES], STEP)?;
        let mut sqe = Sqe::admin(cmd::NVME_ADMIN_IDENTIFY, prp, cmd::NVME_ID_CNS_NS, 0);
        sqe.nsid = nsid;
        self.command(sqe, STEP)?;
        let mut b = [0u8; cmd::IDENTIFY_BYTES];
        self.mem_read(DATA_AT, &mut b, STEP)?;
        let bdf = self.bdf;
        match IdentifyNamespace::parse(&b) {
            Some(ns) if ns.blocks > 0 => Ok(ns),
            Some(_) => Err(NvmeError::Unsupported {
                bdf,
                why: format!("namespace {nsid} is not attached (its size is 0)"),
            }),
            None => Err(NvmeError::Unsupported {
                bdf,
                why: format!("namespace {nsid}'s format in use has no block size rig can address"),
            }),
        }
    }

    /// Set Features, Number of Queues: asks for `sq` submission and `cq` completion
    /// queues and returns how many the controller allocated (NSQA, NCQA).
    ///
    /// # Errors
    /// [`NvmeError::Command`] and the admin queue's errors.
    pub fn set_queue_count(&mut self, sq: u16, cq: u16) -> Result<(u32, u32), NvmeError> {
        const STEP: &str = "set the number of queues";
        let (sq, cq) = (sq.max(1), cq.max(1));
        let cdw11 = u32::from(sq - 1) | (u32::from(cq - 1) << 16);
        let cqe = self.command(
            Sqe::admin(
                cmd::NVME_ADMIN_SET_FEATURES,
                0,
                cmd::NVME_FEAT_NUM_QUEUES,
                cdw11,
            ),
            STEP,
        )?;
        Ok(((cqe.result & 0xffff) + 1, (cqe.result >> 16) + 1))
    }

    /// Checks a queue's id, size and address before the controller sees them.
    fn check_queue(
        &self,
        step: &'static str,
        qid: u16,
        entries: u32,
        addr: u64,
    ) -> Result<(), NvmeError> {
        let bad = |why: String| {
            Err(NvmeError::BadQueue {
                bdf: self.bdf,
                step,
                qid,
                why,
            })
        };
        if qid == 0 {
            return bad("is the admin queue".into());
        }
        if !(2..=self.cap.max_entries).contains(&entries) {
            return bad(format!(
                "of {entries} entries is outside 2 to {} (CAP.MQES + 1)",
                self.cap.max_entries
            ));
        }
        if !addr.is_multiple_of(PAGE) {
            return bad(format!("at {addr:#x} is not page-aligned"));
        }
        Ok(())
    }

    /// Create I/O Completion Queue (NVMe 1.4 §5, "Create I/O Completion Queue command"): physically contiguous, with the
    /// interrupt on `spec.vector` or none.
    ///
    /// # Errors
    /// [`NvmeError::BadQueue`] before sending; [`NvmeError::Command`] with the
    /// controller's status (Invalid Queue Identifier, Invalid Queue Size, Invalid
    /// Interrupt Vector…); the admin queue's errors.
    pub fn create_cq(&mut self, spec: &CqSpec) -> Result<(), NvmeError> {
        const STEP: &str = "create an I/O completion queue";
        self.check_queue(STEP, spec.qid, spec.entries, spec.addr)?;
        let cdw10 = ((spec.entries - 1) << 16) | u32::from(spec.qid);
        let cdw11 = cmd::NVME_QUEUE_PHYS_CONTIG
            | spec
                .vector
                .map_or(0, |v| cmd::NVME_CQ_IRQ_ENABLED | (u32::from(v) << 16));
        self.command(
            Sqe::admin(cmd::NVME_ADMIN_CREATE_CQ, spec.addr, cdw10, cdw11),
            STEP,
        )
        .map(|_| ())
    }

    /// Create I/O Submission Queue (NVMe 1.4 §5, "Create I/O Submission Queue command") bound to `spec.cqid`, physically
    /// contiguous, medium priority (ignored under round robin).
    ///
    /// # Errors
    /// As [`Controller::create_cq`]; Completion Queue Invalid when the CQ is missing.
    pub fn create_sq(&mut self, spec: &SqSpec) -> Result<(), NvmeError> {
        const STEP: &str = "create an I/O submission queue";
        self.check_queue(STEP, spec.qid, spec.entries, spec.addr)?;
        let cdw10 = ((spec.entries - 1) << 16) | u32::from(spec.qid);
        let cdw11 = (u32::from(spec.cqid) << 16) | cmd::NVME_QUEUE_PHYS_CONTIG;
        self.command(
            Sqe::admin(cmd::NVME_ADMIN_CREATE_SQ, spec.addr, cdw10, cdw11),
            STEP,
        )
        .map(|_| ())
    }

    /// Delete I/O Submission Queue: the controller completes or aborts every command of
    /// the queue before this completes (NVMe 1.4 §5, "Delete I/O Submission Queue command"), so after it returns the queue's
    /// commands write no more memory.
    ///
    /// # Errors
    /// [`NvmeError::Command`] (Invalid Queue Identifier for one that does not exist);
    /// the admin queue's errors.
    pub fn delete_sq(&mut self, qid: u16) -> Result<(), NvmeError> {
        self.delete(
            cmd::NVME_ADMIN_DELETE_SQ,
            qid,
            "delete an I/O submission queue",
        )
    }

    /// Delete I/O Completion Queue; its submission queues must be deleted first
    /// (Invalid Queue Deletion otherwise, NVMe 1.4 §5, "Delete I/O Completion Queue command").
    ///
    /// # Errors
    /// As [`Controller::delete_sq`].
    pub fn delete_cq(&mut self, qid: u16) -> Result<(), NvmeError> {
        self.delete(
            cmd::NVME_ADMIN_DELETE_CQ,
            qid,
            "delete an I/O completion queue",
        )
    }

    fn delete(&mut self, opcode: u8, qid: u16, step: &'static str) -> Result<(), NvmeError> {
        if qid == 0 {
            return Err(NvmeError::BadQueue {
                bdf: self.bdf,
                step,
                qid,
                why: "is the admin queue".into(),
            });
        }
        self.command(Sqe::admin(opcode, 0, u32::from(qid), 0), step)
            .map(|_| ())
    }

    /// Doorbell Buffer Config (NVMe 1.4 §5, "Doorbell Buffer Config command"): from now on the controller reads each
    /// I/O queue's SQ tail and CQ head from the shadow buffer at `shadow` (tail of qid
    /// q at `shadow + 8q`, head at `+ 4`) and writes its event indexes at `eventidx`;
    /// a doorbell write then only tells it to look (docs/hardware/queues.md, "Doorbell
    /// Buffer Config"). Both page-aligned.
    ///
    /// # Errors
    /// [`NvmeError::Unsupported`] when OACS bit 8 is clear (or Identify has not run);
    /// [`NvmeError::BadQueue`] for misaligned buffers; the command's errors.
    pub fn config_dbbuf(&mut self, shadow: u64, eventidx: u64) -> Result<(), NvmeError> {
        const STEP: &str = "configure the doorbell buffer";
        if !self.has_dbbuf() {
            return Err(NvmeError::Unsupported {
                bdf: self.bdf,
                why: "it does not offer Doorbell Buffer Config (OACS bit 8)".into(),
            });
        }
        if !shadow.is_multiple_of(PAGE) || !eventidx.is_multiple_of(PAGE) {
            return Err(NvmeError::BadQueue {
                bdf: self.bdf,
                step: STEP,
                qid: 0,
                why: format!("buffers at {shadow:#x} and {eventidx:#x} must be page-aligned"),
            });
        }
        let mut sqe = Sqe::admin(cmd::NVME_ADMIN_DBBUF_CONFIG, shadow, 0, 0);
        sqe.prp2 = eventidx;
        self.command(sqe, STEP).map(|_| ())
    }

    /// Submits one admin command and waits for its completion: writes the entry at the
    /// tail, rings SQ0TDBL, polls the CQ entry at the head for the expected phase,
    /// checks its command id, rings CQ0HDBL.
    ///
    /// # Errors
    /// [`NvmeError::NotEnabled`], [`NvmeError::Wedged`], [`NvmeError::CommandTimeout`]
    /// (the queue is wedged from then on), [`NvmeError::Fatal`],
    /// [`NvmeError::StrayCompletion`], [`NvmeError::Command`] for a status other than
    /// success; register and memory errors.
    pub fn command(&mut self, mut sqe: Sqe, step: &'static str) -> Result<Cqe, NvmeError> {
        let bdf = self.bdf;
        if !self.enabled {
            return Err(NvmeError::NotEnabled { bdf, step });
        }
        if self.wedged {
            return Err(NvmeError::Wedged { bdf, step });
        }
        sqe.cid = self.admin.next_cid;
        self.admin.next_cid = self.admin.next_cid.wrapping_add(1);
        let at = ASQ_AT + u64::from(self.admin.sq_tail) * regs::SQE_BYTES;
        self.mem_write(at, &sqe.to_bytes(), step)?;
        self.admin.sq_tail = (self.admin.sq_tail + 1) % self.admin.entries;
        // The entry is in memory before the doorbell: `Mmio::write` fences first.
        self.write32(
            self.cap.sq_tail_doorbell(0),
            u32::from(self.admin.sq_tail),
            step,
        )?;
        let cqe = self.wait_completion(step)?;
        self.admin.cq_head = (self.admin.cq_head + 1) % self.admin.entries;
        if self.admin.cq_head == 0 {
            self.admin.phase = !self.admin.phase;
        }
        self.write32(
            self.cap.cq_head_doorbell(0),
            u32::from(self.admin.cq_head),
            step,
        )?;
        if cqe.cid != sqe.cid || cqe.sq_id != 0 {
            // One command is in flight at a time, so anything else is the controller's
            // confusion; what it means for the queue is unknown.
            self.wedged = true;
            return Err(NvmeError::StrayCompletion {
                bdf,
                step,
                want: sqe.cid,
                got: (cqe.sq_id, cqe.cid),
                sq_head: cqe.sq_head,
            });
        }
        if !cqe.status.is_success() {
            return Err(NvmeError::Command {
                bdf,
                step,
                status: cqe.status,
            });
        }
        Ok(cqe)
    }

    /// Polls the admin CQ entry at the head until its phase is the current one.
    fn wait_completion(&mut self, step: &'static str) -> Result<Cqe, NvmeError> {
        let at = ACQ_AT + u64::from(self.admin.cq_head) * regs::CQE_BYTES;
        let limit = self.options.admin_timeout;
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            // DW3 (with the phase) first, then the whole entry: read in one pass, the
            // bytes before the phase could still be the old entry's while the phase is
            // already the new one's.
            let mut dw3 = [0u8; 4];
            self.mem_read(at + 12, &mut dw3, step)?;
            if (u32::from_le_bytes(dw3) & (1 << 16) != 0) == self.admin.phase {
                fence(Ordering::Acquire);
                let mut b = [0u8; 16];
                self.mem_read(at, &mut b, step)?;
                return Ok(Cqe::parse(&b));
            }
            let csts = self.read32(regs::NVME_REG_CSTS, step)?;
            if csts & regs::NVME_CSTS_CFS != 0 {
                self.wedged = true;
                return Err(NvmeError::Fatal {
                    bdf: self.bdf,
                    step,
                });
            }
            if start.elapsed() >= limit {
                self.wedged = true;
                return Err(NvmeError::CommandTimeout {
                    bdf: self.bdf,
                    step,
                    waited: limit,
                });
            }
            // QEMU completes admin commands from a timer a few µs after the doorbell;
            // spin briefly, then yield the CPU in 100 µs naps.
            spins += 1;
            if spins > 64 {
                thread::sleep(Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn read32(&self, offset: u64, step: &'static str) -> Result<u32, NvmeError> {
        let v = self
            .regs
            .read(offset, Width::W32)
            .map_err(|source| self.reg_error(step, source))?;
        Ok(u32::try_from(v).expect("a 32-bit read fits"))
    }

    fn write32(&self, offset: u64, value: u32, step: &'static str) -> Result<(), NvmeError> {
        self.regs
            .write(offset, Width::W32, value.into())
            .map_err(|source| self.reg_error(step, source))
    }

    /// 64-bit registers are written as two 32-bit halves, low first, which every
    /// controller accepts (NVMe 1.4 §3.1: 64-bit registers may be accessed as two
    /// 32-bit ones).
    fn write64(&self, offset: u64, value: u64, step: &'static str) -> Result<(), NvmeError> {
        let (lo, hi) = split(value);
        self.write32(offset, lo, step)?;
        self.write32(offset + 4, hi, step)
    }

    fn reg_error(&self, step: &'static str, source: MmioError) -> NvmeError {
        NvmeError::Register {
            bdf: self.bdf,
            step,
            source,
        }
    }

    fn mem_read(&self, at: u64, buf: &mut [u8], step: &'static str) -> Result<(), NvmeError> {
        self.mem.read(at, buf).map_err(|source| NvmeError::Memory {
            bdf: self.bdf,
            step,
            source,
        })
    }

    fn mem_write(&self, at: u64, data: &[u8], step: &'static str) -> Result<(), NvmeError> {
        self.mem
            .write(at, data)
            .map_err(|source| NvmeError::Memory {
                bdf: self.bdf,
                step,
                source,
            })
    }
}

/// Reads a 64-bit register as two 32-bit halves, low first.
fn read64(regs: &dyn Regs, offset: u64) -> Result<u64, MmioError> {
    let lo = regs.read(offset, Width::W32)?;
    let hi = regs.read(offset + 4, Width::W32)?;
    Ok(lo | (hi << 32))
}

fn split(v: u64) -> (u32, u32) {
    // CAST: the halves of a u64.
    #[expect(clippy::cast_possible_truncation, reason = "halves")]
    (v as u32, (v >> 32) as u32)
}
