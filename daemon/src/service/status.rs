//! The wire form of rigd's errors, and the one place that makes it: an error's gRPC
//! code and each side-socket reply's code are picked here, from the reason the error
//! gives itself (`crate::error::Classify`, implemented beside each stage's error), and
//! its chain is flattened here into one line. Errors travel typed from the stages up to
//! here (and to `main.rs`, the other edge) and become text only here.
//!
//! Every error status also carries typed details for programs (`grpc-status-details-bin`,
//! a `google.rpc.Status`): one `google.rpc.ErrorInfo` whose `reason` is the stable
//! UPPER_SNAKE word of [`Reason`], `domain` is [`DOMAIN`], and `metadata` names the
//! `device` and the `step` where the error has them. docs/errors.md lists the reasons.
//! DMA and channel errors' reasons are the side socket's code words, so a client reads
//! the same word on either socket.
//!
//! Not here: what each error is (the stages' `Classify`), the words of each failure
//! (their `Display`), the side socket's framing (`service::dma`).

use std::collections::HashMap;

use rig_proto::v1 as pb;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::{
    error::{Class, Classify, Reason},
    take::{self, RecoverError, Recovered},
};

/// The `domain` of every `google.rpc.ErrorInfo` rigd sends.
pub const DOMAIN: &str = "rig.dev";

/// The gRPC code of each reason (docs/errors.md's table).
pub fn code(reason: Reason) -> Code {
    use Reason as R;
    match reason {
        R::BadAddress
        | R::BadRequest
        | R::MmioRefused
        | R::BarSizeUnsupported
        | R::BarNotResizable
        | R::QueueDepthZero
        | R::QueueDepthOverLimit
        | R::ZeroSize
        | R::Misaligned
        | R::Oversized
        | R::Protocol
        | R::BadRing => Code::InvalidArgument,
        R::NoDevice | R::UnknownQueue | R::NoPool | R::UnknownLease | R::UnknownChannel => {
            Code::NotFound
        }
        R::ShortConfig | R::BadResourceFile => Code::DataLoss,
        R::SysfsPermissionDenied
        | R::NotAdmin
        | R::NotClient
        | R::SysfsModeNotAllowed
        | R::NoPeerCredentials
        | R::LeaseNotAllowed
        | R::BadSession
        | R::GpuRingsRefused => Code::PermissionDenied,
        R::SysfsUnreadable | R::UnbindStuck | R::Rm => Code::Unavailable,
        R::Busy | R::Locked => Code::Aborted,
        R::AlreadyHeld
        | R::NotHeld
        | R::Refused
        | R::ForeignVfio
        | R::GroupNotViable
        | R::NoIommuGroup
        | R::NoBar
        | R::NotResizable
        | R::NoResizeFile
        | R::DriverBound
        | R::ResizeFailed
        | R::NoResetMethod
        | R::ResetMethodUnsupported
        | R::ResetRestore
        | R::ResetFailed
        | R::FunctionBusy
        | R::NvmeUnsupported
        | R::Leased
        | R::LeaseInUse
        | R::NotLeased
        | R::LeaseKept
        | R::HeldAcrossRestart
        | R::DmaOff
        | R::NotContiguous
        | R::NotServed => Code::FailedPrecondition,
        R::UnbindTimeout => Code::DeadlineExceeded,
        R::WrongDriver
        | R::StepFailed
        | R::Vfio
        | R::Journal
        | R::QueueDevice
        | R::NvmeAdminFailed
        | R::LeaseReclaimFailed
        | R::Internal => Code::Internal,
        R::QueueLimit
        | R::NoQueueId
        | R::TooManyPending
        | R::Quota
        | R::Exhausted
        | R::ChannelLimit => Code::ResourceExhausted,
    }
}

/// The side socket's code of a DMA, channel or session request's failure: the code of
/// the same word, `INTERNAL` for a reason the socket has no word for.
pub fn dma_code(reason: Reason) -> pb::DmaErrorCode {
    use Reason as R;
    use pb::DmaErrorCode as C;
    match reason {
        R::ZeroSize => C::ZeroSize,
        R::Misaligned => C::Misaligned,
        R::Oversized => C::Oversized,
        R::Quota => C::Quota,
        R::Exhausted => C::Exhausted,
        R::NotContiguous => C::NotContiguous,
        R::UnknownLease => C::UnknownLease,
        R::BadSession => C::BadSession,
        R::Protocol => C::Protocol,
        R::BadRing => C::BadRing,
        R::ChannelLimit => C::ChannelLimit,
        R::UnknownChannel => C::UnknownChannel,
        R::NotServed => C::NotServed,
        R::Rm => C::Rm,
        R::Leased => C::Leased,
        R::GpuRingsRefused => C::GpuRingsRefused,
        R::NotClient => C::NotClient,
        R::NotAdmin => C::NotAdmin,
        _ => C::Internal,
    }
}

