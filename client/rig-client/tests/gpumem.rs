//! GPU memory end to end against a fake RM: rigd serves a `FakeRm` GPU (its books
//! stand for the GPU's memory and page tables); clients learn their GPU at the claim,
//! allocate through the library (buffers carved from leased 2 MiB pages, small ones
//! without a round trip), are refused on bad input with typed errors while others stay
//! served, and are reclaimed when their session goes — dropped, or its process killed
//! with SIGKILL — while another client keeps its own.

mod dma_support;

use std::{sync::Arc, time::Duration};

use dma_support::{Server, wait_until};
use rig_client::{
    channel::{Channel, Engine},
    gpumem::{GpuMemId, GpuMemory},
    session::{Session, SessionError, SessionErrorKind},
};
use rig_model::addr::{GpuVa, layout};
use rigd::{
    channels::{Limits, Served},
    dma::PoolMode,
    gpumem::Quota,
    nvrm::{Call, FakeRm, layout::r580},
};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 2 * MIB;
const GPU: &str = "0000:00:06.0";

struct Fixture {
    server: Server,
    rm: FakeRm,
    gpu: Arc<Served<FakeRm>>,
}

/// rigd serving a fake GPU whose sessions may hold `per_uid` pages each uid and
/// `per_gpu` pages in all.
async fn serve(per_uid: u64, per_gpu: u64) -> Fixture {
    let server = Server::start(64 * MIB).await;
    let rm = FakeRm::new();
    let gpu = server.serve_fake_gpu(
        GPU,
        rm.clone(),
        Limits {
            gpu_memory: Quota {
                per_uid_bytes: per_uid * PAGE,
                per_gpu_bytes: per_gpu * PAGE,
            },
            ..Limits::default()
        },
        4,
    );
    Fixture { server, rm, gpu }
}

fn kind(r: Result<impl std::fmt::Debug, SessionError>) -> Option<SessionErrorKind> {
    r.expect_err("refused").kind()
}

