//! Pool logic on shmem blocks (no hugepages, no root) and a fake IOMMU.

use std::{sync::Arc, time::Duration};

use rig_sys::{
    memfd::SealedMemfd,
    mman::{Fill, Mapping},
};

use super::*;
use crate::dma::{FakeIommu, IommuCall, IovaError};

const G: u64 = BLOCK_SIZE;

fn pool(mode: PoolMode, blocks: u32) -> Pool {
    let p = Pool::start(
        "test",
        PoolSpec {
            mode,
            blocks,
            backing: Backing::Shmem,
            pin_threads: 2,
        },
    )
    .expect("start");
    assert!(p.wait_pinned(Duration::from_secs(10)), "filled");
    p
}

#[test]
fn a_new_pool_fills_to_its_size_in_the_background() {
    let p = pool(PoolMode::Host, 5);
    let s = p.status();
    assert_eq!(
        (s.free_blocks, s.leased_blocks, s.pinning_blocks),
        (5, 0, 0)
    );
    assert!(s.pin_gib_per_s.is_some_and(|r| r > 0.0));
    assert_eq!(PoolMode::name_of(s.addressing), "host");
}

#[test]
fn a_host_lease_has_no_device_address_and_one_descriptor_per_block() {
    let p = pool(PoolMode::Host, 4);
    let lent = p.lease(LeaseId(1), 3).expect("lease");
    assert_eq!(lent.addr, None);
    assert_eq!(lent.fds.len(), 3);
    assert_eq!(p.status().free_blocks, 1);
}

#[test]
fn a_lease_can_pin_a_missing_block_itself_while_the_pinner_gets_no_time() {
    // The load bench (1,000 clients) and the soak: the pinner refills at nice 19, and
    // with every CPU busy it got none, so every lease was refused "being pinned".
    let p = pool(PoolMode::Host, 1);
    p.shared.state().hold_refills = true;
    p.lease(LeaseId(1), 1).expect("lease");
    p.release(LeaseId(1)).expect("release");
    assert!(matches!(
        p.lease(LeaseId(2), 1),
        Err(DmaError::Exhausted { pending: 1, .. })
    ));
    assert!(p.pin_one(), "one block was missing");
    p.lease(LeaseId(2), 1).expect("the block the caller pinned");
    assert!(!p.pin_one(), "nothing is missing now");
    p.release(LeaseId(2)).expect("release");
    p.shared.state().hold_refills = false;
    p.shared.work.notify_all();
    assert!(p.wait_pinned(Duration::from_secs(10)));
    assert_eq!(p.status().free_blocks, 1);
}

#[test]
fn a_released_lease_is_replaced_by_fresh_blocks() {
    let p = pool(PoolMode::Host, 2);
    let lent = p.lease(LeaseId(1), 1).expect("lease");
    p.write(LeaseId(1), 0, b"client data").expect("write");
    assert_eq!(p.release(LeaseId(1)).expect("release"), 1);
    assert!(p.wait_pinned(Duration::from_secs(10)));
    assert_eq!(p.status().free_blocks, 2);
    // The client's descriptor no longer reaches the data: the page was punched out.
    let kept = SealedMemfd::check(lent.fds[0].try_clone().expect("dup")).expect("sealed");
    let view = Mapping::shared(&kept, Fill::Lazy).expect("map");
    let mut got = [0xffu8; 11];
    view.read(0, &mut got).expect("read");
    assert_eq!(got, [0; 11]);
    // And the next lease's blocks start clean.
    p.lease(LeaseId(2), 2).expect("lease both");
    let mut fresh = [0xffu8; 11];
    p.read(LeaseId(2), 0, &mut fresh).expect("read");
    p.read(LeaseId(2), G, &mut fresh).expect("read");
    assert_eq!(fresh, [0; 11]);
}

