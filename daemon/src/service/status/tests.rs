//! What each wire says of rigd's errors: the status and its ErrorInfo, the reason
//! tables against the side socket's codes, and a pin of every stage's classification
//! against what `service` gave before the stages classified their own errors (GPU
//! memory's rows as they were when it was added).

use rig_proto::v1::SessionErrorCode;
use tonic_types::StatusExt;

use super::*;
use crate::{
    channels::ChannelError,
    dma::{DmaError, SessionId},
    events::EventError,
    gpumem::GpuMemError,
    nvme::NvmeError,
    pci::{Bdf, PciError},
    queue::QueueError,
    rig::{RequestError, RigError},
    take::{ResetError, ResizeError, TakeError},
};

fn is_upper_snake(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

fn bdf() -> Bdf {
    "0000:03:00.0".parse().expect("a PCI address")
}

#[test]
fn a_status_carries_one_error_info_with_reason_domain_device_and_step() {
    let class = Class::new(Reason::UnbindTimeout)
        .on("0000:03:00.0")
        .at("unbind");
    let s = status(class, None, "the line".into(), Vec::new());
    assert_eq!(
        (s.code(), s.message()),
        (Code::DeadlineExceeded, "the line")
    );
    let info = s.get_details_error_info().expect("an ErrorInfo");
    assert_eq!(
        (info.reason.as_str(), info.domain.as_str()),
        ("UNBIND_TIMEOUT", DOMAIN)
    );
    assert_eq!(
        info.metadata.get("device").map(String::as_str),
        Some("0000:03:00.0")
    );
    assert_eq!(
        info.metadata.get("step").map(String::as_str),
        Some("unbind")
    );
}

#[test]
fn a_take_over_error_names_its_device_and_step_and_a_stream_fills_a_missing_step() {
    let timeout = RigError::Take(TakeError::UnbindTimeout {
        bdf: bdf(),
        driver: "nvidia".into(),
        timeout: std::time::Duration::from_secs(10),
    });
    let class = timeout.class();
    assert_eq!(code(class.reason), Code::DeadlineExceeded);
    assert_eq!(class.device.as_deref(), Some("0000:03:00.0"));
    assert_eq!(class.step, Some("unbind"));
    // Its own step wins over the stream's last one.
    let s = from_error_during(&timeout, Some("save config"));
    let info = s.get_details_error_info().expect("info");
    assert_eq!(
        info.metadata.get("step").map(String::as_str),
        Some("unbind")
    );

    let held = RigError::Take(TakeError::NotHeld { bdf: bdf() });
    let s = from_error_during(&held, Some("lock the device"));
    let info = s.get_details_error_info().expect("info");
    assert_eq!(info.reason, "NOT_HELD");
    assert_eq!(
        info.metadata.get("step").map(String::as_str),
        Some("lock the device")
    );
}

#[test]
fn every_side_socket_code_has_an_upper_snake_reason_of_its_own() {
    // Code 0 is UNSPECIFIED, which rigd never sends; every other code is the word
    // of exactly one reason, and that reason goes back to it.
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..=28 {
        let code = SessionErrorCode::try_from(n).expect("a code");
        let name = code.as_str_name();
        let word = name.strip_prefix("SESSION_ERROR_CODE_").unwrap_or(name);
        assert!(is_upper_snake(word), "{code:?}: {word}");
        assert!(seen.insert(word), "{word} twice");
        let reasons: Vec<&Reason> = Reason::ALL.iter().filter(|r| r.as_str() == word).collect();
        if code == SessionErrorCode::Unspecified {
            assert!(reasons.is_empty(), "no reason is UNSPECIFIED");
            continue;
        }
        assert_eq!(reasons.len(), 1, "{word}");
        assert_eq!(dma_code(*reasons[0]), code, "{word}");
    }
    assert!(
        SessionErrorCode::try_from(29).is_err(),
        "a new code: add it above"
    );
}

#[test]
fn dma_errors_keep_their_side_socket_code_as_reason() {
    let quota = DmaError::Quota {
        uid: 1000,
        scope: "in all".into(),
        held: 0,
        bytes: 1,
        limit: 0,
    };
    let class = quota.class();
    assert_eq!(
        (code(class.reason), class.reason.as_str()),
        (Code::ResourceExhausted, "QUOTA")
    );
    let class = DmaError::NoPool { name: "x".into() }.class();
    assert_eq!(
        (
            code(class.reason),
            class.reason.as_str(),
            class.device.as_deref()
        ),
        (Code::NotFound, "NO_POOL", Some("x"))
    );
}

#[test]
fn reasons_of_rig_errors_are_upper_snake() {
    let errors = [
        RigError::BadRequest(RequestError::ResizeWithoutSize),
        RigError::Busy { bdf: bdf() },
        RigError::Pci(PciError::NoDevice { bdf: bdf() }),
        RigError::Take(TakeError::SysfsModeNotAllowed),
        RigError::Take(TakeError::AlreadyHeld {
            bdf: bdf(),
            mode: crate::take::Mode::Vfio,
        }),
        RigError::Take(TakeError::Reset(ResetError::NoMethod { bdf: bdf() })),
        RigError::Take(TakeError::Resize(ResizeError::NotResizable { bdf: bdf() })),
        RigError::Queue(QueueError::DepthZero { bdf: bdf() }),
    ];
    for e in &errors {
        let class = e.class();
        assert!(is_upper_snake(class.reason.as_str()), "{e}: {class:?}");
    }
}

/// One row of the classification pin: an error, and what each wire says of it.
struct Row {
    error: RigError,
    code: Code,
    reason: &'static str,
    device: Option<&'static str>,
    step: Option<&'static str>,
    dma: SessionErrorCode,
    queue: pb::QueueErrorCode,
    lease: pb::DeviceLeaseErrorCode,
}

fn io(kind: std::io::ErrorKind) -> std::io::Error {
    std::io::Error::from(kind)
}

/// What each wire says of these errors: the gRPC status exactly as `service` made
/// it before each stage classified its own error, and the side-socket code of the
/// reply that carries the error (DMA, channel and session errors: the DMA code;
/// queue requests': the queue code; whole-device leases': the lease code) as it was
/// then. A column for a reply that never carries an error pins the table all the
/// same.
fn rows() -> Vec<Row> {
    use SessionErrorCode as D;
    use pb::{DeviceLeaseErrorCode as L, QueueErrorCode as Q};
    let b = bdf();
    let row = |error, code, reason, device, step, dma, queue, lease| Row {
        error,
        code,
        reason,
        device,
        step,
        dma,
        queue,
        lease,
    };
    let dev = Some("0000:03:00.0");
    vec![
        row(
            RigError::BadAddress("x".parse::<Bdf>().expect_err("not an address")),
            Code::InvalidArgument,
            "BAD_ADDRESS",
            None,
            None,
            D::Internal,
            Q::BadRequest,
            L::BadRequest,
        ),
        row(
            RequestError::NotTheSessionsDevice {
                pool: "host".into(),
                bdf: b,
            }
            .into(),
            Code::InvalidArgument,
            "BAD_REQUEST",
            None,
            None,
            D::Internal,
            Q::BadRequest,
            L::BadRequest,
        ),
        row(
            RigError::EnableMsix {
                bdf: b,
                source: "no vectors".into(),
            },
            Code::InvalidArgument,
            "BAD_REQUEST",
            None,
            None,
            D::Internal,
            Q::BadRequest,
            L::BadRequest,
        ),
        row(
            PciError::Read {
                path: "/sys/x".into(),
                source: io(std::io::ErrorKind::PermissionDenied),
            }
            .into(),
            Code::PermissionDenied,
            "SYSFS_PERMISSION_DENIED",
            None,
            None,
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            TakeError::Read {
                bdf: b,
                source: PciError::Read {
                    path: "/sys/x".into(),
                    source: io(std::io::ErrorKind::NotFound),
                },
            }
            .into(),
            Code::Unavailable,
            "SYSFS_UNREADABLE",
            dev,
            Some("read"),
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            TakeError::NotHeld { bdf: b }.into(),
            Code::FailedPrecondition,
            "NOT_HELD",
            dev,
            None,
            D::Internal,
            Q::NotHeld,
            L::NotHeld,
        ),
        row(
            TakeError::Step {
                bdf: b,
                step: "write driver_override",
                source: io(std::io::ErrorKind::Other),
            }
            .into(),
            Code::Internal,
            "STEP_FAILED",
            dev,
            Some("write driver_override"),
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            TakeError::Resize(ResizeError::DriverBound {
                bdf: b,
                driver: "nvidia".into(),
            })
            .into(),
            Code::FailedPrecondition,
            "DRIVER_BOUND",
            dev,
            Some("resize"),
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            TakeError::Reset(ResetError::ShortSaved { bdf: b, len: 4 }).into(),
            Code::FailedPrecondition,
            "RESET_RESTORE",
            dev,
            Some("reset"),
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            TakeError::SysfsModeNotAllowed.into(),
            Code::PermissionDenied,
            "SYSFS_MODE_NOT_ALLOWED",
            None,
            None,
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            RigError::Leased {
                bdf: b,
                uid: 1,
                pid: 2,
                session: 3,
                failed: None,
            },
            Code::FailedPrecondition,
            "LEASED",
            dev,
            None,
            D::Leased,
            Q::Leased,
            L::Leased,
        ),
        row(
            RigError::LeaseNotAllowed {
                bdf: b,
                uid: 1,
                admins: Vec::new(),
            },
            Code::PermissionDenied,
            "LEASE_NOT_ALLOWED",
            dev,
            None,
            D::Internal,
            Q::Device,
            L::NotAllowed,
        ),
        row(
            RigError::LeaseInUse {
                bdf: b,
                why: "it lends queues".into(),
            },
            Code::FailedPrecondition,
            "LEASE_IN_USE",
            dev,
            None,
            D::Internal,
            Q::Device,
            L::InUse,
        ),
        row(
            RigError::NotLeased { bdf: b },
            Code::FailedPrecondition,
            "NOT_LEASED",
            dev,
            None,
            D::Internal,
            Q::Device,
            L::NotLeased,
        ),
        row(
            QueueError::NoQueueId { bdf: b, max_qid: 7 }.into(),
            Code::ResourceExhausted,
            "NO_QUEUE_ID",
            dev,
            None,
            D::Internal,
            Q::TooMany,
            L::Device,
        ),
        row(
            QueueError::Device {
                bdf: b,
                qid: 1,
                step: "create the SQ",
                source: "refused".into(),
            }
            .into(),
            Code::Internal,
            "QUEUE_DEVICE",
            dev,
            Some("create the SQ"),
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            NvmeError::Unsupported {
                bdf: b,
                why: "no dbbuf".into(),
            }
            .into(),
            Code::FailedPrecondition,
            "NVME_UNSUPPORTED",
            None,
            None,
            D::Internal,
            Q::Unsupported,
            L::Device,
        ),
        row(
            NvmeError::Wedged {
                bdf: b,
                step: "identify",
            }
            .into(),
            Code::Internal,
            "NVME_ADMIN_FAILED",
            None,
            None,
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            DmaError::UnknownLease {
                lease: crate::dma::LeaseId(9),
            }
            .into(),
            Code::NotFound,
            "UNKNOWN_LEASE",
            None,
            None,
            D::UnknownLease,
            Q::BadRequest,
            L::Device,
        ),
        row(
            DmaError::NoPool { name: "gpu".into() }.into(),
            Code::NotFound,
            "NO_POOL",
            Some("gpu"),
            None,
            D::Internal,
            Q::Device,
            L::BadRequest,
        ),
        row(
            DmaError::Exhausted {
                pool: "host".into(),
                wanted: 2,
                free: 1,
                pending: 0,
            }
            .into(),
            Code::ResourceExhausted,
            "EXHAUSTED",
            Some("host"),
            None,
            D::Exhausted,
            Q::Device,
            L::Device,
        ),
        row(
            DmaError::BadSession {
                session: crate::dma::SessionId(4),
                why: "not claimed",
            }
            .into(),
            Code::PermissionDenied,
            "BAD_SESSION",
            None,
            None,
            D::BadSession,
            Q::BadRequest,
            L::BadRequest,
        ),
        row(
            ChannelError::RingSize { entries: 3 }.into(),
            Code::InvalidArgument,
            "BAD_RING",
            None,
            None,
            D::BadRing,
            Q::Device,
            L::Device,
        ),
        row(
            ChannelError::NoSpace {
                session: crate::dma::SessionId(4),
                gpu: "0000:41:00.0".into(),
            }
            .into(),
            Code::FailedPrecondition,
            "NOT_SERVED",
            Some("0000:41:00.0"),
            None,
            D::NotServed,
            Q::Device,
            L::Device,
        ),
        row(
            ChannelError::SpaceExists {
                session: crate::dma::SessionId(4),
                gpu: "0000:41:00.0".into(),
            }
            .into(),
            Code::PermissionDenied,
            "BAD_SESSION",
            Some("0000:41:00.0"),
            None,
            D::BadSession,
            Q::BadRequest,
            L::BadRequest,
        ),
        row(
            ChannelError::Share {
                gpu: "0000:41:00.0".into(),
                what: "the ring",
                source: io(std::io::ErrorKind::Other),
            }
            .into(),
            Code::Internal,
            "INTERNAL",
            Some("0000:41:00.0"),
            None,
            D::Internal,
            Q::Device,
            L::Device,
        ),
        row(
            ChannelError::Faulted {
                session: crate::dma::SessionId(3),
                channel: crate::channels::ChannelId(7),
                reason: "info32 31: an MMU fault".into(),
            }
            .into(),
            Code::FailedPrecondition,
            "CHANNEL_FAULTED",
            None,
            None,
            D::ChannelFaulted,
            Q::Device,
            L::Device,
        ),
        row(
            ChannelError::GpuUnwell {
                gpu: "0000:41:00.0".into(),
                health: crate::channels::Health::Lost {
                    why: "the RM's recovery action is 1 (GPU Reset Required): Xid 154".into(),
                    since: std::time::SystemTime::UNIX_EPOCH,
                },
            }
            .into(),
            Code::Unavailable,
            "GPU_LOST",
            Some("0000:41:00.0"),
            None,
            D::GpuLost,
            Q::Device,
            L::Device,
        ),
        row(
            ChannelError::SwitchTimeout {
                uid: 1000,
                gpu: "0000:41:00.0".into(),
                left_s: 60,
            }
            .into(),
            Code::ResourceExhausted,
            "GPU_TIME",
            Some("0000:41:00.0"),
            None,
            D::GpuTime,
            Q::Device,
            L::Device,
        ),
        row(
            GpuMemError::UnknownId {
                id: crate::gpumem::GpuMemId(7),
            }
            .into(),
            Code::NotFound,
            "UNKNOWN_GPU_MEMORY",
            None,
            None,
            D::UnknownGpuMemory,
            Q::Device,
            L::Device,
        ),
        row(
            GpuMemError::CpuViewRefused {
                uid: 1000,
                group: None,
            }
            .into(),
            Code::PermissionDenied,
            "CPU_VIEW_REFUSED",
            None,
            None,
            D::CpuViewRefused,
            Q::Device,
            L::Device,
        ),
        row(
            EventError::UnknownToken {
                gpu: "0000:41:00.0".into(),
            }
            .into(),
            Code::NotFound,
            "UNKNOWN_EVENT",
            Some("0000:41:00.0"),
            None,
            D::UnknownEvent,
            Q::Device,
            L::Device,
        ),
        row(
            EventError::OtherUid {
                uid: 1001,
                owner: 1000,
            }
            .into(),
            Code::PermissionDenied,
            "EVENT_REFUSED",
            None,
            None,
            D::EventRefused,
            Q::Device,
            L::Device,
        ),
        row(
            EventError::Gone {
                exporter: SessionId(3),
            }
            .into(),
            Code::FailedPrecondition,
            "EVENT_GONE",
            None,
            None,
            D::EventGone,
            Q::Device,
            L::Device,
        ),
        row(
            EventError::Limit {
                session: SessionId(3),
                limit: 256,
            }
            .into(),
            Code::ResourceExhausted,
            "EVENT_LIMIT",
            None,
            None,
            D::EventLimit,
            Q::Device,
            L::Device,
        ),
        row(
            GpuMemError::Quota {
                bytes: 2 << 20,
                held: 64 << 30,
                limit: 64 << 30,
                whom: "uid 1000".into(),
                gpu: "0000:41:00.0".into(),
            }
            .into(),
            Code::ResourceExhausted,
            "QUOTA",
            Some("0000:41:00.0"),
            None,
            D::Quota,
            Q::Device,
            L::Device,
        ),
        row(
            GpuMemError::Misaligned { bytes: 4096 }.into(),
            Code::InvalidArgument,
            "MISALIGNED",
            None,
            None,
            D::Misaligned,
            Q::Device,
            L::Device,
        ),
    ]
}

#[test]
fn each_error_keeps_the_code_reason_device_step_and_side_codes_it_always_had() {
    for r in rows() {
        let class = r.error.class();
        let s = from_error(&r.error);
        let info = s.get_details_error_info().expect("an ErrorInfo");
        let got = (
            s.code(),
            info.reason.as_str(),
            info.metadata.get("device").map(String::as_str),
            info.metadata.get("step").map(String::as_str),
            dma_code(class.reason),
            queue_code(class.reason),
            lease_code(class.reason),
        );
        let want = (r.code, r.reason, r.device, r.step, r.dma, r.queue, r.lease);
        assert_eq!(got, want, "{}", r.error);
    }
}

#[test]
fn a_role_refusal_names_the_role_and_the_groups_that_grant_it() {
    let r = crate::policy::Refused {
        action: "Rig.Detach".into(),
        role: crate::policy::Role::Admin,
        uid: 1000,
        has: None,
        admins: vec!["rigadm".into()],
        clients: None,
    };
    let s = refused(&r);
    let info = s.get_details_error_info().expect("info");
    assert_eq!(
        (s.code(), info.reason.as_str()),
        (Code::PermissionDenied, "NOT_ADMIN")
    );
    assert_eq!(info.metadata.get("role").map(String::as_str), Some("admin"));
    assert_eq!(dma_code(r.class().reason), SessionErrorCode::NotAdmin);
}
