//! Lent channels end to end against a fake RM: rigd serves a `FakeRm` GPU with its
//! pool on shmem; a client opens a session and channels through the library, submits
//! (the words, GP_PUT and the doorbell land where rigd and the fake see them), waits,
//! gets the RM's fault as a typed error, is refused on bad input, and is reclaimed
//! when its session goes while another client keeps its channel; a channel whose rings
//! live in GPU memory (the fake's window is host memory) is submitted on the same way
//! and its window is reused for the same uid.

mod dma_support;

use std::{sync::Arc, time::Duration};

use dma_support::{Server, wait_until};
use rig_client::{
    Client,
    addr::GpuVa,
    channel::{Channel, ChannelError, Engine, Rings, TimelineError, WaitPolicy},
    session::{Addressing, Session, SessionErrorKind},
};
use rigd::{
    channels::{ChannelHost, ChannelId, Limits, Served},
    dma::PoolMode,
    nvrm::{Call, FAKE_TOKEN, FakeRm, LEASE_BASE, VA_END, layout::r580},
};

const MIB: u64 = 1 << 20;
const GPU: &str = "0000:00:06.0";
const SHORT: Duration = Duration::from_millis(200);

struct Fixture {
    server: Server,
    rm: FakeRm,
    gpu: Arc<Served<FakeRm>>,
}

async fn serve() -> Fixture {
    let server = Server::start(64 * MIB).await;
    let rm = FakeRm::new();
    let gpu = server.serve_fake_gpu(
        GPU,
        rm.clone(),
        Limits {
            channels_per_session: 2,
            max_ring_entries: 4096,
            ..Limits::default()
        },
        8,
    );
    Fixture { server, rm, gpu }
}