/// GPU memory allocations the fake RM has seen.
fn vidmem_allocs(rm: &FakeRm) -> usize {
    rm.calls()
        .iter()
        .filter(|c| {
            matches!(
                c,
                Call::Alloc {
                    class: r580::NV01_MEMORY_LOCAL_USER,
                    ..
                }
            )
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_learns_its_gpu_at_the_claim_and_one_on_a_host_pool_learns_none() {
    let f = serve(8, 16).await;
    f.server.shmem_pool("host", PoolMode::Host, 1);

    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let host = Session::open(&f.server.socket, "host").await.expect("host");

    let g = s.gpu().expect("a served GPU's session");
    assert_eq!(g.page_bytes, PAGE);
    assert_eq!(g.gpu_memory, layout::GPU_MEMORY_BASE..layout::VA_END);
    assert_eq!(g.gpu_memory_quota_bytes, 8 * PAGE);
    assert_eq!(
        (g.shared_window, g.local_window),
        (layout::SHARED_WINDOW, layout::LOCAL_WINDOW)
    );
    assert_eq!(g.va_end, GpuVa(1 << 40));
    let geo = g.geometry.expect("geometry");
    assert_eq!(
        (geo.sm_version, geo.sms(), geo.max_tpcs()),
        (0x900, 132, 72)
    );
    assert!(host.gpu().is_none());
    assert_eq!(
        kind(GpuMemory::alloc(&host, 4096).await),
        Some(SessionErrorKind::NotServed)
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffers_are_carved_from_leased_pages_and_a_small_alloc_and_free_costs_no_round_trip() {
    let f = serve(64, 64).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");

    let big = GpuMemory::alloc(&s, 3 * PAGE + 1).await.expect("big");
    assert!(big.va().is_aligned(PAGE), "{}", big.va());
    assert!(
        big.va() >= layout::GPU_MEMORY_BASE && big.va().get() + big.len() <= layout::VA_END.get()
    );
    let leases = GpuMemory::leases(&s);
    assert_eq!(leases.len(), 1);
    assert_eq!(leases[0].bytes, 4 * PAGE, "whole pages");
    assert_eq!(f.rm.vidmem_in_use(), 4 * PAGE);

    let a = GpuMemory::alloc(&s, 4096).await.expect("a");
    let b = GpuMemory::alloc(&s, 1000).await.expect("b");
    assert_eq!(
        vidmem_allocs(&f.rm),
        1,
        "a and b are carved from the lease's tail"
    );
    assert_eq!(b.va().get() - a.va().get(), 4096);
    assert_eq!(GpuMemory::leases(&s)[0].id, a.lease().0);
    assert!(b.va().is_aligned(GpuMemory::DEFAULT_ALIGN));
    drop((a, b));
    let calls = f.rm.calls().len();
    for _ in 0..100 {
        let c = GpuMemory::alloc(&s, 64 << 10).await.expect("again");
        GpuMemory::free(&s, c).await.expect("free");
    }
    assert_eq!(f.rm.calls().len(), calls, "kept pages: not one RM call");

    GpuMemory::free(&s, big).await.expect("free big");
    assert_eq!(
        f.rm.vidmem_in_use(),
        4 * PAGE,
        "emptied, and kept for the next"
    );
    let huge = GpuMemory::alloc(&s, 16 * PAGE)
        .await
        .expect("more than is kept");
    assert_eq!(vidmem_allocs(&f.rm), 2);
    GpuMemory::free(&s, huge).await.expect("free");
    // Released pages are unmapped and freed on rigd's lender thread, after the reply.
    assert!(
        wait_until(Duration::from_secs(5), || f.rm.vidmem_in_use() == 4 * PAGE).is_some(),
        "the 16 pages went back (over the 32 MiB kept), the 4 stay: {} in use",
        f.rm.vidmem_in_use()
    );
    GpuMemory::set_keep_bytes(&s, 0);
    assert_eq!(GpuMemory::trim(&s).await.expect("trim"), 1);
    assert!(
        wait_until(Duration::from_secs(5), || f.rm.vidmem_in_use() == 0
            && f.rm.live_maps() == 0)
        .is_some(),
        "trimmed: {} in use, {} maps",
        f.rm.vidmem_in_use(),
        f.rm.live_maps()
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sizes_quotas_and_foreign_ids_are_refused_typed_and_others_keep_working() {
    let f = serve(4, 6).await;
    let alice = Session::open(&f.server.socket, GPU).await.expect("alice");
    let bob = Session::open(&f.server.socket, GPU).await.expect("bob");
    let mine = GpuMemory::lease(&alice, PAGE).await.expect("a page");

    assert_eq!(
        kind(GpuMemory::alloc(&alice, 0).await),
        Some(SessionErrorKind::ZeroSize)
    );
    assert_eq!(
        kind(GpuMemory::alloc_aligned(&alice, 64, 3).await),
        Some(SessionErrorKind::Misaligned)
    );
    assert_eq!(
        kind(GpuMemory::lease(&alice, PAGE + 4096).await),
        Some(SessionErrorKind::Misaligned),
        "rigd lends whole pages"
    );
    assert_eq!(
        kind(GpuMemory::lease(&alice, 7 * PAGE).await),
        Some(SessionErrorKind::Oversized)
    );
    assert_eq!(
        kind(GpuMemory::lease(&bob, 4 * PAGE).await),
        Some(SessionErrorKind::Quota),
        "the same uid's two sessions share its quota"
    );
    assert_eq!(
        kind(GpuMemory::release(&bob, mine.id).await),
        Some(SessionErrorKind::UnknownGpuMemory),
        "alice's memory is not bob's to free"
    );
    assert_eq!(
        kind(GpuMemory::release(&alice, GpuMemId(9999)).await),
        Some(SessionErrorKind::UnknownGpuMemory)
    );
    let view = GpuMemory::lease_cpu_view(&alice, PAGE).await;
    if nix::unistd::getuid().is_root() {
        let (info, cpu) = view.expect("root may map GPU memory");
        assert!(info.cpu_view);
        cpu.write_u64(8, 0xfeed).expect("store");
        cpu.fence();
        assert_eq!(cpu.read_u64(8).expect("load"), 0xfeed);
    } else {
        assert_eq!(kind(view), Some(SessionErrorKind::CpuViewRefused));
    }

    // Both sessions still work.
    GpuMemory::alloc(&bob, 4096)
        .await
        .expect("bob within the quota");
    GpuMemory::release(&alice, mine.id)
        .await
        .expect("alice's own");
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_end_takes_its_gpu_memory_after_its_channels_and_another_keeps_its_own() {
    let f = serve(64, 64).await;
    let alice = Session::open(&f.server.socket, GPU).await.expect("alice");
    let bob = Session::open(&f.server.socket, GPU).await.expect("bob");
    let ch = Channel::open(&alice, Engine::Copy, 64)
        .await
        .expect("channel");
    let _a = GpuMemory::alloc(&alice, 8 * PAGE).await.expect("alice's");
    let b = GpuMemory::alloc(&bob, PAGE).await.expect("bob's");
    assert!(f.gpu.boosted(), "clocks up while a channel is lent");
    let mark = f.rm.calls().len();

    drop((ch, alice));

    assert!(
        wait_until(Duration::from_secs(5), || f.rm.vidmem_in_use() == PAGE).is_some(),
        "alice's GPU memory freed"
    );
    let calls = f.rm.calls();
    let after = &calls[mark..];
    let channel_freed = after
        .iter()
        .position(|c| matches!(c, Call::Free { .. }))
        .expect("something freed");
    let vidmem_unmapped = after
        .iter()
        .position(|c| matches!(c, Call::UnmapDma { dma_offset, .. } if *dma_offset >= layout::GPU_MEMORY_BASE.get()))
        .expect("alice's GPU memory unmapped");
    assert!(
        channel_freed < vidmem_unmapped,
        "the channel went first: {after:#?}"
    );
    assert!(!f.gpu.boosted(), "no channel left: clocks back");
    let status = f.server.rig.gpu_memory_status(None);
    assert_eq!(status.0.len(), 1);
    assert_eq!(
        (status.0[0].session.0, status.0[0].bytes),
        (bob.id().0, PAGE)
    );
    GpuMemory::free(&bob, b).await.expect("bob's still his");
    f.server.stop().await;
}

/// In a child process (this binary, run for this test alone with the socket in
/// `RIG_GPUMEM_CHILD`): a session with GPU memory and a channel, then "ready", then
/// sleep until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_killed_with_sigkill_has_its_gpu_memory_and_channels_taken_back() {
    if let Ok(socket) = std::env::var("RIG_GPUMEM_CHILD") {
        let s = Session::open(&socket, GPU).await.expect("child session");
        let _m = GpuMemory::alloc(&s, 4 * PAGE).await.expect("child memory");
        let _ch = Channel::open(&s, Engine::Compute, 64)
            .await
            .expect("child channel");
        println!("ready");
        tokio::time::sleep(Duration::from_secs(60)).await;
        return;
    }
    let f = serve(64, 64).await;
    let other = Session::open(&f.server.socket, GPU).await.expect("other");
    let _kept = GpuMemory::alloc(&other, PAGE)
        .await
        .expect("another client's");
    let mut child = std::process::Command::new(std::env::current_exe().expect("this test"))
        .args([
            "--exact",
            "a_client_killed_with_sigkill_has_its_gpu_memory_and_channels_taken_back",
            "--nocapture",
        ])
        .env("RIG_GPUMEM_CHILD", &f.server.socket)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("child");
    let out = child.stdout.take().expect("stdout");
    let ready = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        std::io::BufReader::new(out)
            .lines()
            .any(|l| l.is_ok_and(|l| l.contains("ready")))
    })
    .await
    .expect("join");
    assert!(ready, "the child holds its memory");
    assert_eq!(f.rm.vidmem_in_use(), 5 * PAGE);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill -9");
    let _ = child.wait();

    assert!(
        wait_until(Duration::from_secs(5), || f.rm.vidmem_in_use() == PAGE
            && f.server.rig.channel_status(None).is_empty())
        .is_some(),
        "the killed client's GPU memory and channel are gone; the other's stays"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_lowers_the_gpu_memory_quota_for_the_next_allocation_and_keeps_what_is_held() {
    let f = serve(8, 16).await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let held = GpuMemory::lease(&s, 4 * PAGE)
        .await
        .expect("within 8 pages");
    let mut config = rigd::config::Config::default();
    config.gpu_memory.per_uid_bytes = 4 * PAGE;

    f.server.rig.reload(&config).expect("reloaded");

    assert_eq!(
        kind(GpuMemory::lease(&s, PAGE).await),
        Some(SessionErrorKind::Quota),
        "the new quota is full with what was held before"
    );
    GpuMemory::release(&s, held.id)
        .await
        .expect("held across the reload");
    GpuMemory::lease(&s, 4 * PAGE)
        .await
        .expect("within the new quota");
    f.server.stop().await;
}
