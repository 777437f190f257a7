//! Queue ids, limits and the order of lending and reclaim, against a recording
//! device and kicks; then the same against `nvme::Controller` on the controller model.

use std::{cell::RefCell, rc::Rc};

use super::{
    Doorbells, EventFd, Kicks, Limits, Owner, QueueDevice, QueueError, Queues, Rings, State,
    pick_qid,
};
use crate::{dma::SessionId, pci::Bdf};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn bdf() -> Bdf {
    "0000:00:05.0".parse().expect("a BDF")
}

#[test]
fn each_client_gets_ids_in_its_own_doorbell_page_when_the_device_has_pages() {
    let used = |_| false;
    assert_eq!(pick_qid(2047, 512, None, &[], used), Some((512, true)));
    assert_eq!(pick_qid(2047, 512, None, &[1], used), Some((1024, true)));
    assert_eq!(
        pick_qid(2047, 512, None, &[1, 2, 3], used),
        Some((1, false))
    );
    // A client's second queue stays in its page.
    assert_eq!(
        pick_qid(2047, 512, Some(2), &[1], |q| q == 1024),
        Some((1025, true))
    );
}

#[test]
fn page_boundaries_and_the_largest_ids_are_exact() {
    // Ids 512..=1023 are page 1; a device with 1023 ids has one isolated page.
    assert_eq!(pick_qid(1023, 512, None, &[1], |_| false), Some((1, false)));
    assert_eq!(pick_qid(512, 512, None, &[], |_| false), Some((512, true)));
    assert_eq!(
        pick_qid(512, 512, Some(1), &[], |q| q == 512),
        Some((1, false))
    );
    assert_eq!(
        pick_qid(u16::MAX, 512, None, &(1..127).collect::<Vec<_>>(), |_| {
            false
        }),
        Some((127 * 512, true))
    );
}

#[test]
fn a_device_with_fewer_ids_than_a_page_gets_dense_ids_and_says_so() {
    assert_eq!(pick_qid(64, 512, None, &[], |_| false), Some((1, false)));
    assert_eq!(pick_qid(64, 512, None, &[], |q| q < 64), Some((64, false)));
    assert_eq!(pick_qid(64, 512, None, &[], |_| true), None);
    assert_eq!(pick_qid(0, 512, None, &[], |_| false), None);
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    Create(u16, u32, Option<u16>),
    Lend(u16),
    Take(u16),
    Delete(u16),
    Register(u64),
    Unregister(u64),
}

#[derive(Debug, Clone, Default)]
struct Log(Rc<RefCell<Vec<Call>>>);

