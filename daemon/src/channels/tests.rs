//! Channel bookkeeping against `FakeRm`: one space and one group per session, limits
//! and bad input refused before any RM call, what a client receives, reclaim order,
//! and the notifier watch.

use std::os::fd::OwnedFd;

use rig_sys::{
    memfd::SealedMemfd,
    mman::{DeviceMapping, Fill, Mapping, ReadMapping},
};

use super::*;
use crate::nvrm::{Call, FAKE_TOKEN, FakeRm, USERD_GP_PUT, layout::r580};

fn peer(uid: u32, pid: i32) -> PeerCred {
    PeerCred { uid, gid: uid, pid }
}

fn served(limits: Limits) -> (FakeRm, Served<FakeRm>) {
    let rm = FakeRm::new();
    let gpu = Gpu::open(rm.clone(), None).expect("fake GPU");
    (rm, Served::new(gpu, limits))
}

/// A request for rings in host memory.
fn host(engine: Engine, entries: u64) -> ChannelRequest {
    ChannelRequest {
        engine,
        entries,
        rings: Rings::Host,
        pushbuffer: 0,
    }
}

/// A request for rings and a pushbuffer of `pushbuffer` bytes in GPU memory.
fn gpu(engine: Engine, entries: u64, pushbuffer: u64) -> ChannelRequest {
    ChannelRequest {
        engine,
        entries,
        rings: Rings::Gpu,
        pushbuffer,
    }
}

fn count(calls: &[Call], class: u32) -> usize {
    calls
        .iter()
        .filter(|c| matches!(c, Call::Alloc { class: k, .. } if *k == class))
        .count()
}

fn sealed(fd: OwnedFd) -> SealedMemfd {
    SealedMemfd::check(fd).expect("a sealed memfd")
}

