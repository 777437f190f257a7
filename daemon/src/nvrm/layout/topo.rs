//! The peer-topology controls' parameter structs: the P2P capabilities between GPUs
//! (`NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2`, on the root client) and each GPU's
//! NVLink links (`NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS`, on a subdevice), with the
//! bits and values `nvrm::topo` decodes.
//!
//! Transcribed from NVIDIA/open-gpu-kernel-modules at tag 580.142 (`1a5075f8`),
//! `src/common/sdk/nvidia/inc/ctrl/ctrl0000/ctrl0000system.h`,
//! `ctrl/ctrl2080/ctrl2080nvlink.h` and `ctrl/ctrl2080/ctrl2080nvlink_common.h`. Every
//! size and offset the tests check was read off those headers compiled with gcc
//! (`tests/h200/rm-topo-layout.c`, run against each tag): GET_P2P_CAPS_V2_PARAMS is
//! 8348 bytes in 570.211.01, 575.64.05, 580.65.06, 580.142 and 590.48.01 alike;
//! GET_NVLINK_STATUS_PARAMS is 13344 bytes in 580.65.06 and 580.142, while 570 and 575
//! have no `NV2080_CTRL_NVLINK_LINK_MASK` (another struct) and 590.48.01 grows each
//! link's entry from 208 to 216 bytes (13864 in all). So the NVLink query is made only
//! on release 580 ([`nvlink_status_layout`]); the P2P query on every known release.
//! Both controls are flagged NON_PRIVILEGED and API_LOCK_READONLY (flags 0x10108 in
//! `src/nvidia/generated/g_client_resource_nvoc.c` and `g_subdevice_nvoc.c`).

use std::mem::size_of;

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::Release;

/// `NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2`.
pub const NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2: u32 = 0x12B;
/// `NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS`.
pub const NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS: u32 = 0x2080_3002;
/// `NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS` (flags 0x10118: NON_PRIVILEGED too).
pub const NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS: u32 = 0x2080_3001;

/// `NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS`.
pub const NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS: usize = 32;
/// `NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS_SQUARED`.
pub const NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS_SQUARED: usize = 1024;
/// `NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE`.
pub const NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE: usize = 9;
/// `NV0000_CTRL_SYSTEM_GET_P2P_CAPS_INVALID_PEER`.
pub const NV0000_CTRL_SYSTEM_GET_P2P_CAPS_INVALID_PEER: u32 = 0xffff_ffff;

// `p2pCaps` bits (`NV0000_CTRL_SYSTEM_GET_P2P_CAPS_*_SUPPORTED`, each a 1-bit field).
pub const P2P_CAPS_WRITES_SUPPORTED: u32 = 1 << 0;
pub const P2P_CAPS_READS_SUPPORTED: u32 = 1 << 1;
pub const P2P_CAPS_PROP_SUPPORTED: u32 = 1 << 2;
pub const P2P_CAPS_NVLINK_SUPPORTED: u32 = 1 << 3;
pub const P2P_CAPS_ATOMICS_SUPPORTED: u32 = 1 << 4;
pub const P2P_CAPS_LOOPBACK_SUPPORTED: u32 = 1 << 5;
pub const P2P_CAPS_PCI_SUPPORTED: u32 = 1 << 6;
pub const P2P_CAPS_INDIRECT_WRITES_SUPPORTED: u32 = 1 << 7;
pub const P2P_CAPS_INDIRECT_READS_SUPPORTED: u32 = 1 << 8;
pub const P2P_CAPS_INDIRECT_ATOMICS_SUPPORTED: u32 = 1 << 9;
pub const P2P_CAPS_INDIRECT_NVLINK_SUPPORTED: u32 = 1 << 10;
pub const P2P_CAPS_C2C_SUPPORTED: u32 = 1 << 12;
pub const P2P_CAPS_PCI_BAR1_SUPPORTED: u32 = 1 << 13;

// `p2pCapsStatus` indices (`NV0000_CTRL_P2P_CAPS_INDEX_*`).
pub const NV0000_CTRL_P2P_CAPS_INDEX_READ: usize = 0;
pub const NV0000_CTRL_P2P_CAPS_INDEX_WRITE: usize = 1;
pub const NV0000_CTRL_P2P_CAPS_INDEX_NVLINK: usize = 2;
pub const NV0000_CTRL_P2P_CAPS_INDEX_ATOMICS: usize = 3;
pub const NV0000_CTRL_P2P_CAPS_INDEX_PROP: usize = 4;
pub const NV0000_CTRL_P2P_CAPS_INDEX_LOOPBACK: usize = 5;
pub const NV0000_CTRL_P2P_CAPS_INDEX_PCI: usize = 6;
pub const NV0000_CTRL_P2P_CAPS_INDEX_C2C: usize = 7;
pub const NV0000_CTRL_P2P_CAPS_INDEX_PCI_BAR1: usize = 8;

