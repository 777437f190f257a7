//! The one place that picks a gRPC code for an error and flattens its chain.

use tonic::Status;

use crate::{
    pci::PciError,
    rig::{RigError, error_line},
};

/// Maps a `Rig` error to a status whose message is the whole chain on one line.
pub fn from_rig(e: &RigError) -> Status {
    let msg = error_line(e);
    match e {
        RigError::BadAddress(_) => Status::invalid_argument(msg),
        RigError::Pci(PciError::NoDevice { .. }) => Status::not_found(msg),
        RigError::Pci(PciError::ShortConfig { .. } | PciError::Resource { .. }) => {
            Status::data_loss(msg)
        }
        RigError::Pci(PciError::Read { source, .. } | PciError::Enumerate { source, .. })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            Status::permission_denied(msg)
        }
        RigError::Pci(_) => Status::unavailable(msg),
    }
}
