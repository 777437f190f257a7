//! The channel path's state machine against `FakeRm`: creation order, teardown in
//! reverse (descheduling first), a failure at every step freeing what came before,
//! and typed refusals.

use super::*;
use crate::sys::nvstatus::NvStatus;

/// Opens a GPU, 2 MiB of host memory, a group and a 1024-entry copy channel, then
/// drops them in reverse.
fn scenario(rm: &FakeRm) -> Result<(), NvrmError> {
    let gpu = Gpu::open(rm.clone(), None)?;
    let _mem = HostMem::new(&gpu, 2 << 20)?;
    let group = ChannelGroup::new(&gpu, GroupEngine::Graphics)?;
    let _ch = Channel::new(&group, Engine::Copy, 1024)?;
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
            Call::Uvm(UvmCall::RegisterGpu { .. }) => open.push("gpu"),
            Call::Uvm(UvmCall::UnregisterGpu { .. }) => assert_eq!(open.pop(), Some("gpu")),
            Call::Uvm(UvmCall::RegisterGpuVaspace { .. }) => open.push("vaspace"),
            Call::Uvm(UvmCall::UnregisterGpuVaspace { .. }) => {
                assert_eq!(open.pop(), Some("vaspace"));
            }
            Call::Uvm(UvmCall::RegisterChannel { .. }) => open.push("channel"),
            Call::Uvm(UvmCall::UnregisterChannel { .. }) => {
                assert_eq!(open.pop(), Some("channel"));
            }
            Call::Uvm(UvmCall::CreateExternalRange { .. }) => open.push("range"),
            Call::MapDma { .. } => open.push("dma"),
            // UVM_FREE comes first and ends the range; the RM unmap follows it.
            Call::Uvm(UvmCall::Free { .. }) => {
                let i = open.iter().rposition(|o| *o == "range").expect("a range");
                open.remove(i);
            }
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
    let uvm_at = |f: fn(&UvmCall) -> bool| position(&c, |x| matches!(x, Call::Uvm(u) if f(u)));
    let order = [
        position(&c, |x| matches!(x, Call::OpenDevice { minor: 0 })),
        class_at(r580::NV01_DEVICE_0),
        class_at(r580::NV20_SUBDEVICE_0),
        position(&c, |x| matches!(x, Call::ClassList { .. })),
        class_at(r580::HOPPER_USERMODE_A),
        position(&c, |x| matches!(x, Call::MapUsermode { .. })),
        uvm_at(|u| matches!(u, UvmCall::Initialize)),
        uvm_at(|u| matches!(u, UvmCall::MmInitialize)),
        uvm_at(|u| matches!(u, UvmCall::RegisterGpu { uuid } if *uuid == FAKE_UUID)),
        class_at(r580::FERMI_VASPACE_A),
        uvm_at(|u| matches!(u, UvmCall::RegisterGpuVaspace { .. })),
        class_at(r580::NV01_MEMORY_VIRTUAL),
    ];
    assert!(order.is_sorted(), "{c:#?}");
    assert_eq!(gpu.uuid(), FAKE_UUID);
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
    let unregister = position(&c, |x| {
        matches!(x, Call::Uvm(UvmCall::UnregisterChannel { .. }))
    });
    let first_free = position(&c, |x| matches!(x, Call::Free { .. }));
    assert!(
        on < off && off < unregister && unregister < first_free,
        "{c:#?}"
    );
    assert_balanced(&c);
}

#[test]
fn host_memory_is_freed_uvm_first_then_unmapped_then_freed() {
    let rm = FakeRm::new();
    let gpu = Gpu::open(rm.clone(), None).expect("open");
    let before = rm.calls().len();
    let mem = HostMem::new(&gpu, 5000).expect("host memory");
    assert_eq!(mem.len(), 8192, "rounded up to pages");
    assert!(mem.gpu_va() >= VA_WINDOW_BASE && mem.gpu_va() + mem.len() <= 1 << 40);
    let (h, va) = (mem.handle(), mem.gpu_va());
    drop(mem);
    let c = &rm.calls()[before..];
    let tail: Vec<&Call> = c.iter().skip(4).collect();
    assert_eq!(
        tail,
        [
            &Call::Uvm(UvmCall::Free {
                base: va,
                length: 8192
            }),
            &Call::UnmapDma {
                h_memory: h,
                dma_offset: va
            },
            &Call::Free {
                parent: gpu.device(),
                object: h
            },
        ]
    );
}

#[test]
fn a_failure_at_every_step_frees_what_was_made_before_it() {
    let full = FakeRm::new();
    scenario(&full).expect("scenario");
    let made = full
        .calls()
        .iter()
        .position(|c| matches!(c, Call::Control { cmd, .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
        .expect("scheduled")
        + 1;
    for k in 0..made {
        let rm = FakeRm::new();
        rm.fail_at(k, NvStatus::InsufficientResources);
        let r = scenario(&rm);
        let mut calls = rm.calls();
        // UVM_MM_INITIALIZE's refusal is tolerated; every other step's is an error.
        if matches!(calls[k], Call::Uvm(UvmCall::MmInitialize)) {
            r.expect("MM_INITIALIZE refused is not fatal");
        } else {
            let e = r.expect_err("the injected failure");
            assert_eq!(
                e.status(),
                Some(NvStatus::InsufficientResources),
                "step {k}: {e}"
            );
        }
        // The failed call made nothing.
        calls.remove(k);
        assert_balanced(&calls);
    }
}

#[test]
fn a_gpu_without_a_hopper_class_is_refused_naming_it() {
    let rm = FakeRm::new();
    rm.set_classes(vec![r580::HOPPER_USERMODE_A, r580::HOPPER_CHANNEL_GPFIFO_A]);
    let e = Gpu::open(rm.clone(), None).expect_err("no compute or copy class");
    assert!(matches!(&e, NvrmError::MissingClasses { missing } if missing.len() == 2));
    assert_eq!(
        e.to_string(),
        "the GPU lacks the Hopper classes rig needs: HOPPER_COMPUTE_A (0xcbc0), \
         HOPPER_DMA_COPY_A (0xc8b5)"
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
    let gpu = Gpu::open(rm.clone(), None).expect("open");
    let group = ChannelGroup::new(&gpu, GroupEngine::Graphics).expect("group");
    let ch = Channel::new(&group, Engine::Compute, 2).expect("channel");
    ch.gpfifo()
        .mapping()
        .write_u32(ch.userd_offset() + USERD_GP_PUT, 1)
        .expect("GP_PUT");
    ch.ring_doorbell();
    let e = ch.close().expect_err("GP_GET never moves");
    assert!(matches!(e, NvrmError::Drain { get: 0, put: 1, .. }), "{e}");
    assert!(rm.calls().contains(&Call::Doorbell { token: FAKE_TOKEN }));
    drop(group);
    drop(gpu);
    assert_balanced(&rm.calls());
}

#[test]
fn ring_sizes_must_be_powers_of_two_and_a_group_runs_while_any_channel_lives() {
    let rm = FakeRm::new();
    let gpu = Gpu::open(rm.clone(), None).expect("open");
    let group = ChannelGroup::new(&gpu, GroupEngine::Copy(2)).expect("group");
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
