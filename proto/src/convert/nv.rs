//! The NVIDIA channel vocabulary (`rig_model::nv`) ↔ the side socket's channel
//! messages, both ways, once: the engine a channel drives (`DmaEngine`), where its
//! rings live (`DmaRings`), and the fault its notifier holds (`DmaChannelFault`); and
//! what a claim's reply says of a served GPU (`SessionGpu`, `GpuComputeGeometry`).
//!
//! The wire's zeros: a `DmaEngine` of UNSPECIFIED is refused (a channel needs one);
//! `DmaRings`' zero is HOST, the rings' default. A fault's `reason` is derived from
//! `info32` going out and not read back (the model derives it again).

use rig_model::{addr::GpuVa, nv as m};

use super::{ConvertError, Result, n16};
use crate::v1 as pb;

impl From<m::Engine> for pb::DmaEngine {
    fn from(e: m::Engine) -> Self {
        match e {
            m::Engine::Copy => Self::Copy,
            m::Engine::Compute => Self::Compute,
        }
    }
}

impl TryFrom<pb::DmaEngine> for m::Engine {
    type Error = ConvertError;

    fn try_from(e: pb::DmaEngine) -> Result<Self> {
        match e {
            pb::DmaEngine::Copy => Ok(Self::Copy),
            pb::DmaEngine::Compute => Ok(Self::Compute),
            pb::DmaEngine::Unspecified => Err(ConvertError::UnknownEnum {
                field: "DmaEngine",
                value: e.into(),
            }),
        }
    }
}

impl From<m::Rings> for pb::DmaRings {
    fn from(r: m::Rings) -> Self {
        match r {
            m::Rings::Host => Self::Host,
            m::Rings::Gpu => Self::Gpu,
        }
    }
}

impl From<pb::DmaRings> for m::Rings {
    fn from(r: pb::DmaRings) -> Self {
        match r {
            pb::DmaRings::Host => Self::Host,
            pb::DmaRings::Gpu => Self::Gpu,
        }
    }
}

wire_enum!(m::Engine => pb::DmaEngine, m::Rings => pb::DmaRings);

impl From<&m::ChannelFault> for pb::DmaChannelFault {
    fn from(f: &m::ChannelFault) -> Self {
        Self {
            info32: f.info32,
            info16: f.info16.into(),
            status: f.status.into(),
            time_ns: f.time_ns,
            reason: f.reason().to_owned(),
        }
    }
}

impl TryFrom<pb::DmaChannelFault> for m::ChannelFault {
    type Error = ConvertError;

    fn try_from(f: pb::DmaChannelFault) -> Result<Self> {
        Ok(Self {
            time_ns: f.time_ns,
            info32: f.info32,
            info16: n16("DmaChannelFault.info16", f.info16)?,
            status: n16("DmaChannelFault.status", f.status)?,
        })
    }
}

impl From<&m::ComputeGeometry> for pb::GpuComputeGeometry {
    fn from(c: &m::ComputeGeometry) -> Self {
        Self {
            sm_version: c.sm_version,
            gpcs: c.gpcs,
            max_tpcs_per_gpc: c.max_tpcs_per_gpc,
            sms_per_tpc: c.sms_per_tpc,
            tpcs: c.tpcs,
            max_warps_per_sm: c.max_warps_per_sm,
        }
    }
}

impl From<pb::GpuComputeGeometry> for m::ComputeGeometry {
    fn from(c: pb::GpuComputeGeometry) -> Self {
        Self {
            sm_version: c.sm_version,
            gpcs: c.gpcs,
            max_tpcs_per_gpc: c.max_tpcs_per_gpc,
            sms_per_tpc: c.sms_per_tpc,
            tpcs: c.tpcs,
            max_warps_per_sm: c.max_warps_per_sm,
        }
    }
}

impl From<&m::SessionGpu> for pb::SessionGpu {
    fn from(g: &m::SessionGpu) -> Self {
        Self {
            page_bytes: g.page_bytes,
            gpu_memory_base: g.gpu_memory.start.get(),
            gpu_memory_end: g.gpu_memory.end.get(),
            gpu_memory_quota_bytes: g.gpu_memory_quota_bytes,
            shared_window: g.shared_window.get(),
            shared_window_bytes: g.shared_window_bytes,
            local_window: g.local_window.get(),
            local_window_bytes: g.local_window_bytes,
            geometry: g.geometry.as_ref().map(pb::GpuComputeGeometry::from),
            va_end: g.va_end.get(),
        }
    }
}

