//! Which GPUs share the links above each other: a PCIe switch's uplink or a root port
//! that several GPUs' paths cross, and what each can expect when all of them copy at
//! once (the shared-uplink effect a multi-GPU host shows: two GPUs at 32 GT/s x16 behind
//! one switch whose uplink is also x16 get half of it each).
//!
//! Input: each GPU's address and its bridges up to the root port (sysfs `upstream`,
//! from `device`); output: the `shared` hops and the contended bandwidth of one
//! device's [`LinkBudget`]. Pure but for [`gpu_paths`], which reads the class register
//! and the upstream walk of every function. Not here: the budget itself (`device`).

use rig_model::{Device, LinkBudget, SharedHop, is_gpu_class};

use super::{Bdf, SysfsRoot};

/// One GPU and the bridges above it, nearest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPath {
    pub bdf: String,
    pub upstream: Vec<String>,
}

impl GpuPath {
    /// The path of a decoded device, if it is a GPU or accelerator.
    pub fn of(d: &Device) -> Option<Self> {
        d.is_gpu().then(|| Self {
            bdf: d.bdf.clone(),
            upstream: d.sysfs.upstream.clone(),
        })
    }
}

/// The path of every GPU and accelerator in sysfs, from the class register (three bytes
/// at 0x09) and the directory its `bus/pci/devices` link resolves to. A function that
/// cannot be read is left out: it is not a GPU rig could show as sharing anything.
pub fn gpu_paths(root: &SysfsRoot) -> Vec<GpuPath> {
    let Ok(all) = root.list() else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|&bdf| reads_as_gpu(root, bdf))
        .map(|bdf| GpuPath {
            bdf: bdf.to_string(),
            upstream: root.upstream(bdf).iter().map(Bdf::to_string).collect(),
        })
        .collect()
}

fn reads_as_gpu(root: &SysfsRoot, bdf: Bdf) -> bool {
    let mut class = [0u8; 3];
    matches!(root.read_config_at(bdf, 0x09, &mut class), Ok(3))
        && is_gpu_class(u32::from_le_bytes([class[0], class[1], class[2], 0]))
}

/// Fills `budget.shared` and `budget.contended_gbytes_per_s` of the device at `own`
/// from the paths of every GPU on the host (`own`'s among them or not). Hops are
/// matched by address, so a bridge whose config could not be read (absent from the
/// hops) is skipped, not misattributed.
pub fn fill(budget: &mut LinkBudget, own: &str, gpus: &[GpuPath]) {
    budget.shared.clear();
    budget.contended_gbytes_per_s = None;
    for (i, hop) in budget.hops.iter().enumerate().skip(1) {
        let mut with: Vec<String> = gpus
            .iter()
            .filter(|g| g.bdf != own && g.upstream.contains(&hop.bdf))
            .map(|g| g.bdf.clone())
            .collect();
        if with.is_empty() {
            continue;
        }
        with.sort_by_cached_key(|b| b.parse::<Bdf>().ok());
        with.dedup();
        let below = with.len() + 1;
        budget.shared.push(SharedHop {
            hop: u32::try_from(i).unwrap_or(u32::MAX),
            bdf: hop.bdf.clone(),
            gbytes_per_s_each: hop.link.as_ref().map(|l| l.gbytes_per_s / below as f64),
            with,
        });
    }
    let each = budget.shared.iter().filter_map(|s| s.gbytes_per_s_each);
    let alone = budget
        .hops
        .iter()
        .filter_map(|h| Some(h.link.as_ref()?.gbytes_per_s));
    if budget.shared.iter().any(|s| s.gbytes_per_s_each.is_some()) {
        budget.contended_gbytes_per_s = each.chain(alone).min_by(f64::total_cmp);
    }
}

/// [`fill`] for every GPU of a listing, from the listing's own paths.
pub fn fill_all(devices: &mut [Device]) {
    let gpus: Vec<GpuPath> = devices.iter().filter_map(GpuPath::of).collect();
    for d in devices.iter_mut().filter(|d| d.is_gpu()) {
        fill(&mut d.link, &d.bdf, &gpus);
    }
}

#[cfg(test)]
mod tests {
    use rig_model::{Link, LinkHop};

    use super::*;

    fn link(gbytes_per_s: f64) -> Option<Link> {
        Some(Link {
            speed: "32GT/s".into(),
            speed_gts: 32.0,
            width: 16,
            gbytes_per_s,
        })
    }

    fn hop(bdf: &str, g: Option<f64>) -> LinkHop {
        LinkHop {
            bdf: bdf.into(),
            link: g.and_then(link),
            capable: None,
        }
    }

