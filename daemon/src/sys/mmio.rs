//! Volatile access to a device's registers through a BAR mapped into rigd (a VFIO
//! region or a sysfs `resourceN` file, mapped with `memmap2::MmapRaw`).
//!
//! Device memory is read and written one naturally aligned access at a time, 1, 2, 4 or
//! 8 bytes, with volatile loads and stores: never `memcpy`, never a reference into the
//! mapping (arm64 Device memory faults on the unaligned accesses `memcpy` makes:
//! docs/hardware/pci-takeover.md, "Register access"; a register read may have side
//! effects, so the compiler must neither merge nor repeat one).

use std::sync::atomic::{Ordering, fence};

use memmap2::MmapRaw;

/// The size of one register access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    W8,
    W16,
    W32,
    W64,
}

impl Width {
    /// From a width in bits.
    pub fn from_bits(bits: u32) -> Option<Self> {
        match bits {
            8 => Some(Self::W8),
            16 => Some(Self::W16),
            32 => Some(Self::W32),
            64 => Some(Self::W64),
            _ => None,
        }
    }

    pub fn bytes(self) -> u64 {
        match self {
            Self::W8 => 1,
            Self::W16 => 2,
            Self::W32 => 4,
            Self::W64 => 8,
        }
    }

    pub fn bits(self) -> u32 {
        match self {
            Self::W8 => 8,
            Self::W16 => 16,
            Self::W32 => 32,
            Self::W64 => 64,
        }
    }

    /// The largest value an access of this width carries.
    pub fn max(self) -> u64 {
        u64::MAX >> (64 - self.bits())
    }
}

/// A register access rigd refuses before touching the device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MmioError {
    #[error("offset {offset:#x} + {} bytes lies outside the {len:#x}-byte BAR", .width.bytes())]
    OutOfRange { offset: u64, width: Width, len: u64 },
    #[error("offset {offset:#x} is not aligned to the {}-byte access", .width.bytes())]
    Misaligned { offset: u64, width: Width },
    #[error("value {value:#x} does not fit a {}-bit access", .width.bits())]
    TooWide { value: u64, width: Width },
    #[error("{count} registers asked for; one read returns 1 to {max}")]
    Count { count: u32, max: u32 },
}

/// A mapped BAR, reached only through [`Mmio::read`] and [`Mmio::write`].
#[derive(Debug)]
pub struct Mmio {
    map: MmapRaw,
}

impl Mmio {
    pub fn new(map: MmapRaw) -> Self {
        Self { map }
    }

