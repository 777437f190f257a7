//! `nvme::Controller` against the controller model of `nvme::fake`.

use std::time::{Duration, Instant};

use super::{
    ADMIN_MEMORY, Controller, CqSpec, NvmeError, Options, SqSpec,
    cmd::{self, Status},
    fake::{FakeBus, FakeCq, FakeNvme, FakeSq},
    regs,
};
use crate::pci::Bdf;

fn bdf() -> Bdf {
    "0000:00:05.0".parse().expect("a BDF")
}

struct Rig {
    bus: FakeBus,
    nvme: FakeNvme,
}

fn model() -> Rig {
    let bus = FakeBus::default();
    let nvme = FakeNvme::new(&bus);
    Rig { bus, nvme }
}

fn controller(r: &Rig, options: Options) -> Result<Controller, NvmeError> {
    let mem = r.bus.alloc(ADMIN_MEMORY);
    Controller::new(bdf(), Box::new(r.nvme.clone()), Box::new(mem), options)
}

fn started(r: &Rig) -> Controller {
    let mut c = controller(r, Options::default()).expect("a usable controller");
    c.start().expect("the model starts");
    c
}

fn quick() -> Options {
    Options {
        admin_timeout: Duration::from_millis(50),
        ..Options::default()
    }
}

#[test]
fn start_disables_first_then_programs_the_admin_queues_then_enables() {
    let r = model();
    // Left enabled by whoever had it before.
    regs_write(&r, regs::NVME_REG_CC, regs::cc_enable());
    let mut c = controller(&r, Options::default()).expect("usable");
    let id = c.start().expect("starts").clone();
    let writes: Vec<u64> = r.nvme.writes().iter().map(|(o, _)| *o).collect();
    // [the test's enable], disable, AQA, ASQ lo/hi, ACQ lo/hi, enable, then SQ0TDBL
    // and CQ0HDBL for Identify and for Number of Queues.
    assert_eq!(
        writes,
        [
            0x14, 0x14, 0x24, 0x28, 0x2c, 0x30, 0x34, 0x14, 0x1000, 0x1004, 0x1000, 0x1004
        ]
    );
    let last_cc = r.nvme.writes()[7].1;
    assert_eq!(last_cc, regs::cc_enable());
    assert_eq!(r.nvme.writes()[2].1, 0x001f_001f);
    assert_eq!(id.model, "QEMU NVMe Ctrl");
    assert_eq!(id.vid, 0x1b36);
    assert!(c.has_dbbuf());
    assert_eq!(c.max_qid(), 64);
    assert_eq!(
        r.nvme.executed(),
        [cmd::NVME_ADMIN_IDENTIFY, cmd::NVME_ADMIN_SET_FEATURES]
    );
}

fn regs_write(r: &Rig, offset: u64, v: u32) {
    use super::Regs;
    r.nvme
        .write(offset, crate::sys::mmio::Width::W32, v.into())
        .expect("a register");
}

#[test]
fn a_queue_pair_is_created_cq_first_and_deleted_sq_first() {
    let r = model();
    let mut c = started(&r);
    let ring = r.bus.alloc(2 * regs::PAGE);
    use super::DmaMem;
    let cq = CqSpec {
        qid: 3,
        entries: 32,
        addr: ring.addr(),
        vector: Some(2),
    };
    let sq = SqSpec {
        qid: 3,
        entries: 32,
        addr: ring.addr() + regs::PAGE,
        cqid: 3,
    };
    c.create_cq(&cq).expect("CQ");
    c.create_sq(&sq).expect("SQ");
    assert_eq!(
        r.nvme.cqs().get(&3),
        Some(&FakeCq {
            addr: ring.addr(),
            entries: 32,
            vector: Some(2)
        })
    );
    assert_eq!(
        r.nvme.sqs().get(&3),
        Some(&FakeSq {
            addr: ring.addr() + regs::PAGE,
            entries: 32,
            cqid: 3
        })
    );
    c.delete_sq(3).expect("delete SQ");
    c.delete_cq(3).expect("delete CQ");
    assert!(r.nvme.cqs().is_empty() && r.nvme.sqs().is_empty());
}