    fn path(bdf: &str, up: &[&str]) -> GpuPath {
        GpuPath {
            bdf: bdf.into(),
            upstream: up.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// Two GPUs on downstream ports of one switch (upstream port 19:00.0, root port
    /// 18:01.0).
    fn pair_behind_one_switch() -> [GpuPath; 2] {
        [
            path(
                "0000:1b:00.0",
                &["0000:1a:00.0", "0000:19:00.0", "0000:18:01.0"],
            ),
            path(
                "0000:1c:00.0",
                &["0000:1a:01.0", "0000:19:00.0", "0000:18:01.0"],
            ),
        ]
    }

    /// GPU → downstream port → switch upstream port → root port.
    fn budget(dsp: &str, usp_gb: f64) -> LinkBudget {
        LinkBudget {
            hops: vec![
                hop("0000:1b:00.0", Some(63.0)),
                hop(dsp, Some(63.0)),
                hop("0000:19:00.0", Some(usp_gb)),
                hop("0000:18:01.0", Some(usp_gb)),
            ],
            ..LinkBudget::default()
        }
    }

    #[test]
    fn two_gpus_behind_one_switch_share_its_uplink_and_split_it() {
        let gpus = [
            path(
                "0000:1b:00.0",
                &["0000:1a:00.0", "0000:19:00.0", "0000:18:01.0"],
            ),
            path(
                "0000:1c:00.0",
                &["0000:1a:01.0", "0000:19:00.0", "0000:18:01.0"],
            ),
            path(
                "0000:9b:00.0",
                &["0000:9a:00.0", "0000:99:00.0", "0000:98:01.0"],
            ),
        ];
        let mut b = budget("0000:1a:00.0", 63.0);
        fill(&mut b, "0000:1b:00.0", &gpus);
        let shared: Vec<_> = b
            .shared
            .iter()
            .map(|s| (s.hop, s.bdf.as_str(), s.with.clone(), s.gbytes_per_s_each))
            .collect();
        assert_eq!(
            shared,
            [
                (
                    2,
                    "0000:19:00.0",
                    vec!["0000:1c:00.0".to_owned()],
                    Some(31.5)
                ),
                (
                    3,
                    "0000:18:01.0",
                    vec!["0000:1c:00.0".to_owned()],
                    Some(31.5)
                ),
            ]
        );
        assert_eq!(b.contended_gbytes_per_s, Some(31.5));
    }

    #[test]
    fn a_gpu_alone_on_its_path_shares_nothing_and_a_refill_clears_old_results() {
        let gpus = [path(
            "0000:1b:00.0",
            &["0000:1a:00.0", "0000:19:00.0", "0000:18:01.0"],
        )];
        let mut b = budget("0000:1a:00.0", 63.0);
        b.contended_gbytes_per_s = Some(1.0);
        b.shared.push(SharedHop {
            hop: 9,
            bdf: "stale".into(),
            with: vec![],
            gbytes_per_s_each: None,
        });
        fill(&mut b, "0000:1b:00.0", &gpus);
        assert!(b.shared.is_empty());
        assert_eq!(b.contended_gbytes_per_s, None);
    }

    #[test]
    fn the_contended_figure_is_the_least_of_own_link_and_each_shared_split() {
        // A slow own link (x4) below a fast shared uplink: the own link still binds.
        let gpus = pair_behind_one_switch();
        let mut b = budget("0000:1a:00.0", 63.0);
        b.hops[0].link = link(7.9);
        fill(&mut b, "0000:1b:00.0", &gpus);
        assert_eq!(b.contended_gbytes_per_s, Some(7.9));
        // A hop without a link is listed as shared but splits nothing.
        let mut b = budget("0000:1a:00.0", 63.0);
        for h in &mut b.hops[2..] {
            h.link = None;
        }
        fill(&mut b, "0000:1b:00.0", &gpus);
        assert_eq!(b.shared.len(), 2);
        assert!(b.shared.iter().all(|s| s.gbytes_per_s_each.is_none()));
        assert_eq!(b.contended_gbytes_per_s, None);
    }

    #[test]
    fn a_hop_missing_from_the_budget_is_skipped_not_misattributed() {
        // The switch's upstream port could not be read: the budget lacks it.
        let gpus = pair_behind_one_switch();
        let mut b = budget("0000:1a:00.0", 63.0);
        b.hops.remove(2);
        fill(&mut b, "0000:1b:00.0", &gpus);
        let at: Vec<_> = b.shared.iter().map(|s| (s.hop, s.bdf.as_str())).collect();
        assert_eq!(at, [(2, "0000:18:01.0")]);
    }
}