/// The side socket's code of a queue request's failure (`QueueRefused`): anything
/// else the device did or refused is `DEVICE`.
pub fn queue_code(reason: Reason) -> pb::QueueErrorCode {
    use Reason as R;
    use pb::QueueErrorCode as C;
    match reason {
        R::QueueDepthZero => C::DepthZero,
        R::QueueDepthOverLimit => C::DepthOverLimit,
        R::QueueLimit | R::NoQueueId => C::TooMany,
        R::UnknownQueue => C::NotYours,
        R::FunctionBusy => C::Busy,
        R::NotHeld => C::NotHeld,
        R::Leased => C::Leased,
        R::NvmeUnsupported => C::Unsupported,
        R::UnknownLease | R::BadSession | R::BadRequest | R::BadAddress => C::BadRequest,
        _ => C::Device,
    }
}

/// The side socket's code of a whole-device lease's failure (`DeviceLeaseRefused`):
/// anything else a step on the device did is `DEVICE`.
pub fn lease_code(reason: Reason) -> pb::DeviceLeaseErrorCode {
    use Reason as R;
    use pb::DeviceLeaseErrorCode as C;
    match reason {
        R::LeaseNotAllowed => C::NotAllowed,
        R::NotHeld => C::NotHeld,
        R::Leased => C::Leased,
        R::LeaseInUse => C::InUse,
        R::NotLeased => C::NotLeased,
        R::BadAddress | R::BadRequest | R::BadSession | R::NoPool => C::BadRequest,
        _ => C::Device,
    }
}

