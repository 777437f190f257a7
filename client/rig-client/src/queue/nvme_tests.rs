//! NVMe commands on the generic queue, against the in-order device model of
//! `queue::testing` executing Read, Write and Flush on a namespace in memory,
//! following PRP1, PRP2 and PRP lists as a controller does.

use std::{cell::RefCell, rc::Rc};

use proptest::prelude::*;

use super::{
    Namespace, NvmeQueue, PAGE, PRP_PER_PAGE, Prp, PrpLists, layout, parse_completion, prp,
};
use crate::queue::{
    Queue, QueueError, RingMem,
    testing::{Bells, Device, VecMem},
};

#[test]
fn a_transfer_inside_one_page_needs_only_prp1() {
    assert_eq!(prp(0x1_0000, 4096).expect("one page"), Prp::One(0x1_0000));
    assert_eq!(prp(0x1_0200, 512).expect("one sector"), Prp::One(0x1_0200));
    assert_eq!(prp(0x1_0ffc, 4).expect("last dword"), Prp::One(0x1_0ffc));
}

#[test]
fn a_transfer_into_the_next_page_puts_that_page_in_prp2() {
    assert_eq!(
        prp(0x1_0000, 8192).expect("two pages"),
        Prp::Two(0x1_0000, 0x1_1000)
    );
    assert_eq!(
        prp(0x1_0ffc, 8).expect("straddles"),
        Prp::Two(0x1_0ffc, 0x1_1000)
    );
}

#[test]
fn longer_transfers_list_every_page_after_the_first_up_to_one_list_page() {
    assert_eq!(
        prp(0x1_0000, 3 * PAGE).expect("three pages"),
        Prp::List(0x1_0000, vec![0x1_1000, 0x1_2000])
    );
    let most = prp(0x1_0000, (PRP_PER_PAGE + 1) * PAGE).expect("513 pages");
    assert!(matches!(most, Prp::List(_, ref l) if l.len() == 512));
    assert!(matches!(
        prp(0x1_0000, (PRP_PER_PAGE + 2) * PAGE),
        Err(QueueError::Transfer { .. })
    ));
}

#[test]
fn empty_misaligned_and_wrapping_transfers_are_refused() {
    for (addr, len) in [(0x1000, 0), (0x1002, 512), (u64::MAX - 3, 8)] {
        assert!(
            matches!(prp(addr, len), Err(QueueError::Transfer { .. })),
            "{addr:#x}+{len}"
        );
    }
}

proptest! {
    /// The pages PRP names cover exactly [addr, addr + len), in order.
    #[test]
    fn prp_entries_cover_the_transfer_exactly(
        page in 1u64..1 << 30,
        dword in 0u64..1024,
        len in 1u64..(PRP_PER_PAGE + 1) * PAGE - 4096,
    ) {
        let addr = page * PAGE + dword * 4;
        let p = prp(addr, len).expect("fits one list");
        let pages: Vec<u64> = match p {
            Prp::One(a) => vec![a],
            Prp::Two(a, b) => vec![a, b],
            Prp::List(a, l) => std::iter::once(a).chain(l).collect(),
        };
        prop_assert_eq!(pages[0], addr);
        for (i, p) in pages.iter().enumerate().skip(1) {
            prop_assert_eq!(*p, addr - addr % PAGE + i as u64 * PAGE);
        }
        let covered = (PAGE - addr % PAGE) + (pages.len() as u64 - 1) * PAGE;
        prop_assert!(covered >= len);
        prop_assert!(covered - len < PAGE);
    }
}

/// Memory: SQ at 0, CQ at 64 KiB, PRP lists at 128 KiB, data at 1 MiB; the device
/// sees it at `DEV` + offset.
const DEV: u64 = 0x4000_0000;
const CQ_AT: u64 = 0x1_0000;
const LISTS_AT: u64 = 0x2_0000;
const DATA_AT: u64 = 0x10_0000;
const MEM: usize = 0x40_0000;
const LBA_SHIFT: u32 = 9;
/// The namespace's size: 64 MiB of 512-byte blocks.
const BLOCKS: u64 = 131_072;

struct Nvm {
    mem: VecMem,
    disk: RefCell<Vec<u8>>,
}

impl Nvm {
    fn dev(&self, addr: u64) -> u64 {
        addr - DEV
    }

