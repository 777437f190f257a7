//! Completion released by the engine that did the work, end to end against a fake RM
//! (rigd serves a `FakeRm` GPU with its pool on shmem): the words a copy, a fill and a
//! release leave in the pushbuffer (read back from the session's leases), a copy
//! engine's 32-bit release read across 2^32, a compute channel that refuses to release
//! raw words, a posted fault that wins over a value that landed, and the arena beside
//! the pushbuffer.

mod dma_support;

use std::{sync::Arc, time::Duration};

use dma_support::Server;
use rig_client::{
    addr::GpuVa,
    channel::{ARENA_ALIGN, Channel, ChannelError, Engine, Options, Payload, Rings, TimelineError},
    session::Session,
};
use rig_nv::method::{
    self,
    copy::{MAX_COPY, MAX_MEMSET, Semaphore},
};
use rigd::{
    channels::{ChannelId, Limits, Served},
    nvrm::FakeRm,
};

const MIB: u64 = 1 << 20;
const GPU: &str = "0000:00:06.0";
const SHORT: Duration = Duration::from_millis(200);

struct Fixture {
    server: Server,
    gpu: Arc<Served<FakeRm>>,
}

async fn serve() -> Fixture {
    let server = Server::start(64 * MIB).await;
    let gpu = server.serve_fake_gpu(
        GPU,
        FakeRm::new(),
        Limits {
            channels_per_session: 4,
            max_ring_entries: 4096,
            ..Limits::default()
        },
        8,
    );
    Fixture { server, gpu }
}

/// Whether `words` lie, in order, anywhere in the session's leases.
fn pushed(s: &Session, words: &[u32]) -> bool {
    let needle: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    s.leases().iter().any(|l| {
        let mut bytes = vec![0u8; usize::try_from(l.bytes).expect("a lease fits memory")];
        s.read_lease(l.id, 0, &mut bytes).expect("read the lease");
        bytes
            .chunks_exact(4)
            .enumerate()
            .any(|(i, _)| bytes[i * 4..].starts_with(&needle))
    })
}

/// What the GPU would do: writes `bytes` at the channel's semaphore, through rigd's
/// own view of the lease.
fn land(f: &Fixture, s: &Session, ch: &Channel, bytes: &[u8]) {
    f.server.gpu_writes(s, GPU, ch.semaphore_va().get(), bytes);
}

