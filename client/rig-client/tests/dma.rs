//! DMA end to end on shmem pools (any user, no hugepages): sessions through the
//! client library, typed refusals, foreign handles, sealed descriptors, reclaim when
//! a session goes, and vfio mode against a fake IOMMU.

mod dma_support;

use std::{sync::Arc, time::Duration};

use dma_support::{Server, wait_until};
use rig_client::{
    ClientError,
    session::{Addressing, Session, SessionErrorKind},
};
use rigd::dma::{FakeIommu, HostVa, Iova, PoolMode};
use tonic::Code;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 2 * MIB;

#[tokio::test]
async fn a_buffer_is_carved_from_a_lease_and_seen_by_rigd() {
    let server = Server::start(64 * MIB).await;
    server.shmem_pool("host", PoolMode::Host, 4);
    let session = Session::open(&server.socket, "host").await.expect("open");
    assert_eq!(session.addressing(), Addressing::None);
    let a = session
        .alloc(64 << 10, 4096)
        .await
        .expect("first: leases a block");
    let b = session
        .alloc(64 << 10, 4096)
        .await
        .expect("second: fast path");
    assert_eq!(session.leases().len(), 1, "both in one block");
    assert_eq!(a.device_address(), None, "host mode");
    assert_eq!(a.as_ptr() as usize % 4096, 0);
    b.write(10, b"from the client").expect("write");
    let (lease, offset) = b.lease();
    let pool = server.rig.dma().pool("host").expect("pool");
    let mut got = [0u8; 15];
    pool.read(rigd::dma::LeaseId(lease.0), offset + 10, &mut got)
        .expect("rigd reads the lease");
    assert_eq!(&got, b"from the client");
    pool.write(rigd::dma::LeaseId(lease.0), offset + 40, b"from rigd")
        .expect("rigd writes");
    let mut back = [0u8; 9];
    b.read(40, &mut back).expect("read");
    assert_eq!(&back, b"from rigd");
    server.stop().await;
}

#[tokio::test]
async fn zero_oversized_misaligned_and_foreign_requests_are_refused_and_others_still_served() {
    let server = Server::start(64 * MIB).await;
    server.shmem_pool("host", PoolMode::Host, 4);
    let alice = Session::open(&server.socket, "host").await.expect("alice");
    let mallory = Session::open(&server.socket, "host")
        .await
        .expect("mallory");
    let kind = |e: rig_client::session::SessionError| e.kind();
    // rigd's own checks, through the raw lease call.
    assert_eq!(
        kind(mallory.lease(0).await.expect_err("zero")),
        Some(SessionErrorKind::ZeroSize)
    );
    assert_eq!(
        kind(mallory.lease(BLOCK + 1).await.expect_err("misaligned")),
        Some(SessionErrorKind::Misaligned)
    );
    assert_eq!(
        kind(
            mallory
                .lease(5 * BLOCK)
                .await
                .expect_err("more than the pool")
        ),
        Some(SessionErrorKind::Oversized)
    );
    assert_eq!(
        kind(mallory.lease(1 << 40).await.expect_err("more than a lease")),
        Some(SessionErrorKind::Oversized)
    );
    // The library's checks before asking.
    assert_eq!(
        kind(mallory.alloc(0, 64).await.expect_err("zero")),
        Some(SessionErrorKind::ZeroSize)
    );
    assert_eq!(
        kind(mallory.alloc(64, 3).await.expect_err("align 3")),
        Some(SessionErrorKind::Misaligned)
    );
    assert_eq!(
        kind(mallory.alloc(64, 4 * MIB).await.expect_err("align 4 MiB")),
        Some(SessionErrorKind::Misaligned)
    );
    // Alice's lease cannot be named by mallory.
    let lease = alice.lease(BLOCK).await.expect("alice leases");
    alice.write_lease(lease.id, 0, b"alice").expect("write");
    let e = mallory.release(lease.id).await.expect_err("foreign handle");
    assert_eq!(e.kind(), Some(SessionErrorKind::UnknownLease));
    assert_eq!(
        mallory
            .read_lease(lease.id, 0, &mut [0; 5])
            .expect_err("not mapped here")
            .kind(),
        Some(SessionErrorKind::UnknownLease)
    );
    let mut got = [0u8; 5];
    alice
        .read_lease(lease.id, 0, &mut got)
        .expect("still alice's");
    assert_eq!(&got, b"alice");
    // Both sessions keep working.
    mallory
        .alloc(100, 64)
        .await
        .expect("mallory is still served");
    alice
        .release(lease.id)
        .await
        .expect("alice releases her own");
    server.stop().await;
}

#[tokio::test]
async fn a_shared_block_cannot_be_truncated_or_grown() {
    let server = Server::start(64 * MIB).await;
    server.shmem_pool("host", PoolMode::Host, 2);
    let session = Session::open(&server.socket, "host").await.expect("open");
    let lease = session.lease(BLOCK).await.expect("lease");
    let fds = session.lease_fds(lease.id).expect("dup").expect("held");
    assert_eq!(fds.len(), 1);
    let shrink = nix::unistd::ftruncate(&fds[0], 0).expect_err("sealed against shrinking");
    assert_eq!(shrink, nix::errno::Errno::EPERM);
    let grow = nix::unistd::ftruncate(&fds[0], 4 << 20).expect_err("sealed against growing");
    assert_eq!(grow, nix::errno::Errno::EPERM);
    session
        .write_lease(lease.id, BLOCK - 1, b"x")
        .expect("the last byte still works");
    server.stop().await;
}

