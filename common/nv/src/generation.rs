//! GPU generations: which host, copy and compute classes a generation's channels use,
//! which QMD version its compute class reads, and the facts of its SMs that a launch
//! needs. One constant per generation ([`HOPPER`], [`BLACKWELL`]); rigd allocates the
//! classes its GPU lists, rig-client binds them with SET_OBJECT, rig-runtime builds the
//! QMD version.
//!
//! A new generation: vendor its class headers into `headers/`, regenerate `class`, add a
//! QMD version to `qmd` if it has one, add its constant here with the tests below
//! (which methods rig sends are unchanged, what moved). docs/hardware/nvidia-compute.md
//! ("QMD versions") says what was checked on which GPU.
//!
//! Facts: Hopper (GH100: H100, H200) is what rig runs on (docs/h200.md). Blackwell's
//! classes and QMD are taken from the headers alone: its compute, copy and host classes
//! keep every method offset and field rig sends (the tests compare them name by name),
//! USERD keeps GP_PUT at 0x8c but no longer names GP_GET, and QMD V05_00 moves almost
//! every field.

use rig_model::nv::Engine;

use crate::class::{
    clc8b5::HOPPER_DMA_COPY_A, clc9b5::BLACKWELL_DMA_COPY_A, clc86f::HOPPER_CHANNEL_GPFIFO_A,
    clc96f::BLACKWELL_CHANNEL_GPFIFO_A, clcbc0::HOPPER_COMPUTE_A, clcdc0::BLACKWELL_COMPUTE_A,
};
use crate::qmd::QmdVersion;

/// One GPU generation's classes and SM facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation {
    /// Its name.
    pub name: &'static str,
    /// The host class: the channel itself (GPFIFO).
    pub host: u32,
    /// The copy engine's class.
    pub copy: u32,
    /// The compute class.
    pub compute: u32,
    /// The QMD version the compute class reads.
    pub qmd: QmdVersion,
    /// The SM architecture its cubins are built for (90: `sm_90`), as a cubin's
    /// `e_flags` name it.
    pub sm: u32,
    /// Whether the PBDMA writes GP_GET into USERD (`gpfifo::USERD_GP_GET`).
    pub userd_gp_get: bool,
}

/// Hopper: GH100 (H100, H200).
pub const HOPPER: Generation = Generation {
    name: "Hopper",
    host: HOPPER_CHANNEL_GPFIFO_A,
    copy: HOPPER_DMA_COPY_A,
    compute: HOPPER_COMPUTE_A,
    qmd: QmdVersion::V04,
    sm: 90,
    userd_gp_get: true,
};

/// Blackwell: GB100 (B100, B200), from the headers; never run.
pub const BLACKWELL: Generation = Generation {
    name: "Blackwell",
    host: BLACKWELL_CHANNEL_GPFIFO_A,
    copy: BLACKWELL_DMA_COPY_A,
    compute: BLACKWELL_COMPUTE_A,
    qmd: QmdVersion::V05,
    sm: 100,
    userd_gp_get: false,
};

/// Every generation rig knows, newest last.
pub const ALL: [Generation; 2] = [HOPPER, BLACKWELL];

impl Generation {
    /// The engine object's class for `engine`.
    pub const fn class(&self, engine: Engine) -> u32 {
        match engine {
            Engine::Copy => self.copy,
            Engine::Compute => self.compute,
        }
    }

    /// The generation whose compute class is `class`.
    pub fn for_compute_class(class: u32) -> Option<Generation> {
        ALL.into_iter().find(|g| g.compute == class)
    }