    /// The mapping's length in bytes.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.map.len() == 0
    }

    /// Checks an access without making it.
    ///
    /// # Errors
    /// As [`Mmio::read`].
    pub fn check(&self, offset: u64, width: Width) -> Result<(), MmioError> {
        self.at(offset, width).map(|_| ())
    }

    /// Checks an access and returns its byte offset as an index into the mapping.
    fn at(&self, offset: u64, width: Width) -> Result<usize, MmioError> {
        if !offset.is_multiple_of(width.bytes()) {
            return Err(MmioError::Misaligned { offset, width });
        }
        match offset.checked_add(width.bytes()) {
            Some(end) if end <= self.len() => {}
            _ => {
                return Err(MmioError::OutOfRange {
                    offset,
                    width,
                    len: self.len(),
                });
            }
        }
        // CAST: `offset < len`, and `len` came from a usize.
        Ok(usize::try_from(offset).expect("offset within a usize-sized mapping"))
    }

    /// Reads one register.
    ///
    /// # Errors
    /// [`MmioError`] for an access outside the BAR or not naturally aligned.
    pub fn read(&self, offset: u64, width: Width) -> Result<u64, MmioError> {
        let at = self.at(offset, width)?;
        let base = self.map.as_ptr();
        // SAFETY: `at` checked that `at..at + width` lies inside this live mapping, which
        // `self` owns for the call, and that `at` is aligned to the width (the mapping
        // starts page-aligned); no reference into device memory is made, only a
        // volatile load of exactly that width.
        let v = unsafe {
            let p = base.add(at);
            match width {
                Width::W8 => u64::from(p.read_volatile()),
                Width::W16 => u64::from(p.cast::<u16>().read_volatile()),
                Width::W32 => u64::from(p.cast::<u32>().read_volatile()),
                Width::W64 => p.cast::<u64>().read_volatile(),
            }
        };
        // The read completes before anything the caller does next (e.g. reading DMA'd
        // memory after a status register says done).
        fence(Ordering::SeqCst);
        Ok(v)
    }

    /// Writes one register.
    ///
    /// # Errors
    /// [`MmioError`] for an access outside the BAR, not naturally aligned, or a value
    /// wider than the access.
    pub fn write(&self, offset: u64, width: Width, value: u64) -> Result<(), MmioError> {
        if value > width.max() {
            return Err(MmioError::TooWide { value, width });
        }
        let at = self.at(offset, width)?;
        let base = self.map.as_mut_ptr();
        // Everything the caller wrote before (e.g. a descriptor in DMA memory) is visible
        // before the device sees this store (a doorbell).
        fence(Ordering::SeqCst);
        // SAFETY: as in `read`: bounds and alignment checked by `at`, the mapping is live
        // and writable (mapped read-write), and the store is one volatile access of the
        // width; the value fits it (checked above), so the casts below lose nothing.
        #[expect(clippy::cast_possible_truncation, reason = "value <= width.max()")]
        unsafe {
            let p = base.add(at);
            match width {
                Width::W8 => p.write_volatile(value as u8),
                Width::W16 => p.cast::<u16>().write_volatile(value as u16),
                Width::W32 => p.cast::<u32>().write_volatile(value as u32),
                Width::W64 => p.cast::<u64>().write_volatile(value),
            }
        }
        fence(Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use memmap2::MmapOptions;

    use super::*;

    fn file_bar(len: u64) -> (tempfile::NamedTempFile, Mmio) {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        f.as_file().set_len(len).expect("size it");
        let map = MmapOptions::new()
            .len(usize::try_from(len).expect("small"))
            .map_raw(f.as_file())
            .expect("map it");
        (f, Mmio::new(map))
    }

    #[test]
    fn write_then_read_every_width_round_trips_little_endian() {
        let (f, bar) = file_bar(4096);
        bar.write(0x80, Width::W64, 0x1122_3344_5566_7788)
            .expect("write");
        bar.write(0x10, Width::W32, 0xdead_beef).expect("write");
        bar.write(0x14, Width::W16, 0xcafe).expect("write");
        bar.write(0x17, Width::W8, 0x5a).expect("write");
        assert_eq!(bar.read(0x80, Width::W64), Ok(0x1122_3344_5566_7788));
        assert_eq!(bar.read(0x84, Width::W32), Ok(0x1122_3344));
        assert_eq!(bar.read(0x10, Width::W32), Ok(0xdead_beef));
        assert_eq!(bar.read(0x14, Width::W16), Ok(0xcafe));
        assert_eq!(bar.read(0x17, Width::W8), Ok(0x5a));
        let bytes = std::fs::read(f.path()).expect("read back");
        assert_eq!(&bytes[0x80..0x88], &0x1122_3344_5566_7788u64.to_le_bytes());
    }

    #[test]
    fn the_last_register_is_reachable_and_one_past_it_is_refused() {
        let (_f, bar) = file_bar(4096);
        assert_eq!(bar.read(4088, Width::W64), Ok(0));
        assert_eq!(bar.read(4095, Width::W8), Ok(0));
        assert_eq!(
            bar.read(4096, Width::W8),
            Err(MmioError::OutOfRange {
                offset: 4096,
                width: Width::W8,
                len: 4096
            })
        );
        assert!(matches!(
            bar.write(u64::MAX - 7, Width::W64, 0),
            Err(MmioError::OutOfRange { .. })
        ));
    }

    #[test]
    fn misaligned_and_too_wide_accesses_are_refused_without_touching_the_bar() {
        let (f, bar) = file_bar(4096);
        assert_eq!(
            bar.write(0x82, Width::W32, 1),
            Err(MmioError::Misaligned {
                offset: 0x82,
                width: Width::W32
            })
        );
        assert_eq!(
            bar.write(0x80, Width::W16, 0x1_0000),
            Err(MmioError::TooWide {
                value: 0x1_0000,
                width: Width::W16
            })
        );
        assert!(
            std::fs::read(f.path())
                .expect("read")
                .iter()
                .all(|&b| b == 0)
        );
    }

    #[test]
    fn widths_come_only_from_8_16_32_64_bits() {
        assert_eq!(Width::from_bits(32), Some(Width::W32));
        assert_eq!(Width::from_bits(0), None);
        assert_eq!(Width::from_bits(24), None);
        assert_eq!(Width::W8.max(), 0xff);
        assert_eq!(Width::W64.max(), u64::MAX);
    }
}
