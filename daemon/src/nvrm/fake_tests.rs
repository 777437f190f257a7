//! The channel path's state machine against `FakeRm`: creation order, teardown in
//! reverse (descheduling first), a failure at every step freeing what came before,
//! one address space per client, and typed refusals.

use std::sync::Arc;

use super::*;
use crate::{dma::DeviceMap, sys::nvstatus::NvStatus};
use rig_nv::class::clc661::HOPPER_USERMODE_A;

type Opened = (Arc<Gpu<FakeRm>>, Arc<AddressSpace<FakeRm>>);

/// A GPU and one client's address space on it.
fn open(rm: &FakeRm) -> Result<Opened, NvrmError> {
    let gpu = Arc::new(Gpu::open(rm.clone(), None)?);
    let space = Arc::new(AddressSpace::new(&gpu)?);
    Ok((gpu, space))
}

/// Opens a GPU, an address space, 2 MiB of host memory, a group and a 1024-entry
/// copy channel, then drops them in reverse.
fn scenario(rm: &FakeRm) -> Result<(), NvrmError> {
    let (_gpu, space) = open(rm)?;
    let _mem = HostMem::new(&space, 2 << 20)?;
    let group = Arc::new(ChannelGroup::new(&space, GroupEngine::Graphics)?);
    let _ch = Channel::new(&group, Engine::Copy, 1024)?;
    Ok(())
}

/// As [`scenario`], with the copy channel's ring and USERD in GPU memory and 64 KiB
/// of GPU memory for commands beside it.
fn scenario_in_gpu_memory(rm: &FakeRm) -> Result<(), NvrmError> {
    let (_gpu, space) = open(rm)?;
    let cmd = Arc::new(DeviceMem::new(
        space.gpu(),
        64 << 10,
        Caching::WriteCombined,
    )?);
    let _cmd_view = DeviceView::map(&space, cmd)?;
    let group = Arc::new(ChannelGroup::new(&space, GroupEngine::Graphics)?);
    let _ch = Channel::placed(
        &group,
        Engine::Copy,
        1024,
        Placement::Device(Caching::WriteCombined),
    )?;
    Ok(())
}

fn position(calls: &[Call], want: impl Fn(&Call) -> bool) -> usize {
    calls.iter().position(want).expect("the call was made")
}

/// Every object made was freed, children before parents (reverse order), and every
/// registration, range, RM map and usermode mapping was undone.
fn assert_balanced(calls: &[Call]) {
    let mut live: Vec<NvHandle> = Vec::new();
    let mut open = Vec::new();
    for c in calls {
        match c {
            Call::Alloc { handle, .. } | Call::AllocOsDescriptor { handle, .. } => {
                live.push(*handle);
            }
            Call::Free { object, .. } => {
                assert_eq!(
                    live.pop(),
                    Some(*object),
                    "frees run in reverse: {calls:#?}"
                );
            }
            Call::MapUsermode { .. } => open.push("usermode"),
            Call::UnmapUsermode => assert_eq!(open.pop(), Some("usermode")),
            Call::MapWindow { .. } => open.push("window"),
            Call::UnmapWindow { .. } => assert_eq!(open.pop(), Some("window")),
            Call::MapDma { .. } => open.push("dma"),
            Call::UnmapDma { .. } => assert_eq!(open.pop(), Some("dma")),
            _ => {}
        }
    }
    assert!(live.is_empty(), "objects left: {live:x?}");
    assert!(open.is_empty(), "left open: {open:?}");
}

