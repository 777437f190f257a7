//! The decoded device to the wire: `pci` hands `service` a `rig_model::Device`, and
//! `rig-proto`'s conversion (one place, both directions, round-trip tested) makes the
//! message. Nothing below `service` sees proto types.

use rig_proto::v1 as pb;

use crate::pci;

pub fn device(d: &pci::Device) -> pb::Device {
    pb::Device::from(d)
}

pub fn bar(b: &pci::device::Bar) -> pb::Bar {
    pb::Bar::from(b)
}
