//! A model of an NVMe controller for `nvme`'s tests: BAR0 registers, and a controller
//! that executes admin commands from its admin SQ when SQ0TDBL is written, posting
//! completions with the phase bit into the admin CQ, all in the memory of a
//! [`FakeBus`] (device addresses to bytes). It follows QEMU's hw/nvme/ctrl.c where the
//! spec leaves room (docs/hardware/queues.md, "QEMU's NVMe controller"): doorbell
//! stride 0, CQR 1, queue ids 1..=`max_qid`, page-aligned contiguous queues only,
//! DBBUF when OACS bit 8 is set.
//!
//! Scripted misbehaviour ([`FakeScript`]): a status for an opcode, a command that is
//! never completed, CSTS.RDY that never follows CC.EN, fatal status on enable, and
//! completions with the wrong command id. An SQ entry fetched from memory that is not
//! on the bus sets CSTS.CFS, as a failed fetch does on the real controller.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use super::{
    DmaMem, Regs,
    cmd::{self, Cqe, Sqe, Status},
    regs::{self, PAGE},
};
use crate::{
    dma::{DmaError, LeaseId},
    sys::mmio::{MmioError, Width},
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Device-visible memory: ranges of bytes by device address.
#[derive(Debug, Clone, Default)]
pub struct FakeBus {
    ranges: Arc<Mutex<BTreeMap<u64, Vec<u8>>>>,
    /// Ranges the device can no longer reach while rigd still can (an IOMMU unmap).
    hidden: Arc<Mutex<HashSet<u64>>>,
}

/// Where the bus hands out its first range; ranges are 2 MiB apart, like pool blocks.
const BUS_BASE: u64 = 0x1000_0000;
const BUS_STRIDE: u64 = 2 << 20;

impl FakeBus {
    /// A fresh range of `len` zeroed bytes.
    pub fn alloc(&self, len: u64) -> FakeMem {
        let mut r = lock(&self.ranges);
        let addr = r.last_key_value().map_or(BUS_BASE, |(a, _)| a + BUS_STRIDE);
        r.insert(addr, vec![0; usize::try_from(len).expect("small")]);
        FakeMem {
            bus: self.clone(),
            addr,
            len,
        }
    }

    /// Takes a range from the device (as an IOMMU unmap does) while rigd keeps it:
    /// the device's accesses to it fail from now on.
    pub fn hide(&self, addr: u64) {
        lock(&self.hidden).insert(addr);
    }

    fn with<R>(
        &self,
        addr: u64,
        len: usize,
        device: bool,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        let mut r = lock(&self.ranges);
        let (base, bytes) = r.range_mut(..=addr).next_back()?;
        if device && lock(&self.hidden).contains(base) {
            return None;
        }
        let at = usize::try_from(addr - base).ok()?;
        bytes.get_mut(at..at.checked_add(len)?).map(f)
    }

    /// The device reads `buf.len()` bytes at `addr`; `None` when not all are mapped.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Option<()> {
        self.with(addr, buf.len(), true, |b| buf.copy_from_slice(b))
    }

    /// The device writes `data` at `addr`; `None` when not all are mapped.
    pub fn write(&self, addr: u64, data: &[u8]) -> Option<()> {
        self.with(addr, data.len(), true, |b| b.copy_from_slice(data))
    }
}

/// One range of a [`FakeBus`], as rigd's side sees it.
#[derive(Debug)]
pub struct FakeMem {
    bus: FakeBus,
    addr: u64,
    len: u64,
}

impl FakeMem {
    fn out(&self, offset: u64, len: usize) -> DmaError {
        DmaError::OutOfLease {
            lease: LeaseId(0),
            offset,
            len: len as u64,
        }
    }
}

impl DmaMem for FakeMem {
    fn addr(&self) -> u64 {
        self.addr
    }

    fn size(&self) -> u64 {
        self.len
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        if offset + buf.len() as u64 > self.len {
            return Err(self.out(offset, buf.len()));
        }
        let n = buf.len();
        self.bus
            .with(self.addr + offset, n, false, |b| buf.copy_from_slice(b))
            .ok_or_else(|| self.out(offset, n))
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), DmaError> {
        if offset + data.len() as u64 > self.len {
            return Err(self.out(offset, data.len()));
        }
        self.bus
            .with(self.addr + offset, data.len(), false, |b| {
                b.copy_from_slice(data);
            })
            .ok_or_else(|| self.out(offset, data.len()))
    }
}