#[test]
fn a_polled_cq_is_created_with_interrupts_off() {
    let r = model();
    let mut c = started(&r);
    let ring = r.bus.alloc(regs::PAGE);
    use super::DmaMem;
    c.create_cq(&CqSpec {
        qid: 1,
        entries: 2,
        addr: ring.addr(),
        vector: None,
    })
    .expect("CQ");
    assert_eq!(r.nvme.cqs()[&1].vector, None);
}

fn status_of(e: &NvmeError) -> Option<Status> {
    e.status()
}

#[test]
fn deleting_a_cq_that_still_has_its_sq_is_the_controllers_invalid_queue_deletion() {
    let r = model();
    let mut c = started(&r);
    let ring = r.bus.alloc(2 * regs::PAGE);
    use super::DmaMem;
    c.create_cq(&CqSpec {
        qid: 1,
        entries: 16,
        addr: ring.addr(),
        vector: None,
    })
    .expect("CQ");
    c.create_sq(&SqSpec {
        qid: 1,
        entries: 16,
        addr: ring.addr() + regs::PAGE,
        cqid: 1,
    })
    .expect("SQ");
    let e = c.delete_cq(1).expect_err("the SQ is still there");
    assert_eq!(status_of(&e), Some(cmd::NVME_SC_INVALID_QUEUE_DELETION));
    assert_eq!(
        e.to_string(),
        "Failed to delete an I/O completion queue on NVMe controller 0000:00:05.0: status 0x1/0x0c (Invalid Queue Deletion)"
    );
    // The admin queue is still healthy.
    c.delete_sq(1).expect("SQ");
    c.delete_cq(1).expect("CQ");
}

#[test]
fn an_sq_on_a_missing_cq_and_a_queue_id_past_the_controllers_are_refused_by_it() {
    let r = model();
    r.nvme.script(|s| s.max_qid = 8);
    let mut c = started(&r);
    let ring = r.bus.alloc(regs::PAGE);
    use super::DmaMem;
    let e = c
        .create_sq(&SqSpec {
            qid: 1,
            entries: 8,
            addr: ring.addr(),
            cqid: 1,
        })
        .expect_err("no CQ 1");
    assert_eq!(status_of(&e), Some(cmd::NVME_SC_CQ_INVALID));
    let e = c
        .create_cq(&CqSpec {
            qid: 9,
            entries: 8,
            addr: ring.addr(),
            vector: None,
        })
        .expect_err("qid 9 > max 8");
    assert_eq!(status_of(&e), Some(cmd::NVME_SC_QID_INVALID));
    let e = c.delete_sq(5).expect_err("no SQ 5");
    assert_eq!(status_of(&e), Some(cmd::NVME_SC_QID_INVALID));
}

#[test]
fn queues_rig_can_tell_are_wrong_never_reach_the_controller() {
    let r = model();
    let mut c = started(&r);
    let before = r.nvme.executed().len();
    let spec = |qid, entries, addr| CqSpec {
        qid,
        entries,
        addr,
        vector: None,
    };
    for (s, why) in [
        (spec(0, 8, 0x1000_0000), "is the admin queue"),
        (spec(1, 1, 0x1000_0000), "of 1 entries is outside 2 to 2048"),
        (
            spec(1, 2049, 0x1000_0000),
            "of 2049 entries is outside 2 to 2048",
        ),
        (spec(1, 8, 0x1000_0800), "at 0x10000800 is not page-aligned"),
    ] {
        let e = c.create_cq(&s).expect_err("refused");
        assert!(matches!(e, NvmeError::BadQueue { .. }), "{e}");
        assert!(e.to_string().contains(why), "{e}");
    }
    assert!(matches!(
        c.delete_cq(0),
        Err(NvmeError::BadQueue { qid: 0, .. })
    ));
    assert_eq!(r.nvme.executed().len(), before);
}

