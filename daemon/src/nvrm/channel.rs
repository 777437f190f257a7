//! `ChannelGroup` and `Channel`: a TSG with its subcontext in one client's
//! [`AddressSpace`], and a GPFIFO channel in it whose ring, USERD and error notifier
//! are [`HostMem`] of that space, made in the order of docs/hardware/nvidia-rm.md,
//! "The object sequence" (steps 15–20; no UVM: the RM maps a channel's context buffers
//! into an RM-owned space itself) and torn down as: deschedule (the last channel of its group), wait until
//! the GPU no longer fetches, free the engine object and the channel, then their
//! memory. A channel holds an `Arc` of its group and the group of its space, so the
//! group goes after its last channel and the space after both.
//!
//! Who writes what: the submitter (rigd in tests, a client when lent) writes ring
//! entries and GP_PUT (USERD +0x8c); the GPU writes GP_GET (USERD +0x88) and the RM
//! the error notifier; rigd only reads them. With the ring in host memory, the 8 bytes
//! past USERD ([`wake_offset`]) are the channel's wake word, which the channel's own
//! releases write before its non-stall interrupts and rigd reads to know whose
//! interrupt an edge was (`channels::wake`).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use zerocopy::IntoBytes;

use super::{
    calls::{Caching, Doorbell, Rm, Window},
    error::{NvrmError, Step, at},
    gpu::{GENERATION, Undo, first_of},
    layout::r580,
    mem::HostMem,
    space::AddressSpace,
    vidmem::{DeviceMem, DeviceView},
};
use crate::sys::nvrm::NvHandle;

/// USERD offsets of HopperAControlGPFifo.
pub use rig_nv::gpfifo::{USERD_GP_GET, USERD_GP_PUT};
/// USERD is 512-byte aligned (`NV_RAMUSERD_BASE_SHIFT` 9) and this long here.
pub const USERD_LEN: u64 = 512;
/// `NV2080_ENGINE_TYPE_COPY0` and up (`cl2080_notification.h`).
const NV2080_ENGINE_TYPE_COPY0: u32 = r580::NV2080_ENGINE_TYPE_COPY0;
/// `NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_SYNC` (`nvos.h`).
const SUBCONTEXT_SYNC: u32 = 0;
// TIMEOUT: a descheduled channel stops fetching within microseconds; 100 ms says it
// did not, and teardown goes on (freeing the channel preempts it in the RM).
const DRAIN_TIMEOUT: Duration = Duration::from_millis(100);
/// Whether the RM refused a group's compute preemption once already (logged once).
static PREEMPTION_REFUSED: AtomicBool = AtomicBool::new(false);

/// The engine a group's channels run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupEngine {
    /// GR0's runlist: compute channels, and copy channels on its copy engine (GRCE),
    /// as tinygrad's ran on the H200. ASYNC subcontext.
    Graphics,
    /// Async copy engine `n` (NV2080_ENGINE_TYPE_COPY0 + n). SYNC subcontext: the RM
    /// allows ASYNC only on GR/GRCE (`kernel_fifo_gp102.c`). Not yet run on a GPU.
    Copy(u8),
}

/// The engine a channel drives: the shared vocabulary's; its class is
/// `gpu::GENERATION`'s.
pub use rig_model::nv::Engine;

/// A channel group (TSG) and its subcontext in one address space.
#[derive(Debug)]
pub struct ChannelGroup<R: Rm> {
    space: Arc<AddressSpace<R>>,
    engine: GroupEngine,
    undo: Vec<Undo>,
    h_group: NvHandle,
    h_ctxshare: NvHandle,
    /// Channels made in it and not yet freed.
    channels: AtomicU32,
    /// Whether GPFIFO_SCHEDULE enabled it: with its first channel, until its last goes.
    scheduled: AtomicBool,
    /// Its last channel went and descheduled it: the RM then refuses a new channel in it
    /// (docs/hardware/nvidia-channels.md, "Channel groups"), so the next channel goes in
    /// a new group.
    retired: AtomicBool,
    /// A channel of it faulted and rigd gave it up ([`ChannelGroup::abandon`]): it is
    /// freed without being descheduled, its channels without waiting for their rings.
    abandoned: AtomicBool,
    /// Its compute preemption was asked for (GR0's group, with its first engine object).
    preemption: AtomicBool,
}