/// An error status: the reason's code, `message`, and an ErrorInfo with `class`'s
/// reason, device and step (or `step`, when the class names none) and `extra`
/// metadata. Counted by reason (`metrics`).
fn status(
    class: Class,
    step: Option<&str>,
    message: String,
    extra: Vec<(&'static str, String)>,
) -> Status {
    super::metrics::global().error(class.reason.as_str());
    let mut metadata = HashMap::new();
    if let Some(d) = class.device {
        metadata.insert("device".to_owned(), d);
    }
    if let Some(s) = class.step.or(step) {
        metadata.insert("step".to_owned(), s.to_owned());
    }
    for (k, v) in extra {
        metadata.insert(k.to_owned(), v);
    }
    Status::with_error_details(
        code(class.reason),
        message,
        ErrorDetails::with_error_info(class.reason.as_str(), DOMAIN, metadata),
    )
}

/// The status of an error: its reason's code, its chain on one line, its class.
pub fn from_error(e: &dyn Classify) -> Status {
    from_error_during(e, None)
}

/// As [`from_error`], for an error of a streamed take-over whose last reported step
/// was `step`: an error that names no step of its own gets that one.
pub fn from_error_during(e: &dyn Classify, step: Option<&str>) -> Status {
    status(e.class(), step, error_line(e), Vec::new())
}

/// A refusal of `service`'s own, with no error behind it (no peer credentials, DMA off,
/// a request's task that failed): `reason`'s code, `message` as the line.
pub fn plain(reason: Reason, message: impl Into<String>) -> Status {
    status(Class::new(reason), None, message.into(), Vec::new())
}

/// A role refusal (`policy`): PERMISSION_DENIED, reason `NOT_ADMIN` or `NOT_CLIENT`,
/// with metadata `role` (the one needed) and `groups` (those that grant it,
/// comma-separated).
pub fn refused(r: &crate::policy::Refused) -> Status {
    let extra = vec![
        ("role", r.role.as_str().to_owned()),
        ("groups", r.granting_groups()),
    ];
    status(r.class(), None, r.to_string(), extra)
}

/// An error and its causes on one line, joined by ": ".
pub fn error_line(e: &dyn std::error::Error) -> String {
    let words: Vec<String> = crate::error::chain(e).map(ToString::to_string).collect();
    words.join(": ")
}

/// What recovery did with one device, on one line: for the log at start and for
/// `rigctl status`.
pub fn recovered_line(r: &Recovered) -> String {
    match r {
        Recovered::Readopted { bdf, mode } => format!("{bdf}: re-adopted ({mode} mode)"),
        Recovered::RolledBack {
            bdf,
            from,
            report,
            readopt,
        } => {
            let mut line = format!(
                "{bdf}: given back to {} (was at: {from})",
                report.driver.as_deref().unwrap_or("no driver")
            );
            if let Some(e) = readopt {
                line.push_str(&format!("; not re-adopted: {}", error_line(e)));
            }
            for w in &report.warnings {
                line.push_str(&format!("; {}", error_line(w)));
            }
            line
        }
        Recovered::Reclaimed {
            bdf,
            mode,
            from,
            report,
        } => {
            let mut line = format!(
                "{bdf}: taken back from its lease and held ({mode} mode; was at: {from}; reset: {})",
                report.reset.as_deref().unwrap_or("none")
            );
            for w in &report.warnings {
                line.push_str(&format!("; {}", error_line(w)));
            }
            line
        }
        Recovered::Waiting {
            bdf, from, holders, ..
        } => waiting_line(*bdf, *from, holders),
        Recovered::Failed(e) => {
            let bdf = match e {
                RecoverError::Journal(_) => "?".to_owned(),
                RecoverError::Gone { bdf }
                | RecoverError::RollBack { bdf, .. }
                | RecoverError::Reclaim { bdf, .. } => bdf.to_string(),
            };
            let mut line = format!("{bdf}: left as it is: {}", error_line(e));
            if let RecoverError::RollBack {
                readopt: Some(r), ..
            } = e
            {
                line.push_str(&format!("; not re-adopted: {}", error_line(r.as_ref())));
            }
            line
        }
    }
}

fn named(holders: &[take::Holder]) -> String {
    if holders.is_empty() {
        "a process rigd could not name".to_owned()
    } else {
        take::holders::list(holders)
    }
}

fn waiting_line(bdf: crate::pci::Bdf, from: take::Phase, holders: &[take::Holder]) -> String {
    format!(
        "{bdf} still held by {} from its lease before rigd restarted (record at: {from}): bus mastering kept off; rigd finishes its recovery by itself once {} exit{}",
        named(holders),
        if holders.len() == 1 { "it" } else { "they" },
        if holders.len() == 1 { "s" } else { "" },
    )
}

/// Where a device that recovery left waiting for its holders is now, on one line.
pub fn outlived_line(bdf: crate::pci::Bdf, o: &crate::rig::Outlived) -> String {
    match o {
        crate::rig::Outlived::Waiting { holders, from } => waiting_line(bdf, *from, holders),
        crate::rig::Outlived::Settled {
            holders,
            after,
            outcome,
        } => format!(
            "{bdf} was held by {} from its lease before rigd restarted; settled {} s after the start, once that ended: {}",
            named(holders),
            after.as_secs(),
            recovered_line(outcome)
        ),
    }
}

#[cfg(test)]
mod tests {
    use rig_proto::v1::DmaErrorCode;
    use tonic_types::StatusExt;

    use super::*;
    use crate::{
        channels::ChannelError,
        dma::DmaError,
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
        for n in 0..=19 {
            let code = DmaErrorCode::try_from(n).expect("a code");
            let name = code.as_str_name();
            let word = name.strip_prefix("DMA_ERROR_CODE_").unwrap_or(name);
            assert!(is_upper_snake(word), "{code:?}: {word}");
            assert!(seen.insert(word), "{word} twice");
            let reasons: Vec<&Reason> = Reason::ALL.iter().filter(|r| r.as_str() == word).collect();
            if code == DmaErrorCode::Unspecified {
                assert!(reasons.is_empty(), "no reason is UNSPECIFIED");
                continue;
            }
            assert_eq!(reasons.len(), 1, "{word}");
            assert_eq!(dma_code(*reasons[0]), code, "{word}");
        }
        assert!(
            DmaErrorCode::try_from(20).is_err(),
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
        dma: DmaErrorCode,
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
        use DmaErrorCode as D;
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
        assert_eq!(dma_code(r.class().reason), DmaErrorCode::NotAdmin);
    }
}
