//! The session's pages without rigd: carving, giving space back, and which emptied
//! leases are kept.

use super::*;

const PAGE: u64 = 2 << 20;

fn pages(leases: &[(u64, u64)], keep_bytes: u64) -> Arc<Pages> {
    let p = Arc::new(Pages::default());
    {
        let mut l = p.lock();
        l.keep_bytes = keep_bytes;
        for &(id, bytes) in leases {
            l.leases.push(LocalLease {
                info: GpuLeaseInfo {
                    id: GpuMemId(id),
                    va: GpuVa((1 << 39) + id * (1 << 30)),
                    bytes,
                    cpu_view: false,
                },
                arena: Some(Arena::new(bytes)),
            });
        }
    }
    p
}

#[test]
fn buffers_are_carved_at_their_leases_va_and_their_space_comes_back_on_drop() {
    let p = pages(&[(1, PAGE)], 0);
    let a = p.carve(4096, 256, None).expect("a");
    let b = p.carve(100, 256, None).expect("b");
    assert_eq!(a.va(), GpuVa((1 << 39) + (1 << 30)));
    assert_eq!(b.va().get() - a.va().get(), 4096);
    assert!(b.va().is_aligned(256));
    assert!(
        p.carve(PAGE, 1, None).is_none(),
        "no room for a whole page now"
    );
    drop((a, b));
    assert!(p.carve(PAGE, PAGE, None).is_some(), "all of it again");
}

#[test]
fn the_smallest_emptied_leases_are_kept_up_to_the_budget_and_busy_ones_never_go() {
    let p = pages(&[(1, 4 * PAGE), (2, PAGE), (3, PAGE), (4, PAGE)], 2 * PAGE);
    let busy = p.carve(64, 64, Some(GpuMemId(4))).expect("in lease 4");

    let mut spare = p.spare();
    spare.sort();

    assert_eq!(
        spare,
        [GpuMemId(1)],
        "two single pages kept, the big one goes"
    );
    drop(busy);
    let mut spare = p.spare();
    spare.sort();
    assert_eq!(
        spare.len(),
        2,
        "one of the three single pages goes too: {spare:?}"
    );
    assert!(
        pages(&[(1, PAGE)], 0).spare() == [GpuMemId(1)],
        "keep nothing"
    );
}

#[test]
fn a_buffer_marked_kept_out_does_not_come_back() {
    let p = pages(&[(1, PAGE)], PAGE);
    let mut a = p.carve(PAGE, PAGE, None).expect("whole page");
    a.keep_out();
    drop(a);
    assert!(p.carve(64, 64, None).is_none());
    assert!(
        p.spare().is_empty(),
        "a lease with space kept out is not empty"
    );
}
