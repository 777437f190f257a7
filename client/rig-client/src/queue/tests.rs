//! The generic queue against the in-order device model of `queue::testing`.

use proptest::prelude::*;

use super::{
    Layout, Queue, QueueError,
    testing::{Bells, Device, VecMem},
};

/// Rings of `sq` 16-byte and `cq` 8-byte entries; the phase is bit 0 of byte 7.
fn layout(sq: u32, cq: u32) -> Layout {
    Layout {
        sq_at: 0,
        sq_entries: sq,
        sq_entry_bytes: 16,
        cq_at: 0x10000,
        cq_entries: cq,
        cq_entry_bytes: 8,
        phase_byte: 7,
        phase_bit: 0,
    }
}

fn pair(l: Layout) -> (Queue<VecMem, Bells>, Device) {
    let mem = VecMem::new(0x20000);
    let bells = Bells::default();
    let q = Queue::new(mem.clone(), bells.clone(), l).expect("layout");
    (q, Device::new(mem, bells, l))
}

fn entry(seq: u64) -> [u8; 16] {
    let mut e = [0u8; 16];
    e[..8].copy_from_slice(&seq.to_le_bytes());
    e
}

/// The completion echoes the command's sequence number in bytes 0..6.
fn echo(cmd: &[u8]) -> Vec<u8> {
    cmd[..6].to_vec()
}

fn seq_of(cqe: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..6].copy_from_slice(&cqe[..6]);
    u64::from_le_bytes(b)
}

#[test]
fn a_ring_of_two_takes_one_command_at_a_time() {
    let (mut q, mut dev) = pair(layout(2, 2));
    assert_eq!(q.limit(), 1);
    q.submit(&entry(1)).expect("first");
    assert!(matches!(
        q.submit(&entry(2)),
        Err(QueueError::Full { in_flight: 1 })
    ));
    q.ring().expect("ring");
    dev.fetch();
    dev.complete(1, echo);
    let mut got = vec![];
    let n = q
        .reap(8, |e| {
            got.push(seq_of(e));
            Ok(())
        })
        .expect("reap");
    assert_eq!(n, 1);
    assert_eq!(got, [1]);
    q.submit(&entry(2)).expect("room again");
}

#[test]
fn nothing_is_reaped_before_the_device_writes_and_the_head_bell_rings_only_for_news() {
    let (mut q, mut dev) = pair(layout(4, 4));
    assert_eq!(q.reap(8, |_| Ok(())).expect("empty"), 0);
    assert_eq!(dev.bells.cq_rings.get(), 0);
    q.submit(&entry(7)).expect("submit");
    // Written but not published: the device sees nothing.
    dev.fetch();
    assert_eq!(dev.pending(), 0);
    q.ring().expect("ring");
    q.ring()
        .expect("a second ring with no new tail does nothing");
    assert_eq!(dev.bells.sq_rings.get(), 1);
    dev.fetch();
    assert_eq!(dev.pending(), 1);
}

#[test]
fn entries_of_the_wrong_size_and_bad_layouts_are_refused() {
    let (mut q, _dev) = pair(layout(4, 4));
    assert!(matches!(
        q.submit(&[0u8; 8]),
        Err(QueueError::EntrySize { got: 8, want: 16 })
    ));
    assert_eq!(q.in_flight(), 0);
    let mem = VecMem::new(64);
    for l in [
        layout(1, 4),
        layout(4, 1),
        Layout {
            phase_byte: 8,
            ..layout(4, 4)
        },
        Layout {
            cq_at: 32,
            ..layout(4, 4)
        },
    ] {
        assert!(matches!(
            Queue::new(mem.clone(), Bells::default(), l),
            Err(QueueError::Layout { .. })
        ));
    }
}

#[test]
fn a_smaller_cq_bounds_the_commands_in_flight() {
    let (q, _dev) = pair(layout(64, 8));
    assert_eq!(q.limit(), 7);
}

#[test]
fn an_error_from_the_reaper_stops_after_that_entry_and_still_rings_the_head() {
    let (mut q, mut dev) = pair(layout(8, 8));
    for s in 0..3 {
        q.submit(&entry(s)).expect("submit");
    }
    q.ring().expect("ring");
    dev.fetch();
    dev.complete(3, echo);
    let e = q
        .reap(8, |_| Err(QueueError::UnknownCommand { cid: 9 }))
        .expect_err("the reaper's error");
    assert!(matches!(e, QueueError::UnknownCommand { cid: 9 }));
    assert_eq!(q.cq_head(), 1);
    assert_eq!(dev.bells.cq_head.get(), 1);
    assert_eq!(q.reap(8, |_| Ok(())).expect("the rest"), 2);
}

proptest! {
    /// Random interleavings of submit, ring, device fetch and completion, and reap.
    #[test]
    fn in_order_completions_keep_order_phase_and_the_in_flight_bound(
        sq_log in 1u32..7,
        cq_log in 1u32..7,
        ops in proptest::collection::vec((0u8..4, 1usize..9), 1..600),
    ) {
        let l = layout(1 << sq_log, 1 << cq_log);
        let (mut q, mut dev) = pair(l);
        let limit = l.sq_entries.min(l.cq_entries) - 1;
        let (mut submitted, mut reaped) = (0u64, 0u64);
        for (op, n) in ops {
            match op {
                0 => for _ in 0..n {
                    match q.submit(&entry(submitted)) {
                        Ok(slot) => {
                            prop_assert_eq!(u64::from(slot), submitted % u64::from(l.sq_entries));
                            submitted += 1;
                        }
                        Err(QueueError::Full { in_flight }) => {
                            prop_assert_eq!(in_flight, limit);
                            prop_assert_eq!(submitted - reaped, u64::from(limit));
                        }
                        Err(e) => prop_assert!(false, "{e}"),
                    }
                },
                1 => { q.ring().expect("ring"); dev.fetch(); }
                2 => { dev.complete(n, echo); }
                _ => {
                    let mut seqs = vec![];
                    let got = q.reap(u32::try_from(n).expect("small"), |e| {
                        seqs.push(seq_of(e));
                        Ok(())
                    }).expect("reap");
                    // Order: completions come back in submission order.
                    for (i, s) in seqs.iter().enumerate() {
                        prop_assert_eq!(*s, reaped + i as u64);
                    }
                    reaped += u64::from(got);
                    // Phase: flipped once per wrap of the head.
                    let wraps = reaped / u64::from(l.cq_entries);
                    prop_assert_eq!(q.phase(), wraps % 2 == 0);
                    prop_assert_eq!(u64::from(q.cq_head()), reaped % u64::from(l.cq_entries));
                    if got > 0 {
                        prop_assert_eq!(dev.bells.cq_head.get(), q.cq_head());
                    }
                }
            }
            prop_assert!(q.in_flight() <= limit);
            prop_assert_eq!(u64::from(q.in_flight()), submitted - reaped);
        }
        // The device read every entry exactly as written: no slot was reused early.
        for (i, e) in dev.fetched.iter().enumerate() {
            prop_assert_eq!(seq_of(e), i as u64);
        }
    }
}