#[test]
fn more_blocks_than_are_free_is_exhausted_and_changes_nothing() {
    let p = pool(PoolMode::Host, 2);
    let e = p.lease(LeaseId(1), 3).expect_err("only 2");
    assert!(
        matches!(
            e,
            DmaError::Exhausted {
                wanted: 3,
                free: 2,
                pending: 0,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(p.status().free_blocks, 2);
}

#[test]
fn an_unknown_lease_cannot_be_released_read_or_written() {
    let p = pool(PoolMode::Host, 1);
    assert!(matches!(
        p.release(LeaseId(9)),
        Err(DmaError::UnknownLease { .. })
    ));
    assert!(matches!(
        p.read(LeaseId(9), 0, &mut [0; 1]),
        Err(DmaError::UnknownLease { .. })
    ));
    assert!(matches!(
        p.write(LeaseId(9), 0, &[0]),
        Err(DmaError::UnknownLease { .. })
    ));
}

#[test]
fn reads_and_writes_cross_block_boundaries_and_stop_at_the_lease_end() {
    let p = pool(PoolMode::Host, 2);
    p.lease(LeaseId(1), 2).expect("lease");
    p.write(LeaseId(1), G - 2, b"abcd")
        .expect("across the boundary");
    let mut got = [0u8; 4];
    p.read(LeaseId(1), G - 2, &mut got).expect("read");
    assert_eq!(&got, b"abcd");
    p.write(LeaseId(1), 2 * G - 1, b"z").expect("the last byte");
    let e = p.write(LeaseId(1), 2 * G - 1, b"zz").expect_err("one past");
    assert!(matches!(e, DmaError::OutOfLease { .. }), "{e}");
    assert!(matches!(
        p.read(LeaseId(1), u64::MAX, &mut got),
        Err(DmaError::OutOfLease { .. })
    ));
}

#[test]
fn a_vfio_lease_is_mapped_at_one_iova_run_and_faults_after_release() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu.clone()), 4);
    let lent = p.lease(LeaseId(1), 3).expect("lease");
    let Some(DeviceAddr::Iova(base)) = lent.addr else {
        panic!("vfio leases have an IOVA: {:?}", lent.addr)
    };
    assert_eq!(base, Iova(G), "the first granule above 0");
    // The device sees the lease's bytes at base + offset, block by block.
    p.write(LeaseId(1), G + 5, b"x").expect("write");
    let host = iommu.translate(Iova(base.0 + G + 5)).expect("mapped");
    assert_eq!(iommu.mapped().len(), 3);
    assert_ne!(host.0, 0);
    p.release(LeaseId(1)).expect("release");
    assert_eq!(
        iommu.translate(Iova(base.0 + G + 5)),
        None,
        "the IOMMU blocks it"
    );
    assert!(iommu.mapped().is_empty());
    // Freed IOVA space is reused, not grown.
    assert!(p.wait_pinned(Duration::from_secs(10)));
    let again = p.lease(LeaseId(2), 3).expect("lease again");
    assert_eq!(again.addr, Some(DeviceAddr::Iova(base)));
}

#[test]
fn a_failed_iommu_map_rolls_back_and_returns_the_blocks() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu.clone()), 2);
    iommu.fail_next_map(libc::ENOMEM);
    let e = p.lease(LeaseId(1), 1).expect_err("map fails");
    assert!(matches!(e, DmaError::Map { .. }), "{e}");
    assert_eq!(p.status().free_blocks, 2);
    let ok = p.lease(LeaseId(2), 2).expect("then works");
    assert_eq!(
        ok.addr,
        Some(DeviceAddr::Iova(Iova(G))),
        "the IOVA was freed"
    );
}

#[test]
fn blocks_whose_unmap_failed_are_never_lent_again() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu.clone()), 2);
    p.lease(LeaseId(1), 1).expect("lease");
    iommu.fail_next_unmap(libc::EIO);
    p.release(LeaseId(1))
        .expect("release still succeeds for the client");
    assert!(p.wait_pinned(Duration::from_secs(10)));
    let s = p.status();
    assert_eq!((s.quarantined_blocks, s.free_blocks), (1, 2));
    // The stuck IOVA stays allocated: the next lease gets another one.
    let next = p.lease(LeaseId(2), 1).expect("lease");
    assert_eq!(next.addr, Some(DeviceAddr::Iova(Iova(2 * G))));
}

#[test]
fn blocks_whose_unmap_failed_outlive_their_pool_and_the_others_are_freed() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = Pool::start(
        "outlives",
        PoolSpec {
            mode: PoolMode::Vfio(iommu.clone()),
            blocks: 3,
            backing: Backing::Shmem,
            pin_threads: 1,
        },
    )
    .expect("start");
    assert!(p.wait_pinned(Duration::from_secs(10)));
    p.lease(LeaseId(1), 1).expect("lease");
    p.lease(LeaseId(2), 1).expect("lease");
    iommu.fail_next_unmap(libc::EIO);
    p.release(LeaseId(1)).expect("release");

    drop(p);

    assert_eq!(orphaned_blocks("outlives"), 1, "the stuck block is kept");
    // Lease 2, still out when the pool went, was unmapped and freed.
    assert_eq!(iommu.mapped().len(), 1, "only the stuck mapping is left");
}

