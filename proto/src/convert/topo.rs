//! The peer topology (`rig_model::topo`) ↔ `TopologyReply`, both ways, exact inverses
//! (the test below round-trips a topology with every enum value).

use rig_model::topo as m;

use super::{ConvertError, Result, shared_hop, shared_hop_back};
use crate::v1 as pb;

/// Each enum both ways: model variant ↔ wire variant; the wire's UNSPECIFIED and
/// values this version does not know are refused, naming the field.
macro_rules! enum_pair {
    ($to:ident, $back:ident, $m:ty, $pb:ty, $field:literal, [$($mv:ident => $pv:ident),+ $(,)?]) => {
        fn $to(v: $m) -> i32 {
            match v {
                $(<$m>::$mv => <$pb>::$pv as i32,)+
            }
        }

        fn $back(v: i32) -> Result<$m> {
            match <$pb>::try_from(v) {
                $(Ok(<$pb>::$pv) => Ok(<$m>::$mv),)+
                _ => Err(ConvertError::UnknownEnum { field: $field, value: v }),
            }
        }
    };
}

enum_pair!(state, state_back, m::NvlinkState, pb::NvlinkState, "NvlinkLink.state", [
    Init => Init, Hwcfg => Hwcfg, Swcfg => Swcfg, Active => Active, Fault => Fault,
    Sleep => Sleep, Recovery => Recovery, Invalid => Invalid, Other => Other,
]);
enum_pair!(kind, kind_back, m::NvlinkRemoteKind, pb::NvlinkRemoteKind, "NvlinkRemote.kind", [
    Gpu => Gpu, Switch => Switch, Npu => Npu, Tegra => Tegra, Ebridge => Ebridge,
    None => None, Other => Other,
]);
enum_pair!(pcie, pcie_back, m::PciePath, pb::PciePath, "PeerPair.pcie", [
    X => X, Pix => Pix, Pxb => Pxb, Phb => Phb, Node => Node, Sys => Sys,
]);
enum_pair!(cap, cap_back, m::P2pCap, pb::P2pCap, "P2pCapStatus.cap", [
    Read => Read, Write => Write, Nvlink => Nvlink, Atomics => Atomics, Prop => Prop,
    Loopback => Loopback, Pci => Pci, C2c => C2c, PciBar1 => PciBar1,
]);
enum_pair!(status, status_back, m::P2pStatus, pb::P2pStatus, "P2pCapStatus.status", [
    Ok => Ok, ChipsetNotSupported => ChipsetNotSupported, GpuNotSupported => GpuNotSupported,
    IohTopologyNotSupported => IohTopologyNotSupported, DisabledByRegkey => DisabledByRegkey,
    NotSupported => NotSupported, Other => Other,
]);

impl From<&m::Topology> for pb::TopologyReply {
    fn from(t: &m::Topology) -> Self {
        Self {
            gpus: t.gpus.iter().map(gpu).collect(),
            pairs: t.pairs.iter().map(pair).collect(),
            driver: t.driver.clone(),
            problems: t.problems.clone(),
        }
    }
}

impl TryFrom<pb::TopologyReply> for m::Topology {
    type Error = ConvertError;

    fn try_from(t: pb::TopologyReply) -> Result<Self> {
        Ok(Self {
            gpus: t.gpus.into_iter().map(gpu_back).collect::<Result<_>>()?,
            pairs: t.pairs.into_iter().map(pair_back).collect::<Result<_>>()?,
            driver: t.driver,
            problems: t.problems,
        })
    }
}

fn gpu(g: &m::TopoGpu) -> pb::TopoGpu {
    pb::TopoGpu {
        bdf: g.bdf.clone(),
        numa_node: g.numa_node,
        local_cpulist: g.local_cpulist.clone(),
        rm_gpu_id: g.rm_gpu_id,
        nvlink: g.nvlink.as_ref().map(|links| pb::NvlinkLinks {
            links: links.iter().map(link).collect(),
        }),
        nvlink_problem: g.nvlink_problem.clone(),
        shared: g.shared.iter().map(shared_hop).collect(),
        contended_gbytes_per_s: g.contended_gbytes_per_s,
    }
}

