//! The GPUs `Rig` serves through their own driver: opening the configured ones, their
//! DMA pools in gpu mode, and each DMA session's address space and channels on them
//! (the bookkeeping is `channels`', the RM objects `nvrm`'s). A session's channels end
//! here too, in the ledger's order (`rig::ledger`): they stop before its leases leave
//! the GPU's page tables.

use std::sync::{Arc, PoisonError};

use super::{Kind, Rig, RigError, StartWarning, lock};
use crate::{
    channels::{
        ChannelError, ChannelHost, ChannelId, ChannelRequest, ChannelView, Limits, OpenedChannel,
        Rings, Served,
    },
    config, dma,
    nvrm::{self, NvrmError, SysRm},
};

/// What `rigctl status` shows of a served GPU.
#[derive(Debug, Clone)]
pub struct ServedGpu {
    pub health: crate::channels::Health,
    /// The graphics engine's geometry, when the RM gave it.
    pub geometry: Option<rig_model::nv::ComputeGeometry>,
    /// Where sessions' copy channels run (COPY0 + n); empty: their GR0 group.
    pub copy_engines: Vec<u8>,
    /// The non-stall interrupts seen; None: rigd does not watch them.
    pub interrupts: Option<u64>,
    /// Channels those interrupts signalled, and passed over by their wake words.
    pub wakes: Option<(u64, u64)>,
}

/// Where a served GPU's pool puts leases in each session's GPU address space: below
/// the range of lent GPU memory.
fn gpu_lease_range() -> std::ops::RangeInclusive<u64> {
    nvrm::LEASE_BASE..=nvrm::GPU_MEMORY_BASE - 1
}

impl Rig {
    /// Opens the GPUs `[channels] serve` names through their driver and serves them;
    /// returns one warning per GPU that could not be.
    pub fn serve_configured(&self) -> Vec<StartWarning> {
        let (wanted, dev) = {
            let running = lock(&self.running);
            (running.channels.serve.clone(), running.paths.dev.clone())
        };
        if wanted.is_empty() {
            return Vec::new();
        }
        let warn =
            |gpu: &str, e: Box<dyn std::error::Error + Send + Sync>| StartWarning::NotServed {
                gpu: gpu.to_owned(),
                source: e,
            };
        let bdfs: Vec<String> = if wanted.iter().any(|w| w == "all") {
            match SysRm::open(&dev).and_then(|rm| {
                use nvrm::Rm as _;
                rm.cards().map_err(|source| NvrmError::Call {
                    step: nvrm::Step::Cards,
                    source,
                })
            }) {
                Ok(cards) => cards.into_iter().map(|c| c.bdf).collect(),
                Err(e) => return vec![warn("all", Box::new(e))],
            }
        } else {
            wanted
        };
        let mut warnings = Vec::new();
        for bdf in bdfs {
            let opened = SysRm::open(&dev).and_then(|rm| nvrm::Gpu::open(rm, Some(&bdf)));
            let served = match opened {
                Ok(gpu) => self.serve_gpu(Arc::new(Served::new(gpu, self.channel_limits()))),
                Err(e) => Err(RigError::Channel(ChannelError::Rm {
                    gpu: bdf.clone(),
                    source: e,
                })),
            };
            match served {
                Ok(()) => tracing::info!(gpu = %bdf, "serving channels through the GPU's driver"),
                Err(e) => warnings.push(warn(&bdf, Box::new(e))),
            }
        }
        warnings
    }

    /// The configured limits of one session's channels.
    pub fn channel_limits(&self) -> Limits {
        // Only `per_session` and the GPU memory quota change with a reload
        // (`rig::reload`); the rest keep their values from the start.
        let running = lock(&self.running);
        let c = &running.channels;
        Limits {
            channels_per_session: c.per_session,
            max_ring_entries: c.max_ring_entries,
            copy_engines: match &c.copy_engines {
                config::CopyEngines::Auto => None,
                config::CopyEngines::Listed(v) => Some(v.clone()),
            },
            gpu_ring_bytes: c.gpu_ring_bytes,
            gpu_rings_per_uid: c.gpu_rings_per_uid,
            switch_timeout_penalty: std::time::Duration::from_secs(c.switch_timeout_penalty_s),
            timeslice_us: c.timeslice_us,
            gpu_memory: (&running.gpu_memory).into(),
            spare_pages: running.gpu_memory.spare_pages,
        }
    }

