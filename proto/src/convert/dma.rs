//! The DMA vocabulary (`rig_model::dma`, and `rig_model::addr::DeviceAddr`) ↔ the DMA
//! service's messages, both ways, once: rigd's report of its pools and sessions
//! (`DmaStatusReply`), a pool's addressing, and a lease's device address.
//!
//! The wire's zeros: a `DmaAddressing` of UNSPECIFIED (or a kind this version does not
//! know) reads as [`Addressing::None`](m::Addressing::None), no device address, as
//! rig-client always read it; a pool's `pin_gib_per_s` of 0 and empty `problem` are
//! none, which the model never holds as `Some` (a rate of zero, an empty line). A
//! device address travels as its number (`DmaLeased.device_address`), its kind as the
//! session's addressing ([`device_addr`] joins them).

use rig_model::{addr::DeviceAddr, dma as m};

use super::{ConvertError, Result};
use crate::v1 as pb;

impl From<m::Addressing> for pb::DmaAddressing {
    fn from(a: m::Addressing) -> Self {
        match a {
            m::Addressing::None => Self::None,
            m::Addressing::Physical => Self::Physical,
            m::Addressing::Iova => Self::Iova,
            m::Addressing::GpuVa => Self::GpuVa,
        }
    }
}

impl From<pb::DmaAddressing> for m::Addressing {
    fn from(a: pb::DmaAddressing) -> Self {
        match a {
            pb::DmaAddressing::Unspecified | pb::DmaAddressing::None => Self::None,
            pb::DmaAddressing::Physical => Self::Physical,
            pb::DmaAddressing::Iova => Self::Iova,
            pb::DmaAddressing::GpuVa => Self::GpuVa,
        }
    }
}

wire_enum!(m::Addressing => pb::DmaAddressing);

/// An `addressing` field's number read back: one this version does not know is
/// [`m::Addressing::None`] (see the module's head).
pub fn addressing(v: i32) -> m::Addressing {
    <m::Addressing as super::WireEnum>::from_wire(v).unwrap_or(m::Addressing::None)
}

/// A lease's device address: the wire's number as the kind `addressing` names. A
/// lease may have none in any mode (in sysfs mode, a block whose physical address
/// rigd could not read).
///
/// # Errors
/// [`ConvertError::Unexpected`] for an address in host mode, which has none.
pub fn device_addr(addressing: m::Addressing, raw: Option<u64>) -> Result<Option<DeviceAddr>> {
    match (addressing, raw) {
        (m::Addressing::None, Some(_)) => Err(ConvertError::Unexpected {
            field: "DmaLeased.device_address",
        }),
        (a, raw) => Ok(raw.and_then(|r| DeviceAddr::new(a, r))),
    }
}

impl From<&m::PoolStatus> for pb::DmaPool {
    fn from(p: &m::PoolStatus) -> Self {
        Self {
            name: p.name.clone(),
            addressing: pb::DmaAddressing::from(p.addressing).into(),
            block_bytes: p.block_bytes,
            target_blocks: p.target_blocks,
            free_blocks: p.free_blocks,
            leased_blocks: p.leased_blocks,
            quarantined_blocks: p.quarantined_blocks,
            pinning_blocks: p.pinning_blocks,
            pin_gib_per_s: p.pin_gib_per_s.unwrap_or(0.0),
            problem: p.problem.clone().unwrap_or_default(),
        }
    }
}

impl From<pb::DmaPool> for m::PoolStatus {
    fn from(p: pb::DmaPool) -> Self {
        Self {
            addressing: addressing(p.addressing),
            name: p.name,
            block_bytes: p.block_bytes,
            target_blocks: p.target_blocks,
            free_blocks: p.free_blocks,
            leased_blocks: p.leased_blocks,
            quarantined_blocks: p.quarantined_blocks,
            pinning_blocks: p.pinning_blocks,
            pin_gib_per_s: (p.pin_gib_per_s > 0.0).then_some(p.pin_gib_per_s),
            problem: (!p.problem.is_empty()).then_some(p.problem),
        }
    }
}

