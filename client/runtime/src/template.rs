//! A launch template: everything about launching one kernel in one shape that does
//! not change between launches, built once — the QMD (release slot 0 aimed at the
//! channel's semaphore), constant bank 0 with the launch words — and a ring of slots
//! in the channel's arena, each holding its own QMD, bank 0 and the words that launch
//! it (a WFI, then SEND_PCAS for its QMD). A launch patches the slot it reuses in
//! place: the release payload (one 64-bit store) and the parameter words of bank 0;
//! only a slot's first launch writes it whole.
//!
//! Flow: `compute` finds or builds the template for (kernel, grid, block, dynamic
//! shared) → [`Template::lay`] checks and lays the arguments → [`Template::write_slot`]
//! writes through the channel's `write_arena` and returns where the slot's launch words
//! are → the channel queues them as one ring entry with the launch's value
//! (`Channel::push_segment_released`), or pushes copies of them into its pushbuffer.
//!
//! Why the words live in the slot: every store a launch makes through BAR1 costs the
//! host time (docs/compute.md, "Host time per launch"), and a slot's SEND_PCAS words
//! never change, so a launch from its slot stores its payload and one ring entry, not
//! four to six pushbuffer words as well.
//!
//! Invariant: a slot is rewritten only after the value of the launch that last used it
//! has landed (`compute` waits for [`Template::busy`] first), so the GPU never reads a
//! slot while it changes. Reference: the QMD release as measured on the H200
//! (docs/hardware/nvidia-compute.md, "Completion").

use rig_model::addr::GpuVa;
use rig_nv::method::compute::{PcasAction, send_pcas};

use crate::{
    ComputeError,
    cbank0::{self, Cbank0Error},
    launch::{Dim3, Shape},
    load::Kernel,
    params::{Arg, lay},
    qmd::{self, ConstantBuffer, Dependent, Launch, Qmd, QmdVersion, Release, ReleaseKind},
    window::Windows,
};

/// Words of a slot's launch block: a WFI (2), then SEND_PCAS for its QMD (4). A launch
/// behind work in flight runs all six; one with nothing in flight the last four.
const LAUNCH_WORDS: u32 = 6;
/// Bytes of the block's WFI, which a launch with nothing in flight skips.
const WFI_BYTES: u64 = 8;
/// Bytes of one grid workspace (cooperative_groups' `grid_workspace`: a u32 size, the
/// u32 barrier; CUDA's are 16 bytes, docs/hardware/nvidia-compute.md, "Cooperative
/// launches").
pub const WORKSPACE: u64 = 16;

/// What a cooperative launch's template needs (`compute`): the blocks each SM must hold
/// at once (0: an ordinary launch) and where the channel's grid workspaces start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cooperative {
    pub co_resident: u32,
    pub workspaces: Option<GpuVa>,
}

/// What identifies a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub kernel: u64,
    pub grid: Dim3,
    pub block: Dim3,
    pub dynamic_shared: u32,
    /// A cooperative launch: every block resident at once, with a grid workspace.
    pub cooperative: bool,
}

/// What a template needs of its channel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub arena_va: GpuVa,
    pub semaphore: GpuVa,
    pub windows: Windows,
    pub local_capacity: u64,
    /// SEND_SIGNALING_PCAS2_B's action.
    pub pcas: PcasAction,
    /// The QMD version the channel's compute class reads.
    pub qmd: QmdVersion,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// The value of the last launch from it (0: none yet).
    value: u64,
    /// Whether its QMD and bank 0 are written whole.
    written: bool,
    /// Whether its QMD in the arena chains a next one (DEPENDENT_QMD0), to be cleared
    /// before the slot launches again.
    chained: bool,
    /// SEND_PCAS_A and SEND_SIGNALING_PCAS2_B for its QMD.
    pcas: [u32; 4],
}

/// Where a slot's launch words are, once [`Template::write_slot`] wrote it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotWords {
    /// SEND_PCAS_A and SEND_SIGNALING_PCAS2_B for the slot's QMD.
    pub pcas: [u32; 4],
    /// The GPU address of the slot's launch block: WFI, then those four words.
    pub block: GpuVa,
}

impl SlotWords {
    /// The segment that launches the slot: (GPU address, words), with the WFI or
    /// without.
    pub fn segment(&self, wfi: bool) -> (GpuVa, u32) {
        if wfi {
            (self.block, LAUNCH_WORDS)
        } else {
            (GpuVa(self.block.get() + WFI_BYTES), LAUNCH_WORDS - 2)
        }
    }
}

