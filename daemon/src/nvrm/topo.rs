//! What the RM says about the GPUs' peers: for every GPU it drives, its enabled NVLink
//! links and their far ends (`NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS` on a
//! subdevice), and for every ordered pair of them, the same GPU twice included
//! (loopback), the P2P capabilities and their status
//! (`NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2` on the root client). Read only: nothing
//! is set, and the device and subdevice made to ask are freed at once.
//!
//! State: none kept. [`read_peers`] takes a way to open a fresh [`Rm`] (a root client
//! with its own files), one per GPU, because each holds its GPU's `/dev/nvidiaN`
//! open until the pair queries are done: the RM answers only for GPUs it has brought
//! up, and without persistence mode it brings one up while a file of it is open.
//!
//! Reference: open-gpu-kernel-modules 580.142, `ctrl0000system.h` (the caps bits,
//! status codes, and loopback as two equal ids: `cliresCtrlCmdSystemGetP2pCapsV2_IMPL`
//! in `client_resource.c`), `ctrl2080nvlink.h` and
//! `subdeviceCtrlCmdBusGetNvlinkStatus_IMPL` (`common_nvlinkapi.c`); the layouts are
//! `layout::topo`'s. Not here: the PCIe paths and the matrix (`rig::topo`).

use rig_model::topo::{
    NvlinkLink, NvlinkRemote, NvlinkRemoteKind, NvlinkState, P2p, P2pCap, P2pCapStatus, P2pStatus,
};
use zerocopy::{FromZeros, IntoBytes};

use super::{
    Card, NvrmError, Rm,
    error::{Step, at},
    layout::{
        Release, r580,
        topo::{self as t, nvlink_status_layout},
    },
};
use crate::sys::nvrm::NvHandle;

/// One GPU the RM drives, and its NVLink links or why they could not be read.
#[derive(Debug)]
pub struct RmGpu {
    pub card: Card,
    pub nvlink: Result<Vec<NvlinkLink>, NvrmError>,
}

/// One ordered pair, by index into [`RmPeers::gpus`].
#[derive(Debug)]
pub struct RmPair {
    pub from: usize,
    pub to: usize,
    pub p2p: Result<P2p, NvrmError>,
}

/// Everything [`read_peers`] learnt.
#[derive(Debug)]
pub struct RmPeers {
    /// The release whose layouts were used.
    pub release: Release,
    pub gpus: Vec<RmGpu>,
    /// Row by row: every `from`, then every `to`.
    pub pairs: Vec<RmPair>,
}

/// Asks the RM about every GPU it drives and every ordered pair of them. `open`
/// makes a fresh root client each time it is called (one for the listing, one per
/// GPU, kept until the end).
///
/// # Errors
/// Only what stops everything: opening the first root client, listing the GPUs. A
/// GPU whose links, or a pair whose caps, cannot be read carries its own error.
pub fn read_peers<R: Rm>(
    mut open: impl FnMut() -> Result<R, NvrmError>,
) -> Result<RmPeers, NvrmError> {
    let first = open()?;
    let release = first.release();
    let cards = first.cards().map_err(at(Step::Cards))?;
    let mut held: Vec<R> = Vec::with_capacity(cards.len());
    let mut gpus = Vec::with_capacity(cards.len());
    for card in cards {
        let nvlink = match open() {
            Ok(rm) => {
                let links = read_links(&rm, &card);
                held.push(rm);
                links
            }
            Err(e) => Err(e),
        };
        gpus.push(RmGpu { card, nvlink });
    }
    let mut pairs = Vec::with_capacity(gpus.len() * gpus.len());
    for (from, a) in gpus.iter().enumerate() {
        for (to, b) in gpus.iter().enumerate() {
            let p2p = read_p2p(&first, a.card.gpu_id, b.card.gpu_id);
            pairs.push(RmPair { from, to, p2p });
        }
    }
    drop(held);
    Ok(RmPeers {
        release,
        gpus,
        pairs,
    })
}

/// GET_P2P_CAPS_V2 for the pair (`a` twice: loopback), decoded.
fn read_p2p<R: Rm>(rm: &R, a: u32, b: u32) -> Result<P2p, NvrmError> {
    Ok(parse_p2p(&*read_p2p_raw(rm, a, b)?))
}