impl From<&m::ClientUse> for pb::DmaClient {
    fn from(c: &m::ClientUse) -> Self {
        Self {
            session: c.session.0,
            uid: c.uid,
            pid: c.pid,
            device: c.device.clone(),
            leases: c.leases,
            bytes: c.bytes,
            claimed: c.claimed,
            gpu_memory_allocations: c.gpu_memory_allocations,
            gpu_memory_bytes: c.gpu_memory_bytes,
            events_exported: c.events_exported,
            events_imported: c.events_imported,
        }
    }
}

impl From<pb::DmaClient> for m::ClientUse {
    fn from(c: pb::DmaClient) -> Self {
        Self {
            session: m::SessionId(c.session),
            uid: c.uid,
            pid: c.pid,
            device: c.device,
            leases: c.leases,
            bytes: c.bytes,
            claimed: c.claimed,
            gpu_memory_allocations: c.gpu_memory_allocations,
            gpu_memory_bytes: c.gpu_memory_bytes,
            events_exported: c.events_exported,
            events_imported: c.events_imported,
        }
    }
}

impl From<&m::DmaStatus> for pb::DmaStatusReply {
    fn from(s: &m::DmaStatus) -> Self {
        Self {
            pools: s.pools.iter().map(pb::DmaPool::from).collect(),
            clients: s.clients.iter().map(pb::DmaClient::from).collect(),
            quota_per_uid_bytes: s.quota_per_uid_bytes,
            quota_per_device_bytes: s.quota_per_device_bytes,
            gpu_memory: s.gpu_memory.iter().map(pb::DmaGpuMemory::from).collect(),
        }
    }
}

impl From<pb::DmaStatusReply> for m::DmaStatus {
    fn from(r: pb::DmaStatusReply) -> Self {
        Self {
            pools: r.pools.into_iter().map(m::PoolStatus::from).collect(),
            clients: r.clients.into_iter().map(m::ClientUse::from).collect(),
            quota_per_uid_bytes: r.quota_per_uid_bytes,
            quota_per_device_bytes: r.quota_per_device_bytes,
            gpu_memory: r
                .gpu_memory
                .into_iter()
                .map(m::GpuMemoryStatus::from)
                .collect(),
        }
    }
}

impl From<&m::GpuMemoryStatus> for pb::DmaGpuMemory {
    fn from(g: &m::GpuMemoryStatus) -> Self {
        Self {
            gpu: g.gpu.clone(),
            lent_bytes: g.lent_bytes,
            kept_bytes: g.kept_bytes,
            spare_bytes: g.spare_bytes,
            per_uid_bytes: g.per_uid_bytes,
            per_gpu_bytes: g.per_gpu_bytes,
        }
    }
}

