//! What each session holds, and the one order in which its end takes it back.
//!
//! A session (a DMA session its client claimed on the side socket: `dma::Pools` keeps
//! it) always holds its memory: its leases, mapped through the IOMMU or into its own
//! GPU address space. Beside that it may hold a device leased whole (`rig::lease`),
//! lent queues (`rig::queues`), channels with their windows in GPU memory
//! (`rig::served`, `channels`), and GPU memory (`rig::gpumem`, `gpumem`). Each kind is lent by its own module, which notes it here
//! when it lends ([`Ledger::note`]); the session's end ([`Ledger::end`], from
//! `Rig::end_session`) takes every kind it holds back in [`Kind::TEARDOWN`]'s order, each
//! step logged (and the device lease's steps journaled by `take`).
//!
//! A new kind is one variant of [`Kind`] with its place in the order, its table here,
//! the `note` where it is lent, and its arm in `Rig::end_session` (a `match`: the
//! compiler asks for it).
//!
//! State: the kinds each open session holds, and the tables of what is lent, by kind:
//! devices leased whole, NVMe controllers that lend queues, GPUs that lend channels.
//! Each behind its own lock, held briefly; lock order: a device's slot, then a table,
//! then `held`. Memory's table is `dma::Pools`' (its sessions are the sessions).
//!
//! Not here: how each kind is lent and reclaimed (the modules named above).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt,
    sync::{Arc, Mutex, RwLock},
};

use super::{lease::DeviceLease, lock, queues::QueueHost};
use crate::{channels::ChannelHost, dma::SessionId, pci::Bdf};

/// What a session can hold. Its end takes them back in [`Kind::TEARDOWN`]'s order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A device leased whole.
    Device,
    /// Queues lent on a held NVMe controller, their rings in the session's leases.
    Queues,
    /// Channels on a served GPU, and the session's address space and groups there.
    Channels,
    /// Events shared between sessions on a served GPU, exported or imported, mapped
    /// in the session's address space there.
    Events,
    /// GPU memory lent on a served GPU, mapped in the session's address space there.
    GpuMemory,
    /// Leases of host memory: the session's floor, held by every session.
    Memory,
}

impl Kind {
    /// The order a session's end takes its kinds back in. Each kind stops what could
    /// still reach the memory of the kinds after it:
    /// 1. the device leased whole stops mastering the bus (and is reset) before anything
    ///    it may still write is unmapped;
    /// 2. lent queues are deleted on the controller, which still masters the bus to
    ///    complete the deletions, before their rings' leases go;
    /// 3. channels are descheduled, drained and freed before what they may read or write
    ///    leaves the session's GPU address space;
    /// 4. shared events leave its GPU address space: those it exported after its
    ///    channels, which release them, stopped, so the value their importers are told
    ///    it reached is final;
    /// 5. GPU memory lent to the session is unmapped from its GPU address space and
    ///    freed: after the channels that could still use it stopped, before the space
    ///    it is mapped in goes;
    /// 6. the leases are unmapped and freed, and the session's address space (its IOMMU
    ///    mappings, or its GPU address space) goes with the last.
    pub const TEARDOWN: [Kind; 6] = [
        Kind::Device,
        Kind::Queues,
        Kind::Channels,
        Kind::Events,
        Kind::GpuMemory,
        Kind::Memory,
    ];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Device => "device lease",
            Self::Queues => "queues",
            Self::Channels => "channels",
            Self::Events => "shared events",
            Self::GpuMemory => "GPU memory",
            Self::Memory => "memory",
        })
    }
}

/// What a session's end took back: each kind it held, in the order taken, with how
/// many of it (devices, queues, channels, GPU memory allocations, leases).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ended {
    pub steps: Vec<(Kind, usize)>,
}

impl Ended {
    /// How many of `kind` were taken back.
    pub fn of(&self, kind: Kind) -> usize {
        self.steps
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, n)| *n)
    }
}

