//! Read-only probe of the NVIDIA RM path on a GPU host: allocates one root client,
//! asks the RM for its release and the layouts that release selects, lists the GPUs
//! the kernel driver holds, frees the client and exits 0. It allocates nothing else
//! and writes nothing to any GPU. Any failure is one line naming the step, exit 1.
//!
//! With `topo`, it also prints the peer-topology controls' answers as the RM wrote
//! them (`nvrm::topo`): per GPU the NVLink status (its file opened, a device and
//! subdevice made and freed), per ordered pair of GPUs, each with itself included,
//! GET_P2P_CAPS_V2; read only.
//!
//! Usage: `rig-nvrm-probe [DEV_DIR] [topo]` (default `/dev`).

use std::{path::PathBuf, process::ExitCode};

use rigd::{
    nvrm::{NvrmError, Root, SysRm, topo},
    service::status::error_line,
};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let dev = args
        .next()
        .map_or_else(|| PathBuf::from("/dev"), PathBuf::from);
    let topo = args.next().is_some_and(|a| a == "topo");
    let ran = run(&dev).and_then(|()| if topo { raw_topo(&dev) } else { Ok(()) });
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rig-nvrm-probe: {}", error_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn run(dev: &std::path::Path) -> Result<(), NvrmError> {
    let root = Root::open(dev)?;
    println!("root client: {:#x} (NV01_ROOT_NON_PRIV)", root.handle());
    // The client is freed by `free` below or, on an early return, by its drop.
    let version = root.build_version()?;
    println!(
        "driver: {} (branch {}, changelist {})",
        version.driver, version.branch, version.changelist
    );
    println!(
        "layouts: release {} ({})",
        version.release,
        version.release.sizes()
    );
    let cards = root.cards()?;
    println!("gpus: {}", cards.len());
    for c in &cards {
        println!(
            "gpu: {} {:04x}:{:04x} gpu_id {:#x} /dev/nvidia{} fb {} MiB",
            c.bdf,
            c.vendor_id,
            c.device_id,
            c.gpu_id,
            c.minor,
            c.fb_size >> 20
        );
    }
    root.free()?;
    println!("root client freed");
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The raw answers of the peer-topology controls, one line per GPU, link and pair.
fn raw_topo(dev: &std::path::Path) -> Result<(), NvrmError> {
    use rigd::nvrm::Rm as _;
    use zerocopy::IntoBytes;
    let first = SysRm::open(dev)?;
    let cards = first.cards().map_err(|source| NvrmError::Call {
        step: rigd::nvrm::Step::Cards,
        source,
    })?;
    let mut held = Vec::new();
    for c in &cards {
        let rm = SysRm::open(dev)?;
        match topo::read_nvlink_caps_raw(&rm, c) {
            Ok(p) => println!(
                "nvlink caps {}: capsTbl {:#x} versions nvlink {}..{} nci {}..{} discoveredLinkMask {:#x} enabledLinkMask {:#x} discoveredLinks {}:{:#x} enabledLinks {}:{:#x}",
                c.bdf,
                p.caps_tbl,
                p.lowest_nvlink_version,
                p.highest_nvlink_version,
                p.lowest_nci_version,
                p.highest_nci_version,
                p.discovered_link_mask,
                p.enabled_link_mask,
                p.discovered_links.len_masks,
                p.discovered_links.masks[0],
                p.enabled_links.len_masks,
                p.enabled_links.masks[0]
            ),
            Err(e) => println!("nvlink caps {}: {}", c.bdf, error_line(&e)),
        }
        match topo::read_links_raw(&rm, c) {
            Ok(p) => {
                println!(
                    "nvlink {}: enabledLinkMask {:#x} enabledLinks.lenMasks {} masks[0] {:#x} bSublinkStateInst {} bNvleModeEnabled {}",
                    c.bdf,
                    p.enabled_link_mask,
                    p.enabled_links.len_masks,
                    p.enabled_links.masks[0],
                    p.b_sublink_state_inst,
                    p.b_nvle_mode_enabled
                );
                println!("nvlink {} head: {}", c.bdf, hex(&p.as_bytes()[..32]));
                for (i, l) in p.link_info.iter().enumerate() {
                    if l.as_bytes().iter().any(|&b| b != 0) {
                        println!("nvlink {} link {i}: {}", c.bdf, hex(l.as_bytes()));
                    }
                }
                let links = topo::parse_links(&p);
                println!("nvlink {}: {} enabled links decoded", c.bdf, links.len());
            }
            Err(e) => println!("nvlink {}: {}", c.bdf, error_line(&e)),
        }
        held.push(rm);
    }
    for a in &cards {
        for b in &cards {
            match topo::read_p2p_raw(&first, a.gpu_id, b.gpu_id) {
                Ok(p) => println!(
                    "p2p {} {}: p2pCaps {:#x} p2pCapsStatus {} readCEs {:#x} writeCEs {:#x} busPeerIds[0..4] {:x?} busEgmPeerIds[0..4] {:x?}",
                    a.bdf,
                    b.bdf,
                    p.p2p_caps,
                    hex(&p.p2p_caps_status),
                    p.p2p_optimal_read_ces,
                    p.p2p_optimal_write_ces,
                    &p.bus_peer_ids[..4],
                    &p.bus_egm_peer_ids[..4]
                ),
                Err(e) => println!("p2p {} {}: {}", a.bdf, b.bdf, error_line(&e)),
            }
        }
    }
    drop(held);
    println!("topo: done, clients freed");
    Ok(())
}
