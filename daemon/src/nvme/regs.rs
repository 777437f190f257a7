//! NVMe controller registers (BAR0): offsets, the fields rig reads and writes, and the
//! doorbell arithmetic. Pure decoding; the accesses are `nvme::Regs`'.
//!
//! Names follow the NVMe Base Specification 1.4, §3.1 "Register Definition" (CAP, VS,
//! CC, CSTS, AQA, ASQ, ACQ; SQyTDBL and CQyHDBL at 1000h).

use std::time::Duration;

/// Controller Capabilities (64 bits).
pub const NVME_REG_CAP: u64 = 0x00;
/// Version (32 bits).
pub const NVME_REG_VS: u64 = 0x08;
/// Controller Configuration (32 bits).
pub const NVME_REG_CC: u64 = 0x14;
/// Controller Status (32 bits).
pub const NVME_REG_CSTS: u64 = 0x1c;
/// Admin Queue Attributes (32 bits).
pub const NVME_REG_AQA: u64 = 0x24;
/// Admin Submission Queue Base Address (64 bits).
pub const NVME_REG_ASQ: u64 = 0x28;
/// Admin Completion Queue Base Address (64 bits).
pub const NVME_REG_ACQ: u64 = 0x30;
/// Where the doorbells start (SQ0TDBL).
pub const NVME_REG_DBS: u64 = 0x1000;

/// CC.EN, bit 0.
pub const NVME_CC_ENABLE: u32 = 1 << 0;
/// CC.CSS, bits 6:4: 000b = the NVM command set.
pub const NVME_CC_CSS_NVM: u32 = 0 << 4;
/// CC.MPS, bits 10:7: memory page size 2^(12+MPS); rig uses 4 KiB (0).
pub const NVME_CC_MPS_SHIFT: u32 = 7;
/// CC.AMS, bits 13:11: 000b = round robin.
pub const NVME_CC_AMS_RR: u32 = 0 << 11;
/// CC.IOSQES, bits 19:16: log2 of the I/O SQ entry size (64 bytes: 6).
pub const NVME_CC_IOSQES: u32 = 6 << 16;
/// CC.IOCQES, bits 23:20: log2 of the I/O CQ entry size (16 bytes: 4).
pub const NVME_CC_IOCQES: u32 = 4 << 20;

/// CSTS.RDY, bit 0.
pub const NVME_CSTS_RDY: u32 = 1 << 0;
/// CSTS.CFS (Controller Fatal Status), bit 1.
pub const NVME_CSTS_CFS: u32 = 1 << 1;

/// The page size rig programs (CC.MPS = 0) and queues are aligned to.
pub const PAGE: u64 = 4096;
/// A submission queue entry's size (NVMe 1.4 §4.2, "Submission Queue Entry").
pub const SQE_BYTES: u64 = 64;
/// A completion queue entry's size (NVMe 1.4 §4.6, "Completion Queue Entry").
pub const CQE_BYTES: u64 = 16;

/// CAP, decoded: the fields rig needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    /// CAP.MQES + 1: the most entries an I/O queue may have.
    pub max_entries: u32,
    /// CAP.CQR: queues must be physically contiguous.
    pub contiguous_required: bool,
    /// CAP.TO: worst-case time for CSTS.RDY to follow CC.EN, in 500 ms units.
    pub timeout_units: u8,
    /// CAP.DSTRD: doorbell stride is 4 << DSTRD bytes.
    pub dstrd: u8,
    /// CAP.CSS bit 0: the NVM command set is supported.
    pub nvm_command_set: bool,
    /// CAP.MPSMIN: smallest memory page size, 2^(12+MPSMIN).
    pub mps_min: u8,
    /// CAP.MPSMAX.
    pub mps_max: u8,
}

impl Cap {
    /// Decodes the 64-bit register (NVMe 1.4 §3.1, "Offset 0h: CAP – Controller Capabilities").
    pub fn parse(raw: u64) -> Self {
        let bits = |lo: u32, n: u32| (raw >> lo) & ((1u64 << n) - 1);
        // CAST: every field below is masked to at most 16 bits first.
        #[expect(clippy::cast_possible_truncation, reason = "masked fields")]
        Self {
            max_entries: bits(0, 16) as u32 + 1,
            contiguous_required: bits(16, 1) == 1,
            timeout_units: bits(24, 8) as u8,
            dstrd: bits(32, 4) as u8,
            nvm_command_set: bits(37, 1) == 1,
            mps_min: bits(48, 4) as u8,
            mps_max: bits(52, 4) as u8,
        }
    }

