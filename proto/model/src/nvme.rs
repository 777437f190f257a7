//! NVMe queue entries as bytes: the 64-byte submission entry, the 16-byte completion
//! entry and its status field. Shared by rigd's `nvme` (admin commands) and
//! rig-client's `queue::nvme` (I/O commands), so both encode one way. Pure: no I/O.
//!
//! Layouts: NVMe Base Specification 1.4, §4.2 "Submission Queue Entry – Command
//! Format" (CDW0: opcode 7:0, CID 31:16; NSID; PRP1 at byte 24, PRP2 at 32; CDW10–15 at
//! 40–63), §4.6 "Completion Queue Entry" (DW0 command specific, DW2 SQHD 15:0 and SQID
//! 31:16, DW3 CID 15:0, phase 16, status 31:17), §4.6.1 "Status Field Definition".
//! Not here: which commands rigd sends (rigd's `nvme::cmd`), the NVM command set's
//! I/O commands and PRPs (rig-client's `queue::nvme`).

use std::fmt;

/// One 64-byte submission queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sqe {
    pub opcode: u8,
    pub cid: u16,
    pub nsid: u32,
    pub prp1: u64,
    pub prp2: u64,
    /// CDW10 to CDW15.
    pub cdw: [u32; 6],
}

impl Sqe {
    /// An admin command with CDW10 and CDW11 set and one data pointer.
    pub fn admin(opcode: u8, prp1: u64, cdw10: u32, cdw11: u32) -> Self {
        Self {
            opcode,
            prp1,
            cdw: [cdw10, cdw11, 0, 0, 0, 0],
            ..Self::default()
        }
    }

    /// The entry as the controller reads it (little endian).
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        let cdw0 = u32::from(self.opcode) | (u32::from(self.cid) << 16);
        b[0..4].copy_from_slice(&cdw0.to_le_bytes());
        b[4..8].copy_from_slice(&self.nsid.to_le_bytes());
        b[24..32].copy_from_slice(&self.prp1.to_le_bytes());
        b[32..40].copy_from_slice(&self.prp2.to_le_bytes());
        for (i, dw) in self.cdw.iter().enumerate() {
            b[40 + 4 * i..44 + 4 * i].copy_from_slice(&dw.to_le_bytes());
        }
        b
    }

    /// Decodes an entry (the fake controller's side).
    pub fn parse(b: &[u8; 64]) -> Self {
        let dw = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let qw = |at: usize| u64::from(dw(at)) | (u64::from(dw(at + 4)) << 32);
        let cdw0 = dw(0);
        // CAST: masked to 8 bits, or 16 after the shift: nothing is lost.
        Self {
            opcode: (cdw0 & 0xff) as u8,
            cid: (cdw0 >> 16) as u16,
            nsid: dw(4),
            prp1: qw(24),
            prp2: qw(32),
            cdw: [dw(40), dw(44), dw(48), dw(52), dw(56), dw(60)],
        }
    }
}

/// A completion entry's status field (DW3 31:17, without the phase bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Status Code Type: 0 generic, 1 command specific, 2 media and data integrity.
    pub sct: u8,
    /// Status Code.
    pub sc: u8,
    /// Do Not Retry.
    pub dnr: bool,
}

impl Status {
    pub const SUCCESS: Self = Self::new(0, 0);

    pub const fn new(sct: u8, sc: u8) -> Self {
        Self {
            sct,
            sc,
            dnr: false,
        }
    }

    pub fn is_success(&self) -> bool {
        self.sct == 0 && self.sc == 0
    }

    /// The 15-bit field as DW3 bits 31:17 carry it.
    pub fn raw(&self) -> u16 {
        u16::from(self.sc) | (u16::from(self.sct & 0x7) << 8) | (u16::from(self.dnr) << 14)
    }

    /// Decodes the 15-bit field.
    pub fn from_raw(raw: u16) -> Self {
        // CAST: masked to 8 and 3 bits: nothing is lost.
        Self {
            sc: (raw & 0xff) as u8,
            sct: ((raw >> 8) & 0x7) as u8,
            dnr: raw & (1 << 14) != 0,
        }
    }

