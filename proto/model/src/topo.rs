//! The host's peer topology: which GPUs can reach each other, by NVLink or PCIe
//! peer-to-peer, as NVIDIA's RM reports it (`NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2`
//! per pair, `NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS` per GPU), beside the PCIe path
//! between them that rigd reads from sysfs, in the words of `nvidia-smi topo -m`.
//!
//! Flow: rigd's `nvrm::topo` asks the RM, its `rig::topo` joins that with the PCI
//! listing (paths, NUMA nodes, the link budget's shared hops) into a [`Topology`] →
//! `rig-proto` → `rig-client` → `rigctl topo`. Plain data; the bits' meanings are
//! `ctrl0000system.h`'s and `ctrl2080nvlink.h`'s (open-gpu-kernel-modules 580), which
//! rigd's `nvrm::layout::topo` cites.

use serde::{Deserialize, Serialize};

use crate::SharedHop;

/// Every GPU of the host and every ordered pair of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    /// The GPUs and accelerators, by address: the matrix's rows and columns.
    pub gpus: Vec<TopoGpu>,
    /// One entry per ordered pair (`from`, `to`), each GPU with itself too, row by row
    /// in the order of `gpus`.
    pub pairs: Vec<PeerPair>,
    /// The NVIDIA driver that answered ("580.159.04"); unset when none was asked.
    pub driver: Option<String>,
    /// Why some of it could not be read, one line each (no NVIDIA driver, a GPU the RM
    /// does not drive); what could be read is still there.
    pub problems: Vec<String>,
}

/// One GPU as the topology sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TopoGpu {
    pub bdf: String,
    pub numa_node: Option<i32>,
    pub local_cpulist: Option<String>,
    /// The RM's id of the GPU (CARD_INFO's `gpu_id`); unset for a GPU the RM does not
    /// drive.
    pub rm_gpu_id: Option<u32>,
    /// Its enabled NVLink links; unset when the RM was not asked or could not say
    /// (`nvlink_problem`). Empty: the RM reports no NVLink links enabled.
    pub nvlink: Option<Vec<NvlinkLink>>,
    pub nvlink_problem: Option<String>,
    /// The link budget's hops this GPU shares with other GPUs (`LinkBudget::shared`).
    pub shared: Vec<SharedHop>,
    /// `LinkBudget::contended_gbytes_per_s`.
    pub contended_gbytes_per_s: Option<f64>,
}

/// One enabled NVLink link of a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvlinkLink {
    /// The link's index on the GPU.
    pub link: u32,
    pub state: NvlinkState,
    /// "4.0"; unset when the RM reports none it names.
    pub version: Option<String>,
    /// `nvlinkLineRateMbps`: the full-speed line rate.
    pub line_rate_mbps: u32,
    /// `nvlinkLinkDataRateKiBps`: what is left for data (valid when active).
    pub data_rate_kibps: u32,
    /// The far end, when something is connected.
    pub remote: Option<NvlinkRemote>,
}

impl NvlinkLink {
    /// Whether it is up and connected.
    pub fn is_active(&self) -> bool {
        self.state == NvlinkState::Active && self.remote.is_some()
    }
}

/// `NV2080_CTRL_NVLINK_STATUS_LINK_STATE_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlinkState {
    Init,
    Hwcfg,
    Swcfg,
    Active,
    Fault,
    Sleep,
    Recovery,
    Invalid,
    /// A value this version does not name.
    Other,
}

/// The far end of a link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvlinkRemote {
    pub kind: NvlinkRemoteKind,
    /// Its PCI address, when the RM gives one.
    pub bdf: Option<String>,
    pub pci_device_id: Option<u32>,
    /// The link's index at the far end.
    pub link: Option<u32>,
    /// The link loops back to this GPU (`LOOP_PROPERTY_LOOPBACK` or `_LOOPOUT`).
    pub loopback: bool,
}

/// `NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvlinkRemoteKind {
    Gpu,
    Switch,
    Npu,
    Tegra,
    Ebridge,
    None,
    Other,
}

/// How one GPU reaches another (or itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerPair {
    pub from: String,
    pub to: String,
    /// The PCIe path between them, from sysfs.
    pub pcie: PciePath,
    /// NVLink links from `from` that reach `to`: links straight to it, or, through
    /// NVSwitches, the fewer of the two GPUs' active switch links. 0 when none.
    pub nvlinks: u32,
    /// What the RM says the pair can do; unset when it was not asked or could not
    /// say (`p2p_problem`).
    pub p2p: Option<P2p>,
    pub p2p_problem: Option<String>,
}

impl PeerPair {
    /// The cell `nvidia-smi topo -m` prints: "X", "NV18", or the PCIe path. NVLink is
    /// named only when the RM reports the pair can use it, or (the RM not asked) when
    /// links reach the peer.
    pub fn cell(&self) -> String {
        if self.pcie == PciePath::X {
            return "X".into();
        }
        let nvlink = self.p2p.as_ref().map_or(self.nvlinks > 0, |p| p.nvlink);
        if nvlink && self.nvlinks > 0 {
            format!("NV{}", self.nvlinks)
        } else if nvlink {
            "NV".into()
        } else {
            self.pcie.word().into()
        }
    }
}

