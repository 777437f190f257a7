//! The books of lent GPU memory against `FakeRm`: sizes, quotas per uid and per GPU
//! and their refunds, ids that only their session may name, reclaim, the RM's refusal
//! as a typed error, and CPU-view memory kept for its uid.

use std::sync::Arc;

use rig_model::addr::layout::{GPU_MEMORY_BASE, VA_END};
use rig_sys::scm::PeerCred;

use super::*;
use crate::nvrm::{Call, FakeRm, layout::r580};

const PAGE: u64 = GPU_PAGE;

struct Fixture {
    rm: FakeRm,
    lender: Lender<FakeRm>,
    gpu: Arc<Gpu<FakeRm>>,
}

fn fixture(quota: Quota) -> Fixture {
    let rm = FakeRm::new();
    let gpu = Arc::new(Gpu::open(rm.clone(), None).expect("fake GPU"));
    let lender = Lender::new(Arc::clone(&gpu), "0000:00:06.0".into(), quota, 0);
    Fixture { rm, lender, gpu }
}

fn peer(uid: u32) -> PeerCred {
    PeerCred {
        uid,
        gid: uid,
        pid: 100 + i32::try_from(uid).unwrap_or(0),
    }
}

fn space(f: &Fixture) -> Arc<AddressSpace<FakeRm>> {
    Arc::new(AddressSpace::new(&f.gpu).expect("space"))
}

fn plain(bytes: u64) -> GpuMemRequest {
    GpuMemRequest {
        bytes,
        cpu_view: false,
    }
}

fn quota(per_uid_pages: u64, per_gpu_pages: u64) -> Quota {
    Quota {
        per_uid_bytes: per_uid_pages * PAGE,
        per_gpu_bytes: per_gpu_pages * PAGE,
    }
}

#[test]
fn an_allocation_is_whole_pages_of_2_mib_pages_mapped_in_the_sessions_range() {
    let f = fixture(quota(8, 8));
    let sp = space(&f);
    let before = f.rm.calls().len();

    let m = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, plain(3 * PAGE))
        .expect("alloc");

    assert!(m.gpu_va.is_aligned(PAGE), "{}", m.gpu_va);
    assert!(m.gpu_va >= GPU_MEMORY_BASE && m.gpu_va.get() + m.bytes <= VA_END.get());
    assert!(m.cpu_view.is_none());
    assert_eq!(f.rm.vidmem_in_use(), 3 * PAGE);
    let c = &f.rm.calls()[before..];
    assert!(
        matches!(c, [
            Call::Alloc { class: r580::NV01_MEMORY_LOCAL_USER, handle, .. },
            Call::MapDma { h_memory, dma_offset, .. },
        ] if handle == h_memory && *dma_offset == m.gpu_va.get()),
        "one allocation, one map, no CPU window: {c:#?}"
    );
}

#[test]
fn zero_partial_pages_and_sizes_no_quota_can_hold_are_refused_before_any_rm_call() {
    let f = fixture(quota(4, 6));
    let sp = space(&f);
    let before = f.rm.calls().len();
    let s = SessionId(1);
    let ask = |bytes| f.lender.alloc(s, peer(1000), &sp, plain(bytes));

    assert!(matches!(ask(0), Err(GpuMemError::ZeroSize)));
    assert!(matches!(
        ask(PAGE + 4096),
        Err(GpuMemError::Misaligned { .. })
    ));
    assert!(matches!(
        ask(5 * PAGE),
        Err(GpuMemError::Oversized {
            whom: "one uid",
            ..
        })
    ));
    assert!(matches!(
        ask(u64::MAX - 4095),
        Err(GpuMemError::Misaligned { .. })
    ));
    assert_eq!(f.rm.calls().len(), before, "no RM call");
}

#[test]
fn quotas_hold_per_uid_and_per_gpu_and_a_free_gives_its_bytes_back() {
    let f = fixture(quota(4, 6));
    let sp = space(&f);
    let (a, b) = (SessionId(1), SessionId(2));
    let first = f
        .lender
        .alloc(a, peer(1000), &sp, plain(4 * PAGE))
        .expect("uid 1000 to its quota");
    let e = f
        .lender
        .alloc(b, peer(1000), &sp, plain(PAGE))
        .expect_err("max + 1, in another session of the same uid");
    assert!(
        matches!(&e, GpuMemError::Quota { whom, held, .. } if whom == "uid 1000" && *held == 4 * PAGE),
        "{e}"
    );
    assert_eq!(e.class().reason, Reason::Quota);
    f.lender
        .alloc(b, peer(1001), &sp, plain(2 * PAGE))
        .expect("another uid, to the GPU's quota");
    let e = f
        .lender
        .alloc(b, peer(1002), &sp, plain(PAGE))
        .expect_err("the GPU is full");
    assert!(
        matches!(&e, GpuMemError::Quota { whom, .. } if whom == "the GPU"),
        "{e}"
    );
    assert_eq!(f.lender.left_for(1000), 0);

    f.lender.free(a, first.id).expect("free");
    f.lender.settle();

    assert_eq!(f.lender.left_for(1000), 4 * PAGE);
    f.lender
        .alloc(b, peer(1000), &sp, plain(PAGE))
        .expect("room again");
    assert_eq!(f.rm.vidmem_in_use(), 3 * PAGE);
}