    /// The spec's name for the codes rig meets (NVMe 1.4 §4.6.1, the generic and command specific status tables).
    pub fn name(&self) -> &'static str {
        match (self.sct, self.sc) {
            (0, 0x00) => "Successful Completion",
            (0, 0x01) => "Invalid Command Opcode",
            (0, 0x02) => "Invalid Field in Command",
            (0, 0x04) => "Data Transfer Error",
            (0, 0x06) => "Internal Error",
            (0, 0x07) => "Command Abort Requested",
            (0, 0x0b) => "Invalid Namespace or Format",
            (0, 0x13) => "Invalid PRP Offset",
            (1, 0x00) => "Completion Queue Invalid",
            (1, 0x01) => "Invalid Queue Identifier",
            (1, 0x02) => "Invalid Queue Size",
            (1, 0x08) => "Invalid Interrupt Vector",
            (1, 0x0c) => "Invalid Queue Deletion",
            (1, 0x0d) => "Feature Identifier Not Saveable",
            _ => "",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status {:#x}/{:#04x}", self.sct, self.sc)?;
        match self.name() {
            "" => Ok(()),
            n => write!(f, " ({n})"),
        }
    }
}

/// One 16-byte completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe {
    /// DW0: command specific.
    pub result: u32,
    pub sq_head: u16,
    pub sq_id: u16,
    pub cid: u16,
    pub phase: bool,
    pub status: Status,
}

impl Cqe {
    /// Decodes an entry as the controller wrote it.
    pub fn parse(b: &[u8; 16]) -> Self {
        let dw = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let (dw2, dw3) = (dw(8), dw(12));
        // CAST: each half of a 32-bit word: nothing is lost.
        Self {
            result: dw(0),
            sq_head: (dw2 & 0xffff) as u16,
            sq_id: (dw2 >> 16) as u16,
            cid: (dw3 & 0xffff) as u16,
            phase: dw3 & (1 << 16) != 0,
            status: Status::from_raw((dw3 >> 17) as u16),
        }
    }

    /// The entry as a controller writes it (the fake controller's side).
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&self.result.to_le_bytes());
        let dw2 = u32::from(self.sq_head) | (u32::from(self.sq_id) << 16);
        b[8..12].copy_from_slice(&dw2.to_le_bytes());
        let dw3 = u32::from(self.cid)
            | (u32::from(self.phase) << 16)
            | (u32::from(self.status.raw()) << 17);
        b[12..16].copy_from_slice(&dw3.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Create I/O SQ (NVMe 1.4 §5) and Invalid Queue Deletion (SCT 1, SC 0x0c).
    const NVME_ADMIN_CREATE_SQ: u8 = 0x01;
    const NVME_SC_INVALID_QUEUE_DELETION: Status = Status::new(1, 0x0c);

    #[test]
    fn sqe_round_trips_through_its_bytes_with_fields_at_the_spec_offsets() {
        let sqe = Sqe {
            opcode: NVME_ADMIN_CREATE_SQ,
            cid: 0xbeef,
            nsid: 7,
            prp1: 0x1234_5678_9000,
            prp2: 0xa000,
            cdw: [1, 2, 3, 4, 5, 6],
        };
        let b = sqe.to_bytes();
        assert_eq!(&b[0..4], &[0x01, 0, 0xef, 0xbe]);
        assert_eq!(&b[24..32], &0x1234_5678_9000u64.to_le_bytes());
        assert_eq!(&b[40..44], &1u32.to_le_bytes());
        assert_eq!(&b[60..64], &6u32.to_le_bytes());
        assert_eq!(Sqe::parse(&b), sqe);
    }

    #[test]
    fn cqe_round_trips_and_keeps_phase_apart_from_status() {
        let cqe = Cqe {
            result: 0x3f_003f,
            sq_head: 5,
            sq_id: 0,
            cid: 9,
            phase: true,
            status: Status {
                dnr: true,
                ..NVME_SC_INVALID_QUEUE_DELETION
            },
        };
        let b = cqe.to_bytes();
        // DW3: CID 9, P 1, SC 0x0c at bit 17, SCT 1 at bit 25, DNR at bit 31.
        let dw3 = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        assert_eq!(dw3, 9 | 1 << 16 | 0x0c << 17 | 1 << 25 | 1 << 31);
        assert_eq!(Cqe::parse(&b), cqe);
    }

    #[test]
    fn status_names_the_codes_and_prints_unknown_ones_bare() {
        assert_eq!(
            NVME_SC_INVALID_QUEUE_DELETION.to_string(),
            "status 0x1/0x0c (Invalid Queue Deletion)"
        );
        assert_eq!(Status::new(3, 0x77).to_string(), "status 0x3/0x77");
        assert!(Status::SUCCESS.is_success());
    }
}