#[test]
fn each_session_gets_its_own_space_and_group_and_one_space_only() {
    let (rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(1000, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    let e = s.attach(a, peer(1000, 10)).expect_err("twice");
    assert!(matches!(e, ChannelError::SpaceExists { .. }), "{e}");
    s.open(a, host(Engine::Compute, 64)).expect("a compute");
    s.open(a, host(Engine::Copy, 64)).expect("a copy");
    s.open(b, host(Engine::Compute, 64)).expect("b compute");
    let c = rm.calls();
    assert_eq!(count(&c, r580::FERMI_VASPACE_A), 2, "a space per session");
    assert_eq!(
        count(&c, r580::KEPLER_CHANNEL_GROUP_A),
        2,
        "a group per session, shared by its channels"
    );
    assert_eq!(count(&c, crate::nvrm::GENERATION.host), 3);
}

#[test]
fn bad_ring_sizes_and_limits_are_refused_before_any_rm_call() {
    let (rm, s) = served(Limits {
        channels_per_session: 2,
        max_ring_entries: 1024,
        ..Limits::default()
    });
    let a = SessionId(1);
    let e = s.open(a, host(Engine::Copy, 64)).expect_err("no space yet");
    assert!(matches!(e, ChannelError::NoSpace { .. }), "{e}");
    s.attach(a, peer(1000, 10)).expect("attach");
    let before = rm.calls().len();
    for bad in [0, 1, 3, 1000, (1 << 31) + 1, 1 << 32, u64::MAX] {
        let e = s.open(a, host(Engine::Copy, bad)).expect_err("bad size");
        assert!(
            matches!(e, ChannelError::RingSize { entries } if entries == bad),
            "{e}"
        );
    }
    let e = s.open(a, host(Engine::Copy, 2048)).expect_err("over quota");
    assert_eq!(
        e.to_string(),
        "A ring of 2048 entries is more than 1024, the most one channel may have"
    );
    assert_eq!(
        rm.calls().len(),
        before,
        "refused before the RM saw anything"
    );
    s.open(a, host(Engine::Copy, 1024)).expect("at the limit");
    s.open(a, host(Engine::Compute, 2)).expect("second");
    let e = s.open(a, host(Engine::Copy, 2)).expect_err("third");
    assert!(
        matches!(e, ChannelError::TooManyChannels { limit: 2, .. }),
        "{e}"
    );
}

#[test]
fn a_client_gets_its_ring_rw_its_notifier_read_only_and_the_doorbell_page() {
    let (_rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(1000, 10)).expect("attach");
    let o = s.open(a, host(Engine::Copy, 512)).expect("open");
    assert_eq!((o.entries, o.token), (512, FAKE_TOKEN));
    assert_eq!(o.userd_offset, 512 * 8);
    assert!(o.ring_gpu_va >= crate::nvrm::OWN_BASE && o.ring_gpu_va < crate::nvrm::LEASE_BASE);

    // The client writes GP_PUT through its own mapping; rigd sees it.
    let ring = Mapping::shared(&sealed(o.ring), Fill::Lazy).expect("ring maps read-write");
    ring.write_u32(
        usize::try_from(o.userd_offset).expect("small") + USERD_GP_PUT,
        7,
    )
    .expect("GP_PUT");
    let v = s.status(None);
    assert_eq!((v[0].gp_put, v[0].gp_get), (7, 0));

    // The notifier maps read-only and refuses a writable mapping.
    let notifier = sealed(o.notifier);
    Mapping::shared(&notifier, Fill::Lazy).expect_err("no writable mapping of the notifier");
    let ro = ReadMapping::shared(&notifier).expect("read-only mapping");
    assert_eq!(ro.read_u64(0).expect("read"), 0, "no fault yet");
    assert_eq!(o.notifier_bytes, 4096);

    // The doorbell page: what the client writes at 0x90 is what the device sees.
    let len = std::num::NonZeroUsize::new(usize::try_from(o.usermode_bytes).expect("64 KiB"))
        .expect("non-zero");
    let page = DeviceMapping::map(std::os::fd::AsFd::as_fd(&o.usermode), len).expect("maps");
    page.write_u32(usize::try_from(DOORBELL_OFFSET).expect("small"), o.token)
        .expect("ring");
    assert_eq!(s.gpu().usermode().read_u32(0x90), FAKE_TOKEN);
}

#[test]
fn ending_a_session_stops_its_channels_first_and_leaves_others_running() {
    let (rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(1000, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    s.open(a, host(Engine::Compute, 64)).expect("a compute");
    s.open(a, host(Engine::Copy, 64)).expect("a copy");
    let kept = s.open(b, host(Engine::Compute, 64)).expect("b");
    let mark = rm.calls().len();
    assert_eq!(s.end(a), 2);
    let c = &rm.calls()[mark..];
    let sched = c
        .iter()
        .position(|x| matches!(x, Call::Control { cmd, first: Some(0), .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
        .expect("descheduled");
    let first_free = c
        .iter()
        .position(|x| matches!(x, Call::Free { .. }))
        .expect("freed");
    assert!(
        sched < first_free,
        "descheduled before anything is freed: {c:#?}"
    );
    // Only a's channels are gone; b's still shows, and b was never descheduled.
    let v = s.status(None);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].id, v[0].session, v[0].uid), (kept.id, b, 1001));
    assert_eq!(s.end(a), 0, "ending twice does nothing");
    // a's space is still held by its leases' pool until they unmap; nothing of a's
    // was left mapped here, so its handles are all freed once its map goes.
    assert_eq!(s.status(Some(1000)), []);
}

#[test]
fn closing_a_channel_of_another_session_or_twice_is_refused() {
    let (_rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(1000, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    let o = s.open(a, host(Engine::Copy, 64)).expect("a");
    let e = s.close(b, o.id).expect_err("b cannot close a's");
    assert!(
        matches!(e, ChannelError::UnknownChannel { channel } if channel == o.id),
        "{e}"
    );
    s.close(a, o.id).expect("a closes its own");
    let e = s.close(a, o.id).expect_err("closed already");
    assert_eq!(
        e.to_string(),
        format!(
            "Channel {} is not one of this session's open channels",
            o.id
        )
    );
}

#[test]
fn the_watch_reports_a_posted_fault_once_and_status_shows_it() {
    let (_rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(1000, 10)).expect("a");
    let o = s.open(a, host(Engine::Compute, 64)).expect("open");
    assert_eq!(s.watch(), []);
    {
        let shared = s.client(a).expect("a");
        let c = lock_client(&shared);
        let n = c.channels[&o.id].channel.notifier().mapping();
        n.write_u64(0, 123_456).expect("timestamp");
        n.write_u64(8, 31).expect("info32 = MMU fault");
    }
    assert_eq!(s.watch(), [a]);
    assert_eq!(s.watch(), [], "reported once");
    let f = s.status(None)[0].fault.expect("shown");
    assert_eq!((f.info32, f.time_ns), (31, 123_456));
}

#[test]
fn a_failing_rm_call_names_the_gpu_and_the_step_and_leaves_the_session_usable() {
    let (rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(1000, 10)).expect("a");
    s.open(a, host(Engine::Compute, 64)).expect("first");
    // The channel allocation of the next open fails (after its two host memories:
    // descriptor and map each).
    rm.fail_at(4, crate::sys::nvstatus::NvStatus::InsufficientResources);
    let e = s.open(a, host(Engine::Copy, 64)).expect_err("injected");
    let line = crate::service::status::error_line(&e);
    assert!(line.starts_with("0000:00:06.0: "), "{line}");
    assert!(line.contains("HOPPER_CHANNEL_GPFIFO_A"), "{line}");
    s.open(a, host(Engine::Copy, 64))
        .expect("the next open works");
    assert_eq!(s.status(None).len(), 2);
}

#[test]
fn a_channel_after_the_last_one_closed_goes_in_a_new_group_and_the_old_is_freed() {
    // On the H200 the RM answered NV_ERR_INVALID_STATE to a channel in a group whose
    // last channel had gone and descheduled it (docs/hardware/nvidia-channels.md,
    // "Channel groups").
    let (rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(1000, 10)).expect("a");
    let first = s.open(a, host(Engine::Copy, 64)).expect("first");
    let second = s
        .open(a, host(Engine::Compute, 64))
        .expect("second, same group");
    assert_eq!(count(&rm.calls(), r580::KEPLER_CHANNEL_GROUP_A), 1);
    s.close(a, first.id)
        .expect("close one: the group still runs the other");
    let mark = rm.calls().len();
    let third = s.open(a, host(Engine::Copy, 64)).expect("third");
    assert_eq!(
        count(&rm.calls()[mark..], r580::KEPLER_CHANNEL_GROUP_A),
        0,
        "joins"
    );
    s.close(a, second.id).expect("close");
    s.close(a, third.id).expect("close the last");
    let mark = rm.calls().len();
    s.open(a, host(Engine::Copy, 64))
        .expect("a channel after the last closed");
    let after = &rm.calls()[mark..];
    assert_eq!(
        count(after, r580::KEPLER_CHANNEL_GROUP_A),
        1,
        "a new group: {after:#?}"
    );
    assert!(
        after.iter().any(|x| matches!(x, Call::Free { .. })),
        "the spent group is freed: {after:#?}"
    );
    assert_eq!(s.status(None).len(), 1);
}

#[test]
fn by_default_copy_channels_go_on_the_rms_asynchronous_copy_engines_that_reach_host_memory() {
    use r580::{NV2080_CTRL_CE_CAPS_CE_GRCE as GRCE, NV2080_CTRL_CE_CAPS_CE_SYSMEM as SYSMEM};
    let rm = FakeRm::new();
    // COPY0 and COPY1 are graphics' (GRCE), COPY3 cannot reach system memory, COPY4 is
    // not present; COPY2 and COPY5 are the ones.
    rm.set_copy_engines(&[
        (0, [GRCE | SYSMEM, 0]),
        (1, [GRCE | SYSMEM, 0]),
        (2, [SYSMEM, 0]),
        (3, [0x10, 0]),
        (5, [SYSMEM | 0x02, 0x40]),
    ]);
    let gpu = Gpu::open(rm.clone(), None).expect("fake GPU");
    assert_eq!(
        super::async_copy_engines(&gpu.copy_engines().expect("caps")),
        [2, 5]
    );
    let s = Served::new(gpu, Limits::default());
    assert_eq!(s.copy_engines(), [2, 5]);
    for id in 1..=2u32 {
        s.attach(SessionId(u64::from(id)), peer(1000 + id, 10))
            .expect("attach");
        s.open(SessionId(u64::from(id)), host(Engine::Copy, 64))
            .expect("copy");
    }
    s.open(SessionId(1), host(Engine::Compute, 64))
        .expect("compute");
    // Each session's copy channel in a copy engine group of its own, and session 1's
    // compute channel in its GR0 group beside it.
    assert_eq!(count(&rm.calls(), r580::KEPLER_CHANNEL_GROUP_A), 3);
}

#[test]
fn with_no_caps_from_the_rm_copy_channels_join_gr0s_group() {
    // The fake leaves CE_GET_ALL_CAPS unanswered: no engine present.
    let (rm, s) = served(Limits::default());
    s.attach(SessionId(1), peer(1001, 10)).expect("attach");
    s.open(SessionId(1), host(Engine::Copy, 64)).expect("copy");
    s.open(SessionId(1), host(Engine::Compute, 64))
        .expect("compute");
    assert_eq!(
        count(&rm.calls(), r580::KEPLER_CHANNEL_GROUP_A),
        1,
        "one group: GR0's"
    );
}

#[test]
fn copy_channels_spread_over_the_configured_copy_engines_and_fall_back_to_gr0() {
    let (rm, s) = served(Limits {
        copy_engines: Some(vec![2, 3]),
        ..Limits::default()
    });
    for id in 1..=3u32 {
        s.attach(SessionId(u64::from(id)), peer(1000 + id, 10))
            .expect("attach");
    }
    // Sessions 1 and 3 land on engine 3, session 2 on engine 2; a compute channel
    // makes a GR0 group beside its session's copy group.
    s.open(SessionId(1), host(Engine::Copy, 64))
        .expect("copy 1");
    s.open(SessionId(1), host(Engine::Compute, 64))
        .expect("compute 1");
    s.open(SessionId(2), host(Engine::Copy, 64))
        .expect("copy 2");
    s.open(SessionId(2), host(Engine::Copy, 64))
        .expect("copy 2 again: same group");
    let c = rm.calls();
    assert_eq!(count(&c, r580::KEPLER_CHANNEL_GROUP_A), 3, "{c:#?}");
    // The RM refuses session 3's copy engine group: its copy channel joins GR0's.
    let mark = rm.calls().len();
    rm.fail_at(0, crate::sys::nvstatus::NvStatus::InsufficientResources);
    s.open(SessionId(3), host(Engine::Copy, 64))
        .expect("falls back to GR0");
    let groups = count(&rm.calls()[mark..], r580::KEPLER_CHANNEL_GROUP_A);
    assert_eq!(groups, 2, "the refused CE group's call, then GR0's group");
    assert_eq!(s.status(None).len(), 5);
    // Reclaim deschedules both of session 1's groups before freeing anything.
    let mark = rm.calls().len();
    assert_eq!(s.end(SessionId(1)), 2);
    let after = &rm.calls()[mark..];
    let first_free = after
        .iter()
        .position(|x| matches!(x, Call::Free { .. }))
        .expect("freed");
    let offs = after[..first_free]
        .iter()
        .filter(|x| matches!(x, Call::Control { cmd, first: Some(0), .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
        .count();
    assert_eq!(offs, 2, "both groups descheduled first: {after:#?}");
}

#[test]
fn one_clients_work_under_its_lock_holds_up_neither_another_client_nor_the_watch() {
    let (_rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(1000, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    let oa = s.open(a, host(Engine::Compute, 64)).expect("a's channel");
    let shared = s.client(a).expect("a");
    let held = lock_client(&shared); // as an open or a reclaim of a's would hold it
    {
        let n = held.channels[&oa.id].channel.notifier().mapping();
        n.write_u64(8, 31).expect("fault");
        n.write_u64(0, 1).expect("time");
    }
    assert_eq!(s.watch(), [], "a is skipped while busy, without waiting");
    s.open(b, host(Engine::Copy, 64))
        .expect("b opens meanwhile");
    drop(held);
    assert_eq!(s.watch(), [a], "a's fault is read at the next tick");
}

#[test]
fn rings_in_gpu_memory_come_in_one_window_with_the_pushbuffer_after_userd() {
    let (rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(1000, 10)).expect("attach");
    let o = s.open(a, gpu(Engine::Copy, 1024, 64 << 10)).expect("open");
    assert_eq!(o.rings, Rings::Gpu);
    // 1024 entries and USERD (0x2200 bytes), the pushbuffer at the next page, the
    // window rounded up to a power of two.
    assert_eq!(o.userd_offset, 0x2000);
    assert_eq!(o.pushbuffer_offset, 0x3000);
    assert_eq!(o.ring_bytes, 128 << 10);
    assert_eq!(o.pushbuffer_bytes, o.ring_bytes - o.pushbuffer_offset);
    assert_eq!(o.pushbuffer_gpu_va, o.ring_gpu_va + o.pushbuffer_offset);
    let calls = rm.calls();
    assert_eq!(count(&calls, r580::NV01_MEMORY_LOCAL_USER), 1, "{calls:#?}");
    let window = calls
        .iter()
        .find_map(|c| match c {
            Call::MapWindow { memory, len, .. } if *len == 128 << 10 => Some(*memory),
            _ => None,
        })
        .expect("the window was mapped for the CPU");
    assert!(
        calls
            .iter()
            .any(|c| matches!(c, Call::MapDma { h_memory, .. } if *h_memory == window)),
        "and into the session's space"
    );
    // What the client maps is the memory rigd's window shows: the fake's is a memfd.
    let m = Mapping::shared(&sealed(o.ring), Fill::Lazy).expect("map the window");
    assert_eq!(m.len() as u64, o.ring_bytes);
    assert_eq!(
        m.read_u32(0x2000 + USERD_GP_PUT).expect("USERD"),
        0,
        "USERD cleared"
    );
}

#[test]
fn a_window_is_reused_for_its_uid_only_and_kept_after_the_session() {
    let (rm, s) = served(Limits::default());
    let (a, b, c) = (SessionId(1), SessionId(2), SessionId(3));
    s.attach(a, peer(1000, 10)).expect("a");
    let first = s.open(a, gpu(Engine::Copy, 64, 4096)).expect("first");
    s.close(a, first.id).expect("close");
    assert_eq!(s.windows_of(1000), (1, 0), "kept, idle");
    s.open(a, gpu(Engine::Compute, 64, 4096)).expect("again");
    assert_eq!(
        count(&rm.calls(), r580::NV01_MEMORY_LOCAL_USER),
        1,
        "reused"
    );
    assert_eq!(s.windows_of(1000), (1, 1));
    // A second channel of the same uid while the first holds the window: a new one.
    s.open(a, gpu(Engine::Copy, 64, 4096)).expect("second");
    assert_eq!(s.windows_of(1000), (2, 2));
    assert_eq!(s.end(a), 2);
    assert_eq!(
        s.windows_of(1000),
        (2, 0),
        "the session went, its windows stay"
    );
    // Another uid never gets them.
    s.attach(b, peer(1001, 11)).expect("b");
    s.open(b, gpu(Engine::Copy, 64, 4096)).expect("b's");
    assert_eq!(count(&rm.calls(), r580::NV01_MEMORY_LOCAL_USER), 3);
    assert_eq!(s.windows_of(1001), (1, 1));
    // The same uid in a new session does, mapped into that session's space.
    s.attach(c, peer(1000, 12)).expect("c");
    s.open(c, gpu(Engine::Copy, 64, 4096)).expect("c's");
    assert_eq!(
        count(&rm.calls(), r580::NV01_MEMORY_LOCAL_USER),
        3,
        "reused across sessions"
    );
    assert_eq!(s.windows_of(1000), (2, 1));
}

#[test]
fn bad_windows_are_refused_before_any_gpu_memory_is_made() {
    let limits = Limits {
        gpu_ring_bytes: 256 << 10,
        gpu_rings_per_uid: 1,
        ..Limits::default()
    };
    let (rm, s) = served(limits);
    let a = SessionId(1);
    s.attach(a, peer(1000, 10)).expect("attach");
    for bad in [0, 6] {
        let e = s
            .open(a, gpu(Engine::Copy, 64, bad))
            .expect_err("bad pushbuffer");
        assert!(matches!(e, ChannelError::PushbufferSize { .. }), "{e}");
    }
    let e = s
        .open(a, gpu(Engine::Copy, 64, 1 << 20))
        .expect_err("over the window limit");
    assert!(
        matches!(e, ChannelError::WindowOverQuota { limit: 0x40000, .. }),
        "{e}"
    );
    assert_eq!(count(&rm.calls(), r580::NV01_MEMORY_LOCAL_USER), 0);
    s.open(a, gpu(Engine::Copy, 64, 4096)).expect("one");
    let e = s
        .open(a, gpu(Engine::Copy, 64, 4096))
        .expect_err("the uid's windows are all held");
    assert!(
        matches!(
            e,
            ChannelError::WindowsExhausted {
                uid: 1000,
                limit: 1,
                ..
            }
        ),
        "{e}"
    );
    // Host rings are not counted against windows.
    s.open(a, host(Engine::Copy, 64)).expect("host rings");
}

/// The PERF_BOOST controls so far: the flags' low byte of each.
fn boosts(rm: &FakeRm) -> Vec<Option<u8>> {
    rm.calls()
        .iter()
        .filter_map(|c| match c {
            Call::Control { cmd, first, .. } if *cmd == r580::NV2080_CTRL_CMD_PERF_BOOST => {
                Some(*first)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_clocks_are_boosted_while_any_session_holds_a_channel_and_cleared_after() {
    let (rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(1000, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    assert!(boosts(&rm).is_empty(), "no channel, no boost");

    let ch = s.open(a, host(Engine::Copy, 64)).expect("a's channel");
    s.open(b, host(Engine::Compute, 64)).expect("b's channel");
    assert_eq!(boosts(&rm), [Some(0x52)], "boosted once, to max, for CUDA");
    assert!(s.boosted());
    s.close(a, ch.id).expect("close a's");
    assert_eq!(boosts(&rm).len(), 1, "b still holds one");

    assert_eq!(s.end(b), 1);
    assert_eq!(
        boosts(&rm),
        [Some(0x52), Some(0x10)],
        "cleared with the last"
    );
    assert!(!s.boosted());
    s.open(a, host(Engine::Copy, 64)).expect("again");
    drop(s);
    assert_eq!(
        boosts(&rm),
        [Some(0x52), Some(0x10), Some(0x52), Some(0x10)],
        "and when rigd lets the GPU go"
    );
}

/// Writes a fault into channel `id`'s notifier, as the RM's robust-channel recovery does.
fn post(s: &Served<FakeRm>, session: SessionId, id: ChannelId, info32: u64) {
    let shared = s.client(session).expect("client");
    let c = lock_client(&shared);
    let n = c.channels[&id].channel.notifier().mapping();
    n.write_u64(8, info32).expect("info32");
    n.write_u64(0, 1).expect("time");
}

fn schedule_offs(calls: &[Call]) -> usize {
    calls
        .iter()
        .filter(|x| matches!(x, Call::Control { cmd, first: Some(0), .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
        .count()
}

#[test]
fn a_fault_is_contained_the_session_freed_without_a_deschedule_and_refused_new_channels() {
    let (rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(65534, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    let compute = s.open(a, host(Engine::Compute, 64)).expect("a compute");
    let copy = s.open(a, host(Engine::Copy, 64)).expect("a copy");
    let other = s.open(b, host(Engine::Compute, 64)).expect("b compute");
    let before = rm.calls().len();
    // Xid 39 on a's copy channel, as the 8 GiB fill raised.
    post(&s, a, copy.id, 39);
    assert_eq!(s.watch(), [a]);
    assert!(s.contain(a), "contained");
    assert!(!s.contain(a), "once");
    let after = &rm.calls()[before..];
    assert_eq!(
        schedule_offs(after),
        0,
        "a faulted group is never descheduled: {after:#?}"
    );
    let frees = after
        .iter()
        .filter(|x| matches!(x, Call::Free { .. }))
        .count();
    assert!(
        frees >= 6,
        "both channels, their engines and the group freed: {after:#?}"
    );
    let left: Vec<_> = s.status(None).into_iter().map(|v| v.id).collect();
    assert_eq!(left, [other.id], "b's channel runs on; a holds none");
    let e = s
        .open(a, host(Engine::Compute, 64))
        .expect_err("no new channels for a");
    assert!(
        matches!(e, ChannelError::Faulted { channel, .. } if channel == copy.id),
        "{e}"
    );
    assert_eq!(e.class().reason, Reason::ChannelFaulted);
    assert!(e.to_string().contains("info32 39"), "{e}");
    // The client may still close what rigd already freed, without an error.
    s.close(a, compute.id).expect("freed with the fault");
    s.close(a, copy.id).expect("freed with the fault");
    assert!(matches!(
        s.close(a, ChannelId(999)),
        Err(ChannelError::UnknownChannel { .. })
    ));
    s.open(b, host(Engine::Copy, 64)).expect("b opens more");
    assert_eq!(s.end(a), 0, "nothing left to reclaim");
}

#[test]
fn a_close_or_an_open_that_meets_a_fault_first_contains_the_session_whole() {
    let (rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(65534, 10)).expect("a");
    let one = s.open(a, host(Engine::Compute, 64)).expect("one");
    let two = s.open(a, host(Engine::Compute, 64)).expect("two");
    post(&s, a, one.id, 31);
    let before = rm.calls().len();
    // The client closes its faulted runtime before the watch saw the fault.
    s.close(a, two.id).expect("close");
    assert_eq!(schedule_offs(&rm.calls()[before..]), 0);
    assert!(s.status(None).is_empty(), "both freed");
    assert!(matches!(
        s.open(a, host(Engine::Copy, 64)),
        Err(ChannelError::Faulted { channel, .. }) if channel == one.id
    ));
    // An open that finds the fault first refuses, and contains.
    let b = SessionId(2);
    s.attach(b, peer(65534, 11)).expect("b");
    let three = s.open(b, host(Engine::Copy, 64)).expect("three");
    post(&s, b, three.id, 32);
    let e = s.open(b, host(Engine::Copy, 64)).expect_err("refused");
    assert!(matches!(e, ChannelError::Faulted { .. }), "{e}");
    assert!(s.status(None).is_empty());
    assert_eq!(s.end(b), 0);
}

#[test]
fn a_switch_timeout_refuses_that_uid_channels_for_the_penalty_and_no_one_else() {
    let limits = Limits {
        switch_timeout_penalty: Duration::from_millis(300),
        ..Limits::default()
    };
    let (_rm, s) = served(limits);
    let (a, b, c) = (SessionId(1), SessionId(2), SessionId(3));
    s.attach(a, peer(65534, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    s.attach(c, peer(65534, 12)).expect("c: the same uid as a");
    let hog = s.open(a, host(Engine::Compute, 64)).expect("a compute");
    s.open(b, host(Engine::Compute, 64)).expect("b compute");
    // The RM ended a's kernel: its block was not switched out in time (Xid 109).
    post(&s, a, hog.id, u64::from(rig_model::nv::CTX_SWITCH_TIMEOUT));
    assert!(s.contain(a));
    let e = s
        .open(c, host(Engine::Compute, 64))
        .expect_err("the uid's other session is refused too");
    assert!(
        matches!(
            e,
            ChannelError::SwitchTimeout {
                uid: 65534,
                left_s: 1,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.class().reason, Reason::GpuTime);
    assert!(e.to_string().contains("between blocks"), "{e}");
    s.open(b, host(Engine::Copy, 64))
        .expect("another uid opens on");
    std::thread::sleep(Duration::from_millis(350));
    s.open(c, host(Engine::Compute, 64))
        .expect("the uid opens again once the penalty is over");
}

#[test]
fn a_configured_timeslice_is_set_on_each_graphics_group_and_none_by_default() {
    let timeslices = |rm: &FakeRm| -> Vec<(u32, Option<u8>)> {
        rm.calls()
            .iter()
            .filter_map(|x| match x {
                Call::Control { object, cmd, first }
                    if *cmd == r580::NVA06C_CTRL_CMD_SET_TIMESLICE =>
                {
                    Some((*object, *first))
                }
                _ => None,
            })
            .collect()
    };
    let (rm, s) = served(Limits::default());
    s.attach(SessionId(1), peer(65534, 10)).expect("a");
    s.open(SessionId(1), host(Engine::Compute, 64))
        .expect("compute");
    assert!(timeslices(&rm).is_empty(), "the RM's default");

    let (rm, s) = served(Limits {
        timeslice_us: 250,
        copy_engines: Some(vec![2]),
        ..Limits::default()
    });
    for (n, engine) in [
        (1, Engine::Compute),
        (2, Engine::Copy),
        (3, Engine::Compute),
    ] {
        s.attach(SessionId(n), peer(65534, 10)).expect("attach");
        s.open(SessionId(n), host(engine, 64)).expect("open");
    }
    let set = timeslices(&rm);
    assert_eq!(
        set.len(),
        2,
        "each GR0 group, not the copy engine's: {set:?}"
    );
    assert!(set.iter().all(|&(_, first)| first == Some(250)), "{set:?}");
    assert_ne!(set[0].0, set[1].0, "two groups");
}

#[test]
fn a_penalty_longer_than_time_holds_is_forever_not_a_panic() {
    let (_rm, s) = served(Limits {
        switch_timeout_penalty: Duration::from_secs(u64::MAX),
        ..Limits::default()
    });
    let (a, c) = (SessionId(1), SessionId(2));
    s.attach(a, peer(65534, 10)).expect("a");
    s.attach(c, peer(65534, 11)).expect("c");
    let o = s.open(a, host(Engine::Compute, 64)).expect("a compute");
    post(&s, a, o.id, u64::from(rig_model::nv::CTX_SWITCH_TIMEOUT));
    assert!(s.contain(a));
    assert!(matches!(
        s.open(c, host(Engine::Compute, 64)),
        Err(ChannelError::SwitchTimeout { left_s, .. }) if left_s > 100 * 365 * 86_400
    ));
}

#[test]
fn other_faults_and_a_zero_penalty_refuse_no_uid() {
    for (info32, penalty) in [(31, Duration::from_secs(60)), (109, Duration::ZERO)] {
        let (_rm, s) = served(Limits {
            switch_timeout_penalty: penalty,
            ..Limits::default()
        });
        let (a, c) = (SessionId(1), SessionId(2));
        s.attach(a, peer(65534, 10)).expect("a");
        s.attach(c, peer(65534, 11)).expect("c");
        let o = s.open(a, host(Engine::Compute, 64)).expect("a compute");
        post(&s, a, o.id, info32);
        assert!(s.contain(a));
        s.open(c, host(Engine::Compute, 64))
            .unwrap_or_else(|e| panic!("info32 {info32}, penalty {penalty:?}: {e}"));
    }
}

#[test]
fn a_session_that_ends_with_a_fault_frees_its_group_without_a_deschedule() {
    let (rm, s) = served(Limits::default());
    let a = SessionId(1);
    s.attach(a, peer(65534, 10)).expect("a");
    let o = s.open(a, host(Engine::Copy, 64)).expect("copy");
    s.open(a, host(Engine::Compute, 64)).expect("compute");
    post(&s, a, o.id, 39);
    let before = rm.calls().len();
    assert_eq!(s.end(a), 2);
    assert_eq!(schedule_offs(&rm.calls()[before..]), 0);
}

#[test]
fn a_gpu_the_rm_says_needs_a_reset_lends_nothing_until_it_works_again() {
    let (rm, s) = served(Limits::default());
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(65534, 10)).expect("a");
    s.open(a, host(Engine::Compute, 64)).expect("open");
    assert_eq!(s.check_health(), Health::Serving);
    // Xid 154: the recovery action becomes GPU_RESET, and every allocation answers
    // NV_ERR_RESET_REQUIRED.
    rm.set_recovery_action(r580::NV2080_CTRL_GPU_RECOVERY_ACTION_GPU_RESET);
    rm.set_lost(Some(crate::sys::nvstatus::NvStatus::ResetRequired));
    let h = s.check_health();
    assert_eq!(h.word(), "lost");
    assert!(h.to_string().contains("GPU Reset Required"), "{h}");
    let e = s.attach(b, peer(1000, 11)).expect_err("no new session");
    assert_eq!(e.class().reason, Reason::GpuLost);
    assert!(e.to_string().contains("lends nothing now"), "{e}");
    let e = s
        .open(a, host(Engine::Compute, 64))
        .expect_err("no new channel");
    assert_eq!(e.class().reason, Reason::GpuLost);
    assert_eq!(s.end(a), 1, "what it held is still reclaimed");
    // Someone allowed to reset it did.
    rm.set_lost(None);
    rm.set_recovery_action(r580::NV2080_CTRL_GPU_RECOVERY_ACTION_NONE);
    assert_eq!(s.check_health(), Health::Serving);
    s.attach(b, peer(1000, 11)).expect("lending again");
    s.open(b, host(Engine::Compute, 64))
        .expect("a channel again");
}

#[test]
fn a_reset_required_answer_to_rigds_own_call_marks_the_gpu_lost_at_once() {
    let (rm, s) = served(Limits::default());
    let a = SessionId(1);
    rm.set_lost(Some(crate::sys::nvstatus::NvStatus::ResetRequired));
    let e = s
        .attach(a, peer(65534, 10))
        .expect_err("the RM refuses the space");
    assert_eq!(e.class().reason, Reason::Rm, "this call's own failure: {e}");
    assert_eq!(
        s.health().word(),
        "lost",
        "seen without waiting for the probe"
    );
    let e = s
        .attach(a, peer(65534, 10))
        .expect_err("refused before any RM call");
    assert_eq!(e.class().reason, Reason::GpuLost);
}

#[test]
fn each_graphics_group_asks_once_for_instruction_level_compute_preemption() {
    let (rm, s) = served(Limits {
        copy_engines: Some(vec![2]),
        ..Limits::default()
    });
    let (a, b) = (SessionId(1), SessionId(2));
    s.attach(a, peer(1000, 10)).expect("a");
    s.attach(b, peer(1001, 11)).expect("b");
    s.open(a, host(Engine::Compute, 64)).expect("a compute");
    s.open(a, host(Engine::Compute, 64))
        .expect("a compute again");
    s.open(a, host(Engine::Copy, 64))
        .expect("a copy, on its own engine's group");
    s.open(b, host(Engine::Copy, 64)).expect("b copy");
    let asks = |calls: &[Call]| {
        calls
            .iter()
            .filter(|c| matches!(c, Call::Control { cmd, first: Some(1), .. } if *cmd == r580::NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE))
            .count()
    };
    assert_eq!(asks(&rm.calls()), 1, "a's GR0 group, once; no copy group");
    // A refusal leaves the channel lent: the group runs with the RM's default.
    let c = SessionId(3);
    s.attach(c, peer(1002, 12)).expect("c");
    let before = rm.calls().len();
    s.open(c, host(Engine::Compute, 64)).expect("c compute");
    let i = rm.calls()[before..]
        .iter()
        .position(|x| matches!(x, Call::Control { cmd, .. } if *cmd == r580::NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE))
        .expect("asked");
    let d = SessionId(4);
    s.attach(d, peer(1003, 13)).expect("d");
    let from = rm.calls().len();
    rm.fail_at(i, crate::sys::nvstatus::NvStatus::NotSupported);
    s.open(d, host(Engine::Compute, 64))
        .expect("lent without the preemption it asked for");
    assert!(
        matches!(rm.calls()[from + i], Call::Control { cmd, .. } if cmd == r580::NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE),
        "the refused call was the preemption's"
    );
}
