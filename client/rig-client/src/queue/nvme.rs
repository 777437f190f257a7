//! NVMe I/O commands on a [`Queue`]: Read, Write and Flush into leased buffers, with
//! PRP1/PRP2 and PRP lists, command ids tracked per queue, and completions decoded.
//!
//! Layouts: the entries are `rig_model::nvme`'s (shared with rigd's admin commands);
//! NVMe Base Specification 1.4 §4.3 "Physical
//! Region Page Entry and List" (PRP1 may start anywhere dword-aligned in a page; a
//! transfer that ends in the next page puts that page in PRP2; a longer one puts a
//! list of the following pages' addresses in PRP2), and the NVM command set's
//! Flush (00h), Write (01h), Read (02h): SLBA in CDW10–11, NLB 0's based in CDW12
//! 15:0.
//!
//! Who writes what: the client writes commands, PRP lists (one page per command id,
//! in its own memory) and its doorbells; the controller reads them and the data
//! buffers of writes, and writes the data buffers of reads and the completions. A
//! command id is the client's again only once its completion is reaped.

use std::collections::VecDeque;

pub use rig_model::nvme::Status;
use rig_model::nvme::{Cqe, Sqe};

use super::{Doorbell, Layout, Queue, QueueError, RingMem};

/// NVM command set opcodes.
pub const NVME_CMD_FLUSH: u8 = 0x00;
pub const NVME_CMD_WRITE: u8 = 0x01;
pub const NVME_CMD_READ: u8 = 0x02;

/// The memory page size rigd programs (CC.MPS = 0).
pub const PAGE: u64 = 4096;
pub const SQE_BYTES: u32 = 64;
pub const CQE_BYTES: u32 = 16;
/// PRP entries one list page holds; rig does not chain lists.
pub const PRP_PER_PAGE: u64 = PAGE / 8;

/// The generic layout of an NVMe queue pair of `entries` entries each, SQ at `sq_at`
/// and CQ at `cq_at`: the phase is bit 16 of DW3, bit 0 of byte 14.
pub fn layout(entries: u32, sq_at: u64, cq_at: u64) -> Layout {
    Layout {
        sq_at,
        sq_entries: entries,
        sq_entry_bytes: SQE_BYTES,
        cq_at,
        cq_entries: entries,
        cq_entry_bytes: CQE_BYTES,
        phase_byte: 14,
        phase_bit: 0,
    }
}

/// A transfer's data pointer: PRP1, PRP2, and the list PRP2 points at when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prp {
    /// The data lies in PRP1's page; PRP2 is 0.
    One(u64),
    /// PRP1's page and the page PRP2 names.
    Two(u64, u64),
    /// PRP1's page, then the pages of the list (PRP2 is the list's address).
    List(u64, Vec<u64>),
}

/// The PRP entries for `len` bytes at device address `addr`, contiguous in the
/// device's address space (a leased buffer is).
///
/// # Errors
/// [`QueueError::Transfer`] for no bytes, an address not dword-aligned, a transfer
/// that wraps the address space, or one that needs more than one list page.
pub fn prp(addr: u64, len: u64) -> Result<Prp, QueueError> {
    let bad = |why: &str| {
        Err(QueueError::Transfer {
            addr,
            len,
            why: why.into(),
        })
    };
    if len == 0 {
        return bad("no bytes");
    }
    if !addr.is_multiple_of(4) {
        return bad("PRP1 must be dword-aligned");
    }
    let Some(end) = addr.checked_add(len) else {
        return bad("it wraps the address space");
    };
    let first_page = addr - addr % PAGE;
    let pages_after: u64 = (end - 1) / PAGE - first_page / PAGE;
    match pages_after {
        0 => Ok(Prp::One(addr)),
        1 => Ok(Prp::Two(addr, first_page + PAGE)),
        n if n <= PRP_PER_PAGE => Ok(Prp::List(
            addr,
            (1..=n).map(|i| first_page + i * PAGE).collect(),
        )),
        n => bad(&format!(
            "it spans {} pages; one PRP list holds {PRP_PER_PAGE} after the first",
            n + 1
        )),
    }
}

