//! Whole fake hosts: trees of many functions laid out as a real machine of the kind rig
//! is written for, to test what only shows with many GPUs (which GPUs share a switch's
//! uplink, NUMA placement, listings of a hundred functions).

use std::{io, path::Path};

use super::{FakeDevice, FakeSysfs};

/// Bus numbers of the four root ports of [`eight_gpus_behind_switches`]: the switch's
/// upstream port is on `bus + 1`, its downstream ports on `bus + 2`, the two GPUs on
/// `bus + 3` and `bus + 4`, the NIC on `bus + 5`.
pub const SWITCH_BUSES: [u8; 4] = [0x15, 0x45, 0x95, 0xc5];

/// Each NUMA node's CPUs (two sockets of 56 cores with SMT).
pub const NODE_CPUS: [&str; 2] = ["0-55,112-167", "56-111,168-223"];

/// The GPUs of [`eight_gpus_behind_switches`], by address.
pub fn eight_gpus() -> Vec<String> {
    SWITCH_BUSES
        .iter()
        .flat_map(|b| [b + 3, b + 4])
        .map(|b| format!("0000:{b:02x}:00.0"))
        .collect()
}

/// An 8-GPU host as HGX H200 boards are built: two CPU sockets (NUMA nodes 0 and 1),
/// each with two root ports at 32 GT/s x16, each leading to a PCIe switch (Broadcom
/// PEX89000, 1000:c030) whose downstream ports hold two H200s (10de:2335) at 32 GT/s
/// x16 and one ConnectX-7 (15b3:1021). So two GPUs share each switch's x16 uplink, the
/// effect the link budget's `shared` hops name. The last switch's uplink trained at
/// 16 GT/s (a degraded link, as a marginal riser shows it), so its GPUs are limited
/// upstream even alone. Each GPU is its own IOMMU group and bound to `nvidia`.
///
/// # Errors
/// I/O errors writing the tree.
pub fn eight_gpus_behind_switches(root: &Path) -> io::Result<FakeSysfs> {
    let fake = FakeSysfs::new(root)?;
    let port = |bdf: &str, vendor, device, ptype, link| {
        FakeDevice::new(bdf, vendor, device, 0x060400)
            .bridge()
            .with_cap_pointer(0x40)
            .with_express(0x40, 0, ptype, (5, 16), link)
            .with_driver("pcieport")
    };
    for (k, &bus) in SWITCH_BUSES.iter().enumerate() {
        let node = k / 2;
        let cpus = NODE_CPUS[node];
        let uplink = if k == 3 { (4, 16) } else { (5, 16) };
        let at = |b: u8, dev: u8| format!("0000:{b:02x}:{dev:02x}.0");
        let (rp, usp) = (at(bus, 1), at(bus + 1, 0));
        let numa = |d: FakeDevice| {
            d.with_attr("numa_node", &node.to_string())
                .with_attr("local_cpulist", cpus)
        };
        // Sapphire Rapids root port (8086:352a), type 4; switch ports types 5 and 6.
        fake.add(&numa(port(&rp, 0x8086, 0x352a, 4, uplink)))?;
        fake.add(&numa(port(&usp, 0x1000, 0xc030, 5, uplink).under(&rp)))?;
        for (i, child) in [bus + 3, bus + 4, bus + 5].into_iter().enumerate() {
            let dsp = at(bus + 2, u8::try_from(i).unwrap_or(0));
            fake.add(&numa(port(&dsp, 0x1000, 0xc030, 6, (5, 16)).under(&usp)))?;
            let group = u32::from(bus) + u32::try_from(i).unwrap_or(0);
            let dev = if i < 2 {
                FakeDevice::new(&at(child, 0), 0x10de, 0x2335, 0x030200)
                    .with_bytes(0x2c, &[0xde, 0x10, 0xbf, 0x18])
                    .with_bar64(
                        0,
                        0x1000_0000_0000 + (u64::from(child) << 32),
                        64 << 20,
                        true,
                    )
                    .with_bar64(
                        2,
                        0x2000_0000_0000 + (u64::from(child) << 38),
                        256 << 30,
                        true,
                    )
                    .with_driver("nvidia")
                    .with_attr("reset_method", "flr bus")
            } else {
                FakeDevice::new(&at(child, 0), 0x15b3, 0x1021, 0x020700)
                    .with_bar64(
                        0,
                        0x0800_0000_0000 + (u64::from(child) << 32),
                        32 << 20,
                        true,
                    )
                    .with_driver("mlx5_core")
            };
            let dev = dev
                .under(&dsp)
                .with_cap_pointer(0x60)
                .with_express(0x60, 0, 0, (5, 16), (5, 16))
                .in_group(group);
            fake.add(&numa(dev))?;
        }
    }
    Ok(fake)
}

/// The NVSwitches of [`eight_gpus_rm`]'s NVLink fabric (NVSwitch 10de:22a3, as HGX
/// H200 boards have four), by the PCI address the RM reports for them.
pub const NVSWITCHES: [&str; 4] = [
    "0000:05:00.0",
    "0000:06:00.0",
    "0000:07:00.0",
    "0000:08:00.0",
];