#[test]
fn an_id_is_known_only_in_its_own_session() {
    let f = fixture(quota(8, 8));
    let sp = space(&f);
    let m = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, plain(PAGE))
        .expect("alloc");

    let e = f
        .lender
        .free(SessionId(2), m.id)
        .expect_err("another session's");
    assert!(matches!(e, GpuMemError::UnknownId { id } if id == m.id));
    assert_eq!(e.class().reason, Reason::UnknownGpuMemory);
    f.lender.free(SessionId(1), m.id).expect("its own");
    let e = f.lender.free(SessionId(1), m.id).expect_err("twice");
    assert!(matches!(e, GpuMemError::UnknownId { .. }));
    f.lender.settle();
    assert_eq!(
        f.rm.vidmem_in_use(),
        PAGE,
        "kept for the session's next lease"
    );
    f.lender.end(SessionId(1));
    assert_eq!(f.rm.vidmem_in_use(), 0);
}

#[test]
fn a_sessions_end_unmaps_then_frees_everything_it_held_and_no_one_elses() {
    let f = fixture(quota(8, 8));
    let sp = space(&f);
    let other = space(&f);
    let kept = f
        .lender
        .alloc(SessionId(2), peer(1001), &other, plain(PAGE))
        .expect("the other session's");
    for _ in 0..3 {
        f.lender
            .alloc(SessionId(1), peer(1000), &sp, plain(PAGE))
            .expect("alloc");
    }
    let before = f.rm.calls().len();

    assert_eq!(f.lender.end(SessionId(1)), 3);

    let c = &f.rm.calls()[before..];
    let unmapped: Vec<usize> = (0..c.len())
        .filter(|&i| matches!(c[i], Call::UnmapDma { .. }))
        .collect();
    let freed: Vec<usize> = (0..c.len())
        .filter(|&i| matches!(c[i], Call::Free { .. }))
        .collect();
    assert_eq!((unmapped.len(), freed.len()), (3, 3), "{c:#?}");
    assert!(
        unmapped.iter().zip(&freed).all(|(u, f)| u < f),
        "each unmapped before it is freed: {c:#?}"
    );
    assert_eq!(f.rm.vidmem_in_use(), PAGE, "the other session's stays");
    assert_eq!(f.lender.end(SessionId(1)), 0, "once");
    let (uses, totals) = f.lender.status(None);
    assert_eq!(uses.len(), 1);
    assert_eq!((uses[0].session, uses[0].bytes), (SessionId(2), PAGE));
    assert_eq!(totals.lent_bytes, PAGE);
    f.lender.free(SessionId(2), kept.id).expect("free");
}

#[test]
fn the_rms_refusal_is_exhausted_and_charges_nothing() {
    let f = fixture(quota(8, 8));
    f.rm.set_vidmem_capacity(2 * PAGE);
    let sp = space(&f);

    let e = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, plain(3 * PAGE))
        .expect_err("the GPU has 4 MiB");

    assert!(
        matches!(e, GpuMemError::Exhausted { bytes, .. } if bytes == 3 * PAGE),
        "{e}"
    );
    assert_eq!(e.class().reason, Reason::Exhausted);
    assert_eq!(f.lender.left_for(1000), 8 * PAGE);
    assert_eq!(f.rm.live_maps(), 0);
}

#[test]
fn a_failed_map_frees_the_memory_and_the_charge() {
    let f = fixture(quota(8, 8));
    let sp = space(&f);
    // The allocation is the next call, its map the one after.
    f.rm.fail_at(1, crate::sys::nvstatus::NvStatus::InsufficientResources);

    let e = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, plain(PAGE))
        .expect_err("the map fails");

    assert!(matches!(e, GpuMemError::Rm { .. }), "{e}");
    assert_eq!(f.rm.vidmem_in_use(), 0);
    assert_eq!(f.lender.left_for(1000), 8 * PAGE);
}