impl<R: Rm> ChannelGroup<R> {
    /// Allocates KEPLER_CHANNEL_GROUP_A and FERMI_CONTEXT_SHARE_A in `space`.
    ///
    /// # Errors
    /// [`NvrmError::Call`] naming the step; what was made before is freed.
    pub fn new(space: &Arc<AddressSpace<R>>, engine: GroupEngine) -> Result<Self, NvrmError> {
        let gpu = space.gpu();
        let (engine_type, flags) = match engine {
            GroupEngine::Graphics => (
                r580::NV2080_ENGINE_TYPE_GRAPHICS,
                r580::NV_CTXSHARE_ALLOCATION_FLAGS_SUBCONTEXT_ASYNC,
            ),
            GroupEngine::Copy(n) => (NV2080_ENGINE_TYPE_COPY0 + u32::from(n), SUBCONTEXT_SYNC),
        };
        let mut g = Self {
            space: Arc::clone(space),
            engine,
            undo: Vec::new(),
            h_group: 0,
            h_ctxshare: 0,
            channels: AtomicU32::new(0),
            scheduled: AtomicBool::new(false),
            retired: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
            preemption: AtomicBool::new(false),
        };
        let mut p = r580::NvChannelGroupAllocationParameters {
            engine_type,
            ..Default::default()
        };
        let rm = gpu.rm();
        g.h_group = rm
            .alloc(
                gpu.device(),
                r580::KEPLER_CHANNEL_GROUP_A,
                Some(p.as_mut_bytes()),
            )
            .map_err(at(Step::AllocGroup))?;
        g.undo.push(Undo::Free {
            parent: gpu.device(),
            object: g.h_group,
        });
        let mut c = r580::NvCtxshareAllocationParameters {
            h_va_space: space.handle(),
            flags,
            subctx_id: 0,
        };
        g.h_ctxshare = rm
            .alloc(
                g.h_group,
                r580::FERMI_CONTEXT_SHARE_A,
                Some(c.as_mut_bytes()),
            )
            .map_err(at(Step::AllocContextShare))?;
        g.undo.push(Undo::Free {
            parent: g.h_group,
            object: g.h_ctxshare,
        });
        Ok(g)
    }

    /// Whether its last channel went (and descheduled it): no channel may join it again.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }

    /// Sets the group's timeslice: how long its channels run, when another group has
    /// work, before the RM switches them out (at a block's end: docs/channels.md, "GPU
    /// time"). The RM rounds it down to what the hardware takes.
    ///
    /// # Errors
    /// [`NvrmError::Call`] (`Timeslice`).
    pub fn set_timeslice(&self, us: u64) -> Result<(), NvrmError> {
        let mut p = us.to_le_bytes();
        self.space
            .gpu()
            .rm()
            .control(self.h_group, r580::NVA06C_CTRL_CMD_SET_TIMESLICE, &mut p)
            .map_err(at(Step::Timeslice))
    }

    /// The group's handle.
    pub fn handle(&self) -> NvHandle {
        self.h_group
    }

    /// The engine its channels run on.
    pub fn engine(&self) -> GroupEngine {
        self.engine
    }

    /// The address space its channels run in.
    pub fn space(&self) -> &Arc<AddressSpace<R>> {
        &self.space
    }

    fn schedule(&self, enable: bool) -> Result<(), NvrmError> {
        if !enable {
            self.log_ctxsw_stats();
        }
        let gpu = self.space.gpu();
        let mut p = gpu.release().gpfifo_schedule(enable);
        let step = if enable {
            Step::Schedule
        } else {
            Step::Unschedule
        };
        gpu.rm()
            .control(
                self.h_group,
                r580::NVA06C_CTRL_CMD_GPFIFO_SCHEDULE,
                p.as_mut_bytes(),
            )
            .map_err(at(step))
    }