    /// Serves `host`'s GPU: a DMA pool of its name whose leases map into each
    /// session's GPU address space, and channels.
    ///
    /// # Errors
    /// [`RigError::Dma`] when the pool cannot be made (`PoolExists`, hugepages).
    pub fn serve_gpu(&self, host: Arc<dyn ChannelHost>) -> Result<(), RigError> {
        self.dma
            .create_configured(host.name(), dma::PoolMode::Gpu(gpu_lease_range()))?;
        self.insert_served(host);
        Ok(())
    }

    /// As [`Rig::serve_gpu`], with a pool as `spec` says (its mode becomes gpu mode):
    /// tests serve a fake GPU on shmem blocks.
    ///
    /// # Errors
    /// As [`Rig::serve_gpu`].
    pub fn serve_gpu_with(
        &self,
        host: Arc<dyn ChannelHost>,
        spec: dma::PoolSpec,
    ) -> Result<Arc<dma::Pool>, RigError> {
        let spec = dma::PoolSpec {
            mode: dma::PoolMode::Gpu(gpu_lease_range()),
            ..spec
        };
        let pool = self.dma.create(host.name(), spec)?;
        self.insert_served(host);
        Ok(pool)
    }

    fn insert_served(&self, host: Arc<dyn ChannelHost>) {
        let name = host.name().to_owned();
        self.ledger
            .gpus
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name, host);
    }

    pub(super) fn host_of(
        &self,
        session: dma::SessionId,
    ) -> Result<Option<Arc<dyn ChannelHost>>, RigError> {
        let (pool, _) = self.dma.session_peer(session)?;
        Ok(self
            .ledger
            .gpus
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pool)
            .cloned())
    }

    pub(super) fn served_host(
        &self,
        session: dma::SessionId,
    ) -> Result<Arc<dyn ChannelHost>, RigError> {
        match self.host_of(session)? {
            Some(h) => Ok(h),
            None => Err(ChannelError::NotServed {
                name: self.dma.session_peer(session)?.0,
            }
            .into()),
        }
    }

    /// A session just claimed: on a served GPU, gives it its own GPU address space,
    /// where its leases map from now on. True when it did.
    ///
    /// # Errors
    /// [`RigError::Channel`], [`RigError::Dma`].
    pub fn attach_session(&self, session: dma::SessionId) -> Result<bool, RigError> {
        let Some(host) = self.host_of(session)? else {
            return Ok(false);
        };
        let (_, peer) = self.dma.session_peer(session)?;
        let map = host.attach(session, peer)?;
        if let Err(e) = self.dma.attach_device_map(session, map) {
            host.end(session);
            return Err(e.into());
        }
        self.ledger.note(session, Kind::Channels);
        Ok(true)
    }

    /// Opens a channel for `session` on its GPU. Rings in GPU memory only for root
    /// and the members of `[channels] gpu_rings_group`.
    ///
    /// # Errors
    /// [`RigError::Channel`] (`NotServed` for a session on another kind of pool,
    /// `GpuRingsRefused`).
    pub fn open_channel(
        &self,
        session: dma::SessionId,
        req: ChannelRequest,
    ) -> Result<OpenedChannel, RigError> {
        let host = self.served_host(session)?;
        if req.rings == Rings::Gpu {
            let (_, peer) = self.dma.session_peer(session)?;
            let policy = self.policy();
            if !policy.may_use_gpu_rings(peer) {
                return Err(ChannelError::GpuRingsRefused {
                    uid: peer.uid,
                    group: policy.gpu_rings_group().map(ToOwned::to_owned),
                }
                .into());
            }
        }
        Ok(host.open(session, req)?)
    }

    /// Closes one of `session`'s channels.
    ///
    /// # Errors
    /// [`RigError::Channel`].
    pub fn close_channel(
        &self,
        session: dma::SessionId,
        channel: ChannelId,
    ) -> Result<(), RigError> {
        Ok(self.served_host(session)?.close(session, channel)?)
    }

    /// Stops and frees `session`'s channels (its groups descheduled first), and its
    /// address space's bookkeeping; returns how many channels. Its leases are
    /// `end_session`'s, after this.
    pub(super) fn end_channels(&self, session: dma::SessionId) -> usize {
        match self.host_of(session) {
            Ok(Some(h)) => h.end(session),
            _ => 0,
        }
    }

    /// Every channel on every served GPU; only `uid`'s when given.
    pub fn channel_status(&self, uid: Option<u32>) -> Vec<ChannelView> {
        self.hosts().iter().flat_map(|h| h.status(uid)).collect()
    }

    /// Reads every channel's error notifier; returns the sessions with a new fault,
    /// for [`Rig::contain_channels`] on a blocking thread.
    pub fn watch_channels(&self) -> Vec<dma::SessionId> {
        self.hosts().iter().flat_map(|h| h.watch()).collect()
    }

    /// Contains `session`'s fault: its channels freed, no new ones (`channels`).
    /// False when it had none, or it was contained before.
    pub fn contain_channels(&self, session: dma::SessionId) -> bool {
        matches!(self.host_of(session), Ok(Some(h)) if h.contain(session))
    }

    /// Each served GPU and its health as last seen (no RM call).
    pub fn gpu_health(&self) -> Vec<(String, crate::channels::Health)> {
        self.each_gpu(|h| h.health())
    }

    /// Each served GPU's health, compute geometry and copy engines (what `rigctl
    /// status` and `rig.devices()` show), by PCI address.
    pub fn served_gpus(&self) -> Vec<(String, ServedGpu)> {
        self.each_gpu(|h| ServedGpu {
            health: h.health(),
            geometry: h.geometry(),
            copy_engines: h.copy_engines(),
            interrupts: h.interrupts(),
            wakes: h.wakes(),
        })
    }

    /// Reads each served GPU's recovery action and says its health: on a blocking
    /// thread.
    pub fn check_gpu_health(&self) -> Vec<(String, crate::channels::Health)> {
        self.each_gpu(|h| h.check_health())
    }

    /// `read` of each served GPU, by PCI address.
    fn each_gpu<T>(&self, read: impl Fn(&dyn ChannelHost) -> T) -> Vec<(String, T)> {
        let mut v: Vec<_> = self
            .hosts()
            .iter()
            .map(|h| (h.name().to_owned(), read(h.as_ref())))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    pub(super) fn hosts(&self) -> Vec<Arc<dyn ChannelHost>> {
        self.ledger
            .gpus
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rig_sys::{memfd::Backing, scm::PeerCred};

    use super::*;
    use crate::{
        config::Config,
        nvrm::{Call, FakeRm, layout::r580},
    };

    #[test]
    fn a_sessions_end_stops_its_channels_then_its_gpu_memory_then_its_leases_and_space() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::default();
        config.paths.pci_ids = dir.path().join("none");
        config.paths.sysfs = dir.path().join("sys");
        config.paths.proc = dir.path().join("proc");
        // No spare pages: the RM's calls are this session's alone.
        config.gpu_memory.spare_pages = 0;
        let (rig, _) = Rig::new(&config);
        let rm = FakeRm::new();
        let gpu = nvrm::Gpu::open(rm.clone(), None).expect("fake GPU");
        let name = gpu.card().bdf.clone();
        let spec = dma::PoolSpec {
            mode: dma::PoolMode::Host,
            blocks: 2,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig
            .serve_gpu_with(Arc::new(Served::new(gpu, rig.channel_limits())), spec)
            .expect("serve");
        assert!(pool.wait_pinned(std::time::Duration::from_secs(10)));
        let peer = PeerCred {
            uid: 1000,
            gid: 1000,
            pid: 77,
        };
        let t = rig.dma.open_session(&name, peer).expect("session");
        rig.dma.claim(t.id, &t.token, peer).expect("claim");
        assert!(rig.attach_session(t.id).expect("attach"));
        rig.dma
            .lease(t.id, 2 << 20)
            .expect("a lease in the session's space");
        let request = ChannelRequest {
            engine: nvrm::Engine::Copy,
            entries: 64,
            rings: Rings::Host,
            pushbuffer: 0,
        };
        rig.open_channel(t.id, request).expect("a channel");
        let lent = rig
            .alloc_gpu_memory(
                t.id,
                crate::gpumem::GpuMemRequest {
                    bytes: 4 << 20,
                    cpu_view: false,
                },
            )
            .expect("GPU memory in the session's space");
        assert!(lent.gpu_va.get() >= nvrm::GPU_MEMORY_BASE);
        let before = rm.calls();
        let allocated = |class| {
            before.iter().rev().find_map(|c| match c {
                Call::Alloc {
                    class: k, handle, ..
                } if *k == class => Some(*handle),
                _ => None,
            })
        };
        let space = allocated(r580::FERMI_VASPACE_A).expect("the session's space");
        let channel = allocated(crate::nvrm::GENERATION.host).expect("the channel");
        let vidmem = allocated(r580::NV01_MEMORY_LOCAL_USER).expect("the GPU memory");

        let ended = rig.end_session(t.id);

        let c = &rm.calls()[before.len()..];
        let at = |f: &dyn Fn(&Call) -> bool| c.iter().position(f);
        let freed = |h| move |x: &Call| matches!(x, Call::Free { object, .. } if *object == h);
        let channel_freed = at(&freed(channel)).expect("the channel freed");
        let vidmem_unmapped = at(&|x| {
            matches!(x, Call::UnmapDma { h_memory, dma_offset, .. }
                if *h_memory == vidmem && *dma_offset == lent.gpu_va.get())
        })
        .expect("the GPU memory unmapped");
        let vidmem_freed = at(&freed(vidmem)).expect("the GPU memory freed");
        let lease_unmapped = at(&|x| {
            matches!(x, Call::UnmapDma { dma_offset, .. }
                if (nvrm::LEASE_BASE..nvrm::GPU_MEMORY_BASE).contains(dma_offset))
        })
        .expect("the lease unmapped");
        let space_freed = at(&freed(space)).expect("the space freed");
        let order = [
            channel_freed,
            vidmem_unmapped,
            vidmem_freed,
            lease_unmapped,
            space_freed,
        ];
        assert!(
            order.is_sorted(),
            "channel, then GPU memory unmapped and freed, then lease, then space: {c:#?}"
        );
        assert_eq!(
            ended.steps,
            [(Kind::Channels, 1), (Kind::GpuMemory, 1), (Kind::Memory, 1)]
        );
        assert_eq!(rm.vidmem_in_use(), 0);
        assert_eq!(rm.live_maps(), 0);
    }

    /// A rig of `config` (its paths under `dir`) serving `rm`'s fake GPU with a pool
    /// of `blocks` shmem blocks; returns it and the GPU's name.
    fn serve_fake(
        config: &mut Config,
        dir: &std::path::Path,
        rm: FakeRm,
        blocks: u32,
    ) -> (Rig, String) {
        config.paths.proc = dir.join("proc");
        config.paths.pci_ids = dir.join("none");
        config.paths.sysfs = dir.join("sys");
        let (rig, _) = Rig::new(config);
        let gpu = nvrm::Gpu::open(rm, None).expect("fake GPU");
        let name = gpu.card().bdf.clone();
        let spec = dma::PoolSpec {
            mode: dma::PoolMode::Host,
            blocks,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        rig.serve_gpu_with(Arc::new(Served::new(gpu, rig.channel_limits())), spec)
            .expect("serve");
        (rig, name)
    }

    #[test]
    fn status_shows_where_copy_channels_run_as_configured_or_as_the_rm_says() {
        let dir = tempfile::tempdir().expect("tempdir");
        let serve = |engines: config::CopyEngines| {
            let mut config = Config::default();
            config.channels.copy_engines = engines;
            let rm = FakeRm::new();
            // COPY0 is graphics' (GRCE); COPY2 and COPY3 are asynchronous.
            rm.set_copy_engines(&[(0, [0x21, 0]), (2, [0x20, 0]), (3, [0x22, 0])]);
            let (rig, _) = serve_fake(&mut config, dir.path(), rm, 1);
            let served = rig.served_gpus();
            assert_eq!(served.len(), 1);
            served[0].1.copy_engines.clone()
        };
        assert_eq!(serve(config::CopyEngines::Auto), [2, 3]);
        assert_eq!(serve(config::CopyEngines::Listed(vec![5])), [5]);
        assert!(serve(config::CopyEngines::Listed(vec![])).is_empty());
    }

    #[test]
    fn status_counts_the_interrupts_that_wake_waits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rm = FakeRm::new();
        let (rig, _) = serve_fake(&mut Config::default(), dir.path(), rm.clone(), 1);
        assert_eq!(rig.served_gpus()[0].1.interrupts, Some(0));
        assert_eq!(rig.served_gpus()[0].1.wakes, Some((0, 0)), "no channel yet");
        assert_eq!(rm.event_files(), 1);
        rm.interrupt();
        let seen = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            rig.served_gpus()[0].1.interrupts == Some(1)
        });
        assert!(seen, "{:?}", rig.served_gpus()[0].1.interrupts);
        drop(rig);
        assert_eq!(rm.event_files(), 0, "the event file closes with the GPU");
    }

    #[test]
    fn cpu_views_of_gpu_memory_are_for_root_and_the_gpu_rings_group_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let groups = dir.path().join("group");
        std::fs::write(&groups, "root:x:0:\nrigtrust:x:951:\n").expect("group file");
        let mut config = Config::default();
        config.channels.gpu_rings_group = Some("rigtrust".into());
        config.paths.group_file = Some(groups);
        let (rig, name) = serve_fake(&mut config, dir.path(), FakeRm::new(), 2);
        let ask = |uid, cpu_view| {
            let peer = PeerCred {
                uid,
                gid: uid,
                pid: 80,
            };
            let t = rig.dma.open_session(&name, peer).expect("session");
            rig.dma.claim(t.id, &t.token, peer).expect("claim");
            assert!(rig.attach_session(t.id).expect("attach"));
            let g = rig.session_gpu(t.id).expect("a served GPU's session");
            assert!(g.gpu_memory_left <= 64 << 30, "the default per-uid quota");
            assert_eq!(g.geometry.map(|g| g.sms()), Some(132));
            rig.alloc_gpu_memory(
                t.id,
                crate::gpumem::GpuMemRequest {
                    bytes: 2 << 20,
                    cpu_view,
                },
            )
        };
        ask(1000, false).expect("plain GPU memory for anyone");
        let e = ask(1000, true).expect_err("not in the group");
        assert!(
            matches!(
                e,
                RigError::GpuMemory(crate::gpumem::GpuMemError::CpuViewRefused { uid: 1000, ref group })
                    if group.as_deref() == Some("rigtrust")
            ),
            "{e}"
        );
        let m = ask(0, true).expect("root");
        assert!(m.cpu_view.is_some());
    }

    #[test]
    fn rings_in_gpu_memory_are_for_root_and_the_group_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let groups = dir.path().join("group");
        std::fs::write(&groups, "root:x:0:\nrigtrust:x:951:bob\n").expect("group file");
        let member = dir.path().join("proc/78");
        std::fs::create_dir_all(&member).expect("proc");
        std::fs::write(member.join("status"), "Name:\tx\nGroups:\t100 951\n").expect("status");
        let mut config = Config::default();
        config.channels.gpu_rings_group = Some("rigtrust".into());
        config.paths.group_file = Some(groups);
        config.paths.proc = dir.path().join("proc");
        config.paths.pci_ids = dir.path().join("none");
        config.paths.sysfs = dir.path().join("sys");
        let (rig, warnings) = Rig::new(&config);
        assert!(
            warnings
                .iter()
                .all(|w| !matches!(w, StartWarning::Policy(_)))
        );
        let gpu = nvrm::Gpu::open(FakeRm::new(), None).expect("fake GPU");
        let name = gpu.card().bdf.clone();
        let spec = dma::PoolSpec {
            mode: dma::PoolMode::Host,
            blocks: 2,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        rig.serve_gpu_with(Arc::new(Served::new(gpu, rig.channel_limits())), spec)
            .expect("serve");
        let open = |uid, pid| {
            let peer = PeerCred { uid, gid: uid, pid };
            let t = rig.dma.open_session(&name, peer).expect("session");
            rig.dma.claim(t.id, &t.token, peer).expect("claim");
            assert!(rig.attach_session(t.id).expect("attach"));
            rig.open_channel(
                t.id,
                ChannelRequest {
                    engine: nvrm::Engine::Copy,
                    entries: 64,
                    rings: Rings::Gpu,
                    pushbuffer: 4096,
                },
            )
        };
        let e = open(1000, 77).expect_err("not in the group");
        assert!(
            matches!(
                e,
                RigError::Channel(ChannelError::GpuRingsRefused { uid: 1000, ref group })
                    if group.as_deref() == Some("rigtrust")
            ),
            "{e}"
        );
        assert!(e.to_string().contains("group `rigtrust`"), "{e}");
        let o = open(1001, 78).expect("a supplementary member");
        assert_eq!(o.rings, Rings::Gpu);
        open(0, 79).expect("root");
    }
}