#[test]
fn cpu_view_memory_is_kept_charged_and_lent_again_to_its_uid_only() {
    let f = fixture(quota(4, 8));
    let sp = space(&f);
    let view = GpuMemRequest {
        bytes: PAGE,
        cpu_view: true,
    };
    let m = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, view)
        .expect("a CPU view");
    assert!(m.cpu_view.is_some(), "the window's file");
    assert!(
        f.rm.calls()
            .iter()
            .any(|c| matches!(c, Call::MapWindow { len, .. } if *len as u64 == PAGE)),
        "mapped through BAR1"
    );
    f.lender.end(SessionId(1));
    assert_eq!(f.rm.vidmem_in_use(), PAGE, "kept after its session");
    assert_eq!(f.lender.left_for(1000), 3 * PAGE, "and still charged");
    assert_eq!(f.lender.status(None).1.kept_bytes, PAGE);

    let other = f
        .lender
        .alloc(SessionId(2), peer(1001), &sp, view)
        .expect("another uid's");
    let again = f
        .lender
        .alloc(SessionId(3), peer(1000), &sp, view)
        .expect("the same uid's again");

    assert_eq!(f.rm.vidmem_in_use(), 2 * PAGE, "uid 1000's was lent again");
    assert_eq!(f.lender.left_for(1000), 3 * PAGE, "at no new charge");
    assert_eq!(f.lender.status(None).1.kept_bytes, 0);
    drop((other, again));
}

fn with_spares(quota: Quota, spares: u32) -> Fixture {
    let rm = FakeRm::new();
    let gpu = Arc::new(Gpu::open(rm.clone(), None).expect("fake GPU"));
    let lender = Lender::new(Arc::clone(&gpu), "0000:00:06.0".into(), quota, spares);
    lender.settle();
    Fixture { rm, lender, gpu }
}

/// The handles of NV01_MEMORY_LOCAL_USER allocations among `calls`.
fn vidmem_handles(calls: &[Call]) -> Vec<u32> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::Alloc {
                class: r580::NV01_MEMORY_LOCAL_USER,
                handle,
                ..
            } => Some(*handle),
            _ => None,
        })
        .collect()
}

/// The memory handle and VA of the first MapDma among `calls`.
fn first_map(calls: &[Call]) -> Option<(u32, u64)> {
    calls.iter().find_map(|c| match c {
        Call::MapDma {
            h_memory,
            dma_offset,
            ..
        } => Some((*h_memory, *dma_offset)),
        _ => None,
    })
}

#[test]
fn a_one_page_lease_is_a_spare_mapped_and_the_spares_are_made_again() {
    let f = with_spares(quota(8, 8), 2);
    assert_eq!(f.rm.vidmem_in_use(), 2 * PAGE, "two spares made at start");
    assert_eq!(f.lender.status(None).1.spare_bytes, 2 * PAGE);
    let (uses, _) = f.lender.status(None);
    assert!(uses.is_empty(), "spares are no one's");
    assert_eq!(f.lender.left_for(1000), 8 * PAGE, "and charged to no one");
    let spares = vidmem_handles(&f.rm.calls());
    let sp = space(&f);
    let before = f.rm.calls().len();

    let m = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, plain(PAGE))
        .expect("alloc");

    // The map is the lease's own call; a refill may run beside it on the lender's thread.
    let c = f.rm.calls()[before..].to_vec();
    let mapped = first_map(&c);
    assert!(
        matches!(mapped, Some((h, va)) if spares.contains(&h) && va == m.gpu_va.get()),
        "a spare mapped at the lent VA: {c:#?}"
    );
    assert_eq!(f.lender.left_for(1000), 7 * PAGE, "charged once lent");
    f.lender.settle();
    assert_eq!(f.lender.status(None).1.spare_bytes, 2 * PAGE, "made again");
    assert_eq!(f.rm.vidmem_in_use(), 3 * PAGE);

    // Larger leases and CPU views allocate their own.
    let before = f.rm.calls().len();
    f.lender
        .alloc(SessionId(1), peer(1000), &sp, plain(2 * PAGE))
        .expect("two pages");
    let own = vidmem_handles(&f.rm.calls()[before..]);
    assert_eq!(own.len(), 1, "its own allocation");
    assert_eq!(f.lender.status(None).1.spare_bytes, 2 * PAGE);

    drop(sp);
    let rm = f.rm.clone();
    f.lender.end(SessionId(1));
    drop(f);
    assert_eq!(rm.vidmem_in_use(), 0, "spares freed with the lender");
    assert_eq!(rm.live_maps(), 0);
}