/// GET_P2P_CAPS_V2 for the pair of RM gpu_ids (`a` twice: loopback), as the RM
/// wrote it.
///
/// # Errors
/// [`NvrmError::Call`] at [`Step::P2pCaps`].
pub fn read_p2p_raw<R: Rm>(
    rm: &R,
    a: u32,
    b: u32,
) -> Result<Box<t::Nv0000CtrlSystemGetP2pCapsV2Params>, NvrmError> {
    // 8 KiB: on the heap, as the 13 KiB NVLink answer.
    let mut p = Box::new(t::Nv0000CtrlSystemGetP2pCapsV2Params::new_zeroed());
    p.gpu_ids[0] = a;
    p.gpu_ids[1] = b;
    p.gpu_count = 2;
    rm.control(
        rm.client(),
        t::NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS_V2,
        p.as_mut_bytes(),
    )
    .map_err(at(Step::P2pCaps))?;
    Ok(p)
}

/// The decoded caps and statuses of a GET_P2P_CAPS_V2 answer.
pub fn parse_p2p(p: &t::Nv0000CtrlSystemGetP2pCapsV2Params) -> P2p {
    let c = p.p2p_caps;
    let has = |bit: u32| c & bit != 0;
    P2p {
        caps_bits: c,
        read: has(t::P2P_CAPS_READS_SUPPORTED),
        write: has(t::P2P_CAPS_WRITES_SUPPORTED),
        nvlink: has(t::P2P_CAPS_NVLINK_SUPPORTED),
        atomics: has(t::P2P_CAPS_ATOMICS_SUPPORTED),
        prop: has(t::P2P_CAPS_PROP_SUPPORTED),
        loopback: has(t::P2P_CAPS_LOOPBACK_SUPPORTED),
        pci: has(t::P2P_CAPS_PCI_SUPPORTED),
        c2c: has(t::P2P_CAPS_C2C_SUPPORTED),
        pci_bar1: has(t::P2P_CAPS_PCI_BAR1_SUPPORTED),
        // CAPS_INDEX_* are 0..9 in `P2pCap::ALL`'s order.
        status: P2pCap::ALL
            .iter()
            .zip(p.p2p_caps_status)
            .map(|(&cap, s)| P2pCapStatus {
                cap,
                status: parse_status(s),
            })
            .collect(),
        optimal_read_ces: p.p2p_optimal_read_ces,
        optimal_write_ces: p.p2p_optimal_write_ces,
    }
}

fn parse_status(s: u8) -> P2pStatus {
    match s {
        t::NV0000_P2P_CAPS_STATUS_OK => P2pStatus::Ok,
        t::NV0000_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED => P2pStatus::ChipsetNotSupported,
        t::NV0000_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED => P2pStatus::GpuNotSupported,
        t::NV0000_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED => P2pStatus::IohTopologyNotSupported,
        t::NV0000_P2P_CAPS_STATUS_DISABLED_BY_REGKEY => P2pStatus::DisabledByRegkey,
        t::NV0000_P2P_CAPS_STATUS_NOT_SUPPORTED => P2pStatus::NotSupported,
        _ => P2pStatus::Other,
    }
}

/// The GPU's enabled NVLink links, decoded.
fn read_links<R: Rm>(rm: &R, card: &Card) -> Result<Vec<NvlinkLink>, NvrmError> {
    Ok(parse_links(&*read_links_raw(rm, card)?))
}

/// Opens the GPU's file, makes a device and subdevice, asks for the NVLink status,
/// frees both; the answer as the RM wrote it.
///
/// # Errors
/// [`NvrmError::NoNvlinkLayout`] on a release other than 580; [`NvrmError::Call`]
/// naming the step.
pub fn read_links_raw<R: Rm>(
    rm: &R,
    card: &Card,
) -> Result<Box<t::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams>, NvrmError> {
    if !nvlink_status_layout(rm.release()) {
        return Err(NvrmError::NoNvlinkLayout {
            release: rm.release(),
        });
    }
    on_subdevice(rm, card, |h_sub| {
        let mut p = Box::new(t::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams::new_zeroed());
        rm.control(
            h_sub,
            t::NV2080_CTRL_CMD_NVLINK_GET_NVLINK_STATUS,
            p.as_mut_bytes(),
        )
        .map_err(at(Step::NvlinkStatus))?;
        Ok(p)
    })
}