/// The PCIe path between two GPUs, in `nvidia-smi topo -m`'s words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PciePath {
    /// The GPU itself.
    X,
    /// Through at most one PCIe switch (bridge).
    #[serde(rename = "PIX")]
    Pix,
    /// Through several bridges, not the host bridge.
    #[serde(rename = "PXB")]
    Pxb,
    /// Through a PCIe host bridge (one root complex).
    #[serde(rename = "PHB")]
    Phb,
    /// Between host bridges of one NUMA node.
    #[serde(rename = "NODE")]
    Node,
    /// Across NUMA nodes (the SMP interconnect), or where the node is not known.
    #[serde(rename = "SYS")]
    Sys,
}

impl PciePath {
    /// The word nvidia-smi prints.
    pub fn word(self) -> &'static str {
        match self {
            Self::X => "X",
            Self::Pix => "PIX",
            Self::Pxb => "PXB",
            Self::Phb => "PHB",
            Self::Node => "NODE",
            Self::Sys => "SYS",
        }
    }
}

/// The P2P capabilities the RM reports for a pair (`p2pCaps`, decoded), with the
/// status of each (`p2pCapsStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct P2p {
    /// `p2pCaps` as the RM wrote it.
    pub caps_bits: u32,
    pub read: bool,
    pub write: bool,
    pub nvlink: bool,
    pub atomics: bool,
    pub prop: bool,
    pub loopback: bool,
    pub pci: bool,
    pub c2c: bool,
    pub pci_bar1: bool,
    /// The status of each capability, in the RM's index order: read, write, nvlink,
    /// atomics, prop, loopback, pci, c2c, pci_bar1.
    pub status: Vec<P2pCapStatus>,
    /// Copy engines to use for reads and writes over NVLink (masks).
    pub optimal_read_ces: u32,
    pub optimal_write_ces: u32,
}

/// The status of one capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct P2pCapStatus {
    pub cap: P2pCap,
    pub status: P2pStatus,
}

/// The capabilities `p2pCapsStatus` reports on (`NV0000_CTRL_P2P_CAPS_INDEX_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum P2pCap {
    Read,
    Write,
    Nvlink,
    Atomics,
    Prop,
    Loopback,
    Pci,
    C2c,
    PciBar1,
}

impl P2pCap {
    /// In the RM's index order.
    pub const ALL: [Self; 9] = [
        Self::Read,
        Self::Write,
        Self::Nvlink,
        Self::Atomics,
        Self::Prop,
        Self::Loopback,
        Self::Pci,
        Self::C2c,
        Self::PciBar1,
    ];
}

/// `NV0000_P2P_CAPS_STATUS_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum P2pStatus {
    Ok,
    ChipsetNotSupported,
    GpuNotSupported,
    IohTopologyNotSupported,
    DisabledByRegkey,
    NotSupported,
    /// A value this version does not name.
    Other,
}

impl P2pStatus {
    /// `nvidia-smi topo -p2p`'s words: OK, CNS, GNS, TNS, NS (and "?").
    pub fn word(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::ChipsetNotSupported => "CNS",
            Self::GpuNotSupported => "GNS",
            Self::IohTopologyNotSupported => "TNS",
            Self::DisabledByRegkey => "DBR",
            Self::NotSupported => "NS",
            Self::Other => "?",
        }
    }
}

impl P2p {
    /// The status of `cap`, if the RM reported one.
    pub fn status_of(&self, cap: P2pCap) -> Option<P2pStatus> {
        self.status.iter().find(|s| s.cap == cap).map(|s| s.status)
    }
}

impl Topology {
    /// The pair `from` → `to`.
    pub fn pair(&self, from: &str, to: &str) -> Option<&PeerPair> {
        self.pairs.iter().find(|p| p.from == from && p.to == to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(pcie: PciePath, nvlinks: u32, nvlink: Option<bool>) -> PeerPair {
        PeerPair {
            from: "a".into(),
            to: "b".into(),
            pcie,
            nvlinks,
            p2p: nvlink.map(|nvlink| P2p {
                caps_bits: 0,
                read: true,
                write: true,
                nvlink,
                atomics: false,
                prop: false,
                loopback: false,
                pci: !nvlink,
                c2c: false,
                pci_bar1: false,
                status: Vec::new(),
                optimal_read_ces: 0,
                optimal_write_ces: 0,
            }),
            p2p_problem: None,
        }
    }

    #[test]
    fn a_cell_names_nvlink_only_when_the_rm_allows_it() {
        assert_eq!(pair(PciePath::X, 18, Some(true)).cell(), "X");
        assert_eq!(pair(PciePath::Sys, 18, Some(true)).cell(), "NV18");
        assert_eq!(pair(PciePath::Pix, 18, Some(false)).cell(), "PIX");
        assert_eq!(pair(PciePath::Node, 0, Some(false)).cell(), "NODE");
        assert_eq!(pair(PciePath::Sys, 4, None).cell(), "NV4");
        assert_eq!(pair(PciePath::Phb, 0, None).cell(), "PHB");
        assert_eq!(pair(PciePath::Pxb, 0, Some(true)).cell(), "NV");
    }

    #[test]
    fn paths_serialise_as_nvidia_smi_spells_them() {
        let j =
            serde_json::to_string(&[PciePath::X, PciePath::Pix, PciePath::Sys]).expect("serialise");
        assert_eq!(j, r#"["X","PIX","SYS"]"#);
        assert_eq!(
            serde_json::to_string(&P2pStatus::IohTopologyNotSupported).expect("serialise"),
            r#""ioh_topology_not_supported""#
        );
    }
}