fn gpu_back(g: pb::TopoGpu) -> Result<m::TopoGpu> {
    Ok(m::TopoGpu {
        bdf: g.bdf,
        numa_node: g.numa_node,
        local_cpulist: g.local_cpulist,
        rm_gpu_id: g.rm_gpu_id,
        nvlink: g
            .nvlink
            .map(|l| l.links.into_iter().map(link_back).collect::<Result<_>>())
            .transpose()?,
        nvlink_problem: g.nvlink_problem,
        shared: g.shared.into_iter().map(shared_hop_back).collect(),
        contended_gbytes_per_s: g.contended_gbytes_per_s,
    })
}

fn link(l: &m::NvlinkLink) -> pb::NvlinkLink {
    pb::NvlinkLink {
        link: l.link,
        state: state(l.state),
        version: l.version.clone(),
        line_rate_mbps: l.line_rate_mbps,
        data_rate_kibps: l.data_rate_kibps,
        remote: l.remote.as_ref().map(|r| pb::NvlinkRemote {
            kind: kind(r.kind),
            bdf: r.bdf.clone(),
            pci_device_id: r.pci_device_id,
            link: r.link,
            loopback: r.loopback,
        }),
    }
}

fn link_back(l: pb::NvlinkLink) -> Result<m::NvlinkLink> {
    Ok(m::NvlinkLink {
        link: l.link,
        state: state_back(l.state)?,
        version: l.version,
        line_rate_mbps: l.line_rate_mbps,
        data_rate_kibps: l.data_rate_kibps,
        remote: l
            .remote
            .map(|r| {
                Ok::<_, ConvertError>(m::NvlinkRemote {
                    kind: kind_back(r.kind)?,
                    bdf: r.bdf,
                    pci_device_id: r.pci_device_id,
                    link: r.link,
                    loopback: r.loopback,
                })
            })
            .transpose()?,
    })
}

fn pair(p: &m::PeerPair) -> pb::PeerPair {
    pb::PeerPair {
        from: p.from.clone(),
        to: p.to.clone(),
        pcie: pcie(p.pcie),
        nvlinks: p.nvlinks,
        p2p: p.p2p.as_ref().map(|c| pb::P2p {
            caps_bits: c.caps_bits,
            read: c.read,
            write: c.write,
            nvlink: c.nvlink,
            atomics: c.atomics,
            prop: c.prop,
            loopback: c.loopback,
            pci: c.pci,
            c2c: c.c2c,
            pci_bar1: c.pci_bar1,
            status: c
                .status
                .iter()
                .map(|s| pb::P2pCapStatus {
                    cap: cap(s.cap),
                    status: status(s.status),
                })
                .collect(),
            optimal_read_ces: c.optimal_read_ces,
            optimal_write_ces: c.optimal_write_ces,
        }),
        p2p_problem: p.p2p_problem.clone(),
    }
}