#[test]
fn doorbell_buffer_config_is_sent_when_oacs_offers_it() {
    let r = model();
    let mut c = started(&r);
    c.config_dbbuf(0x2000_0000, 0x2000_1000).expect("DBBUF");
    assert_eq!(r.nvme.dbbuf(), Some((0x2000_0000, 0x2000_1000)));
    let e = c
        .config_dbbuf(0x2000_0008, 0x2000_1000)
        .expect_err("misaligned");
    assert!(matches!(e, NvmeError::BadQueue { .. }));
}

#[test]
fn doorbell_buffer_config_is_refused_without_oacs_bit_8_and_nothing_is_sent() {
    let r = model();
    r.nvme.script(|s| s.oacs = 0);
    let mut c = started(&r);
    let e = c
        .config_dbbuf(0x2000_0000, 0x2000_1000)
        .expect_err("no DBBUF");
    assert!(matches!(e, NvmeError::Unsupported { .. }));
    assert!(e.to_string().contains("OACS bit 8"), "{e}");
    assert_eq!(
        r.nvme.executed().len(),
        2,
        "Identify and Number of Queues only"
    );
}

#[test]
fn a_controller_that_never_becomes_ready_times_out_after_cap_to() {
    let r = model();
    r.nvme.script(|s| s.ready_stuck = true);
    let mut c = controller(&r, Options::default()).expect("usable");
    let t = Instant::now();
    let e = c.start().expect_err("never ready");
    let took = t.elapsed();
    assert!(
        matches!(e, NvmeError::ReadyTimeout { want: true, waited, .. } if waited == Duration::from_millis(500)),
        "{e}"
    );
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(3));
    assert!(
        e.to_string()
            .contains("CSTS.RDY did not become 1 within 500 ms")
    );
}

#[test]
fn a_controller_in_fatal_status_on_enable_is_reported_as_such() {
    let r = model();
    r.nvme.script(|s| s.fatal_on_enable = true);
    let mut c = controller(&r, Options::default()).expect("usable");
    let e = c.start().expect_err("fatal");
    assert!(matches!(e, NvmeError::Fatal { .. }), "{e}");
}

#[test]
fn a_lost_command_times_out_wedges_the_queue_and_a_restart_recovers_it() {
    let r = model();
    let mut c = controller(&r, quick()).expect("usable");
    c.start().expect("starts");
    r.nvme.script(|s| {
        s.swallow.insert(cmd::NVME_ADMIN_SET_FEATURES);
    });
    let e = c.set_queue_count(4, 4).expect_err("lost");
    assert!(matches!(e, NvmeError::CommandTimeout { .. }), "{e}");
    let e = c.set_queue_count(4, 4).expect_err("wedged");
    assert!(matches!(e, NvmeError::Wedged { .. }), "{e}");
    r.nvme.script(|s| s.swallow.clear());
    c.start().expect("a reset clears it");
    assert_eq!(c.set_queue_count(4, 4).expect("answered"), (64, 64));
}

#[test]
fn a_completion_for_another_command_is_refused_and_wedges_the_queue() {
    let r = model();
    let mut c = started(&r);
    r.nvme.script(|s| s.wrong_cid = true);
    let e = c.set_queue_count(1, 1).expect_err("wrong cid");
    assert!(matches!(e, NvmeError::StrayCompletion { .. }), "{e}");
    assert!(matches!(
        c.set_queue_count(1, 1),
        Err(NvmeError::Wedged { .. })
    ));
}

#[test]
fn a_scripted_status_comes_back_as_the_commands_error() {
    let r = model();
    let mut c = started(&r);
    r.nvme.script(|s| {
        s.fail
            .insert(cmd::NVME_ADMIN_SET_FEATURES, Status::new(0, 0x06));
    });
    let e = c.set_queue_count(2, 2).expect_err("internal error");
    assert_eq!(e.status(), Some(Status::new(0, 0x06)));
    assert!(
        e.to_string().ends_with("status 0x0/0x06 (Internal Error)"),
        "{e}"
    );
}

