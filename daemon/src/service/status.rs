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

/// A served GPU's health, compute geometry and copy engines on the wire (`rigctl
/// status`).
pub fn served_gpu(bdf: String, g: &crate::rig::ServedGpu) -> pb::ServedGpu {
    use crate::channels::Health as H;
    let h = &g.health;
    let (health, since) = match h {
        H::Serving => (pb::GpuHealth::Serving, None),
        H::Stalled { .. } => (pb::GpuHealth::Stalled, None),
        H::Lost { since, .. } => (pb::GpuHealth::Lost, Some(*since)),
    };
    pb::ServedGpu {
        bdf,
        health: health.into(),
        reason: match h {
            H::Serving => String::new(),
            other => other.to_string(),
        },
        since_unix_ms: since
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        geometry: g.geometry.as_ref().map(Into::into),
        copy_engines: g.copy_engines.iter().copied().map(u32::from).collect(),
        interrupts: g.interrupts,
        wakes_given: g.wakes.map(|w| w.0),
        wakes_passed: g.wakes.map(|w| w.1),
    }
}

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
        R::NoDevice
        | R::UnknownQueue
        | R::NoPool
        | R::UnknownLease
        | R::UnknownChannel
        | R::UnknownGpuMemory
        | R::UnknownEvent => Code::NotFound,
        R::ShortConfig | R::BadResourceFile => Code::DataLoss,
        R::SysfsPermissionDenied
        | R::NotAdmin
        | R::NotClient
        | R::SysfsModeNotAllowed
        | R::NoPeerCredentials
        | R::LeaseNotAllowed
        | R::BadSession
        | R::GpuRingsRefused
        | R::CpuViewRefused
        | R::EventRefused => Code::PermissionDenied,
        R::SysfsUnreadable | R::UnbindStuck | R::Rm | R::GpuLost => Code::Unavailable,
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
        | R::NotServed
        | R::ChannelFaulted
        | R::EventGone => Code::FailedPrecondition,
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
        | R::ChannelLimit
        | R::GpuTime
        | R::EventLimit => Code::ResourceExhausted,
    }
}

/// The side socket's code of a DMA, channel or session request's failure: the code of
/// the same word, `INTERNAL` for a reason the socket has no word for.
pub fn dma_code(reason: Reason) -> pb::SessionErrorCode {
    use Reason as R;
    use pb::SessionErrorCode as C;
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
        R::UnknownGpuMemory => C::UnknownGpuMemory,
        R::CpuViewRefused => C::CpuViewRefused,
        R::ChannelFaulted => C::ChannelFaulted,
        R::GpuLost => C::GpuLost,
        R::GpuTime => C::GpuTime,
        R::UnknownEvent => C::UnknownEvent,
        R::EventRefused => C::EventRefused,
        R::EventGone => C::EventGone,
        R::EventLimit => C::EventLimit,
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
pub use crate::error::line as error_line;

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
mod tests;
