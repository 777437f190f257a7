//! What the NVIDIA RM writes into a channel's error notifier: `info32` is one of the
//! `ROBUST_CHANNEL_*` codes of `src/common/sdk/nvidia/inc/nverror.h`
//! (open-gpu-kernel-modules 580), the same numbers the kernel log calls Xids. Shared by
//! rigd (its log and `rigctl channels`) and rig-client (a channel's typed error).

/// The code's name and what it means, for the codes a lent channel can end with.
pub fn robust_channel_reason(info32: u32) -> &'static str {
    match info32 {
        8 => "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT (the channel stopped making progress)",
        13 => "ROBUST_CHANNEL_GR_EXCEPTION (the compute engine raised an exception)",
        14 => "ROBUST_CHANNEL_FAKE_ERROR (an error injected on purpose)",
        31 => {
            "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT (an MMU fault: an address not mapped in the channel's GPU address space)"
        }
        32 => {
            "ROBUST_CHANNEL_PBDMA_ERROR (the pushbuffer or ring held something the channel cannot run)"
        }
        39..=41 => "ROBUST_CHANNEL_CEn_ERROR (the copy engine raised an error)",
        43 => "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR (the channel was reset)",
        44 => "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW (a fault while switching contexts)",
        45 => {
            "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL (the channel was removed, e.g. when another channel of its group faulted)"
        }
        46 => "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR (the GPU timed out)",
        48 => "ROBUST_CHANNEL_GPU_ECC_DBE (an uncorrectable ECC error)",
        79 => "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
        94 => "ROBUST_CHANNEL_CONTAINED_ERROR (a contained memory error)",
        95 => "ROBUST_CHANNEL_UNCONTAINED_ERROR (an uncontained memory error)",
        _ => "a ROBUST_CHANNEL code rig does not name (see nverror.h)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mmu_fault_is_named_and_unknown_codes_point_at_the_header() {
        assert!(robust_channel_reason(31).starts_with("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT"));
        assert!(robust_channel_reason(40).contains("copy engine"));
        assert!(robust_channel_reason(12345).contains("nverror.h"));
    }
}
