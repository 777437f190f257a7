//! The host's peer topology (`rigctl topo`): every GPU of the listing and every
//! ordered pair of them, the PCIe path between them in `nvidia-smi topo -m`'s words
//! (from the sysfs upstream walks and NUMA nodes), and what NVIDIA's RM says: each
//! GPU's NVLink links, each pair's P2P capabilities (`nvrm::topo`). The link budget's
//! shared hops (`pci::share`) ride along per GPU.
//!
//! State: none kept; each request reads sysfs and asks the RM afresh (a few RM calls
//! per GPU, read only). Where the RM is asked is a [`PeerSource`]: by default a fresh
//! root client on `[paths] dev`, a fake in tests (`Rig::set_peer_source`, with feature
//! `fakes`). What could not be read stays typed ([`Unread`], each with where it
//! belongs) until the edge makes its lines ([`Found::into_topology`]). Not here: the
//! RM calls (`nvrm::topo`), the link budget (`pci::share`), the lines (`service`).

use std::{error::Error, fmt};

use rig_model::{
    Device,
    topo::{PciePath, PeerPair, TopoGpu, Topology},
};

use super::{Rig, RigError};
use crate::{
    nvrm::{
        NvrmError, SysRm,
        topo::{RmPeers, read_peers},
    },
    pci::PciError,
};

/// Where the RM is asked about peers.
pub trait PeerSource: fmt::Debug + Send + Sync {
    /// The RM's answers.
    ///
    /// # Errors
    /// As [`read_peers`].
    fn read(&self) -> Result<RmPeers, NvrmError>;
}

/// The real RM, through root clients on `dev`'s `nvidiactl`.
#[derive(Debug)]
struct SysPeers {
    dev: std::path::PathBuf,
}

impl PeerSource for SysPeers {
    fn read(&self) -> Result<RmPeers, NvrmError> {
        read_peers(|| SysRm::open(&self.dev))
    }
}

#[cfg(any(test, feature = "fakes"))]
impl PeerSource for crate::nvrm::FakeRm {
    fn read(&self) -> Result<RmPeers, NvrmError> {
        read_peers(|| Ok(self.clone()))
    }
}

/// What the topology could not say; its line goes where [`At`] says.
#[derive(Debug, thiserror::Error)]
pub enum Unread {
    /// A PCI function of the listing.
    #[error(transparent)]
    Function(PciError),
    #[error("the NVIDIA RM could not be asked")]
    Rm(#[source] NvrmError),
    #[error("the RM drives {bdf} (gpu_id {gpu_id:#x}), which the PCI listing lacks")]
    Unlisted { bdf: String, gpu_id: u32 },
    /// A GPU's NVLink status.
    #[error(transparent)]
    Nvlink(NvrmError),
    /// A pair's P2P capabilities.
    #[error(transparent)]
    P2p(NvrmError),
    #[error("the RM was not asked")]
    NotAsked,
    #[error("the NVIDIA driver does not drive both of them")]
    NotBoth,
}

/// Where an [`Unread`]'s line goes in the [`Topology`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    /// `problems`.
    Host,
    /// `gpus[i].nvlink_problem`.
    Gpu(usize),
    /// `pairs[i].p2p_problem`.
    Pair(usize),
}

/// A topology with what could not be read beside it, still typed.
#[derive(Debug, Default)]
pub struct Found {
    /// Every problem field unset.
    pub topology: Topology,
    pub unread: Vec<(At, Unread)>,
}

impl Found {
    /// The topology with each problem's line, made by `line` (the edge's), in its place.
    pub fn into_topology(self, line: impl Fn(&dyn Error) -> String) -> Topology {
        let mut t = self.topology;
        for (at, e) in &self.unread {
            let l = line(e);
            match *at {
                At::Host => t.problems.push(l),
                At::Gpu(i) => {
                    if let Some(g) = t.gpus.get_mut(i) {
                        g.nvlink_problem = Some(l);
                    }
                }
                At::Pair(i) => {
                    if let Some(p) = t.pairs.get_mut(i) {
                        p.p2p_problem = Some(l);
                    }
                }
            }
        }
        t
    }
}

impl Rig {
    /// Asks `source` instead of the real RM from now on (tests).
    #[cfg(any(test, feature = "fakes"))]
    pub fn set_peer_source(&self, source: std::sync::Arc<dyn PeerSource>) {
        *self
            .peer_source
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(source);
    }

    /// Where the RM is asked: root clients on `[paths] dev`, or the tests' source.
    fn peer_source(&self) -> std::sync::Arc<dyn PeerSource> {
        #[cfg(any(test, feature = "fakes"))]
        if let Some(s) = self
            .peer_source
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
        {
            return s;
        }
        std::sync::Arc::new(SysPeers {
            dev: super::lock(&self.running).paths.dev.clone(),
        })
    }