#[test]
fn a_release_is_off_the_books_at_once_and_unmapped_then_freed_behind_it() {
    let f = with_spares(quota(2, 8), 0);
    let sp = space(&f);
    let a = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp, plain(2 * PAGE))
        .expect("the uid's whole quota");
    let before = f.rm.calls().len();

    f.lender.free(SessionId(1), a.id).expect("release");

    assert!(
        f.lender.status(None).0.iter().all(|u| u.bytes == 0),
        "no longer the session's"
    );
    f.lender
        .alloc(SessionId(1), peer(1000), &sp, plain(2 * PAGE))
        .expect("the quota is free again at once");
    f.lender.settle();
    let c = &f.rm.calls()[before..];
    let unmap = c.iter().position(
        |c| matches!(c, Call::UnmapDma { dma_offset, .. } if *dma_offset == a.gpu_va.get()),
    );
    let free = c.iter().position(|c| matches!(c, Call::Free { .. }));
    assert!(
        matches!((unmap, free), (Some(u), Some(f)) if u < f),
        "unmapped, then freed: {c:#?}"
    );
    assert_eq!(f.rm.vidmem_in_use(), 2 * PAGE, "only the new lease");
    assert_eq!(f.rm.live_maps(), 1);
}

#[test]
fn a_sessions_end_waits_for_what_it_released_before() {
    let f = with_spares(quota(8, 8), 0);
    let sp = space(&f);
    let ids: Vec<GpuMemId> = (0..4)
        .map(|_| {
            f.lender
                .alloc(SessionId(1), peer(1000), &sp, plain(PAGE))
                .expect("alloc")
                .id
        })
        .collect();
    for id in &ids[..3] {
        f.lender.free(SessionId(1), *id).expect("release");
    }

    assert_eq!(f.lender.end(SessionId(1)), 1);

    assert_eq!(
        f.rm.vidmem_in_use(),
        0,
        "released and held alike, before it returns"
    );
    assert_eq!(f.rm.live_maps(), 0);
}

#[test]
fn a_released_page_is_kept_unmapped_for_its_own_session_only_and_freed_with_it() {
    let f = with_spares(quota(8, 8), 1);
    let (sp1, sp2) = (space(&f), space(&f));
    let a = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp1, plain(PAGE))
        .expect("a spare, mapped");
    f.lender.free(SessionId(1), a.id).expect("release");
    f.lender.settle();
    let c = f.rm.calls();
    assert!(
        c.iter().any(
            |c| matches!(c, Call::UnmapDma { dma_offset, .. } if *dma_offset == a.gpu_va.get())
        ),
        "unmapped from the session's space"
    );
    assert!(
        !c.iter().any(|c| matches!(c, Call::Free { .. })),
        "not freed: {c:#?}"
    );
    assert_eq!(f.lender.left_for(1000), 8 * PAGE, "charged to no one");
    assert_eq!(
        f.lender.status(None).1.spare_bytes,
        2 * PAGE,
        "its page and the GPU's spare"
    );

    // Another session (of the same uid) gets the GPU's spare, not the page.
    let before = f.rm.calls().len();
    let other = f
        .lender
        .alloc(SessionId(2), peer(1000), &sp2, plain(PAGE))
        .expect("other");
    let (first, _) = first_map(&c).expect("the first map");
    assert_ne!(
        first_map(&f.rm.calls()[before..]).map(|(h, _)| h),
        Some(first)
    );
    f.lender.settle();

    // Its own session maps it again: one call, no allocation.
    let before = f.rm.calls().len();
    let again = f
        .lender
        .alloc(SessionId(1), peer(1000), &sp1, plain(PAGE))
        .expect("again");
    let c = f.rm.calls()[before..].to_vec();
    assert!(
        matches!(c.as_slice(), [Call::MapDma { h_memory, dma_offset, .. }]
            if *h_memory == first && *dma_offset == again.gpu_va.get()),
        "the kept page mapped, nothing else: {c:#?}"
    );
    assert_eq!(f.lender.left_for(1000), 6 * PAGE, "both leases charged");

    // Larger leases are freed, not kept.
    let big = f
        .lender
        .alloc(SessionId(2), peer(1000), &sp2, plain(2 * PAGE))
        .expect("big");
    let in_use = f.rm.vidmem_in_use();
    f.lender.free(SessionId(2), big.id).expect("release big");
    f.lender.settle();
    assert_eq!(f.rm.vidmem_in_use(), in_use - 2 * PAGE, "freed");

    // A session's end frees the page it kept, as what it held.
    f.lender.free(SessionId(1), again.id).expect("release");
    f.lender.settle();
    assert_eq!(f.lender.end(SessionId(1)), 0);
    f.lender.free(SessionId(2), other.id).expect("release");
    assert_eq!(f.lender.end(SessionId(2)), 0);
    drop((sp1, sp2));
    assert_eq!(f.rm.live_maps(), 0);
    assert_eq!(
        f.rm.vidmem_in_use(),
        f.lender.status(None).1.spare_bytes,
        "only the GPU's spares are left"
    );
}