#[test]
fn an_iommu_without_room_for_a_block_refuses_the_pool() {
    let tiny = Arc::new(FakeIommu::new(vec![0..=0xfff], 0x1000));
    let e = Pool::start(
        "t",
        PoolSpec {
            mode: PoolMode::Vfio(tiny),
            blocks: 1,
            backing: Backing::Shmem,
            pin_threads: 1,
        },
    )
    .expect_err("no room");
    assert!(
        matches!(e, DmaError::Iova(IovaError::NoRanges { .. })),
        "{e}"
    );
}

#[test]
fn sysfs_mode_refuses_blocks_that_are_not_hugepages() {
    let e = Pool::start(
        "t",
        PoolSpec {
            mode: PoolMode::Sysfs,
            blocks: 1,
            backing: Backing::Shmem,
            pin_threads: 1,
        },
    )
    .expect_err("shmem has no stable physical address");
    assert!(matches!(e, DmaError::Config { .. }), "{e}");
}

#[test]
fn dropping_a_pool_unmaps_its_leases_from_the_iommu() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu.clone()), 2);
    p.lease(LeaseId(1), 2).expect("lease");
    drop(p);
    assert!(iommu.mapped().is_empty());
}

#[test]
fn contiguous_runs_are_found_or_the_longest_is_reported() {
    let pa = |i: u64| i * G;
    let keys = [pa(1), pa(2), pa(4), pa(5), pa(6), pa(9)];
    assert_eq!(
        contiguous_run(keys.into_iter(), 3),
        Ok(vec![pa(4), pa(5), pa(6)])
    );
    assert_eq!(contiguous_run(keys.into_iter(), 1), Ok(vec![pa(1)]));
    assert_eq!(contiguous_run(keys.into_iter(), 4), Err(3));
    assert_eq!(contiguous_run(std::iter::empty(), 1), Err(0));
    // The top of the address space does not wrap around to 0.
    let top = [u64::MAX - (G - 1), 0];
    assert_eq!(contiguous_run(top.into_iter(), 2), Err(1));
}

#[test]
fn blocks_that_failed_to_pin_are_tried_again_later() {
    let p = pool(PoolMode::Host, 2);
    {
        let mut st = p.shared.state();
        // As if one refill had failed: one block short, nothing else to do.
        let (_, b) = st.free.pop_first().expect("a block");
        b.retire();
        st.failed = 1;
    }
    p.shared.work.notify_all();
    assert_eq!(p.status().pinning_blocks, 1, "counted as still to pin");
    assert!(
        p.wait_pinned(Duration::from_secs(5)),
        "retried after the back-off"
    );
    assert_eq!(p.status().free_blocks, 2);
}

/// A session's device map that records blocks and fails on request.
#[derive(Debug, Default)]
struct Space {
    mapped: std::sync::Mutex<Vec<u64>>,
    fail_map_at: std::sync::Mutex<Option<usize>>,
    fail_unmap: std::sync::atomic::AtomicBool,
}

impl DeviceMap for Space {
    fn va_range(&self) -> std::ops::RangeInclusive<u64> {
        G..=64 * G - 1
    }

    fn map_block(&self, va: u64, _block: &rig_sys::mman::Mapping) -> Result<(), DmaError> {
        let mut m = self.mapped.lock().expect("lock");
        if *self.fail_map_at.lock().expect("lock") == Some(m.len()) {
            return Err(DmaError::DeviceMap {
                va,
                source: "refused".into(),
            });
        }
        m.push(va);
        Ok(())
    }

    fn unmap(&self, va: u64, len: u64) -> Result<(), DmaError> {
        if self.fail_unmap.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(DmaError::DeviceUnmap {
                va,
                source: "refused".into(),
            });
        }
        self.mapped
            .lock()
            .expect("lock")
            .retain(|v| !(va..va + len).contains(v));
        Ok(())
    }
}

#[test]
fn a_gpu_lease_maps_into_the_sessions_space_and_only_with_one() {
    let p = pool(PoolMode::Gpu(G..=64 * G - 1), 4);
    let e = p.lease(LeaseId(1), 1).expect_err("no space given");
    assert!(matches!(e, DmaError::Config { .. }), "{e}");
    let space = Arc::new(Space::default());
    let map: Arc<dyn DeviceMap> = space.clone();
    let l = p.lease_into(LeaseId(2), 3, Some(&map)).expect("lease");
    assert_eq!(l.addr, Some(DeviceAddr::GpuVa(GpuVa(G))));
    assert_eq!(*space.mapped.lock().expect("lock"), [G, 2 * G, 3 * G]);
    p.release(LeaseId(2)).expect("release");
    assert!(
        space.mapped.lock().expect("lock").is_empty(),
        "unmapped at release"
    );
}

