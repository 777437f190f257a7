//! The runtime against rigd serving a fake RM GPU (no GPU needed): a module loads
//! through the copy engine's words, a launch writes its QMD and bank 0 once and then
//! patches them, every bad input is one typed error with nothing submitted, a busy slot
//! and a posted fault come back typed. The GPU's part (a release landing, a fault) is
//! played by hand through rigd's own views.

mod support;

use std::time::Duration;

use rig_client::{
    channel::{Channel, ChannelError, Engine, TimelineError},
    session::Session,
    space::{Holder, find_host_region, find_region},
};
use rig_model::addr::{
    GpuVa,
    layout::{LOCAL_WINDOW, SHARED_WINDOW},
};
use rig_nv::method::{
    self, Waiting,
    compute::{Invalidate, PcasAction},
    copy::Semaphore,
};
use rig_runtime::{
    Arg, Cbank0Error, ComputeChannel, ComputeError, ComputeOptions, ConstantBuffer, CopyChannel,
    CopyError, CopyOptions, Dim3, EventError, EventPage, Geometry, Graph, GraphError, HostAlloc,
    Launch, LaunchError, LoadError, Memory, MemoryError, Module, Place, QmdError, QmdVersion,
    Release, ReleaseKind, Runtime, RuntimeError, Shape, Span, Submit, ValueError, Windows, cbank0,
    event, load, qmd, region_at,
};
use support::{
    Fixture, GPU, KERNELS, MIB, fetched, gp_puts, gpu_writes, pushed, read, serve, u64s,
};

// TIMEOUT: the fake GPU never releases on its own; a value the test landed by hand is
// seen at once.
const SHORT: Duration = Duration::from_millis(300);

/// A copy channel, and the fixture module loaded through it (the "copy engine"
/// releases the upload's values, 1 for the copy and 2 for the clear of the globals,
/// before they are asked for).
async fn loaded(f: &Fixture, s: &Session) -> (CopyChannel, Module) {
    let mut copies = CopyChannel::open(s, CopyOptions::default())
        .await
        .expect("copy channel");
    let sem = copies.channel().semaphore_va().get();
    gpu_writes(f, s, sem, &2u64.to_le_bytes());
    let module = load::load(s, &mut copies, &HostAlloc, KERNELS, SHORT)
        .await
        .expect("loads");
    (copies, module)
}

/// A runtime on the session's own channels (a compute channel of 4 slots, the loaded
/// copy channel and module), with the module's `empty` kernel.
async fn runtime(f: &Fixture, s: &Session) -> (Runtime, rig_runtime::Kernel) {
    let (copies, module) = loaded(f, s).await;
    let empty = module.kernel("empty").expect("empty");
    let rt = Runtime::with(compute(s, 4).await, copies, module).expect("runtime");
    (rt, empty)
}

