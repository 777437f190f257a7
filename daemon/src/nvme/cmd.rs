//! NVMe admin commands: the opcodes and fields rigd sends, the status codes it meets,
//! and the Identify Controller and Namespace fields it reads. Pure: no I/O. The entries
//! themselves (64-byte commands, 16-byte completions, the status field) are
//! `rig_model::nvme`, shared with the client's I/O commands.
//!
//! Layouts: NVMe Base Specification 1.4, §4.2 "Submission Queue Entry – Command
//! Format" (CDW0: opcode 7:0, CID 31:16; NSID; PRP1 at byte 24, PRP2 at 32; CDW10–15 at
//! 40–63), §4.6 "Completion Queue Entry" (DW0 command specific, DW2 SQHD 15:0 and SQID
//! 31:16, DW3 CID 15:0, phase 16, status 31:17), §4.6.1 "Status Field Definition", and
//! §5 "Admin Command Set" for each opcode.

pub use rig_model::nvme::{Cqe, Sqe, Status};

/// Admin opcodes rig sends (NVMe 1.4 §5, "Admin Command Set", its opcode table).
pub const NVME_ADMIN_DELETE_SQ: u8 = 0x00;
pub const NVME_ADMIN_CREATE_SQ: u8 = 0x01;
pub const NVME_ADMIN_GET_LOG_PAGE: u8 = 0x02;
pub const NVME_ADMIN_DELETE_CQ: u8 = 0x04;
pub const NVME_ADMIN_CREATE_CQ: u8 = 0x05;
pub const NVME_ADMIN_IDENTIFY: u8 = 0x06;
pub const NVME_ADMIN_SET_FEATURES: u8 = 0x09;
pub const NVME_ADMIN_DBBUF_CONFIG: u8 = 0x7c;

/// Identify CNS 00h: the Identify Namespace data structure of the command's NSID.
pub const NVME_ID_CNS_NS: u32 = 0x00;
/// Identify CNS 01h: the Identify Controller data structure.
pub const NVME_ID_CNS_CTRL: u32 = 0x01;
/// Feature 07h: Number of Queues.
pub const NVME_FEAT_NUM_QUEUES: u32 = 0x07;
/// OACS bit 8: Doorbell Buffer Config is supported (Identify Controller, bytes 257:256).
pub const NVME_CTRL_OACS_DBBUF_SUPP: u16 = 1 << 8;

/// Create I/O CQ CDW11: PC (bit 0), IEN (bit 1), IV (31:16).
pub const NVME_CQ_IRQ_ENABLED: u32 = 1 << 1;
/// Create I/O SQ/CQ CDW11 bit 0: physically contiguous.
pub const NVME_QUEUE_PHYS_CONTIG: u32 = 1 << 0;

/// Command-specific status codes (SCT 1) a fake or real controller answers with.
pub const NVME_SC_CQ_INVALID: Status = Status::new(1, 0x00);
pub const NVME_SC_QID_INVALID: Status = Status::new(1, 0x01);
pub const NVME_SC_QUEUE_SIZE: Status = Status::new(1, 0x02);
pub const NVME_SC_INVALID_VECTOR: Status = Status::new(1, 0x08);
pub const NVME_SC_INVALID_QUEUE_DELETION: Status = Status::new(1, 0x0c);
/// Generic status codes (SCT 0).
pub const NVME_SC_INVALID_OPCODE: Status = Status::new(0, 0x01);
pub const NVME_SC_INVALID_FIELD: Status = Status::new(0, 0x02);
pub const NVME_SC_DATA_TRANSFER_ERROR: Status = Status::new(0, 0x04);

/// The Identify Controller fields rig uses (NVMe 1.4, Identify command, "Identify Controller Data Structure").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentifyController {
    /// PCI Vendor ID (bytes 1:0).
    pub vid: u16,
    /// Serial Number (23:4), trimmed.
    pub serial: String,
    /// Model Number (63:24), trimmed.
    pub model: String,
    /// Firmware Revision (71:64), trimmed.
    pub firmware: String,
    /// Maximum Data Transfer Size (byte 77): 2^MDTS minimum pages; 0 = no limit.
    pub mdts: u8,
    /// Optional Admin Command Support (257:256).
    pub oacs: u16,
    /// Submission Queue Entry Size (byte 512): required 3:0, maximum 7:4 (log2).
    pub sqes: u8,
    /// Completion Queue Entry Size (byte 513).
    pub cqes: u8,
    /// Number of Namespaces (519:516).
    pub nn: u32,
}

/// The Identify data structure's size.
pub const IDENTIFY_BYTES: usize = 4096;

