//! The one place that picks a gRPC code for an error and flattens its chain: errors
//! travel typed from `pci`, `take` and `dma` up to here (and to `main.rs`, the other
//! edge), and become text only here.
//!
//! Every error status also carries typed details for programs (`grpc-status-details-bin`,
//! a `google.rpc.Status`): one `google.rpc.ErrorInfo` whose `reason` is a stable
//! UPPER_SNAKE code, `domain` is [`DOMAIN`], and `metadata` names the `device` and the
//! `step` where the error has them. docs/errors.md lists the reasons. DMA and channel
//! errors take their reason from the side socket's code (`service::dma`), so a client
//! reads the same word on either socket.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::{
    nvme::NvmeError,
    pci::PciError,
    queue::QueueError,
    rig::RigError,
    take::{self, RecoverError, Recovered, ResetError, ResizeError, TakeError},
};

/// The `domain` of every `google.rpc.ErrorInfo` rigd sends.
pub const DOMAIN: &str = "rig.dev";

/// What an error status says to programs beside its line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Why {
    /// A stable UPPER_SNAKE code (docs/errors.md).
    pub reason: &'static str,
    /// The device the error concerns: a PCI address, or a DMA pool's device name.
    pub device: Option<String>,
    /// The step that failed, in the words of the progress stream or the error.
    pub step: Option<String>,
    /// More metadata: a refusal's `role` and `groups`.
    pub extra: Vec<(&'static str, String)>,
}

impl Why {
    pub fn reason(reason: &'static str) -> Self {
        Self {
            reason,
            ..Self::default()
        }
    }

    fn device(mut self, device: Option<impl ToString>) -> Self {
        self.device = device.map(|d| d.to_string());
        self
    }

    fn step(mut self, step: Option<impl ToString>) -> Self {
        self.step = step.map(|s| s.to_string());
        self
    }
}

/// An error status: `code`, the one-line `message`, and `why` as an ErrorInfo.
pub fn status(code: Code, message: impl Into<String>, why: Why) -> Status {
    super::metrics::global().error(why.reason);
    let mut metadata = HashMap::new();
    if let Some(d) = why.device {
        metadata.insert("device".to_owned(), d);
    }
    if let Some(s) = why.step {
        metadata.insert("step".to_owned(), s);
    }
    for (k, v) in why.extra {
        metadata.insert(k.to_owned(), v);
    }
    Status::with_error_details(
        code,
        message,
        ErrorDetails::with_error_info(why.reason, DOMAIN, metadata),
    )
}

/// A role refusal (`policy`): PERMISSION_DENIED, reason `NOT_ADMIN` when the admin
/// role was needed (the reason rigd has always sent for it) or `NOT_CLIENT`, with
/// metadata `role` (the one needed) and `groups` (those that grant it, comma-separated).
pub fn refused(r: &crate::policy::Refused) -> Status {
    let reason = match r.role {
        crate::policy::Role::Admin => "NOT_ADMIN",
        crate::policy::Role::Client => "NOT_CLIENT",
    };
    let why = Why {
        reason,
        extra: vec![
            ("role", r.role.as_str().to_owned()),
            ("groups", r.granting_groups()),
        ],
        ..Why::default()
    };
    status(Code::PermissionDenied, r.to_string(), why)
}

/// An error and its causes on one line, joined by ": ".
pub fn error_line(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        line.push_str(": ");
        line.push_str(&c.to_string());
        cause = c.source();
    }
    line
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

/// Maps a `Rig` error to a status whose message is the whole chain on one line.
pub fn from_rig(e: &RigError) -> Status {
    from_rig_during(e, None)
}

/// As [`from_rig`], for an error of a streamed take-over whose last reported step was
/// `step`: an error that names no step of its own gets that one.
pub fn from_rig_during(e: &RigError, step: Option<&str>) -> Status {
    let (code, mut why) = classify(e);
    if why.step.is_none() {
        why.step = step.map(ToOwned::to_owned);
    }
    status(code, error_line(e), why)
}