/// How the model departs from a healthy controller.
#[derive(Debug, Clone)]
pub struct FakeScript {
    /// Identify Controller's OACS (default: bit 8, Doorbell Buffer Config).
    pub oacs: u16,
    /// The highest I/O queue id Create accepts (QEMU: `max_ioqpairs`, default 64).
    pub max_qid: u16,
    /// CAP.TO in 500 ms units.
    pub timeout_units: u8,
    /// CAP.MPSMIN.
    pub mps_min: u8,
    /// CSTS.RDY never follows CC.EN when set.
    pub ready_stuck: bool,
    /// Enabling sets CSTS.CFS instead of RDY.
    pub fatal_on_enable: bool,
    /// These opcodes complete with this status.
    pub fail: HashMap<u8, Status>,
    /// These opcodes are fetched and never completed.
    pub swallow: HashSet<u8>,
    /// Completions carry a command id one off.
    pub wrong_cid: bool,
}

impl Default for FakeScript {
    fn default() -> Self {
        Self {
            oacs: cmd::NVME_CTRL_OACS_DBBUF_SUPP,
            max_qid: 64,
            timeout_units: 1,
            mps_min: 0,
            ready_stuck: false,
            fatal_on_enable: false,
            fail: HashMap::new(),
            swallow: HashSet::new(),
            wrong_cid: false,
        }
    }
}

/// An I/O completion queue the model holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeCq {
    pub addr: u64,
    pub entries: u32,
    pub vector: Option<u16>,
}

/// An I/O submission queue the model holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeSq {
    pub addr: u64,
    pub entries: u32,
    pub cqid: u16,
}

#[derive(Debug, Default)]
struct State {
    script: FakeScript,
    cc: u32,
    csts: u32,
    aqa: u32,
    asq: u64,
    acq: u64,
    sq_head: u16,
    cq_tail: u16,
    phase: bool,
    cqs: BTreeMap<u16, FakeCq>,
    sqs: BTreeMap<u16, FakeSq>,
    dbbuf: Option<(u64, u64)>,
    /// Opcodes in the order they were fetched.
    executed: Vec<u8>,
    /// Every register write: (offset, value).
    writes: Vec<(u64, u32)>,
}

/// The controller model; clones share it (the test keeps one, the driver another).
#[derive(Debug, Clone)]
pub struct FakeNvme {
    bus: FakeBus,
    state: Arc<Mutex<State>>,
}

/// BAR0's size: registers, doorbells of queues 0..=511, MSI-X elsewhere.
const BAR0_BYTES: u64 = 0x4000;