async fn compute(s: &Session, slots: usize) -> ComputeChannel {
    ComputeChannel::open(
        s,
        ComputeOptions {
            arena: 256 << 10,
            timeout: SHORT,
            slots,
            ..ComputeOptions::default()
        },
    )
    .await
    .expect("compute channel")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_loads_through_the_copy_engine_and_names_its_kernels_and_globals() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut copies, module) = loaded(&f, &s).await;
    assert_eq!(copies.channel().last_value(), 2, "the upload and the clear");
    let base = module.memory().va().expect("a GPU address").get();
    let counter = module.variable("counter").expect("a __device__ global");
    assert!((base..base + module.memory().len()).contains(&counter.get()));
    // The zero-initialised global is cleared by the copy engine, which releases 2.
    let sem = copies.channel().semaphore_va().get();
    let clear = method::copy::memset(
        counter,
        0,
        8,
        Some(Semaphore {
            addr: GpuVa(sem),
            payload: 2,
            timestamp: false,
        }),
    )
    .expect("words");
    assert!(pushed(&s, &clear));
    module.kernel("saxpy").expect("saxpy");
    assert!(module.kernels().any(|k| k == "copy_u4"));
    assert!(matches!(
        module.kernel("nope"),
        Err(LoadError::NoKernel { .. })
    ));
    assert_eq!(module.local_bytes(), 0x640, "local_array's stack");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_writes_its_slot_whole_once_then_patches_payload_and_parameters() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (_copies, module) = loaded(&f, &s).await;
    let mut c = compute(&s, 1).await;
    let k = module.kernel("saxpy").expect("saxpy");
    let args = |a: f32, n: u64| {
        [
            Arg::F32(a),
            Arg::Ptr(GpuVa(0x40_0000_0000)),
            Arg::Ptr(GpuVa(0x40_1000_0000)),
            Arg::U64(n),
        ]
    };
    let v = c.launch(&k, 4, 256, 0, &args(2.0, 1024)).expect("launch");
    assert_eq!(v, 1);
    let arena = c.channel().arena_va().expect("arena").get();
    let sem = c.channel().semaphore_va().get();

    // The QMD and bank 0, as built from scratch for this launch.
    let shape = Shape::new(k.info(), 4, 256, 0).expect("fits");
    let windows = Windows::new(SHARED_WINDOW, LOCAL_WINDOW).expect("windows");
    let a: Vec<Vec<u8>> = vec![
        2.0f32.to_le_bytes().to_vec(),
        0x40_0000_0000u64.to_le_bytes().to_vec(),
        0x40_1000_0000u64.to_le_bytes().to_vec(),
        1024u64.to_le_bytes().to_vec(),
    ];
    let refs: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
    let bank0 = cbank0::build(k.info(), &shape, &windows, &refs).expect("bank 0");
    let image = rig_cubin::Module::parse(KERNELS)
        .expect("parses")
        .layout()
        .expect("lays out")
        .place(module.memory().va().expect("a GPU address"))
        .expect("places");
    let mut banks = vec![ConstantBuffer {
        index: 0,
        addr: GpuVa(arena + 384),
        size: bank0.size(),
    }];
    for b in image.banks() {
        banks.push(qmd::constant_buffer(*b).expect("bank"));
    }
    let qmd = qmd::build(
        QmdVersion::V04,
        &Launch {
            kernel: k.info(),
            shape: &shape,
            program: k.entry(),
            banks: &banks,
            release: Some(Release {
                addr: GpuVa(sem),
                payload: 1,
                kind: ReleaseKind::DoubleWord,
            }),
            local_capacity: 0,
            co_resident: 0,
        },
    )
    .expect("QMD");
    assert_eq!(read(&s, arena, 384), qmd.to_bytes());
    assert_eq!(read(&s, arena + 384, bank0.bytes().len()), bank0.bytes());
    // What the GPU fetches last: the caches invalidated after the module's load, then
    // the launch, behind the channel's set-up; no WFI, since nothing was in flight.
    let pcas = method::compute::send_pcas(GpuVa(arena), PcasAction::InvalidatePrefetchCopySchedule)
        .expect("words");
    let mut launch_words = method::compute::invalidate_shader_caches(Invalidate::ALL).to_vec();
    launch_words.extend(pcas);
    let first = fetched(&s, c.channel(), 1).remove(0);
    assert!(first.ends_with(&launch_words), "{first:x?}");
    assert!(
        !first.windows(2).any(|w| w == method::wfi()),
        "no WFI before the first launch"
    );

    // Its QMD released 1: the slot is reused, patched in place.
    gpu_writes(&f, &s, sem, &1u64.to_le_bytes());
    let v = c.launch(&k, 4, 256, 0, &args(3.0, 7)).expect("again");
    assert_eq!(v, 2);
    let again = u64s(&read(&s, arena, 384));
    let mut want = qmd.to_u64s();
    want[qmd.release_payload_word().expect("V04")] = 2;
    assert_eq!(again, want);
    let b = read(&s, arena + 384 + 0x210, 32);
    assert_eq!(b[..4], 3.0f32.to_le_bytes());
    assert_eq!(b[24..32], 7u64.to_le_bytes());
    // The slot's own launch words, written with it the first time: the ring entry
    // points into the slot, and no pushbuffer word was written for this launch.
    let (va, _) = c.channel().submitted(1).expect("ring")[0];
    assert!((arena..arena + 4096).contains(&va.get()), "{va}");
    assert_eq!(fetched(&s, c.channel(), 1), vec![pcas.to_vec()]);
    c.wait(1, SHORT).expect("the first landed");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_behind_one_in_flight_waits_for_it_on_the_gpu_and_only_then() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (_copies, module) = loaded(&f, &s).await;
    let mut c = compute(&s, 4).await;
    let empty = module.kernel("empty").expect("empty");
    let arena = c.channel().arena_va().expect("arena");
    let pcas = method::compute::send_pcas(arena, PcasAction::InvalidatePrefetchCopySchedule)
        .expect("words");
    let wfi_then_launch: Vec<u32> = method::wfi().into_iter().chain(pcas).collect();

    c.launch(&empty, 1, 1, 0, &[]).expect("first");
    let first = fetched(&s, c.channel(), 1).remove(0);
    assert!(first.ends_with(&pcas), "{first:x?}");
    assert!(
        !first.windows(2).any(|w| w == method::wfi()),
        "nothing was in flight"
    );
    c.launch(&empty, 1, 1, 0, &[]).expect("second");

    // The second slot's words: the same methods, its own QMD's address (>> 8).
    let second = fetched(&s, c.channel(), 1).remove(0);
    let methods = |w: &[u32]| [w[0], w[1], w[2], w[4], w[5]];
    assert_eq!(
        methods(&second),
        methods(&wfi_then_launch),
        "the first has not been seen done: a WFI first, so the grids run in order"
    );
    assert!(second[3] > pcas[1], "{second:x?}");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_one_typed_error_each_with_nothing_submitted() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut copies, module) = loaded(&f, &s).await;
    let mut c = compute(&s, 4).await;
    let empty = module.kernel("empty").expect("empty");
    c.launch(&empty, 1, 1, 0, &[]).expect("a good launch first");
    let mark = (gp_puts(&f), c.channel().last_value());
    let k = module.kernel("grid_fill").expect("grid_fill");
    let out = [Arg::Ptr(GpuVa(0x40_0000_0000))];
    let shape = |c: &mut ComputeChannel, g: (u32, u32, u32), b: (u32, u32, u32), d| match c
        .launch(&k, g, b, d, &out)
    {
        Err(ComputeError::Shape(e)) => e,
        other => panic!("{g:?} {b:?} {d}: {other:?}"),
    };
    assert!(matches!(
        shape(&mut c, (0, 1, 1), (32, 1, 1), 0),
        LaunchError::Grid { value: 0, .. }
    ));
    assert!(matches!(
        shape(&mut c, (1, 65536, 1), (32, 1, 1), 0),
        LaunchError::Grid { value: 65536, .. }
    ));
    assert!(matches!(
        shape(&mut c, (1, 1, 1), (0, 1, 1), 0),
        LaunchError::Block { value: 0, .. }
    ));
    assert!(matches!(
        shape(&mut c, (1, 1, 1), (1025, 1, 1), 0),
        LaunchError::Block { value: 1025, .. }
    ));
    assert!(matches!(
        shape(&mut c, (1, 1, 1), (32, 32, 2), 0),
        LaunchError::Threads { threads: 2048, .. }
    ));
    assert!(matches!(
        shape(&mut c, (1, 1, 1), (32, 1, 1), 228 * 1024),
        LaunchError::Shared { .. }
    ));
    assert!(matches!(
        c.launch(&k, 1, 32, 0, &[]),
        Err(ComputeError::Params(Cbank0Error::Count {
            given: 0,
            expected: 1
        }))
    ));
    assert!(matches!(
        c.launch(&k, 1, 32, 0, &[Arg::U32(1)]),
        Err(ComputeError::Params(Cbank0Error::Size {
            given: 4,
            expected: 8,
            ..
        }))
    ));
    // local_array has a stack; this channel has no local memory yet.
    let local = module.kernel("local_array").expect("local_array");
    let la = [
        Arg::Ptr(GpuVa(0x1000)),
        Arg::Ptr(GpuVa(0x2000)),
        Arg::U32(1),
    ];
    assert!(matches!(
        c.launch(&local, 1, 32, 0, &la),
        Err(ComputeError::Qmd(QmdError::LocalMemory {
            needed: 0x640,
            capacity: 0
        }))
    ));
    assert_eq!(
        (gp_puts(&f), c.channel().last_value()),
        mark,
        "nothing was submitted"
    );

    // A launch on a copy channel, copies on a compute channel.
    let copy_ch = Channel::open(&s, Engine::Copy, 64).await.expect("copy");
    let refused = ComputeChannel::from_channel(copy_ch, ComputeOptions::default())
        .expect_err("a copy channel");
    assert!(matches!(
        refused.0,
        ComputeError::NotCompute {
            engine: Engine::Copy,
            ..
        }
    ));
    let compute_ch = Channel::open(&s, Engine::Compute, 64)
        .await
        .expect("compute");
    let refused = CopyChannel::from_channel(compute_ch).expect_err("a compute channel");
    assert!(matches!(
        refused.0,
        CopyError::WrongEngine {
            engine: Engine::Compute,
            ..
        }
    ));

    // Copies: another session's memory, lengths that differ, a range past the end.
    let other = Session::open(&f.server.socket, GPU).await.expect("other");
    let theirs = other.alloc(MIB, 4096).await.expect("their buffer");
    let mine = s.alloc(MIB, 4096).await.expect("my buffer");
    let copy_mark = (gp_puts(&f), copies.channel().last_value());
    let e = copies
        .copy(&s, all(&theirs), all(&mine))
        .expect_err("not mine");
    assert!(
        matches!(e, CopyError::Memory(MemoryError::NotOwned { .. })),
        "{e}"
    );
    let e = copies
        .copy(&s, all(&mine), all(&theirs))
        .expect_err("not mine");
    assert!(matches!(e, CopyError::Memory(MemoryError::NotOwned { .. })));
    let half = Span::new(&mine, 0, MIB / 2).expect("half");
    let e = copies.copy(&s, half, all(&mine)).expect_err("lengths");
    assert!(matches!(e, CopyError::Lengths { .. }));
    assert!(matches!(
        Span::new(&mine, MIB / 2, MIB),
        Err(MemoryError::OutOfRange { .. })
    ));
    assert_eq!(
        (gp_puts(&f), copies.channel().last_value()),
        copy_mark,
        "nothing was submitted"
    );
    // The kernel copy refuses the same, and unaligned ends.
    let copy_u4 = module.kernel("copy_u4").expect("copy_u4");
    assert!(matches!(
        c.copy(&s, &copy_u4, all(&theirs), all(&mine)),
        Err(ComputeError::Copy(_))
    ));
    let odd = Span::new(&mine, 8, 64).expect("odd");
    let even = Span::new(&mine, 4096, 64).expect("even");
    assert!(matches!(
        c.copy(&s, &copy_u4, odd, even),
        Err(ComputeError::Unaligned { .. })
    ));

    // A cubin that is cut short, or for another GPU: refused before any memory.
    let leases = s.leases().len();
    let e = load::load(&s, &mut copies, &HostAlloc, &KERNELS[..1000], SHORT)
        .await
        .expect_err("truncated");
    assert!(matches!(e, LoadError::Cubin(_)), "{e}");
    assert_eq!(s.leases().len(), leases);
    let now: Vec<_> = gp_puts(&f)
        .into_iter()
        .filter(|(id, _)| mark.0.iter().any(|(m, _)| m == id))
        .collect();
    assert_eq!(
        (now, c.channel().last_value()),
        mark,
        "nothing was submitted"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_whose_slot_is_still_in_flight_waits_and_times_out_typed() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (_copies, module) = loaded(&f, &s).await;
    let mut c = compute(&s, 1).await;
    let empty = module.kernel("empty").expect("empty");
    c.launch(&empty, 1, 1, 0, &[]).expect("first");
    let e = c
        .launch(&empty, 1, 1, 0, &[])
        .expect_err("its slot is busy");
    assert!(
        matches!(
            e,
            ComputeError::Channel(ChannelError::Timeout { value: 1, .. })
        ),
        "{e}"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_posted_for_the_compute_channel_ends_the_wait_typed() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (_copies, module) = loaded(&f, &s).await;
    let mut c = compute(&s, 4).await;
    let k = module.kernel("store_at").expect("store_at");
    let v = c
        .launch(&k, 1, 1, 0, &[Arg::Ptr(GpuVa(0xf_0000_0000)), Arg::U32(7)])
        .expect("launch");
    let id = c.channel().id();
    assert!(f.gpu.post_fault(rigd::channels::ChannelId(id), 31));
    let e = c.wait(v, Duration::from_secs(5)).expect_err("faulted");
    assert!(
        matches!(&e, ComputeError::Channel(ChannelError::Fault { fault, .. }) if fault.info32 == 31),
        "{e}"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_between_the_sessions_own_buffers_is_released_by_the_copy_engine() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut copies = CopyChannel::open(&s, CopyOptions::default())
        .await
        .expect("copy channel");
    let a = s.alloc(MIB, 4096).await.expect("a");
    let b = s.alloc(MIB, 4096).await.expect("b");
    let v = copies.copy(&s, all(&a), all(&b)).expect("copy");
    let sem = copies.channel().semaphore_va().get();
    let words = method::copy::copy_released(
        a.gpu_va().expect("va"),
        b.gpu_va().expect("va"),
        MIB,
        Semaphore {
            addr: GpuVa(sem),
            payload: 1,
            timestamp: false,
        },
    )
    .expect("words");
    assert_eq!(v, 1);
    assert!(pushed(&s, &words));
    let fill = copies
        .fill(&s, Span::new(&b, 0, 4096).expect("span"), 0xabcd)
        .expect("fill");
    assert_eq!(fill, 2);
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_named_by_its_gpu_address_is_found_in_the_ledger_and_checked_like_a_buffer() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut copies = CopyChannel::open(&s, CopyOptions::default())
        .await
        .expect("copy channel");
    let a = s.alloc(MIB, 4096).await.expect("a");
    let b = s.alloc(MIB, 4096).await.expect("b");
    let (va, vb) = (a.gpu_va().expect("va"), b.gpu_va().expect("va"));

    // The lease that holds a's second 4 KiB, found by address, is memory: a copy from
    // it is the same words as one from the buffer.
    let at = GpuVa(va.get() + 4096);
    let ra = region_at(&s, at, 4096).expect("a's lease");
    assert_eq!(ra.holder, Holder::Host(a.lease().0));
    assert_eq!(Memory::place(&ra), Place::Host);
    assert_eq!(ra.host_address_of(va), Some(a.as_ptr() as usize));
    assert_eq!(find_host_region(&s, a.as_ptr() as usize), Some(ra));
    let rb = region_at(&s, vb, 4096).expect("b's lease");
    let src = Span::new(&ra, at.get() - ra.va.get(), 4096).expect("span");
    let dst = Span::new(&rb, vb.get() - rb.va.get(), 4096).expect("span");
    assert_eq!((src.va(), dst.va()), (at, vb));
    let v = copies.copy(&s, src, dst).expect("copy by address");
    let sem = copies.channel().semaphore_va().get();
    let words = method::copy::copy_released(
        at,
        vb,
        4096,
        Semaphore {
            addr: GpuVa(sem),
            payload: u32::try_from(v).expect("a small value"),
            timestamp: false,
        },
    )
    .expect("words");
    assert!(pushed(&s, &words));

    // No lease there, or a range running past the lease: refused before anything.
    let mark = (gp_puts(&f), copies.channel().last_value());
    assert!(matches!(
        region_at(&s, GpuVa(0x1000), 4),
        Err(MemoryError::Unmapped { .. })
    ));
    let end = GpuVa(ra.va.get() + ra.bytes - 4);
    assert!(matches!(
        region_at(&s, end, 8),
        Err(MemoryError::OutOfRange { .. })
    ));

    // Another session's addresses name this session's memory, never theirs: the same
    // numbers are another lease (or none) here.
    let other = Session::open(&f.server.socket, GPU).await.expect("other");
    let theirs = other.alloc(8 * MIB, 4096).await.expect("their buffer");
    let far = GpuVa(theirs.gpu_va().expect("va").get() + 8 * MIB - 4096);
    assert_eq!(
        find_region(&other, far).map(|r| r.holder),
        Some(Holder::Host(theirs.lease().0))
    );
    assert!(find_region(&s, far).is_none_or(|r| r.holder != Holder::Host(theirs.lease().0)));

    // A lease given back after the lookup is no longer memory of the session: the
    // region found before is refused at submission.
    let (lease_b, _) = b.lease();
    drop(b);
    s.release(lease_b).await.expect("release");
    let e = copies
        .copy(
            &s,
            Span::new(&ra, 0, 4096).expect("span"),
            Span::new(&rb, 0, 4096).expect("span"),
        )
        .expect_err("released");
    assert!(
        matches!(e, CopyError::Memory(MemoryError::NotOwned { .. })),
        "{e}"
    );
    assert_eq!(
        (gp_puts(&f), copies.channel().last_value()),
        mark,
        "nothing submitted"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_doorbells_queue_launches_copies_and_events_until_submit_or_a_wait() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut rt, empty) = runtime(&f, &s).await;
    rt.set_event_page(EventPage::new(&s).await.expect("event page"));
    let a = s.alloc(MIB, 4096).await.expect("a");
    let before = gp_puts(&f);
    rt.hold();
    let start = rt.record(Engine::Compute, &[]).expect("record");
    let k = rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    let end = rt.record(Engine::Compute, &[]).expect("record");
    let up = rt.copy(&s, all(&a), all(&a)).expect("copy");
    let fill = rt.fill(&s, all(&a), 7, &[up]).expect("fill");
    assert_eq!(gp_puts(&f), before, "nothing reached the GPU while held");
    // One submission per channel: the GPU sees every command of the run at once.
    rt.submit().expect("submit");
    let after = gp_puts(&f);
    assert_ne!(after, before);
    let compute_words = fetched(&s, rt.compute().channel(), 1).concat();
    assert!(!compute_words.is_empty());
    assert_eq!(
        (k.engine, up.engine, fill.engine),
        (Engine::Compute, Engine::Copy, Engine::Copy)
    );
    assert!(start.id < end.id);
    // Held again: a wait rings the doorbells itself (here it times out: the fake GPU
    // runs nothing), so a held run cannot wait on work it never sent.
    rt.hold();
    let k2 = rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    let mark = gp_puts(&f);
    assert!(rt.wait(k2, SHORT).is_err());
    assert_ne!(gp_puts(&f), mark, "the wait submitted first");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_for_a_channel_of_the_same_engine_keeps_the_group_on_and_another_engines_yields() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut rt, empty) = runtime(&f, &s).await;
    let mut c2 = compute(&s, 4).await;
    let k = rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    let fence = rt.compute().channel().fence(k.value).expect("fence");
    c2.acquire(fence).expect("acquire");
    c2.channel().submit().expect("submit");
    let sem = rt.compute().channel().semaphore_va();
    let words = fetched(&s, c2.channel(), 1).concat();
    // Both compute channels are in the session's one group: it stays on the engine.
    let stay = method::acquire(sem, k.value, Waiting::Stay).expect("words");
    let switch = method::acquire(sem, k.value, Waiting::SwitchGroup).expect("words");
    assert!(at(&words, &stay).is_some(), "{words:x?}");
    assert_eq!(at(&words, &switch), None, "{words:x?}");
    // A copy's fence is another engine's (another group): the wait yields.
    let a = s.alloc(MIB, 4096).await.expect("a");
    let up = rt.copy(&s, all(&a), all(&a)).expect("copy");
    let fence = rt.copies().channel().fence(up.value).expect("fence");
    c2.acquire(fence).expect("acquire");
    c2.channel().submit().expect("submit");
    let copy_sem = rt.copies().channel().semaphore_va();
    let words = fetched(&s, c2.channel(), 1).concat();
    let yields = method::acquire32(copy_sem, 3, Waiting::SwitchGroup).expect("words");
    assert!(at(&words, &yields).is_some(), "{words:x?}");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_that_needs_the_other_channels_waits_for_it_on_the_gpu_not_the_host() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut rt, empty) = runtime(&f, &s).await;
    let a = s.alloc(MIB, 4096).await.expect("a");
    let b = s.alloc(MIB, 4096).await.expect("b");
    let copy_sem = rt.copies().channel().semaphore_va();
    let compute_sem = rt.compute().channel().semaphore_va();

    // Copy → kernel: the launch's ring entries are the acquire of the copy engine's
    // 32-bit value, then the launch; the host waited for nothing (the fake GPU never
    // released the copy).
    let up = rt.copy(&s, all(&a), all(&b)).expect("copy");
    assert_eq!((up.engine, up.value), (Engine::Copy, 3));
    let k = rt
        .launch(&empty, 1, 1, 0, &[], &[up])
        .expect("a launch after the copy");
    assert_eq!(k.engine, Engine::Compute);
    let acquire_up = method::acquire32(copy_sem, 3, Waiting::SwitchGroup).expect("words");
    // One segment: SET_OBJECT, the acquire, the first launch's words.
    let words = fetched(&s, rt.compute().channel(), 1).concat();
    let pcas_at = words.len() - 4;
    assert!(
        at(&words, &acquire_up).is_some_and(|i| i < pcas_at),
        "the acquire, then the launch: {words:x?}"
    );
    assert!(
        !pushed(
            &s,
            &method::acquire(copy_sem, 3, Waiting::SwitchGroup).expect("words")
        ),
        "32 bits, not 64"
    );

    // Kernel → copy: the copy channel acquires the QMD's 64-bit release.
    let down = rt
        .copy_after(&s, all(&b), all(&a), &[k])
        .expect("a copy after the launch");
    assert_eq!((down.engine, down.value), (Engine::Copy, 4));
    let acquire_k = method::acquire(compute_sem, k.value, Waiting::SwitchGroup).expect("words");
    let copy_words = method::copy::copy_released(
        b.gpu_va().expect("va"),
        a.gpu_va().expect("va"),
        MIB,
        Semaphore {
            addr: copy_sem,
            payload: 4,
            timestamp: false,
        },
    )
    .expect("words");
    let words = fetched(&s, rt.copies().channel(), 1).concat();
    let (acq, copy) = (at(&words, &acquire_k), at(&words, &copy_words));
    assert!(
        acq.zip(copy).is_some_and(|(a, c)| a < c),
        "the acquire, then the copy: {words:x?}"
    );
    // A fill after both: the channel's own value needs no word, and the launch was
    // acquired already by this channel's earlier methods.
    let fill = rt
        .fill(&s, Span::new(&a, 0, 4096).expect("span"), 7, &[down, k])
        .expect("fill");
    assert_eq!(fill.value, 5);
    let words = fetched(&s, rt.copies().channel(), 1).concat();
    assert_eq!(at(&words, &acquire_k[..5]), None, "{words:x?}");

    // What already landed costs no word: nothing new reaches the ring.
    gpu_writes(&f, &s, copy_sem.get(), &5u64.to_le_bytes());
    let mark = gp_puts(&f);
    rt.order(Engine::Compute, &[up, fill]).expect("landed");
    rt.compute().submit().expect("submit");
    assert_eq!(gp_puts(&f), mark, "nothing to wait for");

    // A value no channel promised is refused, typed, before any word.
    let never = rig_runtime::Done {
        engine: Engine::Copy,
        value: 9,
    };
    let e = rt
        .launch(&empty, 1, 1, 0, &[], &[never])
        .expect_err("never released");
    assert!(
        matches!(
            e,
            RuntimeError::Copy(CopyError::Channel(ChannelError::Timeline(
                TimelineError::NeverReleased { value: 9, last: 5 }
            )))
        ),
        "{e}"
    );
    // A launch behind an acquire that has not landed times out naming what its
    // channel waits for on the GPU.
    let e = rt
        .wait(k, SHORT)
        .expect_err("the fake GPU releases nothing");
    assert!(
        e.to_string().contains(&format!(
            "its methods wait on the GPU for channel {}'s value 3",
            rt.copies().channel().id()
        )),
        "{e}"
    );
    // A dependency whose channel faulted: its value will never land, so nothing waits
    // for it; the fault comes back.
    let stuck = rt.copy(&s, all(&a), all(&b)).expect("copy");
    let id = rt.copies().channel().id();
    assert!(f.gpu.post_fault(rigd::channels::ChannelId(id), 31));
    let mark = (gp_puts(&f), rt.compute().channel().last_value());
    let e = rt
        .launch(&empty, 1, 1, 0, &[], &[stuck])
        .expect_err("faulted");
    assert!(
        matches!(
            &e,
            RuntimeError::Copy(CopyError::Channel(ChannelError::Fault { .. }))
        ),
        "{e}"
    );
    assert_eq!((gp_puts(&f), rt.compute().channel().last_value()), mark);
    f.server.stop().await;
}