/// The code and details of a `Rig` error.
pub fn classify(e: &RigError) -> (Code, Why) {
    match e {
        RigError::BadAddress(_) => (Code::InvalidArgument, Why::reason("BAD_ADDRESS")),
        RigError::BadRequest(_) => (Code::InvalidArgument, Why::reason("BAD_REQUEST")),
        RigError::Pci(p) => classify_pci(p),
        RigError::Take(TakeError::Read { source: p, bdf }) => {
            let (code, why) = classify_pci(p);
            (code, why.device(Some(bdf)).step(Some("read")))
        }
        // Transparent: the DMA error's own code and reason.
        RigError::Dma(d) => super::dma::classify(d),
        RigError::Channel(c) => {
            let code = super::channels::code(e);
            let (grpc, reason) = super::dma::of_code(code);
            (grpc, Why::reason(reason).device(channel_device(c)))
        }
        RigError::Take(TakeError::SysfsModeNotAllowed) => (
            Code::PermissionDenied,
            Why::reason("SYSFS_MODE_NOT_ALLOWED"),
        ),
        RigError::Busy { bdf } => (Code::Aborted, Why::reason("BUSY").device(Some(bdf))),
        RigError::LeaseNotAllowed { bdf, .. } => (
            Code::PermissionDenied,
            Why::reason("LEASE_NOT_ALLOWED").device(Some(bdf)),
        ),
        RigError::Leased { bdf, .. } => (
            Code::FailedPrecondition,
            Why::reason("LEASED").device(Some(bdf)),
        ),
        RigError::LeaseInUse { bdf, .. } => (
            Code::FailedPrecondition,
            Why::reason("LEASE_IN_USE").device(Some(bdf)),
        ),
        RigError::NotLeased { bdf } => (
            Code::FailedPrecondition,
            Why::reason("NOT_LEASED").device(Some(bdf)),
        ),
        RigError::Reclaim { bdf, .. } => (
            Code::Internal,
            Why::reason("LEASE_RECLAIM_FAILED").device(Some(bdf)),
        ),
        RigError::Queue(q) => classify_queue(q),
        RigError::Nvme(n) => {
            let code = match n {
                NvmeError::Unsupported { .. } => Code::FailedPrecondition,
                _ => Code::Internal,
            };
            let reason = match n {
                NvmeError::Unsupported { .. } => "NVME_UNSUPPORTED",
                _ => "NVME_ADMIN_FAILED",
            };
            (code, Why::reason(reason))
        }
        RigError::Take(t) => classify_take(t),
    }
}

fn classify_pci(e: &PciError) -> (Code, Why) {
    match e {
        PciError::NoDevice { bdf } => (Code::NotFound, Why::reason("NO_DEVICE").device(Some(bdf))),
        PciError::ShortConfig { bdf, .. } => (
            Code::DataLoss,
            Why::reason("SHORT_CONFIG").device(Some(bdf)),
        ),
        PciError::Resource { .. } => (Code::DataLoss, Why::reason("BAD_RESOURCE_FILE")),
        PciError::Read { source, .. } | PciError::Enumerate { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            (
                Code::PermissionDenied,
                Why::reason("SYSFS_PERMISSION_DENIED"),
            )
        }
        PciError::Read { .. } | PciError::Enumerate { .. } => {
            (Code::Unavailable, Why::reason("SYSFS_UNREADABLE"))
        }
    }
}

fn classify_queue(q: &QueueError) -> (Code, Why) {
    let (code, reason, bdf, step) = match q {
        QueueError::DepthZero { bdf } => (Code::InvalidArgument, "QUEUE_DEPTH_ZERO", bdf, None),
        QueueError::DepthOverLimit { bdf, .. } => {
            (Code::InvalidArgument, "QUEUE_DEPTH_OVER_LIMIT", bdf, None)
        }
        QueueError::TooMany { bdf, .. } => (Code::ResourceExhausted, "QUEUE_LIMIT", bdf, None),
        QueueError::NoQueueId { bdf, .. } => (Code::ResourceExhausted, "NO_QUEUE_ID", bdf, None),
        QueueError::NotYours { bdf, .. } => (Code::NotFound, "UNKNOWN_QUEUE", bdf, None),
        QueueError::Busy { bdf, .. } => (Code::FailedPrecondition, "FUNCTION_BUSY", bdf, None),
        QueueError::Device { bdf, step, .. } => (Code::Internal, "QUEUE_DEVICE", bdf, Some(*step)),
    };
    (code, Why::reason(reason).device(Some(bdf)).step(step))
}

