//! Physical addresses of this process's pages: `/proc/self/pagemap`
//! (Documentation/admin-guide/mm/pagemap.rst).
//!
//! One little-endian u64 per 4 KiB virtual page: bit 63 present, bit 62 swapped,
//! bits 0–54 the page frame number when present. Without `CAP_SYS_ADMIN` the kernel
//! reports the frame number as 0, which [`parse_entry`] turns into "hidden".

use std::{fs::File, io, os::unix::fs::FileExt};

/// The file read by [`read_entries`].
pub const PAGEMAP: &str = "/proc/self/pagemap";
/// The size of a pagemap page (the base page size on x86_64 and arm64 with 4 KiB pages).
pub const PAGE_SIZE: u64 = 4096;

const PM_PFN_MASK: u64 = (1 << 55) - 1;
const PM_SWAP: u64 = 1 << 62;
const PM_PRESENT: u64 = 1 << 63;

/// One decoded pagemap entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// Not in memory: never faulted, or swapped out.
    Absent { swapped: bool },
    /// In memory, at this page frame number.
    Frame(u64),
    /// In memory, but the kernel hid the frame number (no `CAP_SYS_ADMIN`).
    Hidden,
}

/// Decodes one raw entry; never fails.
pub fn parse_entry(raw: u64) -> Entry {
    if raw & PM_PRESENT == 0 {
        return Entry::Absent {
            swapped: raw & PM_SWAP != 0,
        };
    }
    match raw & PM_PFN_MASK {
        0 => Entry::Hidden,
        pfn => Entry::Frame(pfn),
    }
}

/// Reads the entries of `count` consecutive 4 KiB pages starting at virtual address
/// `va` (rounded down to its page).
///
/// # Errors
/// Opening or reading `/proc/self/pagemap`.
pub fn read_entries(va: u64, count: usize) -> io::Result<Vec<Entry>> {
    let file = File::open(PAGEMAP)?;
    let mut raw = vec![0u8; count.checked_mul(8).ok_or(io::ErrorKind::InvalidInput)?];
    let offset = (va / PAGE_SIZE)
        .checked_mul(8)
        .ok_or(io::ErrorKind::InvalidInput)?;
    file.read_exact_at(&mut raw, offset)?;
    Ok(raw
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            parse_entry(u64::from_le_bytes(b))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_decode_present_absent_swapped_and_hidden() {
        assert_eq!(parse_entry(0), Entry::Absent { swapped: false });
        assert_eq!(
            parse_entry(PM_SWAP | 0x1234),
            Entry::Absent { swapped: true }
        );
        assert_eq!(parse_entry(PM_PRESENT | 0x1234), Entry::Frame(0x1234));
        assert_eq!(parse_entry(PM_PRESENT), Entry::Hidden);
        // Flag bits 55..61 are not part of the frame number.
        assert_eq!(
            parse_entry(PM_PRESENT | (0x3f << 55) | PM_PFN_MASK),
            Entry::Frame(PM_PFN_MASK)
        );
    }

    #[test]
    fn an_unmapped_page_reads_absent() {
        // The page at address 0 is never mapped in a Rust process.
        let e = read_entries(0, 1).expect("pagemap is readable");
        assert_eq!(e, [Entry::Absent { swapped: false }]);
    }
}