impl Log {
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

#[derive(Debug)]
struct Dev {
    log: Log,
    max_qid: u16,
    fail_create: bool,
    fail_delete: bool,
}

impl QueueDevice for Dev {
    fn max_qid(&self) -> u16 {
        self.max_qid
    }
    fn ids_per_page(&self) -> u16 {
        512
    }
    fn max_entries(&self) -> u32 {
        2048
    }
    fn create(
        &mut self,
        qid: u16,
        entries: u32,
        _: &Rings,
        vector: Option<u16>,
    ) -> Result<Doorbells, BoxError> {
        self.log
            .0
            .borrow_mut()
            .push(Call::Create(qid, entries, vector));
        if self.fail_create {
            return Err("Invalid Queue Identifier".into());
        }
        Ok(Doorbells {
            sq_tail: 0x1000 + 8 * u64::from(qid),
            cq_head: 0x1004 + 8 * u64::from(qid),
        })
    }
    fn delete(&mut self, qid: u16) -> Result<(), BoxError> {
        self.log.0.borrow_mut().push(Call::Delete(qid));
        if self.fail_delete {
            return Err("no completion within 5000 ms".into());
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Kick {
    log: Log,
    fail: bool,
    vectors: u16,
}

impl Kicks for Kick {
    fn vectors(&self) -> u16 {
        self.vectors
    }
    fn lend_vector(&self, v: u16) -> Result<EventFd, BoxError> {
        self.log.0.borrow_mut().push(Call::Lend(v));
        Ok(EventFd::new(libc::EFD_CLOEXEC)?)
    }
    fn take_vector(&self, v: u16) -> Result<(), BoxError> {
        self.log.0.borrow_mut().push(Call::Take(v));
        Ok(())
    }
    fn register(&self, offset: u64, _: u64) -> Result<EventFd, BoxError> {
        self.log.0.borrow_mut().push(Call::Register(offset));
        if self.fail {
            return Err("EINVAL".into());
        }
        Ok(EventFd::new(libc::EFD_CLOEXEC)?)
    }
    fn unregister(&self, offset: u64, _: u64) -> Result<(), BoxError> {
        self.log.0.borrow_mut().push(Call::Unregister(offset));
        Ok(())
    }
}

fn owner(s: u64) -> Owner {
    Owner {
        session: SessionId(s),
        uid: 1000,
        pid: 4242,
    }
}

const RINGS: Rings = Rings {
    sq: 0x4000_0000,
    cq: 0x4000_1000,
};

fn setup(max_qid: u16) -> (Queues, Dev, Kick, Log) {
    let log = Log::default();
    let q = Queues::new(
        bdf(),
        Limits {
            per_client: 2,
            max_depth: 256,
        },
    );
    let dev = Dev {
        log: log.clone(),
        max_qid,
        fail_create: false,
        fail_delete: false,
    };
    let kick = Kick {
        log: log.clone(),
        fail: false,
        vectors: 0,
    };
    (q, dev, kick, log)
}

#[test]
fn a_lent_queue_is_created_then_kicked_and_reclaimed_deleted_then_unkicked() {
    let (mut q, mut dev, kick, log) = setup(2047);
    let lent = q.open(&mut dev, &kick, owner(1), 32, RINGS).expect("lent");
    assert_eq!((lent.qid, lent.entries, lent.kick_data), (512, 33, 0));
    assert_eq!(
        log.take(),
        [Call::Create(512, 33, None), Call::Register(0x2000)]
    );
    let st = q.status();
    assert_eq!(st.len(), 1);
    assert!(st[0].page_isolated);
    let r = q.reclaim(&mut dev, &kick, SessionId(1));
    assert_eq!(r.freed, [512]);
    assert!(r.memory_free());
    assert_eq!(log.take(), [Call::Delete(512), Call::Unregister(0x2000)]);
    assert!(q.status().is_empty());
}

#[test]
fn two_clients_get_separate_pages_and_a_freed_page_is_reused() {
    let (mut q, mut dev, kick, _log) = setup(2047);
    let a = q.open(&mut dev, &kick, owner(1), 8, RINGS).expect("a");
    let a2 = q
        .open(&mut dev, &kick, owner(1), 8, RINGS)
        .expect("a's second");
    let b = q.open(&mut dev, &kick, owner(2), 8, RINGS).expect("b");
    assert_eq!((a.qid, a2.qid, b.qid), (512, 513, 1024));
    q.reclaim(&mut dev, &kick, SessionId(1));
    let c = q.open(&mut dev, &kick, owner(3), 8, RINGS).expect("c");
    assert_eq!(c.qid, 512);
}

#[test]
fn a_one_client_device_refuses_a_second_session_until_the_first_is_reclaimed() {
    let (_, mut dev, kick, _log) = setup(3);
    let mut q = Queues::one_client(
        bdf(),
        Limits {
            per_client: 3,
            max_depth: 256,
        },
    );
    let a = q.open(&mut dev, &kick, owner(1), 8, RINGS).expect("a");
    let a2 = q
        .open(&mut dev, &kick, owner(1), 8, RINGS)
        .expect("a's second");
    // Dense ids, yet no other client's doorbell is on the device.
    assert_eq!((a.qid, a2.qid), (1, 2));
    assert!(q.status().iter().all(|s| s.page_isolated));
    let e = q
        .open(&mut dev, &kick, owner(2), 8, RINGS)
        .expect_err("one client at a time");
    assert!(
        matches!(
            e,
            QueueError::Busy {
                uid: 1000,
                pid: 4242,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("one client at a time"), "{e}");
    q.reclaim(&mut dev, &kick, SessionId(1));
    let b = q
        .open(&mut dev, &kick, owner(2), 8, RINGS)
        .expect("b, after a");
    assert_eq!(b.qid, 1);
}

#[test]
fn a_one_client_device_stays_busy_while_a_dead_sessions_queue_is_stuck() {
    let (_, mut dev, kick, _log) = setup(3);
    let mut q = Queues::one_client(
        bdf(),
        Limits {
            per_client: 2,
            max_depth: 256,
        },
    );
    q.open(&mut dev, &kick, owner(1), 8, RINGS).expect("a");
    dev.fail_delete = true;
    assert!(!q.reclaim(&mut dev, &kick, SessionId(1)).memory_free());
    // The device may still write the stuck queue's rings: nobody else gets it.
    let e = q
        .open(&mut dev, &kick, owner(2), 8, RINGS)
        .expect_err("stuck");
    assert!(matches!(e, QueueError::Busy { .. }), "{e}");
}

#[test]
fn a_queue_the_device_will_not_delete_is_stuck_and_its_memory_is_kept() {
    let (mut q, mut dev, kick, log) = setup(2047);
    q.open(&mut dev, &kick, owner(1), 8, RINGS).expect("lent");
    log.take();
    dev.fail_delete = true;
    let r = q.reclaim(&mut dev, &kick, SessionId(1));
    assert!(!r.memory_free());
    assert_eq!(r.stuck.len(), 1);
    assert!(r.freed.is_empty());
    // The kick stays registered: the queue may be alive.
    assert_eq!(log.take(), [Call::Delete(512)]);
    assert_eq!(q.status()[0].state, State::Stuck);
    // A later reclaim does not try again on a stuck queue.
    assert!(q.reclaim(&mut dev, &kick, SessionId(1)).stuck.is_empty());
}

#[test]
fn a_pair_whose_kick_cannot_be_registered_is_deleted_again() {
    let (mut q, mut dev, mut kick, log) = setup(2047);
    kick.fail = true;
    let e = q
        .open(&mut dev, &kick, owner(1), 8, RINGS)
        .expect_err("no kick");
    assert!(
        matches!(
            e,
            QueueError::Device {
                step: "register the kick",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        log.take(),
        [
            Call::Create(512, 9, None),
            Call::Register(0x2000),
            Call::Delete(512)
        ]
    );
    assert!(q.status().is_empty());
}

#[test]
fn depth_zero_too_deep_and_too_many_are_refused_before_the_device_is_asked() {
    let (mut q, mut dev, kick, log) = setup(2047);
    assert!(matches!(
        q.open(&mut dev, &kick, owner(1), 0, RINGS),
        Err(QueueError::DepthZero { .. })
    ));
    let e = q
        .open(&mut dev, &kick, owner(1), 257, RINGS)
        .expect_err("limit");
    assert_eq!(
        e.to_string(),
        "A queue of depth 257 was asked for on 0000:00:05.0; the most is 256 (queue.max_depth)"
    );
    q.open(&mut dev, &kick, owner(1), 256, RINGS)
        .expect("at the limit");
    q.open(&mut dev, &kick, owner(1), 1, RINGS).expect("second");
    log.take();
    assert!(matches!(
        q.open(&mut dev, &kick, owner(1), 1, RINGS),
        Err(QueueError::TooMany { held: 2, .. })
    ));
    assert!(log.take().is_empty());
}

#[test]
fn a_device_error_on_create_leaves_nothing_lent() {
    let (mut q, mut dev, kick, log) = setup(2047);
    dev.fail_create = true;
    let e = q
        .open(&mut dev, &kick, owner(1), 8, RINGS)
        .expect_err("refused");
    assert_eq!(
        e.to_string(),
        "Failed to create the queue pair for queue 512 on 0000:00:05.0"
    );
    assert_eq!(log.take(), [Call::Create(512, 9, None)]);
    assert!(q.status().is_empty());
}

#[test]
fn closing_another_sessions_queue_is_refused() {
    let (mut q, mut dev, kick, _log) = setup(2047);
    q.open(&mut dev, &kick, owner(1), 8, RINGS).expect("lent");
    assert!(matches!(
        q.close(&mut dev, &kick, SessionId(2), 512),
        Err(QueueError::NotYours { qid: 512, .. })
    ));
    let r = q.close(&mut dev, &kick, SessionId(1), 512).expect("own");
    assert_eq!(r.freed, [512]);
}

mod on_the_controller_model {
    use super::*;
    use crate::nvme::{
        ADMIN_MEMORY, Controller, DmaMem, Options,
        fake::{FakeBus, FakeMem, FakeNvme},
        regs::PAGE,
    };

    /// A started controller model with `max_qid` queue ids, rings on its bus, an
    /// empty table and recording kicks.
    struct Model {
        nvme: FakeNvme,
        c: Controller,
        rings: Rings,
        q: Queues,
        kick: Kick,
        log: Log,
        _ring: FakeMem,
    }

    fn model(max_qid: u16, admin_timeout: std::time::Duration) -> Model {
        let bus = FakeBus::default();
        let nvme = FakeNvme::new(&bus);
        nvme.script(|s| s.max_qid = max_qid);
        let mut c = Controller::new(
            bdf(),
            Box::new(nvme.clone()),
            Box::new(bus.alloc(ADMIN_MEMORY)),
            Options {
                admin_timeout,
                ..Options::default()
            },
        )
        .expect("usable");
        c.start().expect("starts");
        let ring = bus.alloc(2 * PAGE);
        let log = Log::default();
        Model {
            nvme,
            c,
            rings: Rings {
                sq: ring.addr(),
                cq: ring.addr() + PAGE,
            },
            q: Queues::new(
                bdf(),
                Limits {
                    per_client: 4,
                    max_depth: 1024,
                },
            ),
            kick: Kick {
                log: log.clone(),
                fail: false,
                vectors: 0,
            },
            log,
            _ring: ring,
        }
    }

    #[test]
    fn a_lent_pair_exists_on_the_controller_until_its_session_is_reclaimed() {
        let mut m = model(1024, std::time::Duration::from_secs(5));
        let lent =
            m.q.open(&mut m.c, &m.kick, owner(7), 32, m.rings)
                .expect("lent");
        assert_eq!(lent.qid, 512);
        assert_eq!(lent.doorbells.sq_tail, 0x2000);
        assert_eq!(m.nvme.sqs()[&512].cqid, 512);
        assert_eq!(m.nvme.cqs()[&512].entries, 33);
        assert_eq!(m.nvme.cqs()[&512].vector, None);
        let r = m.q.reclaim(&mut m.c, &m.kick, SessionId(7));
        assert!(r.memory_free());
        assert!(m.nvme.sqs().is_empty() && m.nvme.cqs().is_empty());
        assert_eq!(
            m.log.take(),
            [Call::Register(0x2000), Call::Unregister(0x2000)]
        );
    }

    #[test]
    fn a_lost_delete_leaves_the_queue_stuck_on_the_controller_model() {
        let mut m = model(64, std::time::Duration::from_millis(20));
        m.q.open(&mut m.c, &m.kick, owner(7), 4, m.rings)
            .expect("lent");
        m.nvme.script(|s| {
            s.swallow.insert(crate::nvme::cmd::NVME_ADMIN_DELETE_SQ);
        });
        let r = m.q.reclaim(&mut m.c, &m.kick, SessionId(7));
        assert!(!r.memory_free());
        // The model still has the pair: the memory must not be freed.
        assert!(m.nvme.sqs().contains_key(&1));
    }
}

#[test]
fn a_lent_vector_is_lent_before_the_create_and_taken_back_after_the_kick() {
    let (mut q, mut dev, mut kick, log) = setup(2047);
    kick.vectors = 2;
    let a = q.open(&mut dev, &kick, owner(1), 8, RINGS).expect("a");
    let b = q.open(&mut dev, &kick, owner(2), 8, RINGS).expect("b");
    let c = q.open(&mut dev, &kick, owner(3), 8, RINGS).expect("c");
    assert!(a.irq.is_some() && b.irq.is_some());
    assert!(c.irq.is_none(), "two vectors: the third queue is polled");
    assert_eq!(
        log.take()[..3],
        [
            Call::Lend(1),
            Call::Create(512, 9, Some(1)),
            Call::Register(0x2000)
        ]
    );
    assert_eq!(q.status()[0].vector, Some(1));
    q.reclaim(&mut dev, &kick, SessionId(1));
    assert_eq!(
        log.take(),
        [Call::Delete(512), Call::Unregister(0x2000), Call::Take(1)]
    );
    let d = q.open(&mut dev, &kick, owner(4), 8, RINGS).expect("d");
    assert!(d.irq.is_some(), "vector 1 is free again");
}