fn classify_take(t: &TakeError) -> (Code, Why) {
    use Code as C;
    let (code, reason, step) = match t {
        TakeError::UnbindTimeout { .. } => (C::DeadlineExceeded, "UNBIND_TIMEOUT", Some("unbind")),
        TakeError::UnbindStuck { .. } => (C::Unavailable, "UNBIND_STUCK", Some("unbind")),
        TakeError::Mmio { .. } => (C::InvalidArgument, "MMIO_REFUSED", Some("mmio")),
        TakeError::AlreadyHeld { .. } => (C::FailedPrecondition, "ALREADY_HELD", None),
        TakeError::NotHeld { .. } => (C::FailedPrecondition, "NOT_HELD", None),
        TakeError::Refused { .. } => (C::FailedPrecondition, "REFUSED", Some("preflight")),
        TakeError::ForeignVfio { .. } => (C::FailedPrecondition, "FOREIGN_VFIO", None),
        TakeError::NotViable { .. } => (C::FailedPrecondition, "GROUP_NOT_VIABLE", None),
        TakeError::NoIommuGroup { .. } => (C::FailedPrecondition, "NO_IOMMU_GROUP", None),
        TakeError::NoBar { .. } => (C::FailedPrecondition, "NO_BAR", None),
        TakeError::Locked { .. } => (C::Aborted, "LOCKED", None),
        TakeError::LeaseKept { .. } => (C::FailedPrecondition, "LEASE_KEPT", Some("reclaim")),
        TakeError::HeldAcrossRestart { .. } => (
            C::FailedPrecondition,
            "HELD_ACROSS_RESTART",
            Some("recover"),
        ),
        TakeError::Resize(r) => {
            let (code, reason) = match r {
                ResizeError::Unsupported { .. } => (C::InvalidArgument, "BAR_SIZE_UNSUPPORTED"),
                ResizeError::BarNotResizable { .. } => (C::InvalidArgument, "BAR_NOT_RESIZABLE"),
                ResizeError::NotResizable { .. } => (C::FailedPrecondition, "NOT_RESIZABLE"),
                ResizeError::NoResizeFile { .. } => (C::FailedPrecondition, "NO_RESIZE_FILE"),
                ResizeError::DriverBound { .. } => (C::FailedPrecondition, "DRIVER_BOUND"),
                _ => (C::FailedPrecondition, "RESIZE_FAILED"),
            };
            (code, reason, Some("resize"))
        }
        TakeError::Reset(r) => {
            let reason = match r {
                ResetError::NoMethod { .. } => "NO_RESET_METHOD",
                ResetError::Unsupported { .. } => "RESET_METHOD_UNSUPPORTED",
                ResetError::Restore { .. } | ResetError::ShortSaved { .. } => "RESET_RESTORE",
                _ => "RESET_FAILED",
            };
            (C::FailedPrecondition, reason, Some("reset"))
        }
        TakeError::Step { step, .. } => (C::Internal, "STEP_FAILED", Some(*step)),
        TakeError::Vfio { source, .. } => (C::Internal, "VFIO", Some(source.step())),
        TakeError::WrongDriver { .. } => (C::Internal, "WRONG_DRIVER", Some("bind")),
        TakeError::Journal { .. } => (C::Internal, "JOURNAL", Some("journal")),
        TakeError::SysfsModeNotAllowed | TakeError::Read { .. } => {
            // Classified by `classify` before it gets here.
            (C::Internal, "INTERNAL", None)
        }
    };
    (code, Why::reason(reason).device(take_device(t)).step(step))
}