// `p2pCapsStatus` values (`NV0000_P2P_CAPS_STATUS_*`).
pub const NV0000_P2P_CAPS_STATUS_OK: u8 = 0x00;
pub const NV0000_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED: u8 = 0x01;
pub const NV0000_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED: u8 = 0x02;
pub const NV0000_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED: u8 = 0x03;
pub const NV0000_P2P_CAPS_STATUS_DISABLED_BY_REGKEY: u8 = 0x04;
pub const NV0000_P2P_CAPS_STATUS_NOT_SUPPORTED: u8 = 0x05;

/// `NV2080_CTRL_NVLINK_MAX_ARR_SIZE` (`ctrl2080nvlink_common.h`).
pub const NV2080_CTRL_NVLINK_MAX_ARR_SIZE: usize = 64;

// `linkState` (`NV2080_CTRL_NVLINK_STATUS_LINK_STATE_*`).
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_INIT: u32 = 0x0;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_HWCFG: u32 = 0x1;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_SWCFG: u32 = 0x2;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_ACTIVE: u32 = 0x3;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_FAULT: u32 = 0x4;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_SLEEP: u32 = 0x5;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_RECOVERY: u32 = 0x6;
pub const NV2080_CTRL_NVLINK_STATUS_LINK_STATE_INVALID: u32 = 0xffff_ffff;

// `remoteDeviceInfo.deviceType` (`NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_*`).
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_EBRIDGE: u64 = 0x0;
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_NPU: u64 = 0x1;
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_GPU: u64 = 0x2;
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_SWITCH: u64 = 0x3;
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_TEGRA: u64 = 0x4;
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_NONE: u64 = 0xff;
/// `NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_ID_FLAGS_PCI`: the PCI fields are valid.
pub const NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_ID_FLAGS_PCI: u32 = 0x1;
/// `NV2080_CTRL_NVLINK_STATUS_CONNECTED_TRUE`.
pub const NV2080_CTRL_NVLINK_STATUS_CONNECTED_TRUE: u8 = 1;
/// `NV2080_CTRL_NVLINK_STATUS_LOOP_PROPERTY_LOOPBACK`.
pub const NV2080_CTRL_NVLINK_STATUS_LOOP_PROPERTY_LOOPBACK: u8 = 1;
/// `NV2080_CTRL_NVLINK_STATUS_LOOP_PROPERTY_LOOPOUT`.
pub const NV2080_CTRL_NVLINK_STATUS_LOOP_PROPERTY_LOOPOUT: u8 = 2;

/// `NV0000_CTRL_SYSTEM_GET_P2P_CAPS_V2_PARAMS`: `gpuIds` in, the caps of the set of
/// GPUs out. Two equal ids ask for loopback (`cliresCtrlCmdSystemGetP2pCapsV2_IMPL`,
/// `src/nvidia/src/kernel/rmapi/client_resource.c`, queries one GPU then).
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv0000CtrlSystemGetP2pCapsV2Params {
    pub gpu_ids: [u32; NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS],
    pub gpu_count: u32,
    pub p2p_caps: u32,
    /// `p2pOptimalReadCEs`: a mask of copy engines.
    pub p2p_optimal_read_ces: u32,
    /// `p2pOptimalWriteCEs`.
    pub p2p_optimal_write_ces: u32,
    pub p2p_caps_status: [u8; NV0000_CTRL_P2P_CAPS_INDEX_TABLE_SIZE],
    /// C's padding before the 4-aligned `busPeerIds`.
    pub pad0: [u8; 3],
    pub bus_peer_ids: [u32; NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS_SQUARED],
    pub bus_egm_peer_ids: [u32; NV0000_CTRL_SYSTEM_MAX_ATTACHED_GPUS_SQUARED],
}
const _: () = assert!(size_of::<Nv0000CtrlSystemGetP2pCapsV2Params>() == 8348);

/// `NV2080_CTRL_NVLINK_LINK_MASK` (`ctrl2080nvlink_common.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlNvlinkLinkMask {
    pub len_masks: u8,
    /// C's padding before the 8-aligned `masks`.
    pub pad0: [u8; 7],
    pub masks: [u64; 1],
}
const _: () = assert!(size_of::<Nv2080CtrlNvlinkLinkMask>() == 16);