    /// The peer topology of every GPU and accelerator.
    ///
    /// # Errors
    /// Only when sysfs cannot be listed ([`Rig::list`]); what the RM cannot say, and
    /// functions that could not be read, are in [`Found::unread`].
    pub fn topology(&self) -> Result<Found, RigError> {
        let listing = self.list(true)?;
        let rm = self.peer_source().read();
        let mut found = build(&listing.devices, rm);
        found.unread.extend(
            listing
                .problems
                .into_iter()
                .map(|e| (At::Host, Unread::Function(e))),
        );
        Ok(found)
    }
}

/// Joins the GPUs of a listing with the RM's answers.
pub fn build(devices: &[Device], rm: Result<RmPeers, NvrmError>) -> Found {
    let gpus: Vec<&Device> = devices.iter().filter(|d| d.is_gpu()).collect();
    let mut t = Topology::default();
    let mut unread = Vec::new();
    // The RM's GPUs, each one's NVLink answer and each pair's P2P answer, taken as
    // they are placed.
    let (cards, mut nvlinks, mut caps) = match rm {
        Ok(p) => {
            t.driver = Some(p.release.to_string());
            let (cards, nvlinks): (Vec<_>, Vec<_>) = p
                .gpus
                .into_iter()
                .map(|g| (g.card, Some(g.nvlink)))
                .collect();
            let caps: Vec<_> = p
                .pairs
                .into_iter()
                .map(|x| ((x.from, x.to), Some(x.p2p)))
                .collect();
            (Some(cards), nvlinks, caps)
        }
        Err(e) => {
            unread.push((At::Host, Unread::Rm(e)));
            (None, Vec::new(), Vec::new())
        }
    };
    // The RM's index of each listed GPU.
    let rm_index = |bdf: &str| {
        cards
            .as_ref()
            .and_then(|c| c.iter().position(|card| card.bdf == bdf))
    };
    for d in &gpus {
        let mut g = TopoGpu {
            bdf: d.bdf.clone(),
            numa_node: d.sysfs.numa_node,
            local_cpulist: d.sysfs.local_cpulist.clone(),
            shared: d.link.shared.clone(),
            contended_gbytes_per_s: d.link.contended_gbytes_per_s,
            ..Default::default()
        };
        if let Some(i) = rm_index(&d.bdf) {
            g.rm_gpu_id = cards.as_ref().and_then(|c| c.get(i)).map(|c| c.gpu_id);
            match nvlinks.get_mut(i).and_then(Option::take) {
                Some(Ok(links)) => g.nvlink = Some(links),
                Some(Err(e)) => unread.push((At::Gpu(t.gpus.len()), Unread::Nvlink(e))),
                None => {}
            }
        }
        t.gpus.push(g);
    }
    for c in cards.iter().flatten() {
        if !gpus.iter().any(|d| d.bdf == c.bdf) {
            unread.push((
                At::Host,
                Unread::Unlisted {
                    bdf: c.bdf.clone(),
                    gpu_id: c.gpu_id,
                },
            ));
        }
    }
    for (a, ga) in gpus.iter().zip(&t.gpus) {
        for (b, gb) in gpus.iter().zip(&t.gpus) {
            let mut pair = PeerPair {
                from: a.bdf.clone(),
                to: b.bdf.clone(),
                pcie: pcie_path(PathEnd::from(*a), PathEnd::from(*b)),
                nvlinks: nvlinks_between(ga, gb),
                p2p: None,
                p2p_problem: None,
            };
            if cards.is_some() {
                let at = At::Pair(t.pairs.len());
                match (rm_index(&a.bdf), rm_index(&b.bdf)) {
                    (Some(i), Some(j)) => match caps
                        .iter_mut()
                        .find(|(k, _)| *k == (i, j))
                        .and_then(|(_, x)| x.take())
                    {
                        Some(Ok(c)) => pair.p2p = Some(c),
                        Some(Err(e)) => unread.push((at, Unread::P2p(e))),
                        None => unread.push((at, Unread::NotAsked)),
                    },
                    _ => unread.push((at, Unread::NotBoth)),
                }
            }
            t.pairs.push(pair);
        }
    }
    Found {
        topology: t,
        unread,
    }
}

/// NVLink links from `a` that reach `b`: straight to `b`, plus, when both have
/// active links to NVSwitches, the fewer of the two counts (every switch port reaches
/// every GPU on the fabric, as on HGX boards). 0 for a GPU with itself.
fn nvlinks_between(a: &TopoGpu, b: &TopoGpu) -> u32 {
    use rig_model::topo::NvlinkRemoteKind;
    if a.bdf == b.bdf {
        return 0;
    }
    let active = |g: &TopoGpu| -> Vec<rig_model::topo::NvlinkRemote> {
        g.nvlink
            .iter()
            .flatten()
            .filter(|l| l.is_active())
            .filter_map(|l| l.remote.clone())
            .collect()
    };
    let (ra, rb) = (active(a), active(b));
    let direct = ra
        .iter()
        .filter(|r| r.kind == NvlinkRemoteKind::Gpu && r.bdf.as_deref() == Some(b.bdf.as_str()))
        .count();
    let switched = |r: &[rig_model::topo::NvlinkRemote]| {
        r.iter()
            .filter(|r| r.kind == NvlinkRemoteKind::Switch)
            .count()
    };
    let through = switched(&ra).min(switched(&rb));
    u32::try_from(direct + through).unwrap_or(u32::MAX)
}