/// With `chain`, launches enqueued back to back reach the GPU as the first one's words:
/// each QMD names the next as its dependent, and each still releases its own value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launches_queued_back_to_back_chain_through_their_qmds() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (_copies, module) = loaded(&f, &s).await;
    let mut c = ComputeChannel::open(
        &s,
        ComputeOptions {
            arena: 256 << 10,
            timeout: SHORT,
            slots: 4,
            chain: true,
            ..ComputeOptions::default()
        },
    )
    .await
    .expect("compute channel");
    let k = module.kernel("empty").expect("empty");
    let sem = c.channel().semaphore_va().get();
    // The first launch after the load goes through the pushbuffer (its invalidation):
    // nothing chains behind words.
    let v = c.launch(&k, 1, 1, 0, &[]).expect("launch");
    gpu_writes(&f, &s, sem, &v.to_le_bytes());
    c.wait(v, SHORT).expect("landed");

    let arena = c.channel().arena_va().expect("arena").get();
    // A slot: the QMD, bank 0, then its launch block on a line of its own.
    let bank0 = (k.info().bank0_template().len() as u64).next_multiple_of(16);
    let block_at = (QmdVersion::V04.size() as u64 + bank0).next_multiple_of(64);
    let stride = (block_at + 64).next_multiple_of(256);
    let qmd_at = |slot: u64| arena + slot * stride;
    let dependent = |slot: u64| {
        let words: Vec<u32> = read(&s, qmd_at(slot), QmdVersion::V04.size())
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4")))
            .collect();
        let [enable, action, prefetch, pointer] = QmdVersion::V04.fields().dependent0;
        (
            enable.get(&words),
            action.get(&words),
            prefetch.get(&words),
            pointer.get(&words),
        )
    };
    let before = c.channel().submitted(1).expect("ring");
    // Slots 1, 2, 3: three launches queued, one submission.
    let vs: Vec<u64> = (0..3)
        .map(|_| c.enqueue(&k, 1, 1, 0, &[]).expect("enqueue"))
        .collect();
    c.submit().expect("submit");
    let after = c.channel().submitted(1).expect("ring");
    assert_ne!(before, after, "one new ring entry");
    // It launches the first; the first names the second, the second the third.
    let (va, n) = after[0];
    assert_eq!(
        va.get(),
        qmd_at(1) + block_at + 8,
        "slot 1's words past its WFI"
    );
    assert_eq!(n, 4, "SEND_PCAS only: nothing was in flight");
    assert_eq!(
        dependent(1),
        (Some(1), Some(1), Some(1), Some(qmd_at(2) >> 8))
    );
    assert_eq!(
        dependent(2),
        (Some(1), Some(1), Some(1), Some(qmd_at(3) >> 8))
    );
    assert_eq!(
        dependent(3),
        (Some(0), Some(0), Some(0), Some(0)),
        "the last chains none"
    );
    assert_eq!(vs, vec![v + 1, v + 2, v + 3]);
    // Each still releases its own value.
    for &x in &vs {
        gpu_writes(&f, &s, sem, &x.to_le_bytes());
        c.wait(x, SHORT).expect("landed");
    }
    // Launched one at a time, nothing chains, and a slot reused clears its chain.
    let w = c.launch(&k, 1, 1, 0, &[]).expect("slot 0");
    gpu_writes(&f, &s, sem, &w.to_le_bytes());
    let w = c.launch(&k, 1, 1, 0, &[]).expect("slot 1 again");
    assert_eq!(
        dependent(1),
        (Some(0), Some(0), Some(0), Some(0)),
        "cleared"
    );
    gpu_writes(&f, &s, sem, &w.to_le_bytes());
    c.wait(w, SHORT).expect("landed");
    f.server.stop().await;
}