/// How many of each GPU's 18 NVLink 4 links go to each switch (5, 4, 4, 5 on HGX).
const LINKS_PER_SWITCH: [usize; 4] = [5, 4, 4, 5];

/// A fake RM driving the GPUs of [`eight_gpus_behind_switches`] (gpu_ids 0x100 + k,
/// minors k). With `nvlink`, every GPU has 18 active NVLink 4.0 links to the four
/// [`NVSWITCHES`] and the RM reports P2P over NVLink (read, write, atomics) between
/// every pair; without, no links are enabled and P2P runs over PCIe only between the
/// two GPUs of one switch (read, write; atomics not supported), while every pair
/// across switches is refused as the chipset would (IOH_TOPOLOGY_NOT_SUPPORTED).
/// Each GPU with itself reports loopback.
pub fn eight_gpus_rm(nvlink: bool) -> crate::nvrm::FakeRm {
    use crate::nvrm::{Card, FakeRm, layout::topo as t};
    use zerocopy::FromZeros;
    let rm = FakeRm::new();
    let gpus = eight_gpus();
    let id = |k: usize| 0x100 + u32::try_from(k).unwrap_or(0);
    rm.set_cards(
        gpus.iter()
            .enumerate()
            .map(|(k, bdf)| Card {
                gpu_id: id(k),
                minor: u32::try_from(k).unwrap_or(0),
                bdf: bdf.clone(),
                vendor_id: 0x10de,
                device_id: 0x2335,
                fb_size: 256 << 30,
            })
            .collect(),
    );
    const OK: u8 = t::NV0000_P2P_CAPS_STATUS_OK;
    const NS: u8 = t::NV0000_P2P_CAPS_STATUS_NOT_SUPPORTED;
    const TNS: u8 = t::NV0000_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED;
    for k in 0..gpus.len() {
        if nvlink {
            let mut p = t::Nv2080CtrlCmdNvlinkGetNvlinkStatusParams::new_zeroed();
            p.enabled_links.len_masks = 1;
            p.enabled_links.masks[0] = (1 << 18) - 1;
            p.enabled_link_mask = (1 << 18) - 1;
            let mut link = 0;
            for (s, &n) in LINKS_PER_SWITCH.iter().enumerate() {
                for port in 0..n {
                    let l = &mut p.link_info[link];
                    l.link_state = t::NV2080_CTRL_NVLINK_STATUS_LINK_STATE_ACTIVE;
                    l.nvlink_version = 7;
                    l.nvlink_line_rate_mbps = 106_250;
                    l.nvlink_link_data_rate_kibps = 25_939_453;
                    l.connected = t::NV2080_CTRL_NVLINK_STATUS_CONNECTED_TRUE;
                    l.remote_device_link_number = u8::try_from(k * n + port).unwrap_or(0xff);
                    l.local_device_link_number = u8::try_from(link).unwrap_or(0xff);
                    let r = &mut l.remote_device_info;
                    r.device_id_flags = t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_ID_FLAGS_PCI;
                    r.bus = u16::try_from(5 + s).unwrap_or(0);
                    r.pci_device_id = 0x22a3;
                    r.device_type = t::NV2080_CTRL_NVLINK_DEVICE_INFO_DEVICE_TYPE_SWITCH;
                    link += 1;
                }
            }
            rm.set_nvlink(id(k), Ok(Box::new(p)));
        }
        for j in 0..gpus.len() {
            let (caps, status) = if j == k {
                (
                    t::P2P_CAPS_LOOPBACK_SUPPORTED
                        | t::P2P_CAPS_READS_SUPPORTED
                        | t::P2P_CAPS_WRITES_SUPPORTED
                        | t::P2P_CAPS_ATOMICS_SUPPORTED
                        | t::P2P_CAPS_PROP_SUPPORTED,
                    [OK, OK, if nvlink { OK } else { NS }, OK, OK, OK, NS, NS, NS],
                )
            } else if nvlink {
                (
                    t::P2P_CAPS_NVLINK_SUPPORTED
                        | t::P2P_CAPS_READS_SUPPORTED
                        | t::P2P_CAPS_WRITES_SUPPORTED
                        | t::P2P_CAPS_ATOMICS_SUPPORTED
                        | t::P2P_CAPS_PROP_SUPPORTED,
                    [OK, OK, OK, OK, OK, NS, NS, NS, NS],
                )
            } else if j / 2 == k / 2 {
                (
                    t::P2P_CAPS_PCI_SUPPORTED
                        | t::P2P_CAPS_READS_SUPPORTED
                        | t::P2P_CAPS_WRITES_SUPPORTED
                        | t::P2P_CAPS_PROP_SUPPORTED,
                    [OK, OK, NS, NS, OK, NS, OK, NS, NS],
                )
            } else {
                (0, [TNS, TNS, NS, NS, NS, NS, TNS, NS, NS])
            };
            rm.set_p2p(id(k), id(j), caps, status);
        }
    }
    rm
}