/// One 64-byte NVM command.
fn command(opcode: u8, cid: u16, nsid: u32, prp1: u64, prp2: u64, cdw: [u32; 3]) -> [u8; 64] {
    Sqe {
        opcode,
        cid,
        nsid,
        prp1,
        prp2,
        cdw: [cdw[0], cdw[1], cdw[2], 0, 0, 0],
    }
    .to_bytes()
}

/// A reaped completion, with the tag its command was submitted under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion<T> {
    pub tag: T,
    pub cid: u16,
    pub status: Status,
    /// DW0: command specific.
    pub result: u32,
    /// SQHD: the controller's SQ head when it posted this.
    pub sq_head: u16,
}

fn parse_completion(b: &[u8]) -> (u16, Status, u32, u16) {
    // The generic queue hands over whole entries of the layout's CQE_BYTES.
    let mut e = [0u8; 16];
    let n = b.len().min(16);
    e[..n].copy_from_slice(&b[..n]);
    let c = Cqe::parse(&e);
    (c.cid, c.status, c.result, c.sq_head)
}

/// Where a queue's PRP lists go: one page per command id, in memory the queue's
/// [`RingMem`] reaches at `at` and the device at `device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrpLists {
    pub at: u64,
    pub device: u64,
}

/// A namespace's geometry (rigd reads it with Identify Namespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespace {
    pub nsid: u32,
    /// log2 of the logical block size (9 for 512 bytes).
    pub lba_shift: u32,
    /// Its size in logical blocks: commands past it are refused before submission.
    pub blocks: u64,
}

/// Typed NVMe I/O on one lent queue pair. `T` is what the caller tags commands with.
#[derive(Debug)]
pub struct NvmeQueue<M, D, T> {
    queue: Queue<M, D>,
    ns: Namespace,
    lists: Option<PrpLists>,
    tags: Vec<Option<T>>,
    free: VecDeque<u16>,
}

impl<M: RingMem, D: Doorbell, T> NvmeQueue<M, D, T> {
    /// Typed commands on `queue` (made with [`layout`]); `lists` is where PRP lists go
    /// (`queue.limit()` pages), or `None` to refuse transfers of more than two pages.
    pub fn new(queue: Queue<M, D>, ns: Namespace, lists: Option<PrpLists>) -> Self {
        let limit = queue.limit();
        let ids = u16::try_from(limit).unwrap_or(u16::MAX);
        Self {
            queue,
            ns,
            lists,
            tags: (0..ids).map(|_| None).collect(),
            free: (0..ids).collect(),
        }
    }

    pub fn queue(&self) -> &Queue<M, D> {
        &self.queue
    }

    pub fn queue_mut(&mut self) -> &mut Queue<M, D> {
        &mut self.queue
    }

    /// Commands in flight.
    pub fn in_flight(&self) -> u32 {
        self.queue.in_flight()
    }

    /// Read `blocks` logical blocks from `lba` into `len` bytes at device address `addr`.
    ///
    /// # Errors
    /// [`QueueError::Full`], [`QueueError::Transfer`] (a length that is not
    /// `blocks` blocks, or a bad data pointer), memory errors.
    pub fn read(
        &mut self,
        lba: u64,
        blocks: u32,
        addr: u64,
        len: u64,
        tag: T,
    ) -> Result<u16, QueueError> {
        self.io(NVME_CMD_READ, lba, blocks, addr, len, tag)
    }

    /// Write `blocks` logical blocks at `lba` from `len` bytes at `addr`.
    ///
    /// # Errors
    /// As [`NvmeQueue::read`].
    pub fn write(
        &mut self,
        lba: u64,
        blocks: u32,
        addr: u64,
        len: u64,
        tag: T,
    ) -> Result<u16, QueueError> {
        self.io(NVME_CMD_WRITE, lba, blocks, addr, len, tag)
    }

    /// Flush the namespace's volatile write cache.
    ///
    /// # Errors
    /// [`QueueError::Full`], memory errors.
    pub fn flush(&mut self, tag: T) -> Result<u16, QueueError> {
        let cid = self.take_id()?;
        let sqe = command(NVME_CMD_FLUSH, cid, self.ns.nsid, 0, 0, [0; 3]);
        self.put(cid, &sqe, tag)
    }