/// Two runtimes of one session are two streams: one's work waits for the other's on
/// the GPU through an exported fence, held doorbells or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_waits_for_another_streams_work_on_the_gpu_through_its_fence() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut one, empty) = runtime(&f, &s).await;
    let (mut two, _) = runtime(&f, &s).await;
    one.hold();
    let d = one.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    let fence = one.export(d).expect("export");
    // Exporting sent the held launch: the fence's value is on its way.
    assert!(
        !fetched(&s, one.compute().channel(), 1).is_empty(),
        "the held launch was submitted by the export"
    );
    assert_eq!(fence.value, d.value);
    let sem = one.compute().channel().semaphore_va();

    // The other stream's kernel waits for it on its compute channel: the same engine,
    // so its group stays on.
    two.import(Engine::Compute, fence).expect("import");
    two.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    // Its first submission: the channel's set-up, the acquire, then the launch.
    let words = fetched(&s, two.compute().channel(), 1).concat();
    let stay = method::acquire(sem, d.value, Waiting::Stay).expect("words");
    let arena = two.compute().channel().arena_va().expect("arena");
    let pcas = method::compute::send_pcas(arena, PcasAction::InvalidatePrefetchCopySchedule)
        .expect("words");
    let wait = at(&words, &stay).expect("the acquire");
    let launch = at(&words, &pcas).expect("the launch");
    assert!(
        wait < launch,
        "the acquire comes before the launch: {words:x?}"
    );
    // Its copies wait for it too, on another engine: the group yields meanwhile.
    two.import(Engine::Copy, fence).expect("import");
    let a = s.alloc(MIB, 4096).await.expect("a");
    two.fill(&s, all(&a), 0, &[]).expect("fill");
    let words = fetched(&s, two.copies().channel(), 1).concat();
    let yields = method::acquire(sem, d.value, Waiting::SwitchGroup).expect("words");
    assert!(at(&words, &yields).is_some(), "{words:x?}");

    // A stream of another session cannot be waited for; nor a value never promised.
    let other = Session::open(&f.server.socket, GPU).await.expect("other");
    let (mut theirs, their_empty) = runtime(&f, &other).await;
    // Nor launched with a kernel of this session's module: its code is not in theirs.
    let e = theirs
        .launch(&empty, 1, 1, 0, &[], &[])
        .expect_err("this session's kernel");
    assert!(
        matches!(
            &e,
            RuntimeError::Compute(ComputeError::ForeignKernel { kernel, .. }) if kernel == "empty"
        ),
        "{e}"
    );
    let d3 = theirs
        .launch(&their_empty, 1, 1, 0, &[], &[])
        .expect("launch");
    let foreign = theirs.export(d3).expect("export");
    let e = two
        .import(Engine::Compute, foreign)
        .expect_err("another session's");
    assert!(
        matches!(
            e,
            RuntimeError::Compute(ComputeError::Channel(ChannelError::ForeignFence { .. }))
        ),
        "{e}"
    );
    let never = rig_runtime::Done {
        value: d.value + 10,
        ..d
    };
    assert!(matches!(
        one.export(never),
        Err(RuntimeError::Compute(ComputeError::Channel(
            ChannelError::Timeline(TimelineError::NeverReleased { .. })
        )))
    ));
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_of_another_session_is_refused() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let other = Session::open(&f.server.socket, GPU).await.expect("other");
    let mut mine = CopyChannel::open(&s, CopyOptions::default())
        .await
        .expect("copy channel");
    let mut theirs = CopyChannel::open(&other, CopyOptions::default())
        .await
        .expect("their copy channel");
    let b = other.alloc(MIB, 4096).await.expect("b");
    let v = theirs.fill(&other, all(&b), 0).expect("fill");
    let fence = theirs.channel().fence(v).expect("fence");
    let e = mine.acquire(fence).expect_err("another session's");
    assert!(
        matches!(e, CopyError::Channel(ChannelError::ForeignFence { .. })),
        "{e}"
    );
    assert!(matches!(
        theirs.channel().fence(v + 1),
        Err(ChannelError::Timeline(TimelineError::NeverReleased { .. }))
    ));
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_is_a_release_with_the_gpus_time_into_a_slot_of_its_own() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut rt, _) = runtime(&f, &s).await;
    assert!(matches!(
        rt.record(Engine::Compute, &[]),
        Err(RuntimeError::Event(EventError::NoPage))
    ));
    let page = s.alloc(event::SLOTS * 16, 4096).await.expect("page");
    let base = page.gpu_va().expect("va");
    rt.set_event_page(EventPage::on(page).expect("page"));

    let a = rt.record(Engine::Compute, &[]).expect("record");
    let b = rt.record(Engine::Copy, &[]).expect("record");
    assert_eq!((a.id, b.id), (1, 2));
    // The release: WFI first, then the id and the timer into the event's own slot.
    let how = method::Release {
        wait_idle: true,
        timestamp: true,
    };
    let words = method::release_with(GpuVa(base.get() + 16), 1, how).expect("words");
    let compute_words = fetched(&s, rt.compute().channel(), 1).concat();
    assert!(at(&compute_words, &words).is_some(), "{compute_words:x?}");
    let words = method::release_with(GpuVa(base.get() + 32), 2, how).expect("words");
    assert!(at(&fetched(&s, rt.copies().channel(), 1).concat(), &words).is_some());

    // Not landed: a typed timeout naming what the slot holds.
    let e = rt.event_time(a, SHORT).expect_err("not landed");
    assert!(
        matches!(
            e,
            RuntimeError::Event(EventError::Timeout {
                id: 1,
                holds: 0,
                ..
            })
        ),
        "{e}"
    );
    // The GPU lands both: id and time.
    let land = |slot: u64, id: u64, ns: u64| {
        let mut b = id.to_le_bytes().to_vec();
        b.extend_from_slice(&ns.to_le_bytes());
        gpu_writes(&f, &s, base.get() + slot * 16, &b);
    };
    land(1, 1, 10_000);
    land(2, 2, 12_345);
    assert_eq!(rt.event_time(a, SHORT).expect("landed"), 10_000);
    assert_eq!(rt.elapsed(a, b, SHORT).expect("elapsed"), 2_345);
    assert!(matches!(
        rt.elapsed(b, a, SHORT),
        Err(RuntimeError::Event(EventError::Reversed {
            by_ns: 2_345,
            ..
        }))
    ));
    // Never recorded here, or its slot reused by a later record: refused, never
    // another event's time.
    let never = rig_runtime::Event {
        engine: Engine::Compute,
        id: 3,
    };
    assert!(matches!(
        rt.event_time(never, SHORT),
        Err(RuntimeError::Event(EventError::Unknown { id: 3, last: 2 }))
    ));
    land(1, 1 + event::SLOTS, 99);
    assert!(matches!(
        rt.event_time(a, SHORT),
        Err(RuntimeError::Event(EventError::Overwritten { id: 1, .. }))
    ));
    // After a copy not landed: the compute channel acquires it before the release.
    let h = s.alloc(MIB, 4096).await.expect("buffer");
    let up = rt.copy(&s, all(&h), all(&h)).expect("copy");
    let after_copy = rt.record(Engine::Compute, &[up]).expect("record");
    let release = method::release_with(GpuVa(base.get() + 16 * after_copy.id), after_copy.id, how)
        .expect("words");
    let acquire = method::acquire32(
        rt.copies().channel().semaphore_va(),
        3,
        Waiting::SwitchGroup,
    )
    .expect("words");
    let compute_words = fetched(&s, rt.compute().channel(), 1).concat();
    assert!(
        at(&compute_words, &acquire)
            .zip(at(&compute_words, &release))
            .is_some_and(|(a, r)| a < r),
        "the acquire, then the release: {compute_words:x?}"
    );
    // A fault posted for the recording channel ends the wait: the record behind
    // faulted work never lands.
    let c = rt.record(Engine::Compute, &[]).expect("record");
    let id = rt.compute().channel().id();
    assert!(f.gpu.post_fault(rigd::channels::ChannelId(id), 31));
    let e = rt
        .event_time(c, Duration::from_secs(5))
        .expect_err("faulted");
    assert!(
        matches!(
            &e,
            RuntimeError::Event(EventError::Channel(ChannelError::Fault { .. }))
        ),
        "{e}"
    );
    f.server.stop().await;
}