    /// Gives the group up after one of its channels faulted: from now on it counts as
    /// descheduled and retired without any RM call, and its channels close without
    /// waiting for their rings to drain. The RM's robust-channel recovery has already
    /// taken a faulted group off its runlist; a GPFIFO_SCHEDULE(off) of a group whose
    /// copy engine had faulted waited on that engine until the GSP's RPC timed out, and
    /// the GPU needed a reset (docs/hardware/nvidia-channels.md, "A faulted group is
    /// freed, not descheduled"). Freeing its channels and then the group is CUDA's own
    /// path after a fault: the RM preempts and tears down each in its free.
    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
        self.scheduled.store(false, Ordering::Release);
        self.retired.store(true, Ordering::Release);
    }

    /// Asks the RM, once, to preempt the group's compute work at the instruction level
    /// (CILP), as CUDA asks for its own groups: under the RM's default a running kernel
    /// beside another session's work could not be switched out to free its channels,
    /// and the RM ended it after about 4 s with Xid 109; with CILP it was freed in 58 ms
    /// (a block that spins for seconds beside another session is still ended so:
    /// docs/hardware/nvidia-channels.md, "Compute preemption"). Only GR0's groups; a
    /// refusal is the caller's to log: the group then runs as before. True when it
    /// asked now.
    ///
    /// # Errors
    /// [`NvrmError::Call`] (`PreemptionMode`).
    fn preempt_compute(&self) -> Result<bool, NvrmError> {
        if self.engine != GroupEngine::Graphics || self.preemption.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        let gpu = self.space.gpu();
        let mut p = r580::Nv2080CtrlGrSetCtxswPreemptionModeParams {
            flags: r580::NV2080_CTRL_GR_SET_CTXSW_PREEMPTION_MODE_FLAGS_CILP_SET,
            h_channel: self.h_group,
            cilp_preempt_mode: r580::NV2080_CTRL_SET_CTXSW_PREEMPTION_MODE_COMPUTE_CILP,
            ..Default::default()
        };
        gpu.rm()
            .control(
                gpu.subdevice(),
                r580::NV2080_CTRL_CMD_GR_SET_CTXSW_PREEMPTION_MODE,
                p.as_mut_bytes(),
            )
            .map(|()| true)
            .map_err(at(Step::PreemptionMode))
    }

    /// Logs (debug) how often the RM saved the group's GR context, and by which
    /// preemption (GR_GET_CTXSW_STATS): what shows whether its kernels were switched
    /// out mid-block (docs/hardware/nvidia-channels.md, "Compute preemption"). Read as
    /// the group is descheduled, while it still has its channels (once they were freed
    /// the RM answered NV_ERR_INVALID_ARGUMENT); GR0's groups that asked for preemption
    /// only, not a group given up after a fault, and only when debug is logged (one RM
    /// call more on the reclaim path).
    fn log_ctxsw_stats(&self) {
        if !tracing::enabled!(tracing::Level::DEBUG)
            || !self.preemption.load(Ordering::Acquire)
            || self.is_abandoned()
        {
            return;
        }
        let gpu = self.space.gpu();
        let mut p = r580::Nv2080CtrlGrGetCtxswStatsParams {
            h_channel: self.h_group,
            ..Default::default()
        };
        match gpu.rm().control(
            gpu.subdevice(),
            r580::NV2080_CTRL_CMD_GR_GET_CTXSW_STATS,
            p.as_mut_bytes(),
        ) {
            Ok(()) => tracing::debug!(
                saves = p.save_cnt,
                restores = p.restore_cnt,
                wfi = p.wfi_save_cnt,
                cta = p.cta_save_cnt,
                cilp = p.cilp_save_cnt,
                "a channel group's context switches"
            ),
            Err(e) => tracing::debug!(
                error = &e as &dyn std::error::Error,
                "a channel group's context switches not read"
            ),
        }
    }

    /// Whether [`ChannelGroup::abandon`] gave it up.
    pub fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Acquire)
    }

    /// Deschedules the group now, whatever channels it has: what reclaiming a client
    /// does first, so that none of its channels runs while the others are freed. A
    /// channel made afterwards schedules it again. An abandoned group is left alone.
    ///
    /// # Errors
    /// [`NvrmError::Call`] (`Unschedule`).
    pub fn stop(&self) -> Result<(), NvrmError> {
        if self.scheduled.swap(false, Ordering::AcqRel) {
            self.schedule(false)
        } else {
            Ok(())
        }
    }

    /// Frees the subcontext and the group.
    ///
    /// # Errors
    /// The first step that failed; the later ones still ran.
    pub fn close(mut self) -> Result<(), NvrmError> {
        let failed = self.space.unwind(&mut self.undo);
        first_of(failed, "a channel group")
    }
}