fn kind(e: ChannelError) -> Option<SessionErrorKind> {
    match e {
        ChannelError::Session(d) => d.kind(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_submits_on_its_channel_without_rigd_and_waits_for_its_release() {
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    assert_eq!(session.addressing(), Addressing::GpuVa);
    let a = session.alloc(MIB, 4096).await.expect("buffer A");
    let b = session.alloc(MIB, 4096).await.expect("buffer B");
    let va = a.gpu_va().expect("GPU VA").get();
    assert!(
        (LEASE_BASE..VA_END).contains(&va),
        "{va:#x} in the lease window"
    );

    let mut ch = Channel::open(&session, Engine::Copy, 256)
        .await
        .expect("channel");
    assert_eq!((ch.engine(), ch.entries()), (Engine::Copy, 256));
    ch.copy(GpuVa(va), b.gpu_va().expect("GPU VA"), MIB)
        .expect("copy");
    let v = ch.release().expect("release");
    assert_eq!(v, 1);
    ch.submit().expect("submit");

    // What the GPU would read: GP_PUT moved past one entry, and the doorbell got the
    // channel's token.
    let views = f.server.rig.channel_status(None);
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].gp_put, views[0].gp_get, views[0].entries),
        (1, 0, 256)
    );
    assert_eq!(views[0].gpu, GPU);
    assert_eq!(f.gpu.gpu().usermode().read_u32(0x90), FAKE_TOKEN);
    // rigctl channels sees the same, through gRPC.
    let listed = Client::connect(&f.server.socket)
        .await
        .expect("connect")
        .channels()
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    let c = &listed[0];
    assert_eq!(
        (c.channel, c.engine, c.entries, c.gp_put, c.session),
        (ch.id(), Some(Engine::Copy), 256, 1, session.id().0)
    );
    assert_eq!(c.uid, nix::unistd::getuid().as_raw());
    assert!(c.fault.is_none());

    // Nothing lands on a fake GPU: the wait times out, naming the state. Past its
    // spin it slept, so it armed the interrupt: a second entry.
    let e = ch.wait(v, SHORT).expect_err("no GPU to release");
    assert!(
        matches!(
            e,
            ChannelError::Timeout {
                value: 1,
                current: 0,
                gp_put: 2,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(ch.interrupts(), 1);
    assert_eq!(ch.rekicks(), 0, "host rings never ring again");
    // The "GPU" releases (rigd writes the semaphore through its own view of the lease).
    f.server
        .gpu_writes(&session, GPU, ch.semaphore_va().get(), &1u64.to_le_bytes());
    ch.wait(v, SHORT).expect("landed");
    assert_eq!(ch.completed().expect("read"), 1);

    // A timeline never moves backwards: refused before anything is written.
    ch.release_value(5).expect("forward");
    let e = ch.release_value(4).expect_err("backwards");
    assert!(
        matches!(
            e,
            ChannelError::Timeline(TimelineError::Backwards { value: 4, last: 5 })
        ),
        "{e}"
    );
    ch.close(&session)
        .await
        .expect("close (the fake never drains: logged)");
    assert!(f.server.rig.channel_status(None).is_empty());
    f.server.stop().await;
}

/// CPU time this thread has used (CLOCK_THREAD_CPUTIME_ID: getrusage's thread times
/// are sampled at the scheduler's tick, and can read 0 for a thread that spun).
fn thread_cpu() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .expect("clock_gettime");
    Duration::from_secs(t.tv_sec().unsigned_abs())
        + Duration::from_nanos(t.tv_nsec().unsigned_abs())
}

/// The words of the last ring entry `ch` submitted, as the GPU would fetch them.
fn last_entry(session: &Session, ch: &Channel) -> Vec<u32> {
    let (va, n) = ch.submitted(1).expect("ring")[0];
    let (lease, off) = dma_support::lease_of(session, va.get());
    let mut b = vec![0u8; 4 * n as usize];
    session.read_lease(lease, off, &mut b).expect("read");
    b.chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_wait_sleeps_until_the_gpus_interrupt_wakes_it() {
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    let a = session.alloc(MIB, 4096).await.expect("buffer");
    let mut ch = Channel::open(&session, Engine::Copy, 256)
        .await
        .expect("channel");
    assert!(
        ch.wake_fd().is_some(),
        "rigd watches the fake GPU's interrupts"
    );
    assert_eq!(f.gpu.wake_descriptors(), 1);
    assert_eq!(ch.wait_policy(), WaitPolicy::default());
    let va = a.gpu_va().expect("GPU VA");
    ch.copy(va, GpuVa(va.get() + 4096), 4096).expect("copy");
    let v = ch.release().expect("release");
    ch.submit().expect("submit");
    ch.set_wait_policy(WaitPolicy::Block);

    // The "GPU" lands the value after 110 ms, runs the arm's release of value + 1
    // into the wake word, and raises the interrupt 2 ms later, early in a sleep's
    // 50 ms slice; another channel's interrupt comes first, at 50 ms, and rigd passes this
    // one over for it.
    let sem = ch.semaphore_va().get();
    let (passed, id) = (f.gpu.wakes().expect("watched").1, ChannelId(ch.id()));
    let (waited, cpu) = std::thread::scope(|t| {
        t.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            f.rm.interrupt();
            std::thread::sleep(Duration::from_millis(60));
            f.server.gpu_writes(&session, GPU, sem, &1u64.to_le_bytes());
            assert!(
                f.gpu.release_wake_word(id, 2),
                "the channel has a wake word"
            );
            std::thread::sleep(Duration::from_millis(2));
            f.rm.interrupt();
        });
        let (start, cpu) = (std::time::Instant::now(), thread_cpu());
        ch.wait(v, Duration::from_secs(10)).expect("woken, landed");
        (start.elapsed(), thread_cpu() - cpu)
    });
    assert!(waited >= Duration::from_millis(110), "{waited:?}");
    // Woken by its own interrupt at 112 ms, not by the slice's end at 150.
    assert!(waited < Duration::from_millis(148), "{waited:?}");
    assert_eq!(ch.missed_wakes(), 0);
    assert!(
        f.gpu.wakes().expect("watched").1 > passed,
        "the first interrupt passed this channel over"
    );
    // Spinning or yielding for that long would take the whole wait's CPU.
    assert!(cpu < waited / 3, "{cpu:?} of CPU in a {waited:?} wait");
    assert_eq!(ch.interrupts(), 1, "armed once for the value");
    assert!(
        ch.sleeps() >= 2,
        "slept again after the early wake: {}",
        ch.sleeps()
    );
    // The arm: a host acquire of the channel's own semaphore for the value, a release
    // of the value into the channel's wake word past USERD, then NON_STALL_INTERRUPT,
    // in their own submission.
    let words = last_entry(&session, &ch);
    assert_eq!(words.len(), 13, "{words:x?}");
    let addr = u64::from(words[1]) | u64::from(words[2]) << 32;
    assert_eq!(addr, sem, "SEM_ADDR_LO, SEM_ADDR_HI");
    assert_eq!(words[3], 1, "the value");
    let wake = ch.wake_word_va().expect("rigd gave a wake word").get();
    assert_eq!(u64::from(words[7]) | u64::from(words[8]) << 32, wake);
    assert_eq!((words[9], words[10]), (2, 0), "the value + 1, 64 bits");
    assert_eq!(
        words[11], 0x0100_0001,
        "SEM_EXECUTE: RELEASE (2:0), 64-bit payload (24), no RELEASE_WFI (20)"
    );
    assert_eq!(words[12], 0x8000_0008, "NON_STALL_INTERRUPT");

    // Nothing releases value 2: the blocked wait still ends at its timeout, typed.
    let v2 = ch.release().expect("release");
    ch.submit().expect("submit");
    let e = ch.wait(v2, SHORT).expect_err("never lands");
    assert!(matches!(e, ChannelError::Timeout { value: 2, .. }), "{e}");
    assert_eq!(ch.interrupts(), 2);
    ch.close(&session).await.expect("close");
    assert_eq!(f.gpu.wake_descriptors(), 0, "closed with its channel");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_whose_wakes_never_come_stop_sleeping_after_three() {
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&session, Engine::Compute, 64)
        .await
        .expect("channel");
    ch.set_wait_policy(WaitPolicy::Block);
    let sem = ch.semaphore_va().get();
    // A "GPU" that lands each value 5 ms after the submission and never raises the
    // interrupt: each sleeping wait ends at its slice, late.
    for n in 1..=4u64 {
        let v = ch.release().expect("release");
        assert_eq!(v, n);
        ch.submit().expect("submit");
        let sleeps = ch.sleeps();
        let took = std::thread::scope(|t| {
            t.spawn(|| {
                std::thread::sleep(Duration::from_millis(5));
                f.server.gpu_writes(&session, GPU, sem, &n.to_le_bytes());
            });
            let start = std::time::Instant::now();
            ch.wait(v, Duration::from_secs(10)).expect("landed");
            start.elapsed()
        });
        let missed = u64::from(rig_client::channel::MISSES_BEFORE_YIELD);
        if n <= missed {
            assert_eq!(ch.missed_wakes(), n, "wait {n} took {took:?}");
            assert!(
                took >= rig_client::channel::BLOCK_SLICE,
                "wait {n}: {took:?}"
            );
        } else {
            // No more sleeps: the wait yielded and saw the value as soon as it landed.
            assert_eq!(ch.sleeps(), sleeps, "wait {n} slept");
            assert!(
                took < rig_client::channel::BLOCK_SLICE,
                "wait {n}: {took:?}"
            );
        }
    }
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_whose_arm_finds_the_ring_full_yields_instead_of_sleeping() {
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    // Two entries: one submission fills the ring, and the fake GPU never fetches.
    let mut ch = Channel::open(&session, Engine::Compute, 2)
        .await
        .expect("channel");
    let v = ch.release().expect("release");
    ch.submit().expect("submit");
    ch.set_wait_policy(WaitPolicy::Block);
    let sem = ch.semaphore_va().get();
    let took = std::thread::scope(|t| {
        t.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            f.server.gpu_writes(&session, GPU, sem, &1u64.to_le_bytes());
        });
        let start = std::time::Instant::now();
        ch.wait(v, Duration::from_secs(10)).expect("landed");
        start.elapsed()
    });
    // The arm words stayed queued: no interrupt could come, so the wait never slept
    // (a sleep would have ended only at its slice, and counted a missed wake).
    assert_eq!((ch.interrupts(), ch.sleeps(), ch.missed_wakes()), (1, 0, 0));
    assert!(took < rig_client::channel::BLOCK_SLICE, "{took:?}");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_wakes_a_blocked_wait_and_the_session_end_forgets_its_wakes() {
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&session, Engine::Compute, 64)
        .await
        .expect("channel");
    let mut other = Channel::open(&session, Engine::Copy, 64)
        .await
        .expect("channel");
    assert_eq!(f.gpu.wake_descriptors(), 2);
    let v = ch.release().expect("release");
    ch.submit().expect("submit");
    ch.set_wait_policy(WaitPolicy::Block);
    other.set_wait_policy(WaitPolicy::Block);
    let id = ChannelId(ch.id());
    let e = std::thread::scope(|t| {
        t.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            assert!(f.gpu.post_fault(id, 31));
        });
        ch.wait(v, Duration::from_secs(10)).expect_err("faulted")
    });
    assert!(matches!(e, ChannelError::Fault { .. }), "{e}");
    // rigd contains the fault: the session's channels, and their wakes, are gone.
    assert!(
        wait_until(Duration::from_secs(5), || f.gpu.wake_descriptors() == 0).is_some(),
        "{} wake descriptors left",
        f.gpu.wake_descriptors()
    );
    drop((ch, other));
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_fault_ends_a_wait_with_the_rms_reason() {
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&session, Engine::Compute, 64)
        .await
        .expect("channel");
    let v = ch.release().expect("release");
    ch.submit().expect("submit");
    assert!(f.gpu.post_fault(ChannelId(ch.id()), 31));
    let e = ch.wait(v, Duration::from_secs(5)).expect_err("faulted");
    let ChannelError::Fault { fault, .. } = &e else {
        panic!("{e}");
    };
    assert_eq!(fault.info32, 31);
    assert!(
        e.to_string()
            .contains("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT"),
        "{e}"
    );
    // rigd's watch sees it too, and rigctl shows it.
    assert!(
        wait_until(Duration::from_secs(2), || {
            f.server.rig.channel_status(None)[0].fault.is_some()
        })
        .is_some()
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_rings_limits_and_foreign_handles_are_refused_and_others_keep_running() {
    let f = serve().await;
    f.server.shmem_pool("host", PoolMode::Host, 2);
    let alice = Session::open(&f.server.socket, GPU).await.expect("alice");
    let bob = Session::open(&f.server.socket, GPU).await.expect("bob");
    let mut bobs = Channel::open(&bob, Engine::Copy, 64)
        .await
        .expect("bob's channel");
    for bad in [0, 3, 1000, 1 << 40] {
        let e = Channel::open(&alice, Engine::Copy, bad)
            .await
            .expect_err("bad ring");
        let line = e.to_string();
        assert!(
            line.contains("not a power of two") && !line.contains('\n'),
            "{line}"
        );
        assert_eq!(kind(e), Some(SessionErrorKind::BadRing), "{bad}");
    }
    let e = Channel::open(&alice, Engine::Copy, 8192)
        .await
        .expect_err("over the limit");
    assert_eq!(kind(e), Some(SessionErrorKind::BadRing));
    let one = Channel::open(&alice, Engine::Copy, 64).await.expect("one");
    let _two = Channel::open(&alice, Engine::Compute, 64)
        .await
        .expect("two");
    let e = Channel::open(&alice, Engine::Copy, 64)
        .await
        .expect_err("three");
    assert_eq!(kind(e), Some(SessionErrorKind::ChannelLimit));
    // Closing one's channel through another session: refused, the channel lives on.
    let id = one.id();
    let e = one.close(&bob).await.expect_err("not bob's");
    assert_eq!(kind(e), Some(SessionErrorKind::UnknownChannel));
    assert!(
        f.server
            .rig
            .channel_status(None)
            .iter()
            .any(|v| v.id.0 == id)
    );
    // A session on a device that serves no channels.
    let host = Session::open(&f.server.socket, "host")
        .await
        .expect("host session");
    let e = Channel::open(&host, Engine::Copy, 64)
        .await
        .expect_err("not served");
    assert_eq!(kind(e), Some(SessionErrorKind::NotServed));
    // Bob was never disturbed.
    bobs.release().expect("release");
    bobs.submit().expect("bob submits");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_that_goes_is_reclaimed_channels_first_and_the_other_keeps_its_own() {
    let f = serve().await;
    let alice = Session::open(&f.server.socket, GPU).await.expect("alice");
    let bob = Session::open(&f.server.socket, GPU).await.expect("bob");
    let a1 = Channel::open(&alice, Engine::Copy, 64).await.expect("a1");
    let a2 = Channel::open(&alice, Engine::Compute, 64)
        .await
        .expect("a2");
    let _b = Channel::open(&bob, Engine::Copy, 64).await.expect("b");
    let mark = f.rm.calls().len();
    // Her channels hold memory of her session: the session (and its side connection)
    // goes with the last of them, as when her process dies.
    drop((a1, a2, alice));
    assert!(
        wait_until(Duration::from_secs(5), || f
            .server
            .rig
            .channel_status(None)
            .len()
            == 1)
        .is_some(),
        "alice's channels reclaimed"
    );
    let calls = f.rm.calls();
    let after = &calls[mark..];
    let sched = after
        .iter()
        .position(|c| matches!(c, Call::Control { cmd, first: Some(0), .. } if *cmd == r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE))
        .expect("descheduled");
    let first_free = after
        .iter()
        .position(|c| matches!(c, Call::Free { .. }))
        .expect("freed");
    assert!(sched < first_free, "descheduled before anything was freed");
    // Her leases left her address space, and the space itself went (the fake logs
    // the RM unmap of each block before the space's free).
    assert!(
        wait_until(Duration::from_secs(5), || {
            f.rm.calls()[mark..]
                .iter()
                .any(|c| matches!(c, Call::Free { object, .. } if is_space(&f.rm.calls(), *object)))
        })
        .is_some(),
        "alice's address space freed"
    );
    let v = f.server.rig.channel_status(None);
    assert_eq!(v[0].session, bob.id());
    f.server.stop().await;
}

fn is_space(calls: &[Call], handle: u32) -> bool {
    calls.iter().any(|c| {
        matches!(c, Call::Alloc { class: r580::FERMI_VASPACE_A, handle: h, .. } if *h == handle)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_completions_fills_up_with_a_typed_error() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    // A small ring and pushbuffer, on a GPU (the fake) that never completes anything.
    let mut ch = Channel::open_with(&s, Engine::Copy, 8, 4096)
        .await
        .expect("channel");
    let mut sent = 0;
    let e = loop {
        match ch.release().and_then(|_| ch.submit()) {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        assert!(sent < 10_000, "never filled");
    };
    assert!(
        matches!(
            e,
            ChannelError::RingFull { entries: 8, .. } | ChannelError::PushbufferFull { .. }
        ),
        "{e}"
    );
    assert_eq!(sent, 7, "a ring of 8 holds 7 entries in flight");
    // rigd and other clients are unharmed: another channel opens and submits.
    let other = Session::open(&f.server.socket, GPU).await.expect("other");
    let mut o = Channel::open(&other, Engine::Compute, 64)
        .await
        .expect("opens");
    o.release().expect("release");
    o.submit().expect("submits");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_channel_with_work_in_flight_keeps_its_memory_out_of_use() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    let sem = ch.semaphore_va().get();
    ch.release().expect("release");
    ch.submit().expect("submit"); // the fake GPU never completes it
    drop(ch);
    // What the GPU may still write is never handed out again in this session.
    for _ in 0..8 {
        let b = s.alloc(16, 16).await.expect("small buffer");
        assert_ne!(
            b.gpu_va().map(|va| va.get()),
            Some(sem),
            "the semaphore's space was reused"
        );
        std::mem::forget(b);
    }
    // A channel closed through rigd (stopped and drained there) gives its memory back.
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    let sem = ch.semaphore_va().get();
    ch.release().expect("release");
    ch.submit().expect("submit");
    ch.close(&s).await.expect("close");
    let b = s.alloc(16, 16).await.expect("small buffer");
    assert_eq!(
        b.gpu_va().map(|va| va.get()),
        Some(sem),
        "first fit: the closed channel's space"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_with_rings_in_gpu_memory_submits_through_its_window() {
    // The test runs as root, whom rigd always lends GPU memory (the group rule is
    // rig::served's unit test).
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: rings in GPU memory are lent to root and a configured group");
        return;
    }
    let f = serve().await;
    let session = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open_in(&session, Engine::Copy, 256, 16 << 10, Rings::Gpu)
        .await
        .expect("channel");
    assert_eq!(ch.rings(), Rings::Gpu);
    let v = ch.release().expect("release");
    ch.submit().expect("submit");
    // rigd reads GP_PUT through its own view of the window; the client wrote it
    // through the descriptor rigd sent.
    let views = f.server.rig.channel_status(None);
    assert_eq!((views[0].gp_put, views[0].entries), (1, 256));
    assert_eq!(views[0].rings, rigd::channels::Rings::Gpu);
    assert_eq!(f.gpu.gpu().usermode().read_u32(0x90), FAKE_TOKEN);
    let listed = Client::connect(&f.server.socket)
        .await
        .expect("connect")
        .channels()
        .await
        .expect("list");
    assert_eq!(listed[0].rings, Some(Rings::Gpu));
    // The wait slept (so armed the interrupt: a second entry), each sleep no longer
    // than the next look at GP_GET.
    let e = ch.wait(v, SHORT).expect_err("no GPU to release");
    assert!(matches!(e, ChannelError::Timeout { gp_put: 2, .. }), "{e}");
    // GP_GET never moved: the wait rang the doorbell again, backing off (20 µs
    // doubling to 1 ms: a few hundred in 200 ms, not thousands).
    let kicks = ch.rekicks();
    assert!((2..=400).contains(&kicks), "{kicks} rekicks");
    let uid = nix::unistd::getuid().as_raw();
    ch.close(&session).await.expect("close");
    assert_eq!(f.gpu.windows_of(uid), (1, 0), "kept for the uid, idle");
    let again = Channel::open_in(&session, Engine::Compute, 256, 16 << 10, Rings::Gpu)
        .await
        .expect("again");
    assert_eq!(f.gpu.windows_of(uid), (1, 1), "the same window");
    let vidmem = f
        .rm
        .calls()
        .iter()
        .filter(
            |c| matches!(c, Call::Alloc { class, .. } if *class == r580::NV01_MEMORY_LOCAL_USER),
        )
        .count();
    assert_eq!(vidmem, 1);
    // A pushbuffer that is no whole number of words is refused, typed.
    let e = Channel::open_in(&session, Engine::Copy, 256, 6, Rings::Gpu)
        .await
        .expect_err("bad pushbuffer");
    assert_eq!(kind(e), Some(SessionErrorKind::BadRing));
    drop(again);
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_lowers_channels_per_session_for_the_next_open_and_keeps_open_ones() {
    let f = serve().await;
    let alice = Session::open(&f.server.socket, GPU).await.expect("alice");
    let _one = Channel::open(&alice, Engine::Copy, 64).await.expect("one");
    let mut two = Channel::open(&alice, Engine::Compute, 64)
        .await
        .expect("two");
    // The config the fixture's rigd runs with (dma_support::Server), `[channels]
    // per_session` lowered to 1: what SIGHUP re-reads.
    let mut config = rigd::config::Config::default();
    config.paths.state_dir = f.server.dir.path().join("state");
    config.paths.pci_ids = f.server.dir.path().join("pci.ids");
    config.dma.quota.per_uid_bytes = 64 * MIB;
    config.dma.quota.per_device_bytes = 64 * MIB;
    config.channels.per_session = 1;
    let done = f.server.rig.reload(&config).expect("reloaded");
    assert!(done.need_restart.is_empty(), "{:?}", done.need_restart);
    // Both channels from before stay open and usable; a third is refused at the new
    // limit, and so is a second one of a new session.
    two.release().expect("release");
    two.submit().expect("an open channel still submits");
    let e = Channel::open(&alice, Engine::Copy, 64)
        .await
        .expect_err("over the reloaded limit");
    assert_eq!(kind(e), Some(SessionErrorKind::ChannelLimit));
    let bob = Session::open(&f.server.socket, GPU).await.expect("bob");
    let _bobs = Channel::open(&bob, Engine::Copy, 64)
        .await
        .expect("bob's first");
    let e = Channel::open(&bob, Engine::Copy, 64)
        .await
        .expect_err("bob's second");
    assert_eq!(kind(e), Some(SessionErrorKind::ChannelLimit));
    // Raised again: the next open goes through.
    config.channels.per_session = 3;
    f.server.rig.reload(&config).expect("reloaded");
    Channel::open(&bob, Engine::Copy, 64)
        .await
        .expect("within the raised limit");
    f.server.stop().await;
}