/// What is lent, by kind and by session.
#[derive(Debug, Default)]
pub(super) struct Ledger {
    /// The kinds each session holds beyond its memory.
    held: Mutex<HashMap<SessionId, BTreeSet<Kind>>>,
    /// Devices leased whole, by address (`rig::lease`).
    pub(super) leases: Mutex<BTreeMap<Bdf, DeviceLease>>,
    /// Held NVMe controllers that lend queues, by address (`rig::queues`).
    pub(super) queue_hosts: Mutex<BTreeMap<Bdf, QueueHost>>,
    /// Served GPUs that lend channels, by PCI address, also their pools' names
    /// (`rig::served`).
    pub(super) gpus: RwLock<BTreeMap<String, Arc<dyn ChannelHost>>>,
}

impl Ledger {
    /// Notes that `session` now holds something of `kind`.
    pub(super) fn note(&self, session: SessionId, kind: Kind) {
        if kind != Kind::Memory {
            lock(&self.held).entry(session).or_default().insert(kind);
        }
    }

    /// Ends `session`'s record and takes back what it held: `reclaim` is called once
    /// per kind it holds, in [`Kind::TEARDOWN`]'s order, and says how many it took back.
    pub(super) fn end(&self, session: SessionId, mut reclaim: impl FnMut(Kind) -> usize) -> Ended {
        let held = lock(&self.held).remove(&session).unwrap_or_default();
        let mut ended = Ended::default();
        for kind in Kind::TEARDOWN {
            if kind == Kind::Memory || held.contains(&kind) {
                let n = reclaim(kind);
                tracing::debug!(session = session.0, %kind, n, "reclaimed");
                ended.steps.push((kind, n));
            }
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_takes_back_the_kinds_held_in_the_declared_order_memory_last() {
        let ledger = Ledger::default();
        let s = SessionId(7);
        // Noted in the order a client might take them.
        ledger.note(s, Kind::GpuMemory);
        ledger.note(s, Kind::Events);
        ledger.note(s, Kind::Channels);
        ledger.note(s, Kind::Device);
        ledger.note(s, Kind::Queues);
        ledger.note(s, Kind::Channels);
        let mut order = Vec::new();

        let ended = ledger.end(s, |k| {
            order.push(k);
            1
        });

        assert_eq!(
            order,
            [
                Kind::Device,
                Kind::Queues,
                Kind::Channels,
                Kind::Events,
                Kind::GpuMemory,
                Kind::Memory
            ]
        );
        assert_eq!(ended.of(Kind::Queues), 1);
        assert_eq!(ended.of(Kind::GpuMemory), 1);
    }

    #[test]
    fn gpu_memory_goes_after_the_channels_and_before_the_address_space() {
        let at = |k: Kind| Kind::TEARDOWN.iter().position(|&t| t == k);
        assert!(at(Kind::Channels) < at(Kind::GpuMemory));
        assert!(
            at(Kind::Channels) < at(Kind::Events),
            "exporters stop first"
        );
        assert!(at(Kind::Events) < at(Kind::Memory));
        assert!(at(Kind::GpuMemory) < at(Kind::Memory));
        assert_eq!(
            Kind::TEARDOWN.last(),
            Some(&Kind::Memory),
            "the space goes with the last lease"
        );
    }

    #[test]
    fn a_session_that_held_only_memory_ends_with_memory_alone_and_once() {
        let ledger = Ledger::default();
        let (a, b) = (SessionId(1), SessionId(2));
        ledger.note(b, Kind::Channels);
        let mut order = Vec::new();

        ledger.end(a, |k| {
            order.push(k);
            0
        });
        ledger.end(b, |k| {
            order.push(k);
            0
        });
        ledger.end(b, |k| {
            order.push(k);
            0
        });

        assert_eq!(
            order,
            [Kind::Memory, Kind::Channels, Kind::Memory, Kind::Memory],
            "b's channels are taken back once; memory always"
        );
    }
}