fn pair_back(p: pb::PeerPair) -> Result<m::PeerPair> {
    Ok(m::PeerPair {
        from: p.from,
        to: p.to,
        pcie: pcie_back(p.pcie)?,
        nvlinks: p.nvlinks,
        p2p: p
            .p2p
            .map(|c| {
                Ok::<_, ConvertError>(m::P2p {
                    caps_bits: c.caps_bits,
                    read: c.read,
                    write: c.write,
                    nvlink: c.nvlink,
                    atomics: c.atomics,
                    prop: c.prop,
                    loopback: c.loopback,
                    pci: c.pci,
                    c2c: c.c2c,
                    pci_bar1: c.pci_bar1,
                    status: c
                        .status
                        .into_iter()
                        .map(|s| {
                            Ok(m::P2pCapStatus {
                                cap: cap_back(s.cap)?,
                                status: status_back(s.status)?,
                            })
                        })
                        .collect::<Result<_>>()?,
                    optimal_read_ces: c.optimal_read_ces,
                    optimal_write_ces: c.optimal_write_ces,
                })
            })
            .transpose()?,
        p2p_problem: p.p2p_problem,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_value() -> m::Topology {
        use m::{NvlinkRemoteKind as K, NvlinkState as S, P2pStatus as St, PciePath as P};
        let states = [
            S::Init,
            S::Hwcfg,
            S::Swcfg,
            S::Active,
            S::Fault,
            S::Sleep,
            S::Recovery,
            S::Invalid,
            S::Other,
        ];
        let kinds = [
            K::Gpu,
            K::Switch,
            K::Npu,
            K::Tegra,
            K::Ebridge,
            K::None,
            K::Other,
        ];
        let statuses = [
            St::Ok,
            St::ChipsetNotSupported,
            St::GpuNotSupported,
            St::IohTopologyNotSupported,
            St::DisabledByRegkey,
            St::NotSupported,
            St::Other,
        ];
        let links = states
            .iter()
            .zip(kinds.iter().cycle())
            .enumerate()
            .map(|(i, (&state, &kind))| m::NvlinkLink {
                link: u32::try_from(i).expect("small"),
                state,
                version: (i % 2 == 0).then(|| "4.0".into()),
                line_rate_mbps: 106_250,
                data_rate_kibps: 25_939_453,
                remote: (i != 3).then_some(m::NvlinkRemote {
                    kind,
                    bdf: Some("0000:05:00.0".into()),
                    pci_device_id: Some(0x22a3),
                    link: Some(7),
                    loopback: i == 1,
                }),
            })
            .collect();
        let gpus = vec![
            m::TopoGpu {
                bdf: "0000:18:00.0".into(),
                numa_node: Some(0),
                local_cpulist: Some("0-55".into()),
                rm_gpu_id: Some(0x100),
                nvlink: Some(links),
                nvlink_problem: None,
                shared: vec![rig_model::SharedHop {
                    hop: 2,
                    bdf: "0000:16:00.0".into(),
                    with: vec!["0000:19:00.0".into()],
                    gbytes_per_s_each: Some(31.5),
                }],
                contended_gbytes_per_s: Some(31.5),
            },
            m::TopoGpu {
                bdf: "0000:19:00.0".into(),
                nvlink: Some(Vec::new()),
                nvlink_problem: Some("no layout".into()),
                ..Default::default()
            },
        ];
        let paths = [P::X, P::Pix, P::Pxb, P::Phb, P::Node, P::Sys];
        let pairs = paths
            .iter()
            .enumerate()
            .map(|(i, &pcie)| m::PeerPair {
                from: "0000:18:00.0".into(),
                to: "0000:19:00.0".into(),
                pcie,
                nvlinks: u32::try_from(i).expect("small"),
                p2p: (i != 2).then(|| m::P2p {
                    caps_bits: 0x5b,
                    read: true,
                    write: i % 2 == 0,
                    nvlink: true,
                    atomics: false,
                    prop: true,
                    loopback: i == 0,
                    pci: false,
                    c2c: i == 5,
                    pci_bar1: false,
                    status: m::P2pCap::ALL
                        .iter()
                        .zip(statuses.iter().cycle())
                        .map(|(&cap, &status)| m::P2pCapStatus { cap, status })
                        .collect(),
                    optimal_read_ces: 0x30,
                    optimal_write_ces: 0xc0,
                }),
                p2p_problem: (i == 2).then(|| "failed".into()),
            })
            .collect();
        m::Topology {
            gpus,
            pairs,
            driver: Some("580".into()),
            problems: vec!["one".into()],
        }
    }

    #[test]
    fn a_topology_with_every_enum_value_survives_the_wire() {
        let t = every_value();
        let back = m::Topology::try_from(pb::TopologyReply::from(&t)).expect("converts back");
        assert_eq!(back, t);
    }

    #[test]
    fn an_unset_pcie_path_is_refused_by_name() {
        let mut w = pb::TopologyReply::from(&every_value());
        w.pairs[0].pcie = 0;
        let e = m::Topology::try_from(w).expect_err("UNSPECIFIED");
        assert_eq!(
            e,
            ConvertError::UnknownEnum {
                field: "PeerPair.pcie",
                value: 0
            }
        );
    }
}