impl From<pb::DmaGpuMemory> for m::GpuMemoryStatus {
    fn from(g: pb::DmaGpuMemory) -> Self {
        Self {
            gpu: g.gpu,
            lent_bytes: g.lent_bytes,
            kept_bytes: g.kept_bytes,
            spare_bytes: g.spare_bytes,
            per_uid_bytes: g.per_uid_bytes,
            per_gpu_bytes: g.per_gpu_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::{collection::vec, option, prelude::*};
    use rig_model::addr::{GpuVa, Iova, PhysAddr};

    use super::*;
    use crate::convert::WireEnum;

    fn addressing_() -> impl Strategy<Value = m::Addressing> {
        prop_oneof![
            Just(m::Addressing::None),
            Just(m::Addressing::Physical),
            Just(m::Addressing::Iova),
            Just(m::Addressing::GpuVa),
        ]
    }

    fn pool() -> impl Strategy<Value = m::PoolStatus> {
        (
            ("\\PC{0,12}", addressing_(), any::<u64>()),
            any::<(u32, u32, u32, u32, u32)>(),
            option::of(1.0e-6..1.0e6f64),
            option::of("\\PC{1,24}"),
        )
            .prop_map(
                |((name, addressing, block_bytes), b, pin_gib_per_s, problem)| m::PoolStatus {
                    name,
                    addressing,
                    block_bytes,
                    target_blocks: b.0,
                    free_blocks: b.1,
                    leased_blocks: b.2,
                    quarantined_blocks: b.3,
                    pinning_blocks: b.4,
                    pin_gib_per_s,
                    problem,
                },
            )
    }

    fn client() -> impl Strategy<Value = m::ClientUse> {
        (
            any::<(u64, u32, i32)>(),
            "\\PC{0,12}",
            any::<(u32, u64, bool)>(),
            any::<(u32, u64, u32, u32)>(),
        )
            .prop_map(
                |((session, uid, pid), device, (leases, bytes, claimed), g)| m::ClientUse {
                    session: m::SessionId(session),
                    uid,
                    pid,
                    device,
                    leases,
                    bytes,
                    claimed,
                    gpu_memory_allocations: g.0,
                    gpu_memory_bytes: g.1,
                    events_exported: g.2,
                    events_imported: g.3,
                },
            )
    }

    fn gpu_memory() -> impl Strategy<Value = m::GpuMemoryStatus> {
        ("\\PC{0,12}", any::<(u64, u64, u64, u64, u64)>()).prop_map(|(gpu, b)| m::GpuMemoryStatus {
            gpu,
            lent_bytes: b.0,
            kept_bytes: b.1,
            spare_bytes: b.4,
            per_uid_bytes: b.2,
            per_gpu_bytes: b.3,
        })
    }

    fn status() -> impl Strategy<Value = m::DmaStatus> {
        (
            vec(pool(), 0..4),
            vec(client(), 0..4),
            any::<(u64, u64)>(),
            vec(gpu_memory(), 0..3),
        )
            .prop_map(
                |(pools, clients, (per_uid, per_device), gpu_memory)| m::DmaStatus {
                    pools,
                    clients,
                    quota_per_uid_bytes: per_uid,
                    quota_per_device_bytes: per_device,
                    gpu_memory,
                },
            )
    }

    fn device_addr_() -> impl Strategy<Value = DeviceAddr> {
        prop_oneof![
            any::<u64>().prop_map(|a| DeviceAddr::Iova(Iova(a))),
            any::<u64>().prop_map(|a| DeviceAddr::Phys(PhysAddr(a))),
            any::<u64>().prop_map(|a| DeviceAddr::GpuVa(GpuVa(a))),
        ]
    }

    proptest! {
        #[test]
        fn a_dma_report_survives_the_wire(s in status()) {
            prop_assert_eq!(m::DmaStatus::from(pb::DmaStatusReply::from(&s)), s);
        }

        #[test]
        fn the_round_trip_holds_through_the_encoded_bytes(s in status()) {
            use prost::Message;
            let bytes = pb::DmaStatusReply::from(&s).encode_to_vec();
            let wire = pb::DmaStatusReply::decode(bytes.as_slice()).expect("our own encoding decodes");
            prop_assert_eq!(m::DmaStatus::from(wire), s);
        }

        #[test]
        fn addressing_and_device_addresses_come_back_with_their_kind(
            a in addressing_(),
            d in device_addr_(),
        ) {
            prop_assert_eq!(m::Addressing::from(pb::DmaAddressing::from(a)), a);
            prop_assert_eq!(addressing(a.wire().into()), a);
            prop_assert_eq!(device_addr(d.addressing(), Some(d.get())), Ok(Some(d)));
        }
    }

    #[test]
    fn the_wires_zeros_read_as_none_and_a_mismatched_address_is_refused() {
        assert_eq!(addressing(0), m::Addressing::None);
        assert_eq!(addressing(99), m::Addressing::None, "a newer rigd's kind");
        assert_eq!(device_addr(m::Addressing::None, None), Ok(None));
        assert_eq!(device_addr(m::Addressing::Physical, None), Ok(None));
        assert_eq!(
            device_addr(m::Addressing::None, Some(1)),
            Err(ConvertError::Unexpected {
                field: "DmaLeased.device_address"
            })
        );
        let pool = m::PoolStatus::from(pb::DmaPool::default());
        assert_eq!((pool.pin_gib_per_s, pool.problem), (None, None));
    }
}