/// The device a take-over error names.
fn take_device(t: &TakeError) -> Option<String> {
    let bdf = match t {
        TakeError::AlreadyHeld { bdf, .. }
        | TakeError::NotHeld { bdf }
        | TakeError::Locked { bdf }
        | TakeError::Refused { bdf, .. }
        | TakeError::ForeignVfio { bdf }
        | TakeError::Step { bdf, .. }
        | TakeError::UnbindTimeout { bdf, .. }
        | TakeError::UnbindStuck { bdf, .. }
        | TakeError::WrongDriver { bdf, .. }
        | TakeError::NotViable { bdf, .. }
        | TakeError::NoIommuGroup { bdf }
        | TakeError::Vfio { bdf, .. }
        | TakeError::Journal { bdf, .. }
        | TakeError::NoBar { bdf, .. }
        | TakeError::Mmio { bdf, .. }
        | TakeError::LeaseKept { bdf, .. }
        | TakeError::HeldAcrossRestart { bdf, .. }
        | TakeError::Read { bdf, .. } => bdf,
        TakeError::Resize(r) => match r {
            ResizeError::NotResizable { bdf }
            | ResizeError::BarNotResizable { bdf, .. }
            | ResizeError::NoResizeFile { bdf, .. }
            | ResizeError::DriverBound { bdf, .. }
            | ResizeError::Unsupported { bdf, .. }
            | ResizeError::Refused { bdf, .. }
            | ResizeError::Read { bdf, .. } => bdf,
        },
        TakeError::Reset(r) => match r {
            ResetError::NoMethod { bdf }
            | ResetError::Unsupported { bdf, .. }
            | ResetError::Failed { bdf, .. }
            | ResetError::Restore { bdf, .. }
            | ResetError::ShortSaved { bdf, .. }
            | ResetError::Config { bdf, .. } => bdf,
        },
        TakeError::SysfsModeNotAllowed => return None,
    };
    Some(bdf.to_string())
}

/// The device (GPU) a channel error names.
fn channel_device(c: &crate::channels::ChannelError) -> Option<&str> {
    use crate::channels::ChannelError as E;
    match c {
        E::NoSpace { gpu, .. }
        | E::SpaceExists { gpu, .. }
        | E::Rm { gpu, .. }
        | E::Share { gpu, .. }
        | E::WindowsExhausted { gpu, .. } => Some(gpu),
        E::NotServed { name } => Some(name),
        E::RingSize { .. }
        | E::RingOverQuota { .. }
        | E::PushbufferSize { .. }
        | E::WindowOverQuota { .. }
        | E::GpuRingsRefused { .. }
        | E::TooManyChannels { .. }
        | E::UnknownChannel { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use rig_proto::v1::SessionErrorCode;
    use tonic_types::StatusExt;

    use super::*;
    use crate::{dma::DmaError, pci::Bdf};

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
        let why = Why::reason("UNBIND_TIMEOUT")
            .device(Some("0000:03:00.0"))
            .step(Some("unbind"));
        let s = status(Code::DeadlineExceeded, "the line", why);
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
        let (code, why) = classify(&timeout);
        assert_eq!(code, Code::DeadlineExceeded);
        assert_eq!(why.device.as_deref(), Some("0000:03:00.0"));
        assert_eq!(why.step.as_deref(), Some("unbind"));
        // Its own step wins over the stream's last one.
        let s = from_rig_during(&timeout, Some("save config"));
        let info = s.get_details_error_info().expect("info");
        assert_eq!(
            info.metadata.get("step").map(String::as_str),
            Some("unbind")
        );

        let held = RigError::Take(TakeError::NotHeld { bdf: bdf() });
        let s = from_rig_during(&held, Some("lock the device"));
        let info = s.get_details_error_info().expect("info");
        assert_eq!(info.reason, "NOT_HELD");
        assert_eq!(
            info.metadata.get("step").map(String::as_str),
            Some("lock the device")
        );
    }

    #[test]
    fn every_side_socket_code_has_an_upper_snake_reason_of_its_own() {
        let mut seen = std::collections::BTreeSet::new();
        for n in 0..=19 {
            let code = SessionErrorCode::try_from(n).expect("a code");
            let (_, reason) = crate::service::dma::of_code(code);
            assert!(is_upper_snake(reason), "{code:?}: {reason}");
            assert!(seen.insert(reason), "{reason} twice");
        }
        assert!(
            SessionErrorCode::try_from(20).is_err(),
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
        let (code, why) = crate::service::dma::classify(&quota);
        assert_eq!((code, why.reason), (Code::ResourceExhausted, "QUOTA"));
        let (code, why) = crate::service::dma::classify(&DmaError::NoPool { name: "x".into() });
        assert_eq!(
            (code, why.reason, why.device.as_deref()),
            (Code::NotFound, "NO_POOL", Some("x"))
        );
    }

    #[test]
    fn reasons_of_rig_errors_are_upper_snake() {
        let errors = [
            RigError::BadRequest("x".into()),
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
            let (_, why) = classify(e);
            assert!(is_upper_snake(why.reason), "{e}: {}", why.reason);
        }
    }
}