/// As [`read_links_raw`], for NVLINK_GET_NVLINK_CAPS: the links the GPU discovered
/// beside those enabled, and its NVLink versions (for `rig-nvrm-probe`).
///
/// # Errors
/// As [`read_links_raw`].
pub fn read_nvlink_caps_raw<R: Rm>(
    rm: &R,
    card: &Card,
) -> Result<t::Nv2080CtrlCmdNvlinkGetNvlinkCapsParams, NvrmError> {
    if !t::nvlink_caps_layout(rm.release()) {
        return Err(NvrmError::NoNvlinkLayout {
            release: rm.release(),
        });
    }
    on_subdevice(rm, card, |h_sub| {
        let mut p = t::Nv2080CtrlCmdNvlinkGetNvlinkCapsParams::default();
        rm.control(
            h_sub,
            t::NV2080_CTRL_CMD_NVLINK_GET_NVLINK_CAPS,
            p.as_mut_bytes(),
        )
        .map_err(at(Step::NvlinkCaps))?;
        Ok(p)
    })
}

/// Opens the GPU's file, makes a device and a subdevice, runs `ask` on the subdevice,
/// frees both whatever it answered.
fn on_subdevice<R: Rm, T>(
    rm: &R,
    card: &Card,
    ask: impl FnOnce(NvHandle) -> Result<T, NvrmError>,
) -> Result<T, NvrmError> {
    let client = rm.client();
    let mut dev = super::gpu::device_params(rm, card)?;
    let h_device = rm
        .alloc(client, r580::NV01_DEVICE_0, Some(dev.as_mut_bytes()))
        .map_err(at(Step::AllocDevice))?;
    let mut sub = r580::Nv2080AllocParameters { sub_device_id: 0 };
    let answer = rm
        .alloc(h_device, r580::NV20_SUBDEVICE_0, Some(sub.as_mut_bytes()))
        .map_err(at(Step::AllocSubdevice))
        .and_then(|h_sub| {
            let answer = ask(h_sub);
            if let Err(e) = rm.free(h_device, h_sub) {
                tracing::debug!(gpu = %card.bdf, error = %e, "freeing the subdevice made to read NVLink state");
            }
            answer
        });
    if let Err(e) = rm.free(client, h_device) {
        // The root client's end frees it anyway (`Root`'s drop).
        tracing::debug!(gpu = %card.bdf, error = %e, "freeing the device made to read NVLink state");
    }
    answer
}

/// The enabled links of a GET_NVLINK_STATUS answer (`enabledLinks`, or the older
/// 32-bit `enabledLinkMask` when the mask struct is empty).
pub fn parse_links(p: &t::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams) -> Vec<NvlinkLink> {
    let mask = if p.enabled_links.len_masks > 0 {
        p.enabled_links.masks[0]
    } else {
        u64::from(p.enabled_link_mask)
    };
    p.link_info
        .iter()
        .enumerate()
        .filter(|&(i, _)| mask & (1u64 << i) != 0)
        .map(|(i, l)| NvlinkLink {
            link: u32::try_from(i).unwrap_or(u32::MAX),
            state: parse_state(l.link_state),
            version: nvlink_version(l.nvlink_version).map(str::to_owned),
            line_rate_mbps: l.nvlink_line_rate_mbps,
            data_rate_kibps: l.nvlink_link_data_rate_kibps,
            remote: (l.connected == t::NV2080_CTRL_NVLINK_STATUS_CONNECTED_TRUE)
                .then(|| parse_remote(l)),
        })
        .collect()
}

fn parse_remote(l: &t::Nv2080CtrlNvlinkLinkStatusInfo) -> NvlinkRemote {
    let r = &l.remote_device_info;
    let pci = r.device_id_flags & t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_ID_FLAGS_PCI != 0;
    NvlinkRemote {
        kind: match r.device_type {
            t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_GPU => NvlinkRemoteKind::Gpu,
            t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_SWITCH => NvlinkRemoteKind::Switch,
            t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_NPU => NvlinkRemoteKind::Npu,
            t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_TEGRA => NvlinkRemoteKind::Tegra,
            t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_EBRIDGE => NvlinkRemoteKind::Ebridge,
            t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_NONE => NvlinkRemoteKind::None,
            _ => NvlinkRemoteKind::Other,
        },
        bdf: pci.then(|| {
            format!(
                "{:04x}:{:02x}:{:02x}.{:x}",
                r.domain, r.bus, r.device, r.function
            )
        }),
        pci_device_id: pci.then_some(r.pci_device_id),
        // NV2080_CTRL_NVLINK_STATUS_REMOTE_LINK_NUMBER_INVALID is 0xff.
        link: (l.remote_device_link_number != 0xff)
            .then_some(u32::from(l.remote_device_link_number)),
        loopback: matches!(
            l.loop_property,
            t::NV2080_CTRL_NVLINK_STATUS_LOOP_PROPERTY_LOOPBACK
                | t::NV2080_CTRL_NVLINK_STATUS_LOOP_PROPERTY_LOOPOUT
        ),
    }
}

