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