    /// How long CSTS.RDY may take to follow CC.EN (CAP.TO × 500 ms). A controller that
    /// reports 0 is given 500 ms rather than none.
    pub fn ready_timeout(&self) -> Duration {
        Duration::from_millis(500 * u64::from(self.timeout_units.max(1)))
    }

    /// The doorbell stride in bytes.
    pub fn stride(&self) -> u64 {
        4u64 << self.dstrd
    }

    /// SQyTDBL: 1000h + (2y × (4 << CAP.DSTRD)) (NVMe 1.4 §3.1, "Submission Queue y Tail Doorbell").
    pub fn sq_tail_doorbell(&self, qid: u16) -> u64 {
        NVME_REG_DBS + 2 * u64::from(qid) * self.stride()
    }

    /// CQyHDBL: 1000h + ((2y + 1) × (4 << CAP.DSTRD)) (NVMe 1.4 §3.1, "Completion Queue y Head Doorbell").
    pub fn cq_head_doorbell(&self, qid: u16) -> u64 {
        NVME_REG_DBS + (2 * u64::from(qid) + 1) * self.stride()
    }
}

/// The CC value rig enables the controller with: NVM command set, 4 KiB pages,
/// round-robin arbitration, 64-byte SQEs and 16-byte CQEs (NVMe 1.4 §3.1, "Offset 14h: CC – Controller Configuration").
pub fn cc_enable() -> u32 {
    NVME_CC_ENABLE
        | NVME_CC_CSS_NVM
        | (0 << NVME_CC_MPS_SHIFT)
        | NVME_CC_AMS_RR
        | NVME_CC_IOSQES
        | NVME_CC_IOCQES
}

/// AQA for admin queues of `sq` and `cq` entries (both fields are 0's based, 12 bits).
pub fn aqa(sq: u16, cq: u16) -> u32 {
    (u32::from(cq - 1) << 16) | u32::from(sq - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_of_qemu_nvme_decodes_to_its_properties() {
        // QEMU hw/nvme/ctrl.c nvme_init_ctrl: MQES 0x7ff, CQR 1, TO 0xf, CSS NVM,
        // MPSMAX 4; DSTRD 0 (docs/hardware/queues.md, "QEMU's NVMe controller").
        let raw = 0x7ff | 1 << 16 | 0xf << 24 | 1 << 37 | 4 << 52;
        let cap = Cap::parse(raw);
        assert_eq!(cap.max_entries, 2048);
        assert!(cap.contiguous_required);
        assert_eq!(cap.ready_timeout(), Duration::from_millis(7500));
        assert!(cap.nvm_command_set);
        assert_eq!((cap.mps_min, cap.mps_max, cap.dstrd), (0, 4, 0));
    }

    #[test]
    fn doorbells_follow_qemus_layout_at_stride_zero_and_spread_at_larger_strides() {
        let cap = Cap::parse(0);
        assert_eq!(cap.sq_tail_doorbell(0), 0x1000);
        assert_eq!(cap.cq_head_doorbell(0), 0x1004);
        assert_eq!(cap.sq_tail_doorbell(512), 0x2000);
        assert_eq!(cap.cq_head_doorbell(511), 0x1ffc);
        let wide = Cap::parse(2 << 32);
        assert_eq!(wide.sq_tail_doorbell(1), 0x1020);
        assert_eq!(wide.cq_head_doorbell(1), 0x1030);
    }

    #[test]
    fn a_zero_timeout_still_waits_half_a_second_and_the_largest_waits_127_s() {
        assert_eq!(Cap::parse(0).ready_timeout(), Duration::from_millis(500));
        assert_eq!(
            Cap::parse(0xff << 24).ready_timeout(),
            Duration::from_millis(127_500)
        );
    }

    #[test]
    fn aqa_and_cc_carry_zero_based_sizes_and_entry_sizes() {
        assert_eq!(aqa(32, 32), 0x001f_001f);
        assert_eq!(aqa(1, 4096), 0x0fff_0000);
        assert_eq!(cc_enable(), 0x0046_0001);
    }
}