    fn io(
        &mut self,
        opcode: u8,
        lba: u64,
        blocks: u32,
        addr: u64,
        len: u64,
        tag: T,
    ) -> Result<u16, QueueError> {
        let want = u64::from(blocks) << self.ns.lba_shift;
        let end = lba.checked_add(u64::from(blocks));
        if end.is_none_or(|e| e > self.ns.blocks) {
            return Err(QueueError::Transfer {
                addr,
                len,
                why: format!(
                    "blocks {lba} to {lba}+{blocks} run past the namespace's {} blocks",
                    self.ns.blocks
                ),
            });
        }
        if blocks == 0 || blocks > 0x1_0000 || want != len {
            return Err(QueueError::Transfer {
                addr,
                len,
                why: format!(
                    "{blocks} blocks of {} bytes (1 to 65536 blocks, exactly the length)",
                    1u64 << self.ns.lba_shift
                ),
            });
        }
        let p = prp(addr, len)?;
        let cid = self.take_id()?;
        let (prp1, prp2) = match self.place(cid, p) {
            Ok(v) => v,
            Err(e) => {
                self.free.push_front(cid);
                return Err(e);
            }
        };
        // CAST: SLBA's halves; NLB is 0's based and blocks <= 65536 was checked.
        #[expect(
            clippy::cast_possible_truncation,
            reason = "halves and a checked count"
        )]
        let cdw = [lba as u32, (lba >> 32) as u32, blocks - 1];
        let sqe = command(opcode, cid, self.ns.nsid, prp1, prp2, cdw);
        self.put(cid, &sqe, tag)
    }

    /// PRP1 and PRP2 for a command, writing its list to its page when it has one.
    fn place(&self, cid: u16, p: Prp) -> Result<(u64, u64), QueueError> {
        match p {
            Prp::One(a) => Ok((a, 0)),
            Prp::Two(a, b) => Ok((a, b)),
            Prp::List(a, pages) => {
                let Some(lists) = self.lists else {
                    return Err(QueueError::Transfer {
                        addr: a,
                        len: (pages.len() as u64 + 1) * PAGE,
                        why: "it needs a PRP list and this queue has no list pages".into(),
                    });
                };
                let at = lists.at + u64::from(cid) * PAGE;
                let bytes: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
                self.queue
                    .mem()
                    .write(at, &bytes)
                    .map_err(|source| QueueError::Memory {
                        step: "write a PRP list",
                        source,
                    })?;
                Ok((a, lists.device + u64::from(cid) * PAGE))
            }
        }
    }

    fn take_id(&mut self) -> Result<u16, QueueError> {
        self.free.pop_front().ok_or(QueueError::Full {
            in_flight: self.queue.in_flight(),
        })
    }

    fn put(&mut self, cid: u16, sqe: &[u8; 64], tag: T) -> Result<u16, QueueError> {
        match self.queue.submit(sqe) {
            Ok(_) => {
                self.tags[usize::from(cid)] = Some(tag);
                Ok(cid)
            }
            Err(e) => {
                self.free.push_front(cid);
                Err(e)
            }
        }
    }

    /// Publishes the commands submitted since the last call.
    ///
    /// # Errors
    /// [`QueueError::Doorbell`].
    pub fn ring(&mut self) -> Result<(), QueueError> {
        self.queue.ring()
    }

    /// Reaps up to `max` completions, giving each to `each` with its command's tag.
    ///
    /// # Errors
    /// [`QueueError::UnknownCommand`] for a completion whose id has no command in
    /// flight (the entry is consumed); memory and doorbell errors.
    pub fn reap(
        &mut self,
        max: u32,
        mut each: impl FnMut(Completion<T>),
    ) -> Result<u32, QueueError> {
        let (tags, free) = (&mut self.tags, &mut self.free);
        self.queue.reap(max, |b| {
            let (cid, status, result, sq_head) = parse_completion(b);
            let tag = tags
                .get_mut(usize::from(cid))
                .and_then(Option::take)
                .ok_or(QueueError::UnknownCommand { cid })?;
            free.push_back(cid);
            each(Completion {
                tag,
                cid,
                status,
                result,
                sq_head,
            });
            Ok(())
        })
    }
}

#[cfg(test)]
#[path = "nvme_tests.rs"]
mod tests;
