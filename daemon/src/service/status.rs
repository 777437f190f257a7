//! The one place that picks a gRPC code for an error and flattens its chain.

use tonic::Status;

use crate::{
    pci::PciError,
    rig::{RigError, error_line},
    take::{ResizeError, TakeError},
};

/// Maps a `Rig` error to a status whose message is the whole chain on one line.
pub fn from_rig(e: &RigError) -> Status {
    let msg = error_line(e);
    match e {
        RigError::BadAddress(_) | RigError::BadRequest(_) => Status::invalid_argument(msg),
        RigError::Pci(p) | RigError::Take(TakeError::Read { source: p, .. }) => from_pci(p, msg),
        RigError::NotAdmin { .. } | RigError::Take(TakeError::SysfsModeNotAllowed) => {
            Status::permission_denied(msg)
        }
        RigError::Busy { .. } | RigError::Take(TakeError::Locked { .. }) => Status::aborted(msg),
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