    /// The newest generation whose host, copy and compute classes all pass `has` (a
    /// GPU's class list).
    pub fn for_classes(has: impl Fn(u32) -> bool) -> Option<Generation> {
        ALL.into_iter()
            .rev()
            .find(|g| has(g.host) && has(g.copy) && has(g.compute))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::{clc8b5, clc9b5, clc86f, clc96f, clcbc0, clcdc0};
    use crate::field::Field;

    #[test]
    fn blackwell_classes_take_every_method_rig_sends_unchanged() {
        // The driver's clc96f.h names SET_OBJECT and the semaphore methods but not WFI,
        // which rig sends at C56F's offset on both (clc86f.h names it there too).
        let offsets: [(u32, u32); 14] = [
            (clc86f::NVC86F_SET_OBJECT, clc96f::NVC96F_SET_OBJECT),
            (clc86f::NVC86F_SEM_ADDR_LO, clc96f::NVC96F_SEM_ADDR_LO),
            (clc86f::NVC86F_SEM_EXECUTE, clc96f::NVC96F_SEM_EXECUTE),
            (
                clc8b5::NVC8B5_SET_SEMAPHORE_A,
                clc9b5::NVC9B5_SET_SEMAPHORE_A,
            ),
            (clc8b5::NVC8B5_LAUNCH_DMA, clc9b5::NVC9B5_LAUNCH_DMA),
            (
                clc8b5::NVC8B5_OFFSET_IN_UPPER,
                clc9b5::NVC9B5_OFFSET_IN_UPPER,
            ),
            (clc8b5::NVC8B5_LINE_LENGTH_IN, clc9b5::NVC9B5_LINE_LENGTH_IN),
            (
                clc8b5::NVC8B5_SET_REMAP_CONST_B,
                clc9b5::NVC9B5_SET_REMAP_CONST_B,
            ),
            (clcbc0::NVCBC0_SEND_PCAS_A, clcdc0::NVCDC0_SEND_PCAS_A),
            (
                clcbc0::NVCBC0_SEND_SIGNALING_PCAS2_B,
                clcdc0::NVCDC0_SEND_SIGNALING_PCAS2_B,
            ),
            (
                clcbc0::NVCBC0_SET_SHADER_LOCAL_MEMORY_A,
                clcdc0::NVCDC0_SET_SHADER_LOCAL_MEMORY_A,
            ),
            (
                clcbc0::NVCBC0_SET_SHADER_SHARED_MEMORY_WINDOW_A,
                clcdc0::NVCDC0_SET_SHADER_SHARED_MEMORY_WINDOW_A,
            ),
            (
                clcbc0::NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI,
                clcdc0::NVCDC0_INVALIDATE_SHADER_CACHES_NO_WFI,
            ),
            (
                clcbc0::NVCBC0_SET_REPORT_SEMAPHORE_A,
                clcdc0::NVCDC0_SET_REPORT_SEMAPHORE_A,
            ),
        ];
        for (hopper, blackwell) in offsets {
            assert_eq!(hopper, blackwell, "{hopper:#x}");
        }
        let fields: [(Field, Field); 6] = [
            (
                clc86f::NVC86F_SEM_EXECUTE_OPERATION,
                clc96f::NVC96F_SEM_EXECUTE_OPERATION,
            ),
            (
                clc86f::NVC86F_SEM_EXECUTE_PAYLOAD_SIZE,
                clc96f::NVC96F_SEM_EXECUTE_PAYLOAD_SIZE,
            ),
            (
                clc86f::NVC86F_GP_ENTRY1_LENGTH,
                clc96f::NVC96F_GP_ENTRY1_LENGTH,
            ),
            (
                clc8b5::NVC8B5_LAUNCH_DMA_SEMAPHORE_TYPE,
                clc9b5::NVC9B5_LAUNCH_DMA_SEMAPHORE_TYPE,
            ),
            (
                clc8b5::NVC8B5_LAUNCH_DMA_REMAP_ENABLE,
                clc9b5::NVC9B5_LAUNCH_DMA_REMAP_ENABLE,
            ),
            (
                clcbc0::NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT,
                clcdc0::NVCDC0_INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT,
            ),
        ];
        for (hopper, blackwell) in fields {
            assert_eq!(hopper, blackwell);
        }
    }

    #[test]
    fn blackwell_userd_keeps_gp_put_and_drops_gp_get() {
        assert_eq!(clc96f::Nvc96fControl::GPPut, clc86f::Nvc86fControl::GPPut);
        assert_eq!(clc86f::Nvc86fControl::GPGet, crate::gpfifo::USERD_GP_GET);
        assert_eq!(ALL.map(|g| g.userd_gp_get), [true, false]);
    }

    #[test]
    fn a_gpu_gets_the_newest_generation_whose_classes_it_lists() {
        let hopper_gpu = [HOPPER.host, HOPPER.copy, HOPPER.compute, 0x9067];
        assert_eq!(
            Generation::for_classes(|c| hopper_gpu.contains(&c)),
            Some(HOPPER)
        );
        let both = [
            HOPPER.compute,
            BLACKWELL.host,
            BLACKWELL.copy,
            BLACKWELL.compute,
        ];
        assert_eq!(
            Generation::for_classes(|c| both.contains(&c)),
            Some(BLACKWELL)
        );
        assert_eq!(Generation::for_classes(|c| c == HOPPER.compute), None);
        assert_eq!(Generation::for_compute_class(0xcdc0), Some(BLACKWELL));
        assert_eq!(HOPPER.class(Engine::Copy), 0xc8b5);
        assert_eq!(HOPPER.class(Engine::Compute), 0xcbc0);
        for g in ALL {
            assert_eq!(crate::qmd::for_class(g.compute), Ok(g.qmd));
        }
    }
}
