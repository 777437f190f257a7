//! What the runtime's tests against rigd share: rigd serving a fake RM GPU with its
//! pool on shmem (no GPU, no hugepages), the fixture cubin, and the GPU's part played
//! by hand (a semaphore written through rigd's own view of the lease, the session's
//! memory read back).

#![allow(dead_code, reason = "each test file uses part of this")]

#[path = "../../../rig-client/tests/dma_support/mod.rs"]
pub mod dma_support;

use std::sync::Arc;

use dma_support::Server;
use rig_client::session::Session;
use rigd::{
    channels::{Limits, Served},
    nvrm::FakeRm,
};

pub const MIB: u64 = 1 << 20;
pub const GPU: &str = "0000:00:06.0";
pub const KERNELS: &[u8] = include_bytes!("../../../cubin/tests/data/kernels.sm_90.cubin");

pub struct Fixture {
    pub server: Server,
    pub gpu: Arc<Served<FakeRm>>,
}

/// rigd serving a fake GPU whose pool holds `blocks` blocks of 2 MiB.
pub async fn serve(blocks: u32) -> Fixture {
    let server = Server::start(u64::from(blocks) * 2 * MIB).await;
    let gpu = server.serve_fake_gpu(
        GPU,
        FakeRm::new(),
        Limits {
            channels_per_session: 8,
            max_ring_entries: 1 << 20,
            ..Limits::default()
        },
        blocks,
    );
    Fixture { server, gpu }
}

/// What the GPU would do: writes `bytes` at `va` in the session's memory, through
/// rigd's own view of the lease.
pub fn gpu_writes(f: &Fixture, s: &Session, va: u64, bytes: &[u8]) {
    f.server.gpu_writes(s, GPU, va, bytes);
}

/// `len` bytes of the session's memory at `va`.
pub fn read(s: &Session, va: u64, len: usize) -> Vec<u8> {
    let (lease, off) = dma_support::lease_of(s, va);
    let mut b = vec![0u8; len];
    s.read_lease(lease, off, &mut b).expect("read");
    b
}

/// Little-endian u64 words of `bytes`.
pub fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// The words the GPU fetches for the last `n` ring entries of `ch`, one list per
/// entry, oldest first.
pub fn fetched(s: &Session, ch: &rig_client::channel::Channel, n: u32) -> Vec<Vec<u32>> {
    ch.submitted(n)
        .expect("the ring reads back")
        .into_iter()
        .map(|(va, words)| {
            read(s, va.get(), 4 * words as usize)
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect()
        })
        .collect()
}

/// Whether `words` lie, in order, anywhere in the session's leases.
pub fn pushed(s: &Session, words: &[u32]) -> bool {
    let needle: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    s.leases().iter().any(|l| {
        let mut bytes = vec![0u8; usize::try_from(l.bytes).expect("a lease fits memory")];
        s.read_lease(l.id, 0, &mut bytes).expect("read the lease");
        (0..bytes.len() / 4).any(|i| bytes[i * 4..].starts_with(&needle))
    })
}

/// The GP_PUT rigd sees for each channel of the fixture, by channel id.
pub fn gp_puts(f: &Fixture) -> Vec<(u64, u32)> {
    let mut v: Vec<_> = f
        .server
        .rig
        .channel_status(None)
        .iter()
        .map(|c| (c.id.0, c.gp_put))
        .collect();
    v.sort_unstable();
    v
}