impl IdentifyController {
    /// Decodes the 4096-byte structure.
    pub fn parse(b: &[u8; IDENTIFY_BYTES]) -> Self {
        let text = |r: std::ops::Range<usize>| {
            String::from_utf8_lossy(&b[r])
                .trim_end_matches([' ', '\0'])
                .to_owned()
        };
        Self {
            vid: u16::from_le_bytes([b[0], b[1]]),
            serial: text(4..24),
            model: text(24..64),
            firmware: text(64..72),
            mdts: b[77],
            oacs: u16::from_le_bytes([b[256], b[257]]),
            sqes: b[512],
            cqes: b[513],
            nn: u32::from_le_bytes([b[516], b[517], b[518], b[519]]),
        }
    }

    /// Whether Doorbell Buffer Config is supported (OACS bit 8).
    pub fn dbbuf(&self) -> bool {
        self.oacs & NVME_CTRL_OACS_DBBUF_SUPP != 0
    }
}

/// The Identify Namespace fields rig uses (NVMe 1.4, "Identify Namespace Data
/// Structure": NSZE bytes 7:0, NCAP 15:8, NLBAF byte 25 (0's based), FLBAS byte 26
/// (bits 3:0 the format in use), LBA Format n at 128 + 4n: MS 15:0, LBADS 23:16 as
/// log2, RP 25:24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdentifyNamespace {
    /// Namespace size in logical blocks; 0: the namespace is not attached.
    pub blocks: u64,
    /// Namespace capacity in logical blocks.
    pub capacity: u64,
    /// log2 of the logical block size of the format in use.
    pub lba_shift: u32,
    /// Metadata bytes per block of that format (rig lends only formats without).
    pub metadata: u16,
}

impl IdentifyNamespace {
    /// Decodes the 4096-byte structure; `None` when FLBAS names a format past NLBAF
    /// or its block size is outside 512 B – 64 KiB (what the spec allows: LBADS ≥ 9).
    pub fn parse(b: &[u8; IDENTIFY_BYTES]) -> Option<Self> {
        let qw = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let format = usize::from(b[26] & 0x0f);
        if format > usize::from(b[25]) {
            return None;
        }
        let lbaf = 128 + 4 * format;
        let lba_shift = u32::from(b[lbaf + 2]);
        if !(9..=16).contains(&lba_shift) {
            return None;
        }
        Some(Self {
            blocks: qw(0),
            capacity: qw(8),
            lba_shift,
            metadata: u16::from_le_bytes([b[lbaf], b[lbaf + 1]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identify_namespace_reads_size_and_the_format_in_use() {
        let mut b = [0u8; IDENTIFY_BYTES];
        b[0..8].copy_from_slice(&131_072u64.to_le_bytes());
        b[8..16].copy_from_slice(&131_000u64.to_le_bytes());
        b[25] = 1; // two formats
        b[26] = 1; // the second in use
        b[128 + 2] = 9;
        b[132..134].copy_from_slice(&8u16.to_le_bytes());
        b[132 + 2] = 12;
        let ns = IdentifyNamespace::parse(&b).expect("a namespace");
        assert_eq!(
            ns,
            IdentifyNamespace {
                blocks: 131_072,
                capacity: 131_000,
                lba_shift: 12,
                metadata: 8,
            }
        );
        b[26] = 2; // past NLBAF
        assert_eq!(IdentifyNamespace::parse(&b), None);
        b[26] = 0;
        b[128 + 2] = 8; // 256-byte blocks: not a valid LBADS
        assert_eq!(IdentifyNamespace::parse(&b), None);
    }

    #[test]
    fn identify_controller_reads_qemus_strings_and_oacs() {
        let mut b = [0u8; IDENTIFY_BYTES];
        b[0..2].copy_from_slice(&0x1b36u16.to_le_bytes());
        b[4..24].copy_from_slice(b"rigci               ");
        b[24..64].copy_from_slice(b"QEMU NVMe Ctrl                          ");
        b[64..72].copy_from_slice(b"10.0.2  ");
        b[77] = 7;
        b[256..258].copy_from_slice(&0x0100u16.to_le_bytes());
        b[512] = 0x66;
        b[513] = 0x44;
        b[516..520].copy_from_slice(&1u32.to_le_bytes());
        let id = IdentifyController::parse(&b);
        assert_eq!(id.vid, 0x1b36);
        assert_eq!(id.serial, "rigci");
        assert_eq!(id.model, "QEMU NVMe Ctrl");
        assert_eq!(id.firmware, "10.0.2");
        assert!(id.dbbuf());
        assert_eq!((id.mdts, id.sqes, id.cqes, id.nn), (7, 0x66, 0x44, 1));
    }
}