    /// The data pages of a command, as a controller walks PRP1, PRP2 and the list.
    fn pages(&self, prp1: u64, prp2: u64, len: u64) -> Vec<(u64, u64)> {
        let first = (PAGE - prp1 % PAGE).min(len);
        let mut out = vec![(self.dev(prp1), first)];
        let rest = len - first;
        let n = rest.div_ceil(PAGE);
        let list: Vec<u64> = if n == 1 {
            vec![prp2]
        } else {
            (0..n)
                .map(|i| {
                    let mut b = [0u8; 8];
                    self.mem.read(self.dev(prp2) + 8 * i, &mut b).expect("list");
                    u64::from_le_bytes(b)
                })
                .collect()
        };
        let mut left = rest;
        for p in list.into_iter().take(usize::try_from(n).expect("small")) {
            out.push((self.dev(p), left.min(PAGE)));
            left -= left.min(PAGE);
        }
        out
    }

    fn execute(&self, cmd: &[u8]) -> Vec<u8> {
        let dw = |at: usize| u32::from_le_bytes([cmd[at], cmd[at + 1], cmd[at + 2], cmd[at + 3]]);
        let qw = |at: usize| u64::from(dw(at)) | u64::from(dw(at + 4)) << 32;
        let (opcode, cid) = (cmd[0], (dw(0) >> 16) as u16);
        let lba = u64::from(dw(40)) | u64::from(dw(44)) << 32;
        let len = (u64::from(dw(48) & 0xffff) + 1) << LBA_SHIFT;
        let mut disk_at = usize::try_from(lba << LBA_SHIFT).expect("small");
        if opcode == super::NVME_CMD_READ || opcode == super::NVME_CMD_WRITE {
            for (at, n) in self.pages(qw(24), qw(32), len) {
                let n = usize::try_from(n).expect("small");
                let mut disk = self.disk.borrow_mut();
                let d = &mut disk[disk_at..disk_at + n];
                if opcode == super::NVME_CMD_READ {
                    self.mem.write(at, d).expect("data");
                } else {
                    self.mem.read(at, d).expect("data");
                }
                disk_at += n;
            }
        }
        let mut cqe = vec![0u8; 16];
        cqe[12..14].copy_from_slice(&cid.to_le_bytes());
        cqe
    }
}

type Q = NvmeQueue<VecMem, Bells, u64>;

fn nvme(entries: u32) -> (Q, Device, Rc<Nvm>) {
    let mem = VecMem::new(MEM);
    let bells = Bells::default();
    let l = layout(entries, 0, CQ_AT);
    let q = Queue::new(mem.clone(), bells.clone(), l).expect("layout");
    let nq = NvmeQueue::new(
        q,
        Namespace {
            nsid: 1,
            lba_shift: LBA_SHIFT,
            blocks: BLOCKS,
        },
        Some(PrpLists {
            at: LISTS_AT,
            device: DEV + LISTS_AT,
        }),
    );
    let nvm = Rc::new(Nvm {
        mem: mem.clone(),
        disk: RefCell::new(vec![0; 1 << 24]),
    });
    (nq, Device::new(mem, bells, l), nvm)
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8)
        .collect()
}

/// Drives the device until every command in flight is reaped.
fn drain(q: &mut Q, dev: &mut Device, nvm: &Nvm, done: &mut Vec<u64>) {
    q.ring().expect("ring");
    while q.in_flight() > 0 {
        dev.fetch();
        dev.complete(usize::MAX, |c| nvm.execute(c));
        q.reap(u32::MAX, |c| {
            assert!(c.status.is_success());
            done.push(c.tag);
        })
        .expect("reap");
    }
}

/// Writes `n` 4 KiB patterns at LBAs 8i through a queue of `entries`, reads them back
/// into a second area, and compares.
fn round_trip(entries: u32, n: u64) {
    let (mut q, mut dev, nvm) = nvme(entries);
    let limit = u64::from(q.queue().limit());
    let mut done = vec![];
    let slot = |i: u64| DATA_AT + (i % limit) * PAGE;
    for i in 0..n {
        if q.in_flight() == q.queue().limit() {
            drain(&mut q, &mut dev, &nvm, &mut done);
        }
        nvm.mem.write(slot(i), &pattern(i, 4096)).expect("fill");
        q.write(8 * i, 8, DEV + slot(i), PAGE, i).expect("write");
    }
    drain(&mut q, &mut dev, &nvm, &mut done);
    q.flush(u64::MAX).expect("flush");
    drain(&mut q, &mut dev, &nvm, &mut done);
    for i in 0..n {
        if q.in_flight() == q.queue().limit() {
            drain(&mut q, &mut dev, &nvm, &mut done);
        }
        q.read(
            8 * i,
            8,
            DEV + DATA_AT + 0x10_0000 + (i % limit) * PAGE,
            PAGE,
            i,
        )
        .expect("read");
        if q.in_flight() == q.queue().limit() || i == n - 1 {
            drain(&mut q, &mut dev, &nvm, &mut done);
            let first = i - i % limit;
            for j in first..=i {
                let mut got = vec![0u8; 4096];
                nvm.mem
                    .read(DATA_AT + 0x10_0000 + (j % limit) * PAGE, &mut got)
                    .expect("read back");
                assert_eq!(got, pattern(j, 4096), "block {j}");
            }
        }
    }
    assert_eq!(done.len() as u64, 2 * n + 1);
    // Completions come back in submission order here (the model completes in order).
    let writes: Vec<u64> = done[..usize::try_from(n).expect("small")].to_vec();
    assert_eq!(writes, (0..n).collect::<Vec<_>>());
}