fn sem(ch: &Channel, value: u64) -> Semaphore {
    Semaphore {
        addr: ch.semaphore_va(),
        payload: u32::try_from(value & 0xffff_ffff).expect("masked"),
        timestamp: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_is_released_by_the_copy_engine_in_its_own_launch_dma() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    assert_eq!(ch.payload(), Payload::Word32);
    let (a, b) = (GpuVa(0x40_0000_0000), GpuVa(0x40_1000_0000));

    let v = ch.copy(a, b, MIB).expect("copy");
    assert_eq!(ch.release().expect("release"), v, "the copy's own release");
    let again = ch.release().expect("a second release");
    assert_eq!(again, v + 1, "a release of the engine's own after it");
    let fill = ch.fill(b, 0xdead_beef, 4096).expect("fill");
    ch.submit().expect("submit");

    let copy = method::copy::copy_released(a, b, MIB, sem(&ch, v)).expect("words");
    assert!(pushed(&s, &copy), "the copy carries its release");
    let bare = method::copy::release(sem(&ch, again)).expect("words");
    assert!(
        pushed(&s, &bare),
        "the copy engine releases after its copies"
    );
    let host = method::release_with(
        ch.semaphore_va(),
        v,
        method::Release {
            wait_idle: true,
            timestamp: false,
        },
    )
    .expect("words");
    assert!(!pushed(&s, &host), "no host release stands for the copy");
    let memset = method::copy::memset(b, 0xdead_beef, 4096, Some(sem(&ch, fill))).expect("words");
    assert!(pushed(&s, &memset));
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_over_the_line_limit_goes_in_lines_and_only_the_last_releases() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    let (a, b) = (GpuVa(0x40_0000_0000), GpuVa(0x48_0000_0000));
    let bytes = 2 * MAX_COPY + 10;
    let v = ch.copy(a, b, bytes).expect("copy");
    ch.submit().expect("submit");
    for i in 0..2 {
        let line = method::copy_flushed(
            GpuVa(a.get() + i * MAX_COPY),
            GpuVa(b.get() + i * MAX_COPY),
            MAX_COPY,
        )
        .expect("words");
        assert!(pushed(&s, &line), "line {i}");
    }
    let last = method::copy::copy_released(
        GpuVa(a.get() + 2 * MAX_COPY),
        GpuVa(b.get() + 2 * MAX_COPY),
        10,
        sem(&ch, v),
    )
    .expect("words");
    assert!(pushed(&s, &last));
    // Refused before anything is written: 0 bytes, an address past 2^57.
    let mark = ch.last_value();
    assert!(matches!(ch.copy(a, b, 0), Err(ChannelError::Copy(_))));
    assert!(matches!(
        ch.copy(a, GpuVa(1 << 57), 8),
        Err(ChannelError::Copy(_))
    ));
    assert!(matches!(ch.fill(b, 0, 6), Err(ChannelError::Copy(_))));
    assert_eq!(ch.last_value(), mark, "nothing promised");
    f.server.stop().await;
}

/// The fill that faulted the copy engine in one line (8 GiB of 4-byte elements) goes as
/// eight 1 GiB lines, the release only in the last, and no line longer than MAX_MEMSET.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_8_gib_fill_goes_in_1_gib_lines_and_only_the_last_releases() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    let dst = GpuVa(0x40_0000_1000);
    let bytes = 8 << 30;
    let v = ch.fill(dst, 0x5a5a_5a5a, bytes).expect("fill");
    ch.submit().expect("submit");
    assert_eq!(MAX_MEMSET, 1 << 30);
    for i in 0..7 {
        let line = method::copy::memset(
            GpuVa(dst.get() + i * MAX_MEMSET),
            0x5a5a_5a5a,
            MAX_MEMSET,
            None,
        )
        .expect("words");
        assert!(pushed(&s, &line), "line {i}");
    }
    let last = method::copy::memset(
        GpuVa(dst.get() + 7 * MAX_MEMSET),
        0x5a5a_5a5a,
        MAX_MEMSET,
        Some(sem(&ch, v)),
    )
    .expect("words");
    assert!(pushed(&s, &last), "the last line releases");
    // One element more than the lines above: a ninth line of 4 bytes.
    let w = ch.fill(dst, 7, bytes + 4).expect("fill");
    ch.submit().expect("submit");
    let tail =
        method::copy::memset(GpuVa(dst.get() + bytes), 7, 4, Some(sem(&ch, w))).expect("words");
    assert!(pushed(&s, &tail));
    // No single line of the 8 GiB the engine refused is ever encoded.
    assert!(matches!(
        method::copy::memset(dst, 0, bytes, None),
        Err(method::copy::CopyError::Length { .. })
    ));
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_32_bit_copy_release_is_read_as_its_value_across_2_to_the_32() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    let before = (1u64 << 32) - 1;
    ch.release_value(before).expect("a host release");
    ch.submit().expect("submit");
    land(&f, &s, &ch, &before.to_le_bytes());
    ch.wait(before, SHORT).expect("landed");
    let v = ch
        .copy(GpuVa(0x40_0000_0000), GpuVa(0x40_1000_0000), 64)
        .expect("copy");
    assert_eq!(v, 1 << 32);
    ch.submit().expect("submit");
    // The copy engine writes the low word only: the high word still says 0.
    land(&f, &s, &ch, &0u32.to_le_bytes());
    ch.wait(v, SHORT).expect("landed");
    assert_eq!(ch.completed().expect("read"), 1 << 32);
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compute_channel_releases_launches_through_their_own_words_only() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Compute, 64)
        .await
        .expect("channel");
    assert_eq!(ch.payload(), Payload::Word64);
    // Nothing pushed: an empty submission's release is the host's.
    let v = ch.release().expect("empty");
    assert_eq!(v, 1);
    // Raw words may be a launch: refused, and nothing promised.
    ch.push(&method::compute::invalidate_sked_caches())
        .expect("raw words");
    let e = ch.release().expect_err("raw words");
    assert!(matches!(e, ChannelError::Unreleased { .. }), "{e}");
    assert_eq!(ch.last_value(), 1);
    assert!(matches!(
        ch.copy(GpuVa(0x1000), GpuVa(0x2000), 4),
        Err(ChannelError::WrongEngine {
            engine: Engine::Compute,
            needs: Engine::Copy,
            ..
        })
    ));
    // A launch's words with its release inside: release() is that value.
    let next = ch.next_value().expect("next");
    let words = method::compute::send_pcas(
        GpuVa(0x10_0000),
        method::compute::PcasAction::InvalidateCopySchedule,
    )
    .expect("words");
    assert_eq!(ch.push_released(&words, next).expect("pushed"), next);
    assert_eq!(ch.release().expect("the launch's"), next);
    assert!(matches!(
        ch.push_released(&words, next),
        Err(ChannelError::Timeline(TimelineError::Backwards { .. }))
    ));
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_posted_by_the_time_the_value_lands_ends_the_wait_with_it() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let mut ch = Channel::open(&s, Engine::Copy, 64).await.expect("channel");
    let v = ch.release().expect("release");
    ch.submit().expect("submit");
    // The value lands (a host release after refused work would), and the RM posts.
    land(&f, &s, &ch, &v.to_le_bytes());
    assert!(f.gpu.post_fault(ChannelId(ch.id()), 32));
    let e = ch.wait(v, SHORT).expect_err("faulted");
    assert!(
        matches!(&e, ChannelError::Fault { fault, .. } if fault.info32 == 32),
        "{e}"
    );
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arena_beside_the_pushbuffer_takes_aligned_words_inside_it() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let o = Options {
        entries: 64,
        arena: 16 * ARENA_ALIGN,
        ..Options::default()
    };
    let ch = Channel::open_opts(&s, Engine::Compute, o)
        .await
        .expect("channel");
    let va = ch.arena_va().expect("an arena");
    assert!(va.is_aligned(ARENA_ALIGN));
    assert_eq!(ch.arena_len(), 16 * ARENA_ALIGN);
    ch.write_arena(8, &[0x1122_3344_5566_7788, 9])
        .expect("write");
    let (lease, off) = dma_support::lease_of(&s, va.get());
    let mut back = [0u8; 16];
    s.read_lease(lease, off + 8, &mut back).expect("read");
    assert_eq!(back[..8], 0x1122_3344_5566_7788u64.to_le_bytes());
    for (offset, n) in [(4, 1), (16 * ARENA_ALIGN - 8, 2), (u64::MAX - 7, 1)] {
        let e = ch.write_arena(offset, &vec![0; n]).expect_err("outside");
        assert!(matches!(e, ChannelError::Arena { .. }), "{e}");
    }
    let bad = Options {
        arena: 100,
        ..Options::default()
    };
    assert!(matches!(
        Channel::open_opts(&s, Engine::Compute, bad).await,
        Err(ChannelError::Arena { len: 100, .. })
    ));
    if nix::unistd::geteuid().is_root() {
        // Rings in GPU memory (the fake's window is host memory): the arena follows
        // the pushbuffer in the window.
        let o = Options {
            entries: 64,
            pushbuffer: 16 << 10,
            arena: 64 << 10,
            rings: Rings::Gpu,
        };
        let g = Channel::open_opts(&s, Engine::Compute, o)
            .await
            .expect("window channel");
        let va = g.arena_va().expect("an arena");
        assert!(va.is_aligned(ARENA_ALIGN));
        g.write_arena((64 << 10) - 8, &[7]).expect("the last word");
        assert!(g.write_arena(64 << 10, &[7]).is_err());
    }
    f.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_written_in_the_arena_is_fetched_after_the_open_one_and_releases_its_value() {
    let f = serve().await;
    let s = Session::open(&f.server.socket, GPU).await.expect("session");
    let o = Options {
        entries: 8,
        arena: 4 * ARENA_ALIGN,
        ..Options::default()
    };
    let mut ch = Channel::open_opts(&s, Engine::Compute, o)
        .await
        .expect("channel");
    let arena = ch.arena_va().expect("an arena");
    let raw = method::compute::invalidate_sked_caches();
    let launch = method::compute::send_pcas(
        GpuVa(0x10_0000),
        method::compute::PcasAction::InvalidateCopySchedule,
    )
    .expect("words");
    ch.write_arena(0, &[pair(launch[0], launch[1]), pair(launch[2], launch[3])])
        .expect("the words, once");
    ch.push(&raw).expect("raw words");
    let v = ch.next_value().expect("next");
    assert_eq!(ch.push_segment_released(arena, 4, v).expect("queued"), v);
    assert_eq!(ch.release().expect("the segment's"), v);
    ch.submit().expect("submit");
    // In order: the pushbuffer's open segment (the raw words), then the arena's.
    let got = ch.submitted(2).expect("ring");
    assert_eq!(got[1], (arena, 4));
    let (lease, off) = dma_support::lease_of(&s, got[0].0.get());
    let mut words = vec![0u8; 4 * got[0].1 as usize];
    s.read_lease(lease, off, &mut words).expect("read");
    assert!(words.ends_with(&raw.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<_>>()));

    // Refused before anything is queued: a value not past the last, a segment no
    // ring entry can point at.
    assert!(matches!(
        ch.push_segment_released(arena, 4, v),
        Err(ChannelError::Timeline(TimelineError::Backwards { .. }))
    ));
    for (va, words) in [(GpuVa(arena.get() + 2), 4), (arena, 0), (GpuVa(1 << 40), 4)] {
        let e = ch
            .push_segment_released(va, words, v + 1)
            .expect_err("no entry points there");
        assert!(matches!(e, ChannelError::Ring(_)), "{e}");
    }
    assert_eq!(ch.last_value(), v);

    // Half the ring's 8 entries queued: the next segment submits them first.
    let put = |f: &Fixture| f.server.rig.channel_status(None)[0].gp_put;
    let before = put(&f);
    for k in 1..=4 {
        ch.push_segment_released(arena, 4, v + k).expect("queued");
    }
    assert_eq!(put(&f), before, "four queued, none submitted");
    ch.push_segment_released(arena, 4, v + 5).expect("queued");
    assert_eq!(put(&f), (before + 4) % 8, "the four went first");
    f.server.stop().await;
}

fn pair(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}