#[test]
fn a_failed_gpu_map_rolls_back_and_a_failed_unmap_quarantines() {
    let p = pool(PoolMode::Gpu(G..=64 * G - 1), 4);
    let space = Arc::new(Space::default());
    let map: Arc<dyn DeviceMap> = space.clone();
    *space.fail_map_at.lock().expect("lock") = Some(1);
    let e = p
        .lease_into(LeaseId(1), 2, Some(&map))
        .expect_err("second block fails");
    assert!(matches!(e, DmaError::DeviceMap { .. }), "{e}");
    assert!(
        space.mapped.lock().expect("lock").is_empty(),
        "the first rolled back"
    );
    assert_eq!(p.status().free_blocks, 4, "the blocks went back");
    *space.fail_map_at.lock().expect("lock") = None;
    p.lease_into(LeaseId(2), 1, Some(&map)).expect("lease");
    space
        .fail_unmap
        .store(true, std::sync::atomic::Ordering::Relaxed);
    p.release(LeaseId(2))
        .expect("release succeeds for the client");
    assert!(p.wait_pinned(Duration::from_secs(10)));
    assert_eq!(
        p.status().quarantined_blocks,
        1,
        "still reachable: never lent again"
    );
}

#[test]
fn an_alias_maps_a_lease_page_a_second_time_and_goes_before_the_lease() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu.clone()), 2);
    let lent = p.lease(LeaseId(1), 1).expect("lease");
    let Some(DeviceAddr::Iova(base)) = lent.addr else {
        panic!("an IOVA")
    };
    let window = p.reserve_window(G).expect("window");
    assert_ne!(window, base);
    p.alias(LeaseId(1), 0x3000, Iova(window.0 + 0x5000))
        .expect("alias");
    let direct = iommu.translate(Iova(base.0 + 0x3008)).expect("lease page");
    let aliased = iommu
        .translate(Iova(window.0 + 0x5008))
        .expect("alias page");
    assert_eq!(direct, aliased, "both IOVAs reach the same byte");
    let e = p.free_window(window, G).expect_err("still aliased");
    assert!(matches!(e, DmaError::BadAlias { .. }), "{e}");
    p.release(LeaseId(1)).expect("release");
    let calls = iommu.calls();
    let unmaps: Vec<_> = calls
        .iter()
        .filter_map(|c| match c {
            IommuCall::Unmap { iova, len } => Some((*iova, *len)),
            IommuCall::Map { .. } => None,
        })
        .collect();
    assert_eq!(
        unmaps,
        [(Iova(window.0 + 0x5000), 0x1000), (base, G)],
        "the alias goes first"
    );
    p.free_window(window, G).expect("empty now");
}

#[test]
fn aliases_must_be_whole_pages_of_a_lease_and_each_iova_is_aliased_once() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu), 2);
    p.lease(LeaseId(1), 1).expect("lease");
    let w = p.reserve_window(G).expect("window");
    let bad = |r: Result<(), DmaError>| matches!(r, Err(DmaError::BadAlias { .. }));
    assert!(bad(p.alias(LeaseId(1), 0x10, w)));
    assert!(bad(p.alias(LeaseId(1), 0, Iova(w.0 + 8))));
    assert!(matches!(
        p.alias(LeaseId(1), G, w),
        Err(DmaError::OutOfLease { .. })
    ));
    assert!(matches!(
        p.alias(LeaseId(9), 0, w),
        Err(DmaError::UnknownLease { .. })
    ));
    p.alias(LeaseId(1), 0, w).expect("alias");
    assert!(bad(p.alias(LeaseId(1), 0x1000, w)));
    p.unalias(w).expect("unalias");
    assert!(bad(p.unalias(w)));
}

#[test]
fn a_lease_whose_alias_cannot_be_unmapped_is_kept_out_of_use() {
    let iommu = Arc::new(FakeIommu::typical());
    let p = pool(PoolMode::Vfio(iommu.clone()), 2);
    p.lease(LeaseId(1), 1).expect("lease");
    let w = p.reserve_window(G).expect("window");
    p.alias(LeaseId(1), 0, w).expect("alias");
    iommu.fail_next_unmap(libc::EIO);
    p.release(LeaseId(1)).expect("released from the session");
    assert_eq!(p.status().quarantined_blocks, 1);
}

#[test]
fn host_pools_have_no_iova_to_reserve_or_alias() {
    let p = pool(PoolMode::Host, 1);
    assert!(matches!(
        p.reserve_window(G),
        Err(DmaError::BadAlias { .. })
    ));
}