#[test]
fn the_admin_queue_wraps_and_flips_its_phase_many_times() {
    let r = model();
    let mut c = controller(
        &r,
        Options {
            admin_entries: 2,
            ..Options::default()
        },
    )
    .expect("usable");
    c.start().expect("starts");
    for _ in 0..101 {
        assert_eq!(c.set_queue_count(8, 8).expect("answered"), (64, 64));
    }
    assert_eq!(r.nvme.executed().len(), 103);
}

#[test]
fn admin_memory_the_device_cannot_reach_ends_in_fatal_status() {
    let r = model();
    let mem = r.bus.alloc(ADMIN_MEMORY);
    use super::DmaMem;
    let addr = mem.addr();
    let mut c =
        Controller::new(bdf(), Box::new(r.nvme.clone()), Box::new(mem), quick()).expect("usable");
    c.start().expect("starts");
    r.bus.hide(addr);
    let e = c.set_queue_count(1, 1).expect_err("the SQ fetch fails");
    assert!(matches!(e, NvmeError::Fatal { .. }), "{e}");
    assert_ne!(r.nvme.csts() & regs::NVME_CSTS_CFS, 0);
    assert!(matches!(
        c.set_queue_count(1, 1),
        Err(NvmeError::Wedged { .. })
    ));
}

#[test]
fn commands_before_start_are_refused_as_not_enabled() {
    let r = model();
    let mut c = controller(&r, Options::default()).expect("usable");
    assert!(matches!(
        c.set_queue_count(1, 1),
        Err(NvmeError::NotEnabled { .. })
    ));
    assert!(r.nvme.writes().is_empty());
}

#[test]
fn controllers_rig_cannot_drive_are_refused_before_any_write() {
    let r = model();
    r.nvme.script(|s| s.mps_min = 1);
    let e = controller(&r, Options::default()).expect_err("8 KiB pages");
    assert!(e.to_string().contains("CAP.MPSMIN 1"), "{e}");
    let r = model();
    let small = r.bus.alloc(regs::PAGE);
    let e = Controller::new(
        bdf(),
        Box::new(r.nvme.clone()),
        Box::new(small),
        Options::default(),
    )
    .expect_err("one page");
    assert!(matches!(e, NvmeError::Unsupported { .. }));
    let e = controller(
        &r,
        Options {
            admin_entries: 65,
            ..Options::default()
        },
    )
    .expect_err("65 entries");
    assert!(e.to_string().contains("65 admin entries"), "{e}");
    assert!(r.nvme.writes().is_empty());
}

#[test]
fn a_restart_deletes_every_queue_the_controller_had() {
    let r = model();
    let mut c = started(&r);
    let ring = r.bus.alloc(regs::PAGE);
    use super::DmaMem;
    c.create_cq(&CqSpec {
        qid: 1,
        entries: 4,
        addr: ring.addr(),
        vector: None,
    })
    .expect("CQ");
    c.config_dbbuf(0x2000_0000, 0x2000_1000).expect("DBBUF");
    c.start().expect("restart");
    assert!(r.nvme.cqs().is_empty());
    assert_eq!(r.nvme.dbbuf(), None);
}

#[test]
fn identify_namespace_gives_the_block_size_and_an_unknown_namespace_is_the_controllers_refusal() {
    let r = model();
    let mut c = started(&r);
    let ns = c.identify_namespace(1).expect("namespace 1");
    assert_eq!((ns.blocks, ns.lba_shift, ns.metadata), (131_072, 9, 0));
    let e = c.identify_namespace(2).expect_err("no namespace 2");
    assert_eq!(status_of(&e), Some(Status::new(0, 0x0b)));
    assert!(
        e.to_string().contains("identify the namespace"),
        "the step is named: {e}"
    );
    // The admin queue carries on.
    c.identify_namespace(1).expect("namespace 1 again");
}
