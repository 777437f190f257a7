//! Sessions, handles and quotas over shmem pools (no hugepages, no root).

use std::time::Duration;

use super::*;

const G: u64 = BLOCK_SIZE;
const ALICE: PeerCred = PeerCred {
    uid: 1000,
    gid: 1000,
    pid: 10,
};
const BOB: PeerCred = PeerCred {
    uid: 1001,
    gid: 1001,
    pid: 11,
};

fn pools(per_uid: u64, per_device: u64, names: &[(&str, u32)]) -> Pools {
    let config = config::Dma {
        quota: config::DmaQuota {
            per_uid_bytes: per_uid,
            per_device_bytes: per_device,
        },
        ..config::Dma::default()
    };
    let p = Pools::new(&config, Path::new("/nonexistent"));
    for (name, blocks) in names {
        let spec = PoolSpec {
            mode: PoolMode::Host,
            blocks: *blocks,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = p.create(name, spec).expect("create");
        assert!(pool.wait_pinned(Duration::from_secs(10)));
    }
    p
}

fn session(p: &Pools, pool: &str, peer: PeerCred) -> SessionId {
    let t = p.open_session(pool, peer).expect("open");
    p.claim(t.id, &t.token, peer).expect("claim");
    t.id
}

#[test]
fn a_session_must_be_claimed_with_its_token_by_its_opener_once() {
    let p = pools(64 * G, 64 * G, &[("gpu0", 4)]);
    let t = p.open_session("gpu0", ALICE).expect("open");
    let e = p.lease(t.id, G).expect_err("unclaimed");
    assert!(matches!(e, DmaError::BadSession { .. }), "{e}");
    let mut wrong = t.token;
    wrong[0] ^= 1;
    assert!(matches!(
        p.claim(t.id, &wrong, ALICE),
        Err(DmaError::BadSession {
            why: "wrong token",
            ..
        })
    ));
    let thief = PeerCred { pid: 99, ..ALICE };
    assert!(
        matches!(
            p.claim(t.id, &t.token, thief),
            Err(DmaError::BadSession { .. })
        ),
        "same uid, other process"
    );
    p.claim(t.id, &t.token, ALICE).expect("claim");
    assert!(
        matches!(
            p.claim(t.id, &t.token, ALICE),
            Err(DmaError::BadSession {
                why: "already claimed",
                ..
            })
        ),
        "only once"
    );
    p.lease(t.id, G).expect("now leases");
}

#[test]
fn zero_misaligned_and_oversized_leases_get_typed_errors() {
    let p = pools(1 << 40, 1 << 40, &[("gpu0", 4)]);
    let s = session(&p, "gpu0", ALICE);
    assert!(matches!(p.lease(s, 0), Err(DmaError::ZeroSize)));
    assert!(matches!(
        p.lease(s, G + 4096),
        Err(DmaError::Misaligned { .. })
    ));
    assert!(
        matches!(p.lease(s, 5 * G), Err(DmaError::Oversized { .. })),
        "pool holds 4"
    );
    let cap = u64::from(MAX_LEASE_BLOCKS + 1) * G;
    assert!(matches!(p.lease(s, cap), Err(DmaError::Oversized { .. })));
    // Nothing was charged or taken by the refusals.
    let g = p.lease(s, 4 * G).expect("the whole pool");
    assert_eq!(g.fds.len(), 4);
}

#[test]
fn a_foreign_handle_is_unknown_and_leaves_its_owner_untouched() {
    let p = pools(64 * G, 64 * G, &[("gpu0", 4)]);
    let a = session(&p, "gpu0", ALICE);
    let b = session(&p, "gpu0", BOB);
    let lease = p.lease(a, G).expect("alice leases").lease;
    let e = p.release(b, lease).expect_err("bob names alice's lease");
    assert!(matches!(e, DmaError::UnknownLease { .. }), "{e}");
    let pool = p.pool("gpu0").expect("pool");
    pool.write(lease, 0, b"still alice's")
        .expect("still leased");
    p.release(a, lease).expect("alice frees it");
}

#[test]
fn quotas_bound_each_uid_per_device_and_across_devices() {
    let p = pools(3 * G, 2 * G, &[("gpu0", 4), ("gpu1", 4)]);
    let a0 = session(&p, "gpu0", ALICE);
    let a1 = session(&p, "gpu1", ALICE);
    p.lease(a0, 2 * G).expect("2 on gpu0");
    let e = p.lease(a0, G).expect_err("3 on gpu0 > per device");
    assert!(
        matches!(&e, DmaError::Quota { scope, .. } if scope == "on gpu0"),
        "{e}"
    );
    p.lease(a1, G).expect("1 on gpu1");
    let e = p.lease(a1, G).expect_err("4 in all > per uid");
    assert!(
        matches!(&e, DmaError::Quota { scope, .. } if scope == "across devices"),
        "{e}"
    );
    // Another uid has its own quota.
    let b = session(&p, "gpu0", BOB);
    p.lease(b, 2 * G).expect("bob's own quota");
}

#[test]
fn closing_a_session_reclaims_its_leases_and_quota() {
    let p = pools(2 * G, 2 * G, &[("gpu0", 2)]);
    let t = p.open_session("gpu0", ALICE).expect("open");
    let ended = p.claim(t.id, &t.token, ALICE).expect("claim");
    p.lease(t.id, 2 * G).expect("all of it");
    assert_eq!(p.close_session(t.id), 1);
    assert!(*ended.borrow(), "the session's end is announced");
    assert_eq!(p.close_session(t.id), 0, "closing twice does nothing");
    let pool = p.pool("gpu0").expect("pool");
    assert!(pool.wait_pinned(Duration::from_secs(10)));
    assert_eq!(pool.status().free_blocks, 2);
    let again = session(&p, "gpu0", ALICE);
    p.lease(again, 2 * G).expect("quota refunded");
}

#[test]
fn status_shows_everyone_to_root_and_only_their_own_to_others() {
    let p = pools(8 * G, 8 * G, &[("gpu0", 4)]);
    let a = session(&p, "gpu0", ALICE);
    let _b = session(&p, "gpu0", BOB);
    p.lease(a, 2 * G).expect("lease");
    let all = p.status(None);
    assert_eq!(all.clients.len(), 2);
    let mine = p.status(Some(ALICE.uid));
    assert_eq!(mine.clients.len(), 1);
    assert_eq!(mine.clients[0].bytes, 2 * G);
    assert_eq!(mine.pools[0].leased_blocks, 2);
}

#[test]
fn removing_a_pool_ends_its_sessions() {
    let p = pools(8 * G, 8 * G, &[("gpu0", 2)]);
    let t = p.open_session("gpu0", ALICE).expect("open");
    let ended = p.claim(t.id, &t.token, ALICE).expect("claim");
    p.lease(t.id, G).expect("lease");
    p.remove("gpu0").expect("remove");
    assert!(*ended.borrow());
    assert!(matches!(p.pool("gpu0"), Err(DmaError::NoPool { .. })));
    assert!(matches!(
        p.open_session("gpu0", ALICE),
        Err(DmaError::NoPool { .. })
    ));
}

#[test]
fn pool_size_must_be_whole_blocks() {
    let config = config::Dma {
        pool_bytes: G + 1,
        ..config::Dma::default()
    };
    let e = Pools::new(&config, Path::new("/nonexistent"))
        .start()
        .expect_err("not whole blocks");
    assert!(e.to_string().starts_with("dma.pool_bytes:"), "{e}");
}

#[test]
fn an_unclaimed_session_expires_and_a_claimed_one_does_not() {
    let p = pools(8 * G, 8 * G, &[("gpu0", 1)]);
    let lost = p.open_session("gpu0", ALICE).expect("open");
    let kept = session(&p, "gpu0", ALICE);
    assert!(p.expire_unclaimed(lost.id));
    assert!(!p.expire_unclaimed(kept));
    assert!(matches!(
        p.claim(lost.id, &lost.token, ALICE),
        Err(DmaError::BadSession { .. })
    ));
    p.lease(kept, G).expect("the claimed one works");
}

#[test]
fn a_uid_may_leave_only_so_many_sessions_unclaimed() {
    let p = pools(8 * G, 8 * G, &[("gpu0", 1)]);
    for _ in 0..MAX_PENDING {
        p.open_session("gpu0", ALICE).expect("open");
    }
    let e = p.open_session("gpu0", ALICE).expect_err("one too many");
    assert!(matches!(e, DmaError::TooManyPending { .. }), "{e}");
    p.open_session("gpu0", BOB)
        .expect("another uid is not affected");
}
