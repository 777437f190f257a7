//! Wire types → the library's own types. The decoded device comes back through
//! `rig-proto`'s conversion (the inverse of the daemon's, round-trip tested there); a
//! reply this client cannot read is a typed [`ClientError::Reply`], never a panic or a
//! silent default. Take-over messages are converted in `take`.

use rig_proto::v1 as pb;

use crate::{ClientError, model::*};

pub fn version(v: pb::VersionReply) -> Version {
    Version {
        daemon: v.daemon_version,
        api: v.api_version,
        sysfs_root: v.sysfs_root,
    }
}

pub fn device(d: pb::Device) -> Result<Device, ClientError> {
    Device::try_from(d).map_err(ClientError::from)
}

pub fn bar(b: pb::Bar) -> Result<Bar, ClientError> {
    Bar::try_from(b).map_err(ClientError::from)
}
