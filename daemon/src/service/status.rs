//! The one place that picks a gRPC code for an error and flattens its chain: errors
//! travel typed from `pci`, `take` and `dma` up to here (and to `main.rs`, the other
//! edge), and become text only here.

use tonic::Status;

use crate::{
    nvme::NvmeError,
    pci::PciError,
    queue::QueueError,
    rig::RigError,
    take::{RecoverError, Recovered, ResizeError, TakeError},
};

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

/// Maps a `Rig` error to a status whose message is the whole chain on one line.
pub fn from_rig(e: &RigError) -> Status {
    let msg = error_line(e);
    match e {
        RigError::BadAddress(_) | RigError::BadRequest(_) => Status::invalid_argument(msg),
        RigError::Pci(p) | RigError::Take(TakeError::Read { source: p, .. }) => from_pci(p, msg),
        // Transparent: the DMA error's own code and line.
        RigError::Dma(d) => super::dma::status(d),
        RigError::Channel(_) => super::dma::status_of_code(super::channels::code(e), msg),
        RigError::NotAdmin { .. } | RigError::Take(TakeError::SysfsModeNotAllowed) => {
            Status::permission_denied(msg)
        }
        RigError::Busy { .. } | RigError::Take(TakeError::Locked { .. }) => Status::aborted(msg),
        RigError::LeaseNotAllowed { .. } => Status::permission_denied(msg),
        RigError::Leased { .. } | RigError::LeaseInUse { .. } | RigError::NotLeased { .. } => {
            Status::failed_precondition(msg)
        }
        RigError::Reclaim { .. } => Status::internal(msg),
        RigError::Queue(q) => match q {
            QueueError::DepthZero { .. } | QueueError::DepthOverLimit { .. } => {
                Status::invalid_argument(msg)
            }
            QueueError::TooMany { .. } | QueueError::NoQueueId { .. } => {
                Status::resource_exhausted(msg)
            }
            QueueError::NotYours { .. } => Status::not_found(msg),
            QueueError::Device { .. } => Status::internal(msg),
        },
        RigError::Nvme(NvmeError::Unsupported { .. }) => Status::failed_precondition(msg),
        RigError::Nvme(_) => Status::internal(msg),
        RigError::Take(t) => match t {
            TakeError::UnbindTimeout { .. } => Status::deadline_exceeded(msg),
            TakeError::Mmio { .. } => Status::invalid_argument(msg),
            TakeError::Resize(ResizeError::Unsupported { .. })
            | TakeError::Resize(ResizeError::BarNotResizable { .. }) => {
                Status::invalid_argument(msg)
            }
            TakeError::AlreadyHeld { .. }
            | TakeError::NotHeld { .. }
            | TakeError::Refused { .. }
            | TakeError::ForeignVfio { .. }
            | TakeError::NotViable { .. }
            | TakeError::NoIommuGroup { .. }
            | TakeError::NoBar { .. }
            | TakeError::Resize(_)
            | TakeError::Reset(_) => Status::failed_precondition(msg),
            _ => Status::internal(msg),
        },
    }
}

fn from_pci(e: &PciError, msg: String) -> Status {
    match e {
        PciError::NoDevice { .. } => Status::not_found(msg),
        PciError::ShortConfig { .. } | PciError::Resource { .. } => Status::data_loss(msg),
        PciError::Read { source, .. } | PciError::Enumerate { source, .. }
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Status::permission_denied(msg)
        }
        PciError::Read { .. } | PciError::Enumerate { .. } => Status::unavailable(msg),
    }
}