fn parse_state(s: u32) -> NvlinkState {
    match s {
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_INIT => NvlinkState::Init,
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_HWCFG => NvlinkState::Hwcfg,
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_SWCFG => NvlinkState::Swcfg,
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_ACTIVE => NvlinkState::Active,
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_FAULT => NvlinkState::Fault,
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_SLEEP => NvlinkState::Sleep,
        // RECOVERY, RECOVERY_AC (8) and RECOVERY_RX (0xa).
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_RECOVERY | 0x8 | 0xa => NvlinkState::Recovery,
        t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_INVALID => NvlinkState::Invalid,
        _ => NvlinkState::Other,
    }
}

/// `NV2080_CTRL_NVLINK_STATUS_NVLINK_VERSION_*`.
fn nvlink_version(v: u8) -> Option<&'static str> {
    Some(match v {
        1 => "1.0",
        2 => "2.0",
        4 => "2.2",
        5 => "3.0",
        6 => "3.1",
        7 => "4.0",
        8 => "5.0",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p2p_bits_and_statuses_decode_in_the_headers_order() {
        let mut p = t::Nv0000CtrlSystemGetP2pCapsV2Params::new_zeroed();
        p.p2p_caps = t::P2P_CAPS_READS_SUPPORTED
            | t::P2P_CAPS_NVLINK_SUPPORTED
            | t::P2P_CAPS_LOOPBACK_SUPPORTED
            | t::P2P_CAPS_C2C_SUPPORTED;
        p.p2p_caps_status = [0, 0, 0, 5, 0, 0, 3, 1, 0x42];
        let d = parse_p2p(&p);
        assert!(d.read && d.nvlink && d.loopback && d.c2c);
        assert!(!d.write && !d.atomics && !d.pci && !d.pci_bar1 && !d.prop);
        assert_eq!(d.status_of(P2pCap::Atomics), Some(P2pStatus::NotSupported));
        assert_eq!(
            d.status_of(P2pCap::Pci),
            Some(P2pStatus::IohTopologyNotSupported)
        );
        assert_eq!(
            d.status_of(P2pCap::C2c),
            Some(P2pStatus::ChipsetNotSupported)
        );
        assert_eq!(d.status_of(P2pCap::PciBar1), Some(P2pStatus::Other));
        assert_eq!(d.status.len(), 9);
    }

    #[test]
    fn only_enabled_links_are_listed_with_their_far_ends() {
        let mut p = t::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams::new_zeroed();
        p.enabled_links.len_masks = 1;
        p.enabled_links.masks[0] = 0b101;
        let l = &mut p.link_info[2];
        l.link_state = t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_ACTIVE;
        l.nvlink_version = 7;
        l.nvlink_line_rate_mbps = 106_250;
        l.connected = 1;
        l.remote_device_link_number = 9;
        l.remote_device_info.device_id_flags = 1;
        l.remote_device_info.domain = 0;
        l.remote_device_info.bus = 0x0a;
        l.remote_device_info.device = 0;
        l.remote_device_info.pci_device_id = 0x22a3;
        l.remote_device_info.device_type = t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_SWITCH;
        p.link_info[1].link_state = 3; // not enabled: not listed
        let links = parse_links(&p);
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].link, 0);
        assert_eq!(links[0].state, NvlinkState::Init);
        assert_eq!(links[0].remote, None);
        assert_eq!(links[1].link, 2);
        assert!(links[1].is_active());
        assert_eq!(links[1].version.as_deref(), Some("4.0"));
        let r = links[1].remote.as_ref().expect("connected");
        assert_eq!(r.kind, NvlinkRemoteKind::Switch);
        assert_eq!(r.bdf.as_deref(), Some("0000:0a:00.0"));
        assert_eq!(
            (r.pci_device_id, r.link, r.loopback),
            (Some(0x22a3), Some(9), false)
        );
    }

    #[test]
    fn the_old_32_bit_mask_is_read_when_the_mask_struct_is_empty() {
        let mut p = t::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams::new_zeroed();
        p.enabled_link_mask = 0b11;
        assert_eq!(parse_links(&p).len(), 2);
    }
}