#[test]
fn a_gpu_opens_in_the_reference_order() {
    let rm = FakeRm::new();
    let gpu = Gpu::open(rm.clone(), Some("0000:00:06.0")).expect("open");
    let c = rm.calls();
    let class_at = |class| {
        position(
            &c,
            |x| matches!(x, Call::Alloc { class: k, .. } if *k == class),
        )
    };
    let order = [
        position(&c, |x| matches!(x, Call::OpenDevice { minor: 0 })),
        class_at(r580::NV01_DEVICE_0),
        class_at(r580::NV20_SUBDEVICE_0),
        position(&c, |x| matches!(x, Call::ClassList { .. })),
        class_at(HOPPER_USERMODE_A),
        position(&c, |x| matches!(x, Call::MapUsermode { .. })),
        position(
            &c,
            |x| matches!(x, Call::Control { cmd, .. } if *cmd == r580::NV2080_CTRL_CMD_GPU_GET_GID_INFO),
        ),
    ];
    assert!(order.is_sorted(), "{c:#?}");
    assert_eq!(gpu.uuid(), FAKE_UUID);
    let gpu = Arc::new(gpu);
    let before = rm.calls().len();
    let space = AddressSpace::new(&gpu).expect("space");
    let c = rm.calls();
    assert!(
        matches!(&c[before..], [
            Call::Alloc { class: r580::FERMI_VASPACE_A, handle: vas, .. },
            Call::Alloc { class: r580::NV01_MEMORY_VIRTUAL, .. },
        ] if *vas == space.handle()),
        "an RM-owned space and its DMA object, nothing else: {:#?}",
        &c[before..]
    );
    drop(space);
    drop(gpu);
    assert_balanced(&rm.calls());
}