impl FakeNvme {
    pub fn new(bus: &FakeBus) -> Self {
        Self {
            bus: bus.clone(),
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    /// Changes the script.
    pub fn script(&self, f: impl FnOnce(&mut FakeScript)) {
        f(&mut lock(&self.state).script);
    }

    pub fn cqs(&self) -> BTreeMap<u16, FakeCq> {
        lock(&self.state).cqs.clone()
    }

    pub fn sqs(&self) -> BTreeMap<u16, FakeSq> {
        lock(&self.state).sqs.clone()
    }

    pub fn dbbuf(&self) -> Option<(u64, u64)> {
        lock(&self.state).dbbuf
    }

    pub fn executed(&self) -> Vec<u8> {
        lock(&self.state).executed.clone()
    }

    pub fn writes(&self) -> Vec<(u64, u32)> {
        lock(&self.state).writes.clone()
    }

    pub fn csts(&self) -> u32 {
        lock(&self.state).csts
    }

    fn cap(s: &State) -> u64 {
        // MQES 0x7ff, CQR, TO, CSS NVM, MPSMIN, MPSMAX 4 (QEMU's values).
        0x7ff
            | 1 << 16
            | u64::from(s.script.timeout_units) << 24
            | 1 << 37
            | u64::from(s.script.mps_min) << 48
            | 4 << 52
    }

    fn set_cc(&self, s: &mut State, cc: u32) {
        let was = s.cc & regs::NVME_CC_ENABLE != 0;
        let now = cc & regs::NVME_CC_ENABLE != 0;
        s.cc = cc;
        match (was, now) {
            (true, false) => {
                // Controller reset: every queue is gone, RDY drops (CFS clears too).
                s.cqs.clear();
                s.sqs.clear();
                s.dbbuf = None;
                s.csts = 0;
            }
            (false, true) if s.script.fatal_on_enable => s.csts |= regs::NVME_CSTS_CFS,
            (false, true) if !s.script.ready_stuck => {
                s.sq_head = 0;
                s.cq_tail = 0;
                s.phase = true;
                s.csts |= regs::NVME_CSTS_RDY;
            }
            _ => {}
        }
    }

    /// Fetches and executes admin entries up to `tail`.
    fn ring_admin(&self, s: &mut State, tail: u16) {
        if s.csts & regs::NVME_CSTS_RDY == 0 {
            return;
        }
        let entries = u16::try_from((s.aqa & 0xfff) + 1).expect("12 bits");
        while s.sq_head != tail % entries {
            let mut b = [0u8; 64];
            let at = s.asq + u64::from(s.sq_head) * regs::SQE_BYTES;
            if self.bus.read(at, &mut b).is_none() {
                s.csts |= regs::NVME_CSTS_CFS;
                return;
            }
            s.sq_head = (s.sq_head + 1) % entries;
            let sqe = Sqe::parse(&b);
            s.executed.push(sqe.opcode);
            if s.script.swallow.contains(&sqe.opcode) {
                continue;
            }
            let (status, result) = match s.script.fail.get(&sqe.opcode) {
                Some(st) => (*st, 0),
                None => self.execute(s, &sqe),
            };
            let cid = if s.script.wrong_cid {
                sqe.cid.wrapping_add(1)
            } else {
                sqe.cid
            };
            let cqe = Cqe {
                result,
                sq_head: s.sq_head,
                sq_id: 0,
                cid,
                phase: s.phase,
                status,
            };
            let at = s.acq + u64::from(s.cq_tail) * regs::CQE_BYTES;
            if self.bus.write(at, &cqe.to_bytes()).is_none() {
                s.csts |= regs::NVME_CSTS_CFS;
                return;
            }
            s.cq_tail = (s.cq_tail + 1) % entries;
            if s.cq_tail == 0 {
                s.phase = !s.phase;
            }
        }
    }

    fn execute(&self, s: &mut State, sqe: &Sqe) -> (Status, u32) {
        let qid = u16::try_from(sqe.cdw[0] & 0xffff).expect("16 bits");
        let entries = (sqe.cdw[0] >> 16) + 1;
        let pc = sqe.cdw[1] & cmd::NVME_QUEUE_PHYS_CONTIG != 0;
        let valid_qid = qid != 0 && qid <= s.script.max_qid;
        let ok = (Status::SUCCESS, 0);
        match sqe.opcode {
            cmd::NVME_ADMIN_IDENTIFY if sqe.cdw[0] == cmd::NVME_ID_CNS_CTRL => {
                let mut b = vec![0u8; cmd::IDENTIFY_BYTES];
                b[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
                b[4..24].copy_from_slice(b"fake-nvme           ");
                b[24..64].copy_from_slice(&[b' '; 40]);
                b[24..38].copy_from_slice(b"QEMU NVMe Ctrl");
                b[64..72].copy_from_slice(b"1.0     ");
                b[77] = 7;
                b[256..258].copy_from_slice(&s.script.oacs.to_le_bytes());
                b[512] = 0x66;
                b[513] = 0x44;
                b[516..520].copy_from_slice(&1u32.to_le_bytes());
                match self.bus.write(sqe.prp1, &b) {
                    Some(()) => ok,
                    None => (cmd::NVME_SC_DATA_TRANSFER_ERROR, 0),
                }
            }
            // QEMU's default namespace: 512-byte blocks, one format; 64 MiB.
            cmd::NVME_ADMIN_IDENTIFY if sqe.cdw[0] == cmd::NVME_ID_CNS_NS => {
                if sqe.nsid != 1 {
                    return (Status::new(0, 0x0b), 0);
                }
                let mut b = vec![0u8; cmd::IDENTIFY_BYTES];
                b[0..8].copy_from_slice(&131_072u64.to_le_bytes());
                b[8..16].copy_from_slice(&131_072u64.to_le_bytes());
                b[128 + 2] = 9;
                match self.bus.write(sqe.prp1, &b) {
                    Some(()) => ok,
                    None => (cmd::NVME_SC_DATA_TRANSFER_ERROR, 0),
                }
            }
            cmd::NVME_ADMIN_SET_FEATURES if sqe.cdw[0] == cmd::NVME_FEAT_NUM_QUEUES => {
                let n = u32::from(s.script.max_qid - 1);
                (Status::SUCCESS, n | n << 16)
            }
            cmd::NVME_ADMIN_CREATE_CQ => {
                if !valid_qid || s.cqs.contains_key(&qid) {
                    (cmd::NVME_SC_QID_INVALID, 0)
                } else if !(2..=2048).contains(&entries) {
                    (cmd::NVME_SC_QUEUE_SIZE, 0)
                } else if !pc || !sqe.prp1.is_multiple_of(PAGE) {
                    (cmd::NVME_SC_INVALID_FIELD, 0)
                } else {
                    let ien = sqe.cdw[1] & cmd::NVME_CQ_IRQ_ENABLED != 0;
                    let vector = ien.then(|| u16::try_from(sqe.cdw[1] >> 16).expect("16 bits"));
                    s.cqs.insert(
                        qid,
                        FakeCq {
                            addr: sqe.prp1,
                            entries,
                            vector,
                        },
                    );
                    ok
                }
            }
            cmd::NVME_ADMIN_CREATE_SQ => {
                let cqid = u16::try_from(sqe.cdw[1] >> 16).expect("16 bits");
                if !valid_qid || s.sqs.contains_key(&qid) {
                    (cmd::NVME_SC_QID_INVALID, 0)
                } else if !s.cqs.contains_key(&cqid) {
                    (cmd::NVME_SC_CQ_INVALID, 0)
                } else if !(2..=2048).contains(&entries) {
                    (cmd::NVME_SC_QUEUE_SIZE, 0)
                } else if !pc || !sqe.prp1.is_multiple_of(PAGE) {
                    (cmd::NVME_SC_INVALID_FIELD, 0)
                } else {
                    s.sqs.insert(
                        qid,
                        FakeSq {
                            addr: sqe.prp1,
                            entries,
                            cqid,
                        },
                    );
                    ok
                }
            }
            cmd::NVME_ADMIN_DELETE_SQ => match s.sqs.remove(&qid) {
                Some(_) => ok,
                None => (cmd::NVME_SC_QID_INVALID, 0),
            },
            cmd::NVME_ADMIN_DELETE_CQ => {
                if !s.cqs.contains_key(&qid) {
                    (cmd::NVME_SC_QID_INVALID, 0)
                } else if s.sqs.values().any(|sq| sq.cqid == qid) {
                    (cmd::NVME_SC_INVALID_QUEUE_DELETION, 0)
                } else {
                    s.cqs.remove(&qid);
                    ok
                }
            }
            cmd::NVME_ADMIN_DBBUF_CONFIG if s.script.oacs & cmd::NVME_CTRL_OACS_DBBUF_SUPP != 0 => {
                if !sqe.prp1.is_multiple_of(PAGE) || !sqe.prp2.is_multiple_of(PAGE) {
                    (cmd::NVME_SC_INVALID_FIELD, 0)
                } else {
                    s.dbbuf = Some((sqe.prp1, sqe.prp2));
                    ok
                }
            }
            _ => (cmd::NVME_SC_INVALID_OPCODE, 0),
        }
    }
}

fn lo_hi(v: u64, high: bool) -> u64 {
    if high { v >> 32 } else { v & 0xffff_ffff }
}

fn set_half(v: &mut u64, value: u64, high: bool) {
    if high {
        *v = (*v & 0xffff_ffff) | (value << 32);
    } else {
        *v = (*v & !0xffff_ffff) | value;
    }
}

impl Regs for FakeNvme {
    fn read(&self, offset: u64, width: Width) -> Result<u64, MmioError> {
        if width != Width::W32 || !offset.is_multiple_of(4) || offset >= BAR0_BYTES {
            return Err(MmioError::Misaligned { offset, width });
        }
        let s = lock(&self.state);
        Ok(match offset {
            0x00 | 0x04 => lo_hi(Self::cap(&s), offset == 0x04),
            regs::NVME_REG_VS => 0x0001_0400,
            regs::NVME_REG_CC => s.cc.into(),
            regs::NVME_REG_CSTS => s.csts.into(),
            regs::NVME_REG_AQA => s.aqa.into(),
            0x28 | 0x2c => lo_hi(s.asq, offset == 0x2c),
            0x30 | 0x34 => lo_hi(s.acq, offset == 0x34),
            _ => 0,
        })
    }

    fn write(&self, offset: u64, width: Width, value: u64) -> Result<(), MmioError> {
        if width != Width::W32 || !offset.is_multiple_of(4) || offset >= BAR0_BYTES {
            return Err(MmioError::Misaligned { offset, width });
        }
        let v = u32::try_from(value).map_err(|_| MmioError::TooWide { value, width })?;
        let mut s = lock(&self.state);
        s.writes.push((offset, v));
        match offset {
            regs::NVME_REG_CC => self.set_cc(&mut s, v),
            regs::NVME_REG_AQA => s.aqa = v,
            0x28 | 0x2c => set_half(&mut s.asq, value, offset == 0x2c),
            0x30 | 0x34 => set_half(&mut s.acq, value, offset == 0x34),
            regs::NVME_REG_DBS => {
                let tail = u16::try_from(v & 0xffff).expect("16 bits");
                self.ring_admin(&mut s, tail);
            }
            _ => {}
        }
        Ok(())
    }
}