impl<R: Rm> Drop for ChannelGroup<R> {
    fn drop(&mut self) {
        for e in self.space.unwind(&mut self.undo) {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "freeing a channel group"
            );
        }
    }
}

fn ring_entries(entries: u64) -> Result<u32, NvrmError> {
    u32::try_from(entries)
        .ok()
        .filter(|n| n.is_power_of_two() && (2..=1 << 31).contains(n))
        .ok_or(NvrmError::RingSize { entries })
}

/// Where USERD starts after a ring of `n` entries (8 bytes each, 512-byte aligned).
pub fn userd_offset(n: u32) -> u64 {
    (u64::from(n) * 8).next_multiple_of(USERD_LEN)
}

/// The bytes a ring of `n` entries and its USERD take.
pub fn ring_len(n: u32) -> u64 {
    userd_offset(n) + USERD_LEN
}

/// Where the wake word of a ring of `n` entries in host memory lies: right past USERD,
/// inside the page USERD ends in (`ring_len` is a multiple of 512 and never of the
/// page, and host memory is whole pages, zeroed).
pub fn wake_offset(n: u32) -> u64 {
    ring_len(n)
}

/// Zeroes USERD at `offset` of a window and reads the last word back, so the stores
/// have landed before the RM makes the channel.
fn clear_userd<W: Window>(w: &W, offset: u64) -> std::io::Result<()> {
    let base = usize::try_from(offset).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    for i in (0..512).step_by(4) {
        w.write_u32(base + i, 0)?;
    }
    std::sync::atomic::fence(Ordering::SeqCst);
    w.read_u32(base + USERD_GP_PUT).map(drop)
}

/// What the RM wrote into a channel's error notifier (`NvNotification`, nvos.h): the
/// shared vocabulary's.
pub use rig_model::nv::ChannelFault;

/// Where a channel's ring and USERD live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Host memory (a sealed memfd): the GPU fetches across PCIe; the submitter's
    /// stores are plain cached ones.
    Host,
    /// GPU memory, written by the CPU through BAR1 with this caching: the GPU fetches
    /// locally; the submitter fences and reads back before each doorbell.
    Device(Caching),
}

/// A channel's ring and USERD, in one allocation.
#[derive(Debug)]
pub enum RingMem<R: Rm> {
    Host(HostMem<R>),
    Device(DeviceView<R>),
}

impl<R: Rm> RingMem<R> {
    /// The RM's handle of the memory.
    pub fn handle(&self) -> NvHandle {
        match self {
            Self::Host(m) => m.handle(),
            Self::Device(v) => v.mem().handle(),
        }
    }

    /// Where the GPU sees the ring.
    pub fn gpu_va(&self) -> u64 {
        match self {
            Self::Host(m) => m.gpu_va(),
            Self::Device(m) => m.gpu_va(),
        }
    }

    /// The host memory, if the ring is there.
    pub fn host(&self) -> Option<&HostMem<R>> {
        match self {
            Self::Host(m) => Some(m),
            Self::Device(_) => None,
        }
    }

    /// The GPU memory's view, if the ring is there.
    pub fn device(&self) -> Option<&DeviceView<R>> {
        match self {
            Self::Host(_) => None,
            Self::Device(m) => Some(m),
        }
    }