/// All of `m`, which has a GPU address.
fn all(m: &dyn Memory) -> Span<'_> {
    Span::all(m).expect("memory of a served GPU's session")
}

/// Where `needle` starts in `words`.
fn at(words: &[u32], needle: &[u32]) -> Option<usize> {
    words.windows(needle.len()).position(|w| w == needle)
}

/// A host buffer that says it is GPU memory: what the copy routing sees.
#[derive(Debug)]
struct AsGpu(rig_client::session::Buffer);

impl Memory for AsGpu {
    fn va(&self) -> Option<GpuVa> {
        self.0.va()
    }
    fn len(&self) -> u64 {
        Memory::len(&self.0)
    }
    fn place(&self) -> Place {
        Place::Gpu
    }
    fn held_by(&self, session: &Session) -> bool {
        self.0.held_by(session)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_within_gpu_memory_go_to_the_copy_kernel_and_the_rest_to_the_copy_engine() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut rt, _) = runtime(&f, &s).await;
    let a = AsGpu(s.alloc(MIB, 4096).await.expect("a"));
    let b = AsGpu(s.alloc(MIB, 4096).await.expect("b"));
    let host = s.alloc(MIB, 4096).await.expect("host");
    let d = rt.copy(&s, all(&a), all(&b)).expect("d2d");
    assert_eq!((d.engine, d.value), (Engine::Compute, 1));
    let odd = Span::new(&a, 8, 4096).expect("odd");
    let d = rt
        .copy(&s, odd, Span::new(&b, 0, 4096).expect("span"))
        .expect("unaligned d2d");
    assert_eq!(d.engine, Engine::Copy);
    let d = rt.copy(&s, all(&host), all(&a)).expect("h2d");
    assert_eq!(d.engine, Engine::Copy);
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_memory_is_sized_for_the_sessions_own_gpu_not_a_fixed_one() {
    // The default fake GPU reports GH100's shape; this one 4 GPCs of 5 TPCs, 48 warps.
    let server = support::dma_support::Server::start(64 * MIB).await;
    let rm = rigd::nvrm::FakeRm::new();
    let mut info = rigd::nvrm::FAKE_GR_INFO;
    // SM_VERSION, GPCS, TPC_PER_GPC, SM_PER_TPC, SHADER_PIPE_SUB_COUNT, MAX_WARPS_PER_SM.
    for (slot, value) in [(1, 4), (2, 5), (4, 20), (5, 48)] {
        info[slot].1 = value;
    }
    rm.set_gr_info(&info);
    let _gpu = server.serve_fake_gpu(GPU, rm, rigd::channels::Limits::default(), 32);
    let s = Session::open(&server.socket, GPU).await.expect("session");
    assert_eq!(
        Geometry::of_session(&s),
        Geometry {
            tpcs: 20,
            sms_per_tpc: 2,
            max_warps_per_sm: 48,
            sms: 40,
        }
    );
    drop(s);
    server.stop().await;

    let f = serve(32).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    // The default fake GPU: GH100's shape with 66 TPCs of 2 SMs enabled.
    assert_eq!(
        Geometry::of_session(&s),
        Geometry {
            sms: 132,
            ..rig_runtime::compute::GH100
        }
    );
    drop(s);
    f.server.stop().await;
}

/// The cooperative-groups fixture (client/cubin/tests/data/coop.cu).
const COOP: &[u8] = include_bytes!("../../cubin/tests/data/coop.sm_90.cubin");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cooperative_launch_gives_each_slot_a_grid_workspace_of_its_own() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut copies, _) = loaded(&f, &s).await;
    // The fixture's upload and clear release 3 and 4 on the copy channel.
    let sem = copies.channel().semaphore_va().get();
    gpu_writes(&f, &s, sem, &4u64.to_le_bytes());
    let module = load::load(&s, &mut copies, &HostAlloc, COOP, SHORT)
        .await
        .expect("the cooperative-groups module loads");
    let mut c = compute(&s, 2).await;
    let k = module.kernel("grid_sum").expect("grid_sum");
    let p = Arg::Ptr(GpuVa(0x40_0000_0000));
    let args = [p, Arg::U32(1024), p, p, p];
    // No workspaces yet: no module was loaded through this channel.
    let e = c
        .launch_cooperative(&k, 132, 256, 0, &args)
        .expect_err("no workspaces");
    assert!(
        matches!(
            e,
            ComputeError::Cooperative {
                source: rig_runtime::occupancy::CooperativeError::NoWorkspace,
                ..
            }
        ),
        "{e}"
    );
    // The workspaces' zeroing fill releases 5.
    gpu_writes(&f, &s, sem, &5u64.to_le_bytes());
    c.ensure_workspaces(&s, &mut copies, &HostAlloc)
        .await
        .expect("workspaces");
    let arena = c.channel().arena_va().expect("arena").get();
    let csem = c.channel().semaphore_va().get();
    // A slot: the QMD, bank 0 (16-aligned), then its launch block on a 64-byte line,
    // which the last ring entry points into.
    let qmd_bytes = QmdVersion::V04.size() as u64;
    let block_at = (qmd_bytes + (k.info().bank0_template().len() as u64).next_multiple_of(16))
        .next_multiple_of(64);
    let stride = (block_at + 64).next_multiple_of(256);
    // The envregs of the slot at `slot`, or of the last launch's slot (a launch from
    // its slot's own words, not the pushbuffer's copies after a module load).
    let envregs = |c: &mut ComputeChannel, slot: Option<u64>| {
        let slot = slot.unwrap_or_else(|| {
            let (va, _) = c.channel().submitted(1).expect("ring")[0];
            (va.get() & !63) - block_at
        });
        let b = read(&s, slot + qmd_bytes + 0x40, 16);
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
        (u64::from(word(4)) << 32) | u64::from(word(8))
    };

    // 132 SMs of the fake GPU, 8 blocks of 256 threads each (their warps): 1,056.
    let v = c
        .launch_cooperative(&k, 1056, 256, 0, &args)
        .expect("a grid that fits");
    // The first template's slot is at the arena's start: the first granule's workspace.
    let ws = envregs(&mut c, Some(arena));
    assert_ne!(ws, 0);
    assert_eq!(ws % 16, 0);
    assert!(
        !(arena..arena + (256 << 10)).contains(&ws),
        "{ws:#x}: not in the arena (host memory under the channel's rings)"
    );
    gpu_writes(&f, &s, csem, &v.to_le_bytes());
    c.wait(v, SHORT).expect("landed");
    // The next slot starts `stride` further: its workspace is that many granules on.
    let v = c
        .launch_cooperative(&k, 1056, 256, 0, &args)
        .expect("again");
    assert_eq!(
        envregs(&mut c, None),
        ws + stride / 256 * 16,
        "the second slot's own"
    );
    gpu_writes(&f, &s, csem, &v.to_le_bytes());
    c.wait(v, SHORT).expect("landed");
    // Back to the first slot: the same workspace as before.
    let v = c
        .launch_cooperative(&k, 1056, 256, 0, &args)
        .expect("a third");
    assert_eq!(envregs(&mut c, None), ws, "the slot keeps its workspace");
    gpu_writes(&f, &s, csem, &v.to_le_bytes());
    c.wait(v, SHORT).expect("landed");

    // An ordinary launch of the same kernel has no workspace: grid.is_valid() is false.
    let v = c.launch(&k, 1056, 256, 0, &args).expect("ordinary");
    assert_eq!(envregs(&mut c, None), 0);
    gpu_writes(&f, &s, csem, &v.to_le_bytes());
    c.wait(v, SHORT).expect("landed");

    // One block more than the SMs hold at once: refused by name, nothing submitted.
    let before = c.channel().last_value();
    let err = c
        .launch_cooperative(&k, 1057, 256, 0, &args)
        .expect_err("too large");
    let ComputeError::Cooperative { kernel, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(kernel, "grid_sum");
    assert_eq!(
        *source,
        rig_runtime::occupancy::CooperativeError::TooLarge {
            blocks: 1057,
            sms: 132,
            per_sm: 8,
            limit: rig_runtime::occupancy::Limit::Warps,
            most: 1056,
        }
    );
    assert_eq!(c.channel().last_value(), before);
    // Bigger blocks hold fewer: 1,024 threads are 32 warps, 2 an SM.
    let err = c
        .launch_cooperative(&k, 265, 1024, 0, &args)
        .expect_err("too large");
    let line = rig_client::error_line(&err);
    assert!(
        line.contains("each of the 132 SMs holds 2 blocks"),
        "{line}"
    );
    f.server.stop().await;
}