/// One end of a PCIe path: a function, the bridges above it (nearest first) and its
/// NUMA node.
#[derive(Debug, Clone, Copy)]
pub struct PathEnd<'a> {
    pub bdf: &'a str,
    pub upstream: &'a [String],
    pub numa_node: Option<i32>,
}

impl<'a> From<&'a Device> for PathEnd<'a> {
    fn from(d: &'a Device) -> Self {
        Self {
            bdf: &d.bdf,
            upstream: &d.sysfs.upstream,
            numa_node: d.sysfs.numa_node,
        }
    }
}

/// The PCIe path between two functions: below one switch (both right under its
/// downstream ports) PIX, deeper below a common bridge PXB, on one host bridge (the
/// top of both walks on one root bus) PHB, else NODE when both NUMA nodes are the
/// same (or both unknown) and SYS when not.
pub fn pcie_path(a: PathEnd<'_>, b: PathEnd<'_>) -> PciePath {
    if a.bdf == b.bdf {
        return PciePath::X;
    }
    let (ua, ub) = (a.upstream, b.upstream);
    if let Some((ia, common)) = ua.iter().enumerate().find(|(_, x)| ub.contains(x)) {
        let ib = ub.iter().position(|x| x == common).unwrap_or(usize::MAX);
        if ia + 1 == ua.len() && ib + 1 == ub.len() && ia > 0 {
            // The common bridge is the root port, below which the paths part.
            return PciePath::Phb;
        }
        return if ia <= 1 && ib <= 1 {
            PciePath::Pix
        } else {
            PciePath::Pxb
        };
    }
    // The root bus each walk starts from: its top bridge's bus, or the function's own.
    let root_bus = |e: PathEnd<'_>| {
        let top = e.upstream.last().map_or(e.bdf, String::as_str);
        top.rsplit_once(':').map(|(bus, _)| bus.to_owned())
    };
    if root_bus(a).is_some() && root_bus(a) == root_bus(b) {
        return PciePath::Phb;
    }
    let node = |e: PathEnd<'_>| e.numa_node.filter(|&n| n >= 0);
    if node(a) == node(b) {
        PciePath::Node
    } else {
        PciePath::Sys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end<'a>(bdf: &'a str, upstream: &'a [String], numa_node: Option<i32>) -> PathEnd<'a> {
        PathEnd {
            bdf,
            upstream,
            numa_node,
        }
    }

    fn up(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn pcie_paths_follow_nvidia_smis_words() {
        let (ua, ub) = (
            up(&["0000:17:00.0", "0000:16:00.0", "0000:15:01.0"]),
            up(&["0000:17:01.0", "0000:16:00.0", "0000:15:01.0"]),
        );
        let uc = up(&["0000:47:00.0", "0000:46:00.0", "0000:45:01.0"]);
        let ud = up(&["0000:97:00.0", "0000:96:00.0", "0000:95:01.0"]);
        let deep = up(&[
            "0000:1b:00.0",
            "0000:1c:00.0",
            "0000:17:02.0",
            "0000:16:00.0",
            "0000:15:01.0",
        ]);
        let a = end("0000:18:00.0", &ua, Some(0));
        assert_eq!(pcie_path(a, a), PciePath::X);
        assert_eq!(
            pcie_path(a, end("0000:19:00.0", &ub, Some(0))),
            PciePath::Pix
        );
        assert_eq!(
            pcie_path(a, end("0000:1a:00.0", &deep, Some(0))),
            PciePath::Pxb
        );
        assert_eq!(
            pcie_path(a, end("0000:48:00.0", &uc, Some(0))),
            PciePath::Node
        );
        assert_eq!(
            pcie_path(a, end("0000:98:00.0", &ud, Some(1))),
            PciePath::Sys
        );
        assert_eq!(
            pcie_path(
                end("0000:00:06.0", &[], None),
                end("0000:00:07.0", &[], None)
            ),
            PciePath::Phb,
            "one root bus"
        );
        assert_eq!(
            pcie_path(
                end("0000:00:06.0", &[], Some(0)),
                end("0000:80:07.0", &[], Some(1))
            ),
            PciePath::Sys
        );
    }

    #[test]
    fn without_an_rm_there_are_no_gpus_from_it_and_one_problem_says_why() {
        let line = |e: &dyn Error| {
            let words: Vec<String> = crate::error::chain(e).map(|c| c.to_string()).collect();
            words.join(": ")
        };
        let t = build(&[], Err(NvrmError::NoGpu { bdf: None })).into_topology(line);
        assert!(t.pairs.is_empty() && t.driver.is_none());
        assert_eq!(t.problems.len(), 1, "{:?}", t.problems);
        assert!(
            t.problems[0].starts_with("the NVIDIA RM could not be asked: the RM drives no GPU"),
            "{:?}",
            t.problems
        );
    }
}