/// A launch template and its slots.
#[derive(Debug)]
pub(crate) struct Template {
    pub key: Key,
    /// Holds the module (its code stays mapped while the template can launch it).
    _kernel: Kernel,
    params: Vec<rig_cubin::Param>,
    arena_va: GpuVa,
    pcas: PcasAction,
    qmd: Qmd,
    /// The QMD's DEPENDENT_QMD0 words, which a chain rewrites in a slot in place.
    dependent: Dependent,
    bank0: Vec<u64>,
    /// The first word of bank 0 that holds parameter bytes, and how many do.
    params_word: usize,
    params_words: usize,
    /// Bytes of that first word before the parameter base.
    params_skip: usize,
    param_bytes: usize,
    /// The parameter words' bytes as the last `lay` left them.
    scratch: Vec<u8>,
    payload_word: u64,
    /// The QMD's size: bank 0 follows it in a slot.
    qmd_bytes: u64,
    /// Where its slots start in the arena, and their stride.
    pub region: u64,
    stride: u64,
    /// A slot's launch block, from the slot's start.
    launch_block: u64,
    slots: Vec<Slot>,
    next: usize,
    /// The channel's launch counter when it was last used.
    pub used: u64,
    /// A cooperative template's: where the channel's grid workspaces start.
    workspaces: Option<GpuVa>,
}

/// Where a slot of `kernel` keeps its launch block: after the QMD and bank 0, on a
/// line of its own.
fn launch_block(qmd: QmdVersion, kernel: &rig_cubin::Kernel) -> u64 {
    let bank0 = (kernel.bank0_template().len() as u64).next_multiple_of(16);
    (qmd.size() as u64 + bank0).next_multiple_of(64)
}

/// Bytes one slot of `kernel` takes: the QMD, bank 0 and the launch block, to the
/// arena's granule.
pub(crate) fn stride(qmd: QmdVersion, kernel: &rig_cubin::Kernel) -> u64 {
    (launch_block(qmd, kernel) + 64).next_multiple_of(crate::arena::GRANULE)
}

impl Template {
    /// The template for `kernel` in `shape` at arena offset `region` with `slots`
    /// slots (the caller took `stride × slots` bytes there).
    ///
    /// # Errors
    /// [`ComputeError::Params`] (a parameter base below sm_90's), [`ComputeError::Qmd`]
    /// (more local memory than the channel holds, an address a field cannot take).
    /// `coop` says whether it is a cooperative launch's (`Cooperative::co_resident`
    /// above 0, with its workspaces).
    pub(crate) fn build(
        spec: Spec,
        kernel: &Kernel,
        shape: Shape,
        coop: Cooperative,
        region: u64,
        slots: usize,
    ) -> Result<Self, ComputeError> {
        let co_resident = coop.co_resident;
        let info = kernel.info();
        let zeros: Vec<Vec<u8>> = info
            .params()
            .iter()
            .map(|p| vec![0; usize::try_from(p.size).unwrap_or(0)])
            .collect();
        let args: Vec<&[u8]> = zeros.iter().map(Vec::as_slice).collect();
        let bank0 = cbank0::build(info, &shape, &spec.windows, &args)?;
        let mut banks = vec![ConstantBuffer {
            index: 0,
            addr: GpuVa(spec.arena_va.get() + region + spec.qmd.size() as u64),
            size: bank0.size(),
        }];
        banks.extend(kernel.module.banks.iter().copied());
        if let Some(own) = kernel.module.kernel_banks.get(kernel.index) {
            banks.extend(own.iter().copied());
        }
        let qmd = qmd::build(
            spec.qmd,
            &Launch {
                kernel: info,
                shape: &shape,
                program: kernel.entry,
                banks: &banks,
                release: Some(Release {
                    addr: spec.semaphore,
                    payload: 0,
                    kind: ReleaseKind::DoubleWord,
                }),
                local_capacity: spec.local_capacity,
                co_resident,
            },
        )?;
        let base = usize::try_from(info.param_base()).unwrap_or(usize::MAX);
        let param_bytes = usize::try_from(info.param_bytes()).unwrap_or(usize::MAX);
        let (params_word, params_skip) = (base / 8, base % 8);
        let params_words = (params_skip + param_bytes).div_ceil(8);
        let bank0 = to_u64s(bank0.bytes());
        let scratch: Vec<u8> = bank0
            .get(params_word..params_word + params_words)
            .ok_or(Cbank0Error::Base {
                base: info.param_base(),
            })?
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let payload_word = qmd
            .release_payload_word()
            .and_then(|w| u64::try_from(w).ok())
            .ok_or(ComputeError::Unpatchable { version: spec.qmd })?;
        Ok(Self {
            key: Key {
                kernel: kernel.id,
                grid: shape.grid(),
                block: shape.block(),
                dynamic_shared: shape.dynamic_shared(),
                cooperative: co_resident > 0,
            },
            workspaces: coop.workspaces.filter(|_| co_resident > 0),
            _kernel: kernel.clone(),
            params: info.params().to_vec(),
            arena_va: spec.arena_va,
            pcas: spec.pcas,
            dependent: qmd.dependent(),
            qmd,
            bank0,
            params_word,
            params_words,
            params_skip,
            param_bytes,
            scratch,
            payload_word,
            qmd_bytes: spec.qmd.size() as u64,
            region,
            stride: stride(spec.qmd, info),
            launch_block: launch_block(spec.qmd, info),
            slots: vec![
                Slot {
                    value: 0,
                    written: false,
                    chained: false,
                    pcas: [0; 4],
                };
                slots.max(1)
            ],
            next: 0,
            used: 0,
        })
    }