impl From<pb::SessionGpu> for m::SessionGpu {
    fn from(g: pb::SessionGpu) -> Self {
        Self {
            page_bytes: g.page_bytes,
            gpu_memory: GpuVa(g.gpu_memory_base)..GpuVa(g.gpu_memory_end),
            gpu_memory_quota_bytes: g.gpu_memory_quota_bytes,
            shared_window: GpuVa(g.shared_window),
            shared_window_bytes: g.shared_window_bytes,
            local_window: GpuVa(g.local_window),
            local_window_bytes: g.local_window_bytes,
            geometry: g.geometry.map(m::ComputeGeometry::from),
            va_end: GpuVa(g.va_end),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::convert::WireEnum;

    fn engine() -> impl Strategy<Value = m::Engine> {
        prop_oneof![Just(m::Engine::Copy), Just(m::Engine::Compute)]
    }

    fn rings() -> impl Strategy<Value = m::Rings> {
        prop_oneof![Just(m::Rings::Host), Just(m::Rings::Gpu)]
    }

    fn fault() -> impl Strategy<Value = m::ChannelFault> {
        any::<(u64, u32, u16, u16)>().prop_map(|(time_ns, info32, info16, status)| {
            m::ChannelFault {
                time_ns,
                info32,
                info16,
                status,
            }
        })
    }

    fn session_gpu() -> impl Strategy<Value = m::SessionGpu> {
        (
            any::<(u64, u64, u64, u64)>(),
            any::<(u64, u64, u64, u64, u64)>(),
            proptest::option::of(any::<(u32, u32, u32, u32, u32, u32)>()),
        )
            .prop_map(|(a, b, c)| m::SessionGpu {
                page_bytes: a.0,
                gpu_memory: GpuVa(a.1)..GpuVa(a.2),
                gpu_memory_quota_bytes: a.3,
                shared_window: GpuVa(b.0),
                shared_window_bytes: b.1,
                local_window: GpuVa(b.2),
                local_window_bytes: b.3,
                geometry: c.map(|c| m::ComputeGeometry {
                    sm_version: c.0,
                    gpcs: c.1,
                    max_tpcs_per_gpc: c.2,
                    sms_per_tpc: c.3,
                    tpcs: c.4,
                    max_warps_per_sm: c.5,
                }),
                va_end: GpuVa(b.4),
            })
    }

    proptest! {
        #[test]
        fn a_session_gpu_survives_the_wire_and_its_bytes(g in session_gpu()) {
            use prost::Message;
            prop_assert_eq!(m::SessionGpu::from(pb::SessionGpu::from(&g)), g.clone());
            let bytes = pb::SessionGpu::from(&g).encode_to_vec();
            let wire = pb::SessionGpu::decode(bytes.as_slice()).expect("our own encoding decodes");
            prop_assert_eq!(m::SessionGpu::from(wire), g);
        }

        #[test]
        fn engines_rings_and_faults_survive_the_wire(e in engine(), r in rings(), f in fault()) {
            prop_assert_eq!(m::Engine::try_from(pb::DmaEngine::from(e)), Ok(e));
            prop_assert_eq!(m::Engine::from_wire(e.wire().into()), Some(e));
            prop_assert_eq!(m::Rings::from(pb::DmaRings::from(r)), r);
            prop_assert_eq!(m::Rings::from_wire(r.wire().into()), Some(r));
            let wire = pb::DmaChannelFault::from(&f);
            prop_assert_eq!(wire.reason.as_str(), f.reason());
            prop_assert_eq!(m::ChannelFault::try_from(wire), Ok(f));
        }
    }

    #[test]
    fn a_channel_needs_an_engine_and_unknown_numbers_are_none() {
        assert_eq!(m::Engine::from_wire(0), None);
        assert_eq!(m::Engine::from_wire(9), None);
        assert_eq!(m::Rings::from_wire(0), Some(m::Rings::Host));
        assert_eq!(m::Rings::from_wire(9), None);
        assert_eq!(
            m::ChannelFault::try_from(pb::DmaChannelFault {
                info16: 0x1_0000,
                ..Default::default()
            }),
            Err(ConvertError::OutOfRange {
                field: "DmaChannelFault.info16",
                value: 0x1_0000,
                bits: 16
            })
        );
    }
}