#[tokio::test]
async fn dropping_a_session_returns_its_blocks_within_100_ms() {
    let server = Server::start(64 * MIB).await;
    server.shmem_pool("host", PoolMode::Host, 4);
    let session = Session::open(&server.socket, "host").await.expect("open");
    session.lease(2 * BLOCK).await.expect("lease");
    session.alloc(1000, 64).await.expect("and a buffer");
    let pool = server.rig.dma().pool("host").expect("pool");
    assert_eq!(pool.status().leased_blocks, 3);
    drop(session);
    let rig = Arc::clone(&server.rig);
    let took = tokio::task::spawn_blocking(move || {
        wait_until(Duration::from_secs(2), || {
            pool.status().leased_blocks == 0 && rig.dma().status(None).clients.is_empty()
        })
    })
    .await
    .expect("join")
    .expect("reclaimed");
    assert!(took < Duration::from_millis(100), "reclaimed in {took:?}");
    server.stop().await;
}

#[tokio::test]
async fn quota_refusals_are_typed() {
    let server = Server::start(2 * BLOCK).await;
    server.shmem_pool("host", PoolMode::Host, 4);
    let session = Session::open(&server.socket, "host").await.expect("open");
    assert_eq!(session.quota_bytes(), 2 * BLOCK);
    session.lease(2 * BLOCK).await.expect("up to the quota");
    let e = session.lease(BLOCK).await.expect_err("past it");
    assert_eq!(e.kind(), Some(SessionErrorKind::Quota));
    assert!(e.to_string().contains("quota"), "{e}");
    server.stop().await;
}

#[tokio::test]
async fn an_unknown_pool_is_not_found() {
    let server = Server::start(64 * MIB).await;
    let e = Session::open(&server.socket, "0000:99:00.0")
        .await
        .expect_err("no pool");
    assert!(
        matches!(
            &e,
            rig_client::session::SessionError::Client(ClientError::Rpc {
                code: Code::NotFound,
                ..
            })
        ),
        "{e:?}"
    );
    let rig_client::session::SessionError::Client(c) = &e else {
        unreachable!("matched above")
    };
    let info = c.error_info().expect("rig's error details");
    assert_eq!(
        (info.reason.as_str(), info.device.as_deref()),
        ("NO_POOL", Some("0000:99:00.0"))
    );
    server.stop().await;
}

#[tokio::test]
async fn vfio_buffers_have_iova_and_the_iommu_blocks_them_after_free() {
    let server = Server::start(64 * MIB).await;
    let iommu = Arc::new(FakeIommu::typical());
    server.shmem_pool("0000:03:00.0", PoolMode::Vfio(iommu.clone()), 4);
    let session = Session::open(&server.socket, "0000:03:00.0")
        .await
        .expect("open");
    assert_eq!(session.addressing(), Addressing::Iova);
    session.set_keep_empty(0);
    let buf = session.alloc(64 << 10, 4096).await.expect("alloc");
    let iova = buf
        .device_address()
        .expect("vfio mode has device addresses")
        .get();
    assert_eq!(iova % 4096, 0);
    // The device reaches the buffer through the IOMMU: what the client writes, rigd's
    // mapping at the translated address holds.
    let host = iommu.translate(Iova(iova)).expect("mapped");
    buf.write(0, b"dma").expect("write");
    let (lease, offset) = buf.lease();
    let pool = server.rig.dma().pool("0000:03:00.0").expect("pool");
    let mut got = [0u8; 3];
    pool.read(rigd::dma::LeaseId(lease.0), offset, &mut got)
        .expect("read");
    assert_eq!(&got, b"dma");
    assert_ne!(host, HostVa(0));
    session.free(buf).await.expect("free gives the lease back");
    assert_eq!(
        iommu.translate(Iova(iova)),
        None,
        "the IOMMU faults the device now"
    );
    server.stop().await;
}

#[tokio::test]
async fn multi_block_buffers_are_contiguous_for_the_cpu_and_the_device() {
    let server = Server::start(64 * MIB).await;
    let iommu = Arc::new(FakeIommu::typical());
    server.shmem_pool("gpu", PoolMode::Vfio(iommu.clone()), 4);
    let session = Session::open(&server.socket, "gpu").await.expect("open");
    let buf = session.alloc(3 * BLOCK, BLOCK).await.expect("three blocks");
    let iova = buf
        .device_address()
        .and_then(|d| d.iova())
        .expect("iova")
        .get();
    assert_eq!(iova % BLOCK, 0);
    assert_eq!(buf.as_ptr() as u64 % BLOCK, 0);
    // Across the first block boundary, for the CPU...
    buf.write(BLOCK - 2, b"span").expect("write across blocks");
    let mut got = [0u8; 4];
    buf.read(BLOCK - 2, &mut got).expect("read");
    assert_eq!(&got, b"span");
    // ...and for the device: consecutive IOVA reach consecutive blocks.
    for i in 0..3 {
        assert!(iommu.translate(Iova(iova + i * BLOCK)).is_some());
    }
    server.stop().await;
}