/// `NV2080_CTRL_NVLINK_DEVICE_INFO`: one end of a link.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlNvlinkDeviceInfo {
    pub device_id_flags: u32,
    pub domain: u32,
    pub bus: u16,
    pub device: u16,
    pub function: u16,
    /// C's padding before `pciDeviceId`.
    pub pad0: u16,
    pub pci_device_id: u32,
    /// C's padding before the 8-aligned `deviceType`.
    pub pad1: u32,
    pub device_type: u64,
    /// `deviceUUID`.
    pub device_uuid: [u8; 16],
    pub fabric_recovery_status_mask: u32,
    /// C's tail padding.
    pub pad2: u32,
}
const _: () = assert!(size_of::<Nv2080CtrlNvlinkDeviceInfo>() == 56);

/// `NV2080_CTRL_NVLINK_LINK_STATUS_INFO` (580's 208 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlNvlinkLinkStatusInfo {
    pub caps_tbl: u32,
    pub phy_type: u8,
    pub sub_link_width: u8,
    /// C's padding before `linkState`.
    pub pad0: [u8; 2],
    pub link_state: u32,
    pub rx_sublink_status: u8,
    pub tx_sublink_status: u8,
    /// `bLaneReversal` (NvBool).
    pub b_lane_reversal: u8,
    pub nvlink_version: u8,
    pub nci_version: u8,
    pub phy_version: u8,
    /// C's padding before `nvlinkLinkClockKHz`.
    pub pad1: [u8; 2],
    /// `nvlinkLinkClockKHz`.
    pub nvlink_link_clock_khz: u32,
    /// `nvlinkCommonClockSpeedKHz`.
    pub nvlink_common_clock_speed_khz: u32,
    /// `nvlinkRefClkSpeedKHz`.
    pub nvlink_ref_clk_speed_khz: u32,
    /// `nvlinkCommonClockSpeedMhz`.
    pub nvlink_common_clock_speed_mhz: u32,
    /// `nvlinkLineRateMbps`.
    pub nvlink_line_rate_mbps: u32,
    /// `nvlinkLinkClockMhz`.
    pub nvlink_link_clock_mhz: u32,
    pub nvlink_ref_clk_type: u8,
    /// C's padding before `nvlinkLinkDataRateKiBps`.
    pub pad2: [u8; 3],
    /// `nvlinkLinkDataRateKiBps`: what is left for transactions, valid when ACTIVE.
    pub nvlink_link_data_rate_kibps: u32,
    /// `nvlinkRefClkSpeedMhz`.
    pub nvlink_ref_clk_speed_mhz: u32,
    /// NvBool.
    pub connected: u8,
    pub loop_property: u8,
    pub remote_device_link_number: u8,
    pub local_device_link_number: u8,
    /// C's padding before the 8-aligned `remoteLinkSid`.
    pub pad3: u32,
    pub remote_link_sid: u64,
    pub local_link_sid: u64,
    pub lane_rxdet_status_mask: u32,
    /// `nvlinkMinL1Threshold`.
    pub nvlink_min_l1_threshold: u32,
    /// `nvlinkMaxL1Threshold`.
    pub nvlink_max_l1_threshold: u32,
    /// `nvlinkL1ThresholdUnits`.
    pub nvlink_l1_threshold_units: u32,
    pub remote_device_info: Nv2080CtrlNvlinkDeviceInfo,
    pub local_device_info: Nv2080CtrlNvlinkDeviceInfo,
}
const _: () = assert!(size_of::<Nv2080CtrlNvlinkLinkStatusInfo>() == 208);

/// `NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS_PARAMS` (580's 13344 bytes): the
/// enabled links, and an entry per link index of those.
#[repr(C)]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlCmdNvlinkGetNvlinkStatusParams {
    pub enabled_link_mask: u32,
    /// C's padding before the 8-aligned `enabledLinks`.
    pub pad0: u32,
    pub enabled_links: Nv2080CtrlNvlinkLinkMask,
    /// `bSublinkStateInst` (NvBool).
    pub b_sublink_state_inst: u8,
    /// `bNvleModeEnabled` (NvBool).
    pub b_nvle_mode_enabled: u8,
    /// C's padding before the 8-aligned `linkInfo`.
    pub pad1: [u8; 6],
    pub link_info: [Nv2080CtrlNvlinkLinkStatusInfo; NV2080_CTRL_NVLINK_MAX_ARR_SIZE],
}
const _: () = assert!(size_of::<Nv2080CtrlCmdNvlinkGetNvlinkStatusParams>() == 13344);