    fn read_u32(&self, offset: usize) -> std::io::Result<u32> {
        match self {
            Self::Host(m) => m.mapping().read_u32(offset),
            Self::Device(v) => v.mem().window().read_u32(offset),
        }
    }
}

/// A GPFIFO channel with its engine object, scheduled.
#[derive(Debug)]
pub struct Channel<R: Rm> {
    group: Arc<ChannelGroup<R>>,
    undo: Vec<Undo>,
    engine: Engine,
    entries: u32,
    userd: usize,
    h_channel: NvHandle,
    token: u32,
    /// Whether it counts among its group's channels.
    counted: bool,
    // Field order: freed after the channel objects (Drop), ring before notifier.
    gpfifo: RingMem<R>,
    notifier: HostMem<R>,
}

impl<R: Rm> Channel<R> {
    /// Makes a channel of `entries` ring entries on `engine` in `group` and schedules
    /// the group.
    ///
    /// # Errors
    /// [`NvrmError::RingSize`], those of [`HostMem::new`],
    /// or [`NvrmError::Call`] naming the step; what was made before is freed.
    pub fn new(
        group: &Arc<ChannelGroup<R>>,
        engine: Engine,
        entries: u64,
    ) -> Result<Self, NvrmError> {
        Self::placed(group, engine, entries, Placement::Host)
    }

    /// As [`Channel::new`], with the ring and USERD placed `at` (GPU memory made for
    /// this channel alone).
    ///
    /// # Errors
    /// As [`Channel::new`], and those of [`DeviceMem::new`].
    pub fn placed(
        group: &Arc<ChannelGroup<R>>,
        engine: Engine,
        entries: u64,
        at: Placement,
    ) -> Result<Self, NvrmError> {
        let n = ring_entries(entries)?;
        let space = &group.space;
        let len = ring_len(n);
        let notifier = HostMem::new(space, 4096)?;
        let ring = match at {
            Placement::Host => RingMem::Host(HostMem::new(space, len)?),
            Placement::Device(caching) => {
                let mem = Arc::new(DeviceMem::new(space.gpu(), len, caching)?);
                RingMem::Device(DeviceView::map(space, mem)?)
            }
        };
        Self::with_ring(group, engine, n, notifier, ring)
    }

    /// As [`Channel::new`], with the ring and USERD at the start of `mem` (GPU memory
    /// of at least [`ring_len`] bytes, which may hold more after them: a pushbuffer),
    /// mapped into the group's space for the channel's life. USERD is cleared first;
    /// the RM does not clear memory it is given.
    ///
    /// # Errors
    /// As [`Channel::new`]; [`NvrmError::HostMemSize`] for memory too short.
    pub fn in_device_mem(
        group: &Arc<ChannelGroup<R>>,
        engine: Engine,
        entries: u64,
        mem: Arc<DeviceMem<R>>,
    ) -> Result<Self, NvrmError> {
        let n = ring_entries(entries)?;
        if mem.len() < ring_len(n) {
            return Err(NvrmError::HostMemSize { len: mem.len() });
        }
        let notifier = HostMem::new(&group.space, 4096)?;
        let view = DeviceView::map(&group.space, mem)?;
        Self::with_ring(group, engine, n, notifier, RingMem::Device(view))
    }

    fn with_ring(
        group: &Arc<ChannelGroup<R>>,
        engine: Engine,
        n: u32,
        notifier: HostMem<R>,
        gpfifo: RingMem<R>,
    ) -> Result<Self, NvrmError> {
        let userd = userd_offset(n);
        if let RingMem::Device(v) = &gpfifo {
            clear_userd(v.mem().window(), userd).map_err(|source| NvrmError::Userd {
                h_channel: 0,
                source,
            })?;
        }
        let mut c = Self {
            group: Arc::clone(group),
            undo: Vec::new(),
            engine,
            entries: n,
            userd: usize::try_from(userd).expect("a ring of 2^31 entries fits usize"),
            h_channel: 0,
            token: 0,
            counted: false,
            gpfifo,
            notifier,
        };
        c.make()?;
        Ok(c)
    }