/// The "GPU" finishes everything queued on `rt`'s compute channel.
fn land_compute(f: &Fixture, s: &Session, rt: &mut Runtime) {
    let ch = rt.compute().channel();
    let last = ch.last_value();
    gpu_writes(f, s, ch.semaphore_va().get(), &last.to_le_bytes());
}

/// The compute channel's GP_PUT: ring entries it has submitted.
fn gp_put(f: &Fixture, ch: &Channel) -> u32 {
    gp_puts(f)
        .into_iter()
        .find_map(|(id, put)| (id == ch.id()).then_some(put))
        .expect("the channel is served")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_replays_its_launches_patched_in_one_call_ringing_early_or_once() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (copies, module) = loaded(&f, &s).await;
    let (saxpy, empty) = (
        module.kernel("saxpy").expect("saxpy"),
        module.kernel("empty").expect("empty"),
    );
    let mut rt = Runtime::with(compute(&s, 4).await, copies, module).expect("runtime");
    let land = |rt: &mut Runtime| land_compute(&f, &s, rt);
    // The first launch after the load goes through the pushbuffer (its invalidation).
    rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    land(&mut rt);

    let (x, y) = (
        Arg::Ptr(GpuVa(0x40_0000_0000)),
        Arg::Ptr(GpuVa(0x40_1000_0000)),
    );
    let mut g = Graph::new();
    assert!(matches!(
        rt.replay(&g, &[], Submit::Early),
        Err(RuntimeError::Graph(GraphError::Empty))
    ));
    assert_eq!(
        g.add(&saxpy, 4, 256, 0, &[Arg::F32(2.0), x, y, Arg::U64(1024)]),
        Ok(0)
    );
    assert_eq!(g.add(&empty, 1, 1, 0, &[]), Ok(1));
    assert_eq!(
        g.add(&saxpy, 8, 128, 0, &[Arg::F32(3.0), y, x, Arg::U64(1024)]),
        Ok(2)
    );
    assert_eq!(g.add(&empty, 1, 1, 0, &[]), Ok(3));

    // Every refusal is typed and leaves the graph as it was.
    let kept: Vec<Vec<u8>> = (0..4)
        .map(|j| g.params(j).expect("launch").to_vec())
        .collect();
    assert!(matches!(
        g.add(&saxpy, 4, 256, 0, &[Arg::F32(2.0), x, y]),
        Err(GraphError::Args {
            launch: 4,
            source: Cbank0Error::Count {
                given: 3,
                expected: 4
            },
            ..
        })
    ));
    assert!(matches!(
        g.add(&empty, 1, 2048, 0, &[]),
        Err(GraphError::Shape { launch: 4, .. })
    ));
    assert_eq!(
        g.set_arg(4, 0, Arg::U32(1)),
        Err(GraphError::NoLaunch { launch: 4, len: 4 })
    );
    assert!(matches!(
        g.set_arg(1, 0, Arg::U32(1)),
        Err(GraphError::NoArg {
            launch: 1,
            index: 0,
            params: 0,
            ..
        })
    ));
    assert!(matches!(
        g.set_arg(2, 3, Arg::U32(7)),
        Err(GraphError::Args {
            launch: 2,
            source: Cbank0Error::Size {
                ordinal: 3,
                given: 4,
                expected: 8
            },
            ..
        })
    ));
    assert!(matches!(
        g.set_shape(2, 0, 128),
        Err(GraphError::Shape { launch: 2, .. })
    ));
    assert_eq!(g.len(), 4);
    for (j, p) in kept.iter().enumerate() {
        assert_eq!(g.params(j), Some(p.as_slice()), "launch {j} unchanged");
    }
    assert_eq!(g.shape(2), Some((Dim3::new(8, 1, 1), Dim3::new(128, 1, 1))));

    // Patched: launch 2's n and shape.
    g.set_arg(2, 3, Arg::U64(7)).expect("n");
    g.set_shape(2, 16, 64).expect("shape");
    assert_eq!(g.params(2).expect("launch")[24..32], 7u64.to_le_bytes());

    // Early: the first launch alone, then runs of 1 and 2. A launch queued behind one
    // not yet submitted chains through its QMD and takes no ring entry, so the 4
    // launches take 3 entries: launches 0, 1 and 2 each began a run.
    let before = gp_put(&f, rt.compute().channel());
    let done = rt.replay(&g, &[], Submit::Early).expect("replay");
    assert_eq!(
        (done.engine, done.value),
        (Engine::Compute, rt.compute().channel().last_value())
    );
    assert_eq!(gp_put(&f, rt.compute().channel()) - before, 3);
    // The last ring entry is launch 2's (3 chains behind it), from the first slot of a
    // template of its own (its shape is not launch 0's): the slot holds the patched
    // arguments.
    let arena = rt.compute().channel().arena_va().expect("arena").get();
    let bank0 = (saxpy.info().bank0_template().len() as u64).next_multiple_of(16);
    let stride =
        ((QmdVersion::V04.size() as u64 + bank0).next_multiple_of(64) + 64).next_multiple_of(256);
    let launch2 = rt.compute().channel().submitted(1).expect("ring")[0]
        .0
        .get();
    let slot = arena + (launch2 - arena) / stride * stride;
    let p = read(&s, slot + 384 + 0x210, 32);
    assert_eq!(p[..4], 3.0f32.to_le_bytes());
    assert_eq!(p[24..32], 7u64.to_le_bytes());
    land(&mut rt);

    // Once: one run, one ring entry, each launch chained behind the one before.
    let before = gp_put(&f, rt.compute().channel());
    let done = rt.replay(&g, &[], Submit::Once).expect("replay");
    assert_eq!(gp_put(&f, rt.compute().channel()) - before, 1);
    assert_eq!(done.value, rt.compute().channel().last_value());
    land(&mut rt);

    // Held: nothing reaches the GPU until submit, and then as one run.
    let before = gp_put(&f, rt.compute().channel());
    rt.hold();
    rt.replay(&g, &[], Submit::Early).expect("replay");
    assert_eq!(gp_put(&f, rt.compute().channel()), before, "held");
    rt.submit().expect("submit");
    assert_eq!(gp_put(&f, rt.compute().channel()) - before, 1);
    land(&mut rt);

    // After a copy: the first launch waits for it on the GPU (the copy engine's
    // acquire before it), the host waits for nothing.
    let a = s.alloc(MIB, 4096).await.expect("a");
    let up = rt.copy(&s, all(&a), all(&a)).expect("copy");
    rt.replay(&g, &[up], Submit::Early)
        .expect("replay after the copy");
    let copy_sem = rt.copies().channel().semaphore_va();
    // Four entries: the acquire, then launches 0, 1 and 2 (3 chains behind 2).
    let words = fetched(&s, rt.compute().channel(), 4).concat();
    let value = u32::try_from(up.value).expect("a copy's value is 32 bits");
    let wait = method::acquire32(copy_sem, value, Waiting::SwitchGroup).expect("acquire words");
    assert_eq!(at(&words, &wait), Some(0), "{words:x?}");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_launching_one_shape_more_times_than_a_template_has_slots_never_waits_on_itself() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    // Templates of 4 slots; the fake GPU lands nothing unless told.
    let (mut rt, empty) = runtime(&f, &s).await;
    let land = |rt: &mut Runtime| land_compute(&f, &s, rt);
    rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    land(&mut rt);
    let graph = |n: usize| {
        let mut g = Graph::new();
        for _ in 0..n {
            g.add(&empty, 1, 1, 0, &[]).expect("add");
        }
        g
    };
    // Ten launches of one shape: without a template of ten slots the fifth would wait
    // for the first to land, which it never does here.
    let mut g = graph(10);
    let before = gp_put(&f, rt.compute().channel());
    let done = rt
        .replay(&g, &[], Submit::Once)
        .expect("no launch waits for another of the same replay");
    assert_eq!(done.value, rt.compute().channel().last_value());
    assert_eq!(
        gp_put(&f, rt.compute().channel()) - before,
        1,
        "one run, chained"
    );
    // Landed: the same graph grown by two gets a larger template (its launches are
    // counted again after an add).
    land(&mut rt);
    g.add(&empty, 1, 1, 0, &[]).expect("add");
    g.add(&empty, 1, 1, 0, &[]).expect("add");
    rt.replay(&g, &[], Submit::Early)
        .expect("the idle template is built again with twelve slots");
    // And after a shape changes: eight launches of each of two shapes, then all
    // sixteen of one.
    land(&mut rt);
    let mut two = Graph::new();
    for grid in [2, 3] {
        for _ in 0..8 {
            two.add(&empty, grid, 1, 0, &[]).expect("add");
        }
    }
    rt.replay(&two, &[], Submit::Once).expect("eight of each");
    land(&mut rt);
    for j in 8..16 {
        two.set_shape(j, 2, 1).expect("shape");
    }
    rt.replay(&two, &[], Submit::Once)
        .expect("sixteen of one shape: counted again after set_shape");
    // In flight, the template is left as it is: a replay behind it waits for its slots,
    // here until the wait times out, typed and naming the launch.
    land(&mut rt);
    rt.replay(&g, &[], Submit::Once)
        .expect("twelve slots, idle");
    let e = rt
        .replay(&g, &[], Submit::Once)
        .expect_err("its slots are all in flight");
    assert!(
        matches!(
            &e,
            RuntimeError::Replay { launch: 0, source, .. }
                if matches!(**source, ComputeError::Channel(ChannelError::Timeout { .. }))
        ),
        "{e:?}"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_in_the_sessions_memory_are_written_after_the_work_and_waited_for_on_the_gpu() {
    let f = serve(16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let (mut rt, empty) = runtime(&f, &s).await;
    let sig = s.alloc(4096, 4096).await.expect("signals");
    let base = sig.gpu_va().expect("va");
    let slot = |n: u64| Span::new(&sig, 16 * n, 16).expect("span");
    let copy_sem = rt.copies().channel().semaphore_va();

    // After a copy not landed: the compute channel acquires it, then releases the
    // value with WFI and the GPU's time into the slot, then its timeline's next value
    // (no second WFI): the Done lands only behind the write.
    let h = s.alloc(MIB, 4096).await.expect("buffer");
    let up = rt.copy(&s, all(&h), all(&h)).expect("copy");
    let compute_sem = rt.compute().channel().semaphore_va();
    let next = rt.compute().channel().last_value() + 1;
    let w = rt
        .write_value(&s, Engine::Compute, slot(1), 7, true, &[up])
        .expect("write");
    assert_eq!((w.engine, w.value), (Engine::Compute, next));
    let stamped = method::Release {
        wait_idle: true,
        timestamp: true,
    };
    let bare = method::Release {
        wait_idle: false,
        timestamp: false,
    };
    let release = method::release_with(GpuVa(base.get() + 16), 7, stamped).expect("words");
    let timeline = method::release_with(compute_sem, next, bare).expect("words");
    let acquire = method::acquire32(
        copy_sem,
        u32::try_from(up.value).expect("small"),
        Waiting::SwitchGroup,
    )
    .expect("words");
    let words = fetched(&s, rt.compute().channel(), 1).concat();
    let (a, r, t) = (
        at(&words, &acquire),
        at(&words, &release),
        at(&words, &timeline),
    );
    assert!(
        a.zip(r).zip(t).is_some_and(|((a, r), t)| a < r && r < t),
        "the acquire, the write, the timeline, rung at once: {words:x?}"
    );
    // Without the time, on the copy channel: 8 bytes, after the copy by the channel's
    // own order (no acquire). Work on the compute channel that must see it waits for
    // the copy channel's Done, which lands behind the write.
    let next = rt.copies().channel().last_value() + 1;
    let w = rt
        .write_value(
            &s,
            Engine::Copy,
            Span::new(&sig, 40, 8).expect("span"),
            9,
            false,
            &[up],
        )
        .expect("write");
    assert_eq!((w.engine, w.value), (Engine::Copy, next));
    let plain = method::Release {
        wait_idle: true,
        timestamp: false,
    };
    let mut words = method::release_with(GpuVa(base.get() + 40), 9, plain)
        .expect("words")
        .to_vec();
    words.extend(method::release_with(copy_sem, next, bare).expect("words"));
    assert_eq!(fetched(&s, rt.copies().channel(), 1).concat(), words);
    rt.launch(&empty, 1, 1, 0, &[], &[w]).expect("launch");
    let acquire = method::acquire32(
        copy_sem,
        u32::try_from(next).expect("small"),
        Waiting::SwitchGroup,
    )
    .expect("words");
    assert!(at(&fetched(&s, rt.compute().channel(), 1).concat(), &acquire).is_some());

    // A wait: the acquire of the 64-bit value, then the timeline's value with WFI,
    // rung by itself; the launch after it comes behind. Its Done is what the copy
    // channel waits for.
    let next = rt.compute().channel().last_value() + 1;
    let reached = rt
        .wait_value(&s, Engine::Compute, slot(2), 3)
        .expect("wait");
    assert_eq!((reached.engine, reached.value), (Engine::Compute, next));
    rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    let mut words = method::acquire(GpuVa(base.get() + 32), 3, Waiting::SwitchGroup)
        .expect("words")
        .to_vec();
    words.extend(method::release_with(compute_sem, next, plain).expect("words"));
    let ring = fetched(&s, rt.compute().channel(), 2);
    assert_eq!(ring[0], words, "the wait is rung by itself");
    assert!(at(&ring[1], &words[..6]).is_none(), "once: {ring:x?}");
    rt.fill(&s, Span::new(&h, 0, 4096).expect("span"), 0, &[reached])
        .expect("fill");
    let acquire = method::acquire(compute_sem, next, Waiting::SwitchGroup).expect("words");
    assert!(at(&fetched(&s, rt.copies().channel(), 1).concat(), &acquire).is_some());

    // Refusals, typed, with nothing pushed.
    let other = Session::open(&f.server.socket, GPU).await.expect("session");
    let foreign = other.alloc(4096, 4096).await.expect("foreign");
    let timeline = region_at(&s, compute_sem, 16).expect("the semaphore is a lease");
    let mark = gp_puts(&f);
    let refused = [
        rt.write_value(
            &s,
            Engine::Compute,
            Span::new(&sig, 0, 8).expect("span"),
            1,
            true,
            &[],
        ),
        rt.write_value(
            &s,
            Engine::Compute,
            Span::new(&sig, 8, 16).expect("span"),
            1,
            true,
            &[],
        ),
        rt.write_value(&s, Engine::Copy, all(&foreign), 1, false, &[]),
        rt.write_value(
            &s,
            Engine::Copy,
            Span::new(&timeline, compute_sem.get() - timeline.va.get(), 8).expect("span"),
            1,
            false,
            &[],
        ),
        rt.wait_value(&s, Engine::Compute, Span::new(&sig, 4, 8).expect("span"), 1),
        rt.wait_value(&s, Engine::Compute, Span::new(&sig, 0, 4).expect("span"), 1),
        rt.wait_value(&s, Engine::Compute, all(&foreign), 1),
    ];
    let kinds: Vec<&str> = refused
        .iter()
        .map(|r| match r {
            Err(RuntimeError::Value(ValueError::Short { .. })) => "short",
            Err(RuntimeError::Value(ValueError::Misaligned { .. })) => "misaligned",
            Err(RuntimeError::Value(ValueError::Memory(MemoryError::NotOwned { .. }))) => {
                "not owned"
            }
            Err(RuntimeError::Value(ValueError::Timeline(t))) if t.semaphore == compute_sem => {
                "timeline"
            }
            other => panic!("{other:?} among {refused:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "short",
            "misaligned",
            "not owned",
            "timeline",
            "misaligned",
            "short",
            "not owned"
        ]
    );
    assert_eq!(gp_puts(&f), mark, "nothing reached a ring");
    // The wait of a value whose channel faulted: the write after it never lands, and
    // the write is refused with that channel's fault.
    let k = rt.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    assert!(
        f.gpu
            .post_fault(rigd::channels::ChannelId(rt.compute().channel().id()), 31)
    );
    let e = rt
        .write_value(&s, Engine::Copy, slot(3), 1, true, &[k])
        .expect_err("faulted");
    assert!(matches!(&e, RuntimeError::Compute(_)), "{e}");
    f.server.stop().await;
}