    /// Its slots: launches of it in flight at once.
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Bytes it takes in the arena.
    pub(crate) fn bytes(&self) -> u64 {
        self.stride * self.slots.len() as u64
    }

    /// The largest value any of its slots waits on: once it lands the template is
    /// idle.
    pub(crate) fn last_value(&self) -> u64 {
        self.slots.iter().map(|s| s.value).max().unwrap_or(0)
    }

    /// Checks `args` against the kernel's parameters and lays them out for the next
    /// launch. Nothing is written to the arena.
    ///
    /// # Errors
    /// [`Cbank0Error::Count`] or [`Cbank0Error::Size`].
    pub(crate) fn lay(&mut self, args: &[Arg<'_>]) -> Result<(), Cbank0Error> {
        let (skip, n) = (self.params_skip, self.param_bytes);
        lay(&self.params, args, &mut self.scratch[skip..skip + n])
    }

    /// Takes `params`, a launch's parameter bytes already checked and laid out
    /// (`graph`: exactly the kernel's parameter bytes), for the next launch.
    pub(crate) fn lay_bytes(&mut self, params: &[u8]) {
        let (skip, n) = (self.params_skip, self.param_bytes);
        self.scratch[skip..skip + n].copy_from_slice(params);
    }

    /// The value the next slot's last launch released, which must land before it is
    /// rewritten (0: never used).
    pub(crate) fn busy(&self) -> u64 {
        self.slots[self.next].value
    }

    /// Writes the next slot for a launch releasing `value` (its QMD, bank 0 and launch
    /// block whole the first time, else the payload and the parameter words) into
    /// `arena`, and returns its launch words and where they are. The slot is taken by
    /// [`Template::commit`] once the launch is pushed.
    ///
    /// # Errors
    /// The arena's, or [`ComputeError::Qmd`] / [`ComputeError::Words`] for a slot
    /// address a field cannot take (caught when the arena was placed).
    pub(crate) fn write_slot(
        &mut self,
        value: u64,
        arena: &impl ArenaWrite,
    ) -> Result<SlotWords, ComputeError> {
        let at = self.region + self.next as u64 * self.stride;
        let block = GpuVa(self.arena_va.get() + at + self.launch_block);
        if self.slots[self.next].chained {
            self.chain(self.next, None, arena)?;
        }
        let slot = &mut self.slots[self.next];
        if slot.written {
            arena.words(at + 8 * self.payload_word, &[value])?;
            if self.params_words > 0 {
                let pw = at + self.qmd_bytes + 8 * self.params_word as u64;
                arena.bytes(pw, &self.scratch)?;
            }
            return Ok(SlotWords {
                pcas: slot.pcas,
                block,
            });
        }
        let qmd_va = GpuVa(self.arena_va.get() + at);
        let mut q = self.qmd.clone();
        q.set_bank_address(0, GpuVa(qmd_va.get() + self.qmd_bytes))?;
        q.set_release_payload(value)?;
        arena.words(at, &q.to_u64s())?;
        let mut bank0 = self.bank0.clone();
        let params = to_u64s(&self.scratch);
        bank0[self.params_word..self.params_word + self.params_words].copy_from_slice(&params);
        if let Some(base) = self.workspaces {
            // The workspace of the granule this slot starts at: no other slot's. A grid
            // that completes its syncs leaves the barrier's count where it found it
            // (each sync adds 2^31), and one that faults ends the session's channels,
            // so it is zeroed once, when the channel got it.
            let ws = (base.get() + at / crate::arena::GRANULE * WORKSPACE).to_le_bytes();
            let (lo, hi) = ws.split_at(4);
            set_half(&mut bank0, cbank0::GRID_WORKSPACE_HI, hi);
            set_half(&mut bank0, cbank0::GRID_WORKSPACE_LO, lo);
        }
        arena.words(at + self.qmd_bytes, &bank0)?;
        let w = send_pcas(qmd_va, self.pcas)?;
        let [a, b] = rig_nv::method::wfi();
        arena.words(
            at + self.launch_block,
            &[pair(a, b), pair(w[0], w[1]), pair(w[2], w[3])],
        )?;
        slot.pcas = w;
        slot.written = true;
        Ok(SlotWords { pcas: w, block })
    }

    /// The slot [`Template::write_slot`] writes next.
    pub(crate) fn next_slot(&self) -> usize {
        self.next
    }

    /// Where slot `slot`'s QMD is.
    pub(crate) fn qmd_va(&self, slot: usize) -> GpuVa {
        GpuVa(self.arena_va.get() + self.region + slot as u64 * self.stride)
    }

    /// Chains the QMD at `next` behind slot `slot`'s (`Some`), or clears its chain
    /// (`None`): only the two 64-bit words of the slot's QMD that hold DEPENDENT_QMD0
    /// are rewritten (rig-nv's `Dependent`; a launch patches nothing they hold). The
    /// slot must not have reached the GPU since (a queued tail, or one whose launch
    /// landed).
    ///
    /// # Errors
    /// [`ComputeError::Qmd`] for a `next` the field cannot hold; the arena's.
    pub(crate) fn chain(
        &mut self,
        slot: usize,
        next: Option<GpuVa>,
        arena: &impl ArenaWrite,
    ) -> Result<(), ComputeError> {
        let at = self.region + slot as u64 * self.stride;
        let words = self.dependent.words(next)?;
        match self.dependent.at() {
            [a, b] if b == a + 1 => arena.words(at + 8 * a as u64, &words)?,
            ats => {
                for (a, w) in ats.into_iter().zip(words) {
                    arena.words(at + 8 * a as u64, &[w])?;
                }
            }
        }
        self.slots[slot].chained = next.is_some();
        Ok(())
    }

    /// Marks the slot [`Template::write_slot`] wrote as launched with `value`, and
    /// moves to the next.
    pub(crate) fn commit(&mut self, value: u64) {
        self.slots[self.next].value = value;
        self.next = (self.next + 1) % self.slots.len();
    }
}

/// Where a template's slots are written: the compute channel's arena.
pub(crate) trait ArenaWrite {
    /// Writes `words` at arena byte `at`.
    fn words(&self, at: u64, words: &[u64]) -> Result<(), ComputeError>;
    /// Writes `bytes` (whole 8-byte words) at arena byte `at`.
    fn bytes(&self, at: u64, bytes: &[u8]) -> Result<(), ComputeError>;
}

impl ArenaWrite for rig_client::channel::Channel {
    fn words(&self, at: u64, words: &[u64]) -> Result<(), ComputeError> {
        Ok(self.write_arena(at, words)?)
    }

    fn bytes(&self, at: u64, bytes: &[u8]) -> Result<(), ComputeError> {
        Ok(self.write_arena_bytes(at, bytes)?)
    }
}

/// Sets the 4 bytes at byte `at` (4-aligned) of `words` to `value`'s, in memory order.
fn set_half(words: &mut [u64], at: usize, value: &[u8]) {
    let mut w = words[at / 8].to_le_bytes();
    w[at % 8..at % 8 + 4].copy_from_slice(value);
    words[at / 8] = u64::from_le_bytes(w);
}

/// Two words as the GPU reads them from one 64-bit little-endian store.
fn pair(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

fn to_u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect()
}