    fn make(&mut self) -> Result<(), NvrmError> {
        let rm = self.group.space.gpu().rm();
        let mut p = r580::NvChannelAllocParams {
            h_object_error: self.notifier.handle(),
            h_object_buffer: self.gpfifo.handle(),
            gp_fifo_offset: self.gpfifo.gpu_va(),
            gp_fifo_entries: self.entries,
            h_context_share: self.group.h_ctxshare,
            ..Default::default()
        };
        p.h_userd_memory[0] = self.gpfifo.handle();
        p.userd_offset[0] = self.userd as u64;
        let group = self.group.h_group;
        self.h_channel = rm
            .alloc(group, GENERATION.host, Some(p.as_mut_bytes()))
            .map_err(at(Step::AllocChannel))?;
        self.undo.push(Undo::Free {
            parent: group,
            object: self.h_channel,
        });
        let h_engine = rm
            .alloc(self.h_channel, GENERATION.class(self.engine), None)
            .map_err(at(Step::AllocEngine))?;
        self.undo.push(Undo::Free {
            parent: self.h_channel,
            object: h_engine,
        });
        // With the group's first engine object its GR context exists.
        match self.group.preempt_compute() {
            Ok(true) => self.log_compute_preemption(),
            Ok(false) => {}
            // Once a rigd: a GPU whose RM refuses it refuses it for every group.
            Err(e) if !PREEMPTION_REFUSED.swap(true, Ordering::Relaxed) => tracing::warn!(
                error = &e as &dyn std::error::Error,
                "channel groups keep the RM's default compute preemption"
            ),
            Err(_) => {}
        }
        let mut t = r580::Nvc36fCtrlCmdGpfifoGetWorkSubmitTokenParams::default();
        rm.control(
            self.h_channel,
            r580::NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN,
            t.as_mut_bytes(),
        )
        .map_err(at(Step::WorkSubmitToken))?;
        self.token = t.work_submit_token;
        // A group runs when scheduled, all its channels together: the first channel
        // schedules it, later ones join it running (as CUDA's and tinygrad's do).
        self.group.channels.fetch_add(1, Ordering::AcqRel);
        self.counted = true;
        if !self.group.scheduled.load(Ordering::Acquire) {
            self.group.schedule(true)?;
            self.group.scheduled.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Logs (debug) the compute preemption the RM says this channel's context has
    /// (GR_GET_CTXSW_MODES): what the mode asked for took.
    fn log_compute_preemption(&self) {
        let gpu = self.group.space.gpu();
        let mut p = r580::Nv2080CtrlGrGetCtxswModesParams {
            h_channel: self.h_channel,
            ..Default::default()
        };
        match gpu.rm().control(
            gpu.subdevice(),
            r580::NV2080_CTRL_CMD_GR_GET_CTXSW_MODES,
            p.as_mut_bytes(),
        ) {
            Ok(()) => tracing::debug!(
                cilp = p.cilp_preempt_mode,
                gfxp = p.gfxp_preempt_mode,
                "compute preemption of a new group (0 WFI, 1 CTA, 2 CILP)"
            ),
            Err(e) => tracing::debug!(
                error = &e as &dyn std::error::Error,
                "compute preemption of a new group not read"
            ),
        }
    }

    /// The channel's handle.
    pub fn handle(&self) -> NvHandle {
        self.h_channel
    }

    /// The engine object's class.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The group it runs in.
    pub fn group(&self) -> &Arc<ChannelGroup<R>> {
        &self.group
    }

    /// The error notifier (rigd's; a client gets a read-only view).
    pub fn notifier(&self) -> &HostMem<R> {
        &self.notifier
    }

    /// Ring entries.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// The work submit token the doorbell takes.
    pub fn token(&self) -> u32 {
        self.token
    }

    /// The ring (at offset 0) and USERD (at [`Channel::userd_offset`]).
    pub fn gpfifo(&self) -> &RingMem<R> {
        &self.gpfifo
    }

    /// Where USERD starts in [`Channel::gpfifo`].
    pub fn userd_offset(&self) -> usize {
        self.userd
    }

    /// With the ring in host memory, that memory and the wake word's offset in it
    /// ([`wake_offset`]); none in GPU memory, where rigd would read it across BAR1.
    pub fn wake_word(&self) -> Option<(&HostMem<R>, usize)> {
        let host = self.gpfifo.host()?;
        let at = wake_offset(self.entries);
        let fits = at + 8 <= host.len();
        fits.then(|| usize::try_from(at).ok().map(|at| (host, at)))?
    }

    /// Rings the doorbell with this channel's token: the GPU reads GP_PUT. Publish
    /// GP_PUT (after a store fence over the entries) first.
    pub fn ring_doorbell(&self) {
        self.group.space.gpu().usermode().ring(self.token);
    }

    /// GP_GET and GP_PUT as USERD holds them now.
    ///
    /// # Errors
    /// [`NvrmError::Userd`] (cannot happen for a mapping this channel sized).
    pub fn gp_get_put(&self) -> Result<(u32, u32), NvrmError> {
        let userd = |source| NvrmError::Userd {
            h_channel: self.h_channel,
            source,
        };
        let m = &self.gpfifo;
        let get = m.read_u32(self.userd + USERD_GP_GET).map_err(userd)?;
        let put = m.read_u32(self.userd + USERD_GP_PUT).map_err(userd)?;
        Ok((get, put))
    }

    /// The error the RM posted for this channel, if any (a zero notifier is none).
    pub fn fault(&self) -> Option<ChannelFault> {
        let m = self.notifier.mapping();
        let time_ns = m.read_u64(0).ok()?;
        let words = m.read_u64(8).ok()?;
        let f = ChannelFault {
            time_ns,
            info32: (words & 0xffff_ffff) as u32,
            info16: ((words >> 32) & 0xffff) as u16,
            status: (words >> 48) as u16,
        };
        (time_ns != 0 || words != 0).then_some(f)
    }

    /// Waits until GP_GET == GP_PUT, up to [`DRAIN_TIMEOUT`].
    fn drain(&self) -> Result<(), NvrmError> {
        let start = Instant::now();
        loop {
            let (get, put) = self.gp_get_put()?;
            if get == put {
                return Ok(());
            }
            if start.elapsed() >= DRAIN_TIMEOUT {
                return Err(NvrmError::Drain {
                    h_channel: self.h_channel,
                    get,
                    put,
                    waited_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                });
            }
            thread::sleep(Duration::from_micros(100));
        }
    }

    fn teardown(&mut self) -> Vec<NvrmError> {
        let mut failed = Vec::new();
        // The last channel out deschedules the group; one leaving a group that still
        // runs others only waits for its own ring to drain.
        if std::mem::take(&mut self.counted)
            && self.group.channels.fetch_sub(1, Ordering::AcqRel) == 1
            && self.group.scheduled.swap(false, Ordering::AcqRel)
        {
            self.group.retired.store(true, Ordering::Release);
            if let Err(e) = self.group.schedule(false) {
                failed.push(e);
            }
        }
        // An abandoned group's rings may never drain: the engine that faulted stopped
        // fetching. The RM preempts the channel in its free.
        if self.h_channel != 0
            && !self.undo.is_empty()
            && !self.group.is_abandoned()
            && let Err(e) = self.drain()
        {
            failed.push(e);
        }
        failed.extend(self.group.space.unwind(&mut self.undo));
        failed
    }

    /// Deschedules, drains and frees the channel (its memory drops with it).
    ///
    /// # Errors
    /// The first step that failed; the later ones still ran.
    pub fn close(mut self) -> Result<(), NvrmError> {
        let failed = self.teardown();
        first_of(failed, "a channel")
    }
}

impl<R: Rm> Drop for Channel<R> {
    fn drop(&mut self) {
        for e in self.teardown() {
            tracing::warn!(error = &e as &dyn std::error::Error, "freeing a channel");
        }
    }
}