#[test]
fn patterns_round_trip_one_command_at_a_time_across_many_wraps() {
    // Depth 1: a ring of two entries, 500 writes and 500 reads wrap it 500 times.
    round_trip(2, 500);
}

#[test]
fn patterns_round_trip_32_deep_across_many_wraps() {
    round_trip(33, 2000);
}

#[test]
fn a_transfer_over_many_pages_goes_through_a_prp_list() {
    let (mut q, mut dev, nvm) = nvme(4);
    let len = 64 * PAGE + 512;
    let data = pattern(9, usize::try_from(len).expect("small"));
    nvm.mem.write(DATA_AT + 512, &data).expect("fill");
    let blocks = u32::try_from(len >> LBA_SHIFT).expect("small");
    q.write(100, blocks, DEV + DATA_AT + 512, len, 1)
        .expect("write");
    let mut done = vec![];
    drain(&mut q, &mut dev, &nvm, &mut done);
    let disk = nvm.disk.borrow();
    let at = 100usize << LBA_SHIFT;
    assert_eq!(&disk[at..at + data.len()], &data[..]);
}

#[test]
fn a_command_id_returns_only_when_its_completion_is_reaped() {
    let (mut q, mut dev, nvm) = nvme(3);
    let a = q.flush(1).expect("first");
    let b = q.flush(2).expect("second");
    assert_ne!(a, b);
    assert!(matches!(q.flush(3), Err(QueueError::Full { .. })));
    let mut done = vec![];
    drain(&mut q, &mut dev, &nvm, &mut done);
    assert_eq!(done, [1, 2]);
    q.flush(3).expect("room again");
}

#[test]
fn a_length_that_is_not_the_block_count_is_refused_and_takes_no_id() {
    let (mut q, _dev, _nvm) = nvme(2);
    let e = q
        .read(0, 8, DEV + DATA_AT, 512, 0)
        .expect_err("8 blocks != 512 bytes");
    assert!(matches!(e, QueueError::Transfer { .. }));
    assert!(matches!(
        q.read(0, 0, DEV + DATA_AT, 0, 0),
        Err(QueueError::Transfer { .. })
    ));
    q.read(0, 1, DEV + DATA_AT, 512, 0)
        .expect("the one id is still free");
}

#[test]
fn a_command_past_the_namespaces_last_block_is_refused_and_takes_no_id() {
    let (mut q, _dev, _nvm) = nvme(2);
    for (lba, blocks) in [(BLOCKS - 7, 8), (BLOCKS, 1), (u64::MAX, 1)] {
        let e = q
            .write(
                lba,
                blocks,
                DEV + DATA_AT,
                u64::from(blocks) << LBA_SHIFT,
                0,
            )
            .expect_err("past the end");
        assert!(
            matches!(&e, QueueError::Transfer { why, .. } if why.contains("past the namespace's 131072 blocks")),
            "{e}"
        );
    }
    q.write(BLOCKS - 8, 8, DEV + DATA_AT, 4096, 0)
        .expect("the last 8 blocks, with the one id still free");
}

#[test]
fn a_completion_with_an_id_no_command_has_is_refused() {
    let (mut q, mut dev, nvm) = nvme(4);
    q.flush(5).expect("flush");
    q.ring().expect("ring");
    dev.fetch();
    dev.complete(1, |c| {
        let mut e = nvm.execute(c);
        e[12] = 3;
        e
    });
    assert!(matches!(
        q.reap(8, |_| {}),
        Err(QueueError::UnknownCommand { cid: 3 })
    ));
}

#[test]
fn completions_decode_status_phase_apart() {
    let mut b = [0u8; 16];
    let dw3: u32 = 7 | 1 << 16 | 0x81 << 17 | 2 << 25 | 1 << 31;
    b[12..16].copy_from_slice(&dw3.to_le_bytes());
    b[8..10].copy_from_slice(&5u16.to_le_bytes());
    let (cid, s, _, sq_head) = parse_completion(&b);
    assert_eq!((cid, s.sct, s.sc, s.dnr, sq_head), (7, 2, 0x81, true, 5));
}