#[test]
fn a_channel_is_descheduled_and_drained_before_anything_is_freed() {
    let rm = FakeRm::new();
    scenario(&rm).expect("scenario");
    let c = rm.calls();
    let sched = |on: bool| {
        position(
            &c,
            |x| matches!(x, Call::Control { cmd, .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE),
        ) + usize::from(!on)
    };
    let on = sched(true);
    let off = on
        + 1
        + c[on + 1..]
            .iter()
            .position(|x| matches!(x, Call::Control { cmd, .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
            .expect("descheduled");
    let first_free = position(&c, |x| matches!(x, Call::Free { .. }));
    assert!(on < off && off < first_free, "{c:#?}");
    assert_balanced(&c);
}

#[test]
fn host_memory_is_unmapped_then_freed() {
    let rm = FakeRm::new();
    let (gpu, space) = open(&rm).expect("open");
    let before = rm.calls().len();
    let mem = HostMem::new(&space, 5000).expect("host memory");
    assert_eq!(mem.len(), 8192, "rounded up to pages");
    assert!(mem.gpu_va() >= OWN_BASE && mem.gpu_va() + mem.len() <= LEASE_BASE);
    let (h, va) = (mem.handle(), mem.gpu_va());
    drop(mem);
    let c = &rm.calls()[before..];
    let h_dma = match c[1] {
        Call::MapDma { h_dma, .. } => h_dma,
        ref other => panic!("mapped second: {other:?}"),
    };
    assert_eq!(
        c[2..],
        [
            Call::UnmapDma {
                h_dma,
                h_memory: h,
                dma_offset: va
            },
            Call::Free {
                parent: gpu.device(),
                object: h
            },
        ]
    );
}

#[test]
fn a_gpu_reads_its_geometry_once_and_serves_without_it_when_the_rm_refuses() {
    let rm = FakeRm::new();
    let gpu = Gpu::open(rm.clone(), None).expect("open");
    let g = gpu.geometry().expect("geometry");
    assert_eq!(
        (g.sm_version, g.sms(), g.max_tpcs(), g.max_warps_per_sm),
        (0x900, 132, 72, 64)
    );
    assert_eq!(
        rm.calls()
            .iter()
            .filter(|c| matches!(c, Call::GrInfo { subdevice } if *subdevice == gpu.subdevice()))
            .count(),
        1
    );
    let refusing = FakeRm::new();
    let at = rm
        .calls()
        .iter()
        .position(|c| matches!(c, Call::GrInfo { .. }))
        .expect("asked");
    refusing.fail_at(at, NvStatus::NotSupported);
    let gpu = Gpu::open(refusing, None).expect("served all the same");
    assert_eq!(gpu.geometry(), None);
}

#[test]
fn the_clock_boost_is_set_to_max_for_cuda_and_cleared_on_the_subdevice() {
    let rm = FakeRm::new();
    let gpu = Gpu::open(rm.clone(), None).expect("open");
    gpu.perf_boost(true).expect("boost");
    gpu.perf_boost(false).expect("clear");
    let boosts: Vec<(NvHandle, Option<u8>)> = rm
        .calls()
        .iter()
        .filter_map(|c| match c {
            Call::Control { object, cmd, first } if *cmd == r580::NV2080_CTRL_CMD_PERF_BOOST => {
                Some((*object, *first))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        boosts,
        [(gpu.subdevice(), Some(0x52)), (gpu.subdevice(), Some(0x10))]
    );
}

#[test]
fn the_fake_refuses_overlapping_maps_and_maps_in_the_compute_windows() {
    let rm = FakeRm::new();
    let (gpu, space) = open(&rm).expect("open");
    let mem = Arc::new(DeviceMem::paged(&gpu, 2 << 20, Pages::Huge, None).expect("vidmem"));
    let mut undo = Vec::new();
    space
        .map_memory(mem.handle(), 2 << 20, LEASE_BASE, 0, &mut undo)
        .expect("first map");
    let e = space
        .map_memory(mem.handle(), 2 << 20, LEASE_BASE + 4096, 0, &mut undo)
        .expect_err("overlaps");
    assert_eq!(e.status(), Some(NvStatus::InvalidOffset));
    let shared = rig_model::addr::layout::SHARED_WINDOW.get();
    let e = space
        .map_memory(mem.handle(), 2 << 20, shared, 0, &mut undo)
        .expect_err("the shared window");
    assert_eq!(e.status(), Some(NvStatus::InvalidOffset));
    assert!(space.unwind(&mut undo).is_empty());
    assert_eq!(rm.live_maps(), 0);
}

#[test]
fn lent_gpu_memory_maps_in_its_own_range_on_2_mib_and_gives_its_va_back() {
    let rm = FakeRm::new();
    let (gpu, space) = open(&rm).expect("open");
    let free = space.gpu_memory_va_free();
    assert_eq!(free, VA_END - GPU_MEMORY_BASE);
    let mem = Arc::new(DeviceMem::paged(&gpu, 3 << 20, Pages::Huge, None).expect("vidmem"));
    assert_eq!(mem.len(), 4 << 20, "whole 2 MiB pages");
    let view =
        DeviceView::map_in(&space, Arc::clone(&mem), Pages::Huge, Region::GpuMemory).expect("view");
    let va = view.gpu_va();
    assert!(va >= GPU_MEMORY_BASE && va + mem.len() <= VA_END, "{va:#x}");
    assert_eq!(va % HUGE_PAGE, 0);
    assert_eq!(space.gpu_memory_va_free(), free - (4 << 20));
    view.close().expect("unmap");
    assert_eq!(space.gpu_memory_va_free(), free, "the VA is free again");
}

/// A 2 MiB sealed shmem block, mapped, as a lease's block would be.
fn two_mib_block() -> rig_sys::mman::Mapping {
    let f = rig_sys::memfd::Memfd::sealed(c"t", rig_sys::memfd::Backing::Shmem, 2 << 20)
        .expect("memfd");
    rig_sys::mman::Mapping::shared(&f, rig_sys::mman::Fill::Populate).expect("map")
}

/// The DMA object of each space: what its maps name as `h_dma`.
fn virtual_of(calls: &[Call], space: NvHandle) -> NvHandle {
    let i = position(
        calls,
        |c| matches!(c, Call::Alloc { handle, .. } if *handle == space),
    );
    match calls[i + 1] {
        Call::Alloc {
            class: r580::NV01_MEMORY_VIRTUAL,
            handle,
            ..
        } => handle,
        ref other => panic!("the DMA object follows its space: {other:?}"),
    }
}

#[test]
fn two_clients_get_two_spaces_and_each_lease_lands_only_in_its_own() {
    let rm = FakeRm::new();
    let (gpu, a) = open(&rm).expect("open");
    let b = Arc::new(AddressSpace::new(&gpu).expect("second space"));
    assert_ne!(a.handle(), b.handle());
    let block = two_mib_block();
    let va = LEASE_BASE + (4 << 20);
    assert!(a.va_range().contains(&va));
    a.map_block(va, &block).expect("map into a");
    let c = rm.calls();
    let (va_a, va_b) = (virtual_of(&c, a.handle()), virtual_of(&c, b.handle()));
    let maps: Vec<NvHandle> = c
        .iter()
        .filter_map(|x| match x {
            Call::MapDma { h_dma, .. } => Some(*h_dma),
            _ => None,
        })
        .collect();
    assert_eq!(
        maps,
        [va_a],
        "mapped in a's space only, never b's ({va_b:#x})"
    );
    assert_eq!(a.leased_blocks(), 1);
    // An unmap over a range that holds no block does nothing.
    b.unmap(va, 2 << 20).expect("nothing in b");
    assert_eq!(a.leased_blocks(), 1);
    a.unmap(LEASE_BASE, 64 << 20).expect("unmap a's range");
    assert_eq!(a.leased_blocks(), 0);
    drop(b);
    drop(a);
    drop(gpu);
    assert_balanced(&rm.calls());
}

#[test]
fn a_space_dropped_with_blocks_still_mapped_unmaps_them_first() {
    let rm = FakeRm::new();
    let (gpu, space) = open(&rm).expect("open");
    let block = two_mib_block();
    space.map_block(LEASE_BASE, &block).expect("map");
    drop(space);
    drop(gpu);
    assert_balanced(&rm.calls());
}

/// Runs `scenario` once whole, then once per call up to the group's scheduling with
/// that call failing: each run fails with the injected status and frees what it made.
/// The calls that may fail without failing the rest (the geometry's read, the group's
/// compute preemption and its read-back) are run with their failure too, and must not
/// fail the scenario.
fn sweep(scenario: fn(&FakeRm) -> Result<(), NvrmError>) {
    let full = FakeRm::new();
    scenario(&full).expect("scenario");
    let calls = full.calls();
    let made = calls
        .iter()
        .position(|c| matches!(c, Call::Control { cmd, .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
        .expect("scheduled")
        + 1;
    for k in 0..made {
        let rm = FakeRm::new();
        rm.fail_at(k, NvStatus::InsufficientResources);
        let optional = matches!(calls[k], Call::GrInfo { .. })
            || matches!(calls[k], Call::Control { cmd, .. } if cmd == r580::NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE || cmd == r580::NV2080_CTRL_CMD_GR_GET_CTXSW_MODES);
        if optional {
            scenario(&rm).expect("a GPU without its geometry still serves");
            assert_balanced(&rm.calls());
            continue;
        }
        let e = scenario(&rm).expect_err("the injected failure");
        assert_eq!(
            e.status(),
            Some(NvStatus::InsufficientResources),
            "step {k}: {e}"
        );
        // The failed call made nothing.
        let mut calls = rm.calls();
        calls.remove(k);
        assert_balanced(&calls);
    }
}

#[test]
fn a_failure_at_every_step_frees_what_was_made_before_it() {
    sweep(scenario);
}

#[test]
fn a_gpu_without_a_hopper_class_is_refused_naming_it() {
    let rm = FakeRm::new();
    rm.set_classes(vec![HOPPER_USERMODE_A, GENERATION.host]);
    let e = Gpu::open(rm.clone(), None).expect_err("no compute or copy class");
    assert!(matches!(&e, NvrmError::MissingClasses { missing } if missing.len() == 2));
    assert_eq!(
        e.to_string(),
        format!(
            "the GPU lacks the Hopper classes rig needs: HOPPER_COMPUTE_A ({:#06x}), \
             HOPPER_DMA_COPY_A ({:#06x})",
            GENERATION.compute, GENERATION.copy
        )
    );
    assert_balanced(&rm.calls());
}

#[test]
fn a_gpu_the_rm_does_not_drive_is_refused() {
    let e = Gpu::open(FakeRm::new(), Some("0000:41:00.0")).expect_err("no such card");
    assert_eq!(e.to_string(), "the RM drives no GPU 0000:41:00.0");
}

#[test]
fn a_channel_the_gpu_does_not_drain_times_out_and_is_still_freed() {
    let rm = FakeRm::new();
    let (gpu, space) = open(&rm).expect("open");
    let group = Arc::new(ChannelGroup::new(&space, GroupEngine::Graphics).expect("group"));
    let ch = Channel::new(&group, Engine::Compute, 2).expect("channel");
    ch.gpfifo()
        .host()
        .expect("Channel::new places the ring in host memory")
        .mapping()
        .write_u32(ch.userd_offset() + USERD_GP_PUT, 1)
        .expect("GP_PUT");
    ch.ring_doorbell();
    let e = ch.close().expect_err("GP_GET never moves");
    assert!(matches!(e, NvrmError::Drain { get: 0, put: 1, .. }), "{e}");
    assert!(rm.calls().contains(&Call::Doorbell { token: FAKE_TOKEN }));
    drop((group, space, gpu));
    assert_balanced(&rm.calls());
}

#[test]
fn ring_sizes_must_be_powers_of_two_and_a_group_runs_while_any_channel_lives() {
    let rm = FakeRm::new();
    let (_gpu, space) = open(&rm).expect("open");
    let group = Arc::new(ChannelGroup::new(&space, GroupEngine::Copy(2)).expect("group"));
    for bad in [0, 1, 3, 1000, (1 << 31) + 1, 1 << 32] {
        let e = Channel::new(&group, Engine::Copy, bad).expect_err("bad size");
        assert!(matches!(e, NvrmError::RingSize { entries } if entries == bad));
    }
    let before = rm.calls().len();
    let first = Channel::new(&group, Engine::Copy, 4).expect("first");
    let second = Channel::new(&group, Engine::Copy, 4).expect("second joins the group");
    let schedules = |from: usize| -> Vec<bool> {
        rm.calls()[from..]
            .iter()
            .filter_map(|c| match c {
                Call::Control { cmd, first, .. }
                    if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE =>
                {
                    Some(*first == Some(1))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        schedules(before),
        [true],
        "scheduled once, with the first channel"
    );
    let mid = rm.calls().len();
    drop(first);
    assert_eq!(
        schedules(mid),
        Vec::<bool>::new(),
        "still running the second"
    );
    drop(second);
    assert_eq!(schedules(mid), [false], "descheduled with the last channel");
    let third = Channel::new(&group, Engine::Copy, 4).expect("schedules the group again");
    assert_eq!(schedules(mid), [false, true]);
    drop(third);
}

#[test]
fn gpu_memory_is_mapped_for_the_cpu_then_each_space_and_unmapped_in_reverse() {
    let rm = FakeRm::new();
    scenario_in_gpu_memory(&rm).expect("scenario");
    let calls = rm.calls();
    assert_balanced(&calls);
    let vidmem: Vec<NvHandle> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Alloc { class, handle, .. } if *class == r580::NV01_MEMORY_LOCAL_USER => {
                Some(*handle)
            }
            _ => None,
        })
        .collect();
    assert_eq!(vidmem.len(), 2, "commands and the ring: {calls:#?}");
    for h in vidmem {
        let at = |want: &dyn Fn(&Call) -> bool| position(&calls, want);
        let alloc = at(&|c| matches!(c, Call::Alloc { handle, .. } if *handle == h));
        let cpu = at(
            &|c| matches!(c, Call::MapWindow { memory, caching: Caching::WriteCombined, .. } if *memory == h),
        );
        let gpu = at(&|c| matches!(c, Call::MapDma { h_memory, .. } if *h_memory == h));
        let gpu_off = at(&|c| matches!(c, Call::UnmapDma { h_memory, .. } if *h_memory == h));
        let cpu_off = at(&|c| matches!(c, Call::UnmapWindow { memory } if *memory == h));
        let free = at(&|c| matches!(c, Call::Free { object, .. } if *object == h));
        assert!(
            alloc < cpu && cpu < gpu && gpu < gpu_off && gpu_off < cpu_off && cpu_off < free,
            "memory {h:#x}: {calls:#?}"
        );
    }
    // The ring's memory is the channel's buffer and USERD, 1024 entries and USERD
    // long, mapped before the channel is made.
    let ring = calls
        .iter()
        .find_map(|c| match c {
            Call::MapWindow {
                memory,
                len: 0x3000,
                ..
            } => Some(*memory),
            _ => None,
        })
        .expect("the ring's window");
    let ring_mapped = position(
        &calls,
        |c| matches!(c, Call::MapDma { h_memory, .. } if *h_memory == ring),
    );
    let channel = position(
        &calls,
        |c| matches!(c, Call::Alloc { class, .. } if *class == GENERATION.host),
    );
    assert!(ring_mapped < channel, "{calls:#?}");
}

#[test]
fn a_failure_at_every_step_in_gpu_memory_frees_what_was_made_before_it() {
    sweep(scenario_in_gpu_memory);
}

#[test]
fn a_client_the_rm_counts_as_privileged_serves_nothing_and_frees_what_it_made() {
    let rm = FakeRm::new();
    rm.set_privileged(0x5);
    let e = Gpu::open(rm.clone(), None).expect_err("privileged");
    assert!(matches!(e, NvrmError::Privileged { flags: 0x5 }), "{e}");
    assert!(e.to_string().contains("would run privileged"), "{e}");
    assert_balanced(&rm.calls());
}