/// `NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS_PARAMS` (48 bytes in 580.65.06, 580.142 and
/// 590.48.01; 570 and 575 have plain `NvU64` masks in place of the two link-mask
/// structs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct Nv2080CtrlCmdNvlinkGetNvlinkCapsParams {
    pub caps_tbl: u32,
    pub lowest_nvlink_version: u8,
    pub highest_nvlink_version: u8,
    pub lowest_nci_version: u8,
    pub highest_nci_version: u8,
    pub discovered_link_mask: u32,
    pub enabled_link_mask: u32,
    pub discovered_links: Nv2080CtrlNvlinkLinkMask,
    pub enabled_links: Nv2080CtrlNvlinkLinkMask,
}
const _: () = assert!(size_of::<Nv2080CtrlCmdNvlinkGetNvlinkCapsParams>() == 48);

/// Whether rigd has `release`'s GET_NVLINK_CAPS layout (580's and 590's).
pub fn nvlink_caps_layout(release: Release) -> bool {
    matches!(release, Release::R580 | Release::R590)
}

/// Whether rigd has `release`'s GET_NVLINK_STATUS layout (580's only, see the head).
pub fn nvlink_status_layout(release: Release) -> bool {
    release == Release::R580
}

#[cfg(test)]
mod tests {
    use zerocopy::FromZeros;

    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
    }

    #[test]
    fn p2p_caps_v2_fields_sit_where_gcc_put_them() {
        let mut p = Nv0000CtrlSystemGetP2pCapsV2Params::new_zeroed();
        p.gpu_ids[31] = 0x11;
        p.gpu_count = 0x22;
        p.p2p_caps = 0x33;
        p.p2p_optimal_read_ces = 0x44;
        p.p2p_optimal_write_ces = 0x55;
        p.p2p_caps_status[0] = 0x66;
        p.p2p_caps_status[8] = 0x77;
        p.bus_peer_ids[0] = 0x88;
        p.bus_egm_peer_ids[0] = 0x99;
        p.bus_egm_peer_ids[1023] = 0xaa;
        let b = p.as_bytes();
        assert_eq!(u32_at(b, 124), 0x11, "gpuIds[31]");
        assert_eq!(u32_at(b, 128), 0x22, "gpuCount");
        assert_eq!(u32_at(b, 132), 0x33, "p2pCaps");
        assert_eq!(u32_at(b, 136), 0x44, "p2pOptimalReadCEs");
        assert_eq!(u32_at(b, 140), 0x55, "p2pOptimalWriteCEs");
        assert_eq!(b[144], 0x66, "p2pCapsStatus[0]");
        assert_eq!(b[152], 0x77, "p2pCapsStatus[8]");
        assert_eq!(u32_at(b, 156), 0x88, "busPeerIds");
        assert_eq!(u32_at(b, 4252), 0x99, "busEgmPeerIds");
        assert_eq!(u32_at(b, 8344), 0xaa, "busEgmPeerIds[1023]");
    }

    #[test]
    fn link_status_fields_sit_where_gcc_put_them() {
        let l = Nv2080CtrlNvlinkLinkStatusInfo {
            caps_tbl: 0x1,
            sub_link_width: 0x2,
            link_state: 0x3,
            tx_sublink_status: 0x4,
            nvlink_version: 0x5,
            phy_version: 0x6,
            nvlink_link_clock_khz: 0x7,
            nvlink_link_clock_mhz: 0x8,
            nvlink_ref_clk_type: 0x9,
            nvlink_link_data_rate_kibps: 0xa,
            nvlink_ref_clk_speed_mhz: 0xb,
            connected: 0xc,
            local_device_link_number: 0xd,
            remote_link_sid: 0xe,
            lane_rxdet_status_mask: 0xf,
            nvlink_l1_threshold_units: 0x10,
            remote_device_info: Nv2080CtrlNvlinkDeviceInfo {
                domain: 0x11,
                bus: 0x12,
                function: 0x13,
                pci_device_id: 0x14,
                device_type: 0x15,
                device_uuid: [0x16; 16],
                fabric_recovery_status_mask: 0x17,
                ..Default::default()
            },
            local_device_info: Nv2080CtrlNvlinkDeviceInfo {
                device_id_flags: 0x18,
                ..Default::default()
            },
            ..Default::default()
        };
        let b = l.as_bytes();
        assert_eq!(u32_at(b, 0), 0x1, "capsTbl");
        assert_eq!(b[5], 0x2, "subLinkWidth");
        assert_eq!(u32_at(b, 8), 0x3, "linkState");
        assert_eq!(b[13], 0x4, "txSublinkStatus");
        assert_eq!(b[15], 0x5, "nvlinkVersion");
        assert_eq!(b[17], 0x6, "phyVersion");
        assert_eq!(u32_at(b, 20), 0x7, "nvlinkLinkClockKHz");
        assert_eq!(u32_at(b, 40), 0x8, "nvlinkLinkClockMhz");
        assert_eq!(b[44], 0x9, "nvlinkRefClkType");
        assert_eq!(u32_at(b, 48), 0xa, "nvlinkLinkDataRateKiBps");
        assert_eq!(u32_at(b, 52), 0xb, "nvlinkRefClkSpeedMhz");
        assert_eq!(b[56], 0xc, "connected");
        assert_eq!(b[59], 0xd, "localDeviceLinkNumber");
        assert_eq!(u64_at(b, 64), 0xe, "remoteLinkSid");
        assert_eq!(u32_at(b, 80), 0xf, "laneRxdetStatusMask");
        assert_eq!(u32_at(b, 92), 0x10, "nvlinkL1ThresholdUnits");
        // remoteDeviceInfo at 96: domain 4, bus 8, function 12, pciDeviceId 16,
        // deviceType 24, deviceUUID 32, fabricRecoveryStatusMask 48.
        assert_eq!(u32_at(b, 100), 0x11, "remote domain");
        assert_eq!(b[104], 0x12, "remote bus");
        assert_eq!(b[108], 0x13, "remote function");
        assert_eq!(u32_at(b, 112), 0x14, "remote pciDeviceId");
        assert_eq!(u64_at(b, 120), 0x15, "remote deviceType");
        assert_eq!(b[128], 0x16, "remote deviceUUID");
        assert_eq!(u32_at(b, 144), 0x17, "remote fabricRecoveryStatusMask");
        assert_eq!(u32_at(b, 152), 0x18, "localDeviceInfo.deviceIdFlags");
    }

    #[test]
    fn nvlink_status_params_put_the_links_after_the_mask_at_32() {
        let mut p = Nv2080CtrlCmdNvlinkGetNvlinkStatusParams::new_zeroed();
        p.enabled_link_mask = 0x3ffff;
        p.enabled_links.len_masks = 1;
        p.enabled_links.masks[0] = 0x3ffff;
        p.b_nvle_mode_enabled = 1;
        p.link_info[0].link_state = 3;
        p.link_info[63].connected = 1;
        let b = p.as_bytes();
        assert_eq!(u32_at(b, 0), 0x3ffff, "enabledLinkMask");
        assert_eq!(b[8], 1, "enabledLinks.lenMasks");
        assert_eq!(u64_at(b, 16), 0x3ffff, "enabledLinks.masks[0]");
        assert_eq!(b[25], 1, "bNvleModeEnabled");
        assert_eq!(u32_at(b, 32 + 8), 3, "linkInfo[0].linkState");
        assert_eq!(b[32 + 63 * 208 + 56], 1, "linkInfo[63].connected");
    }

    #[test]
    fn nvlink_caps_put_the_link_masks_at_16_and_32() {
        let mut p = Nv2080CtrlCmdNvlinkGetNvlinkCapsParams {
            caps_tbl: 0x3,
            highest_nvlink_version: 7,
            discovered_link_mask: 0x3ffff,
            enabled_link_mask: 0x1,
            ..Default::default()
        };
        p.discovered_links.masks[0] = 0x3ffff;
        p.enabled_links.len_masks = 1;
        let b = p.as_bytes();
        assert_eq!(u32_at(b, 0), 0x3, "capsTbl");
        assert_eq!(b[5], 7, "highestNvlinkVersion");
        assert_eq!(u32_at(b, 8), 0x3ffff, "discoveredLinkMask");
        assert_eq!(u32_at(b, 12), 0x1, "enabledLinkMask");
        assert_eq!(u64_at(b, 24), 0x3ffff, "discoveredLinks.masks[0]");
        assert_eq!(b[32], 1, "enabledLinks.lenMasks");
        assert!(nvlink_caps_layout(Release::R590) && !nvlink_caps_layout(Release::R575));
    }

    #[test]
    fn only_580_has_the_nvlink_status_layout() {
        assert!(nvlink_status_layout(Release::R580));
        for r in [Release::R570, Release::R575, Release::R590] {
            assert!(!nvlink_status_layout(r), "{r}");
        }
    }
}
