//! Boot layouts, as pure functions over caller-owned buffers: the GSP-RM radix3 page table and
//! the AMD PSP bootloader staging buffer.
//!
//! Flow: parsed image (`gsp::GspImage`, `amd::AmdImage`) → layout here → DMA memory owned by
//! the daemon (`dma/`), which supplies the device address of every 4 KiB page of its buffer.
//! Nothing here allocates device memory or touches hardware.
//!
//! **Radix3** (nova-core `firmware/gsp.rs`, nouveau `nvkm_gsp_radix3_sg`, tinygrad
//! `init_gsp_image`): 4 KiB pages, 8-byte little-endian entries. Level 0 is one page whose
//! entries point at the level-1 pages; level-1 entries point at the level-2 pages; level-2
//! entries point at the image's pages; the image is mapped at GSP virtual address 0. With one
//! level-1 page (images up to 1 GiB, every image shipped so far) level 0 holds one entry, as in
//! nova-core and nouveau; larger images get one level-0 entry per level-1 page, as tinygrad
//! builds it. The buffer holds, in order: level 0, level 1, level 2, then the image; the tail of
//! the last image page and of each table page is zeroed.
//!
//! **PSP** (tinygrad `am` `AM_PSP.init`, amdgpu `psp_v13_0_bootloader_load_*`): the PSP
//! bootloader takes one component at a time from a 1 MiB-aligned address (`addr >> 20` goes to
//! `C2PMSG_36`, the command to `C2PMSG_35`), in the order KDB, SPL, SYS_DRV, SOC_DRV,
//! INTF_DRV, DBG_DRV, RAS_DRV, SOS. Here every component gets its own 1 MiB-aligned slot in one
//! buffer, so all of them are staged once. MP0 13.x ships no SPL: its SPL step loads the KDB
//! again (amdgpu `psp_v13_0_bootloader_load_spl`), which reuses the KDB slot.

use crate::amd::{AmdImage, PspFwType};
use crate::source::{ReadAt, SourceError, Span};

/// GSP page size.
pub const GSP_PAGE_SIZE: usize = 4096;
/// Entries per radix3 table page.
const ENTRIES_PER_PAGE: u64 = (GSP_PAGE_SIZE / 8) as u64;
/// Alignment of PSP bootloader components (the mailbox takes the address shifted by 20).
pub const PSP_ALIGN: u64 = 1 << 20;

/// `enum psp_bootloader_cmd` of amdgpu_psp.h: the command for each component.
pub mod psp_cmd {
    /// Load the system driver.
    pub const PSP_BL__LOAD_SYSDRV: u32 = 0x10000;
    /// Load the secure OS.
    pub const PSP_BL__LOAD_SOSDRV: u32 = 0x20000;
    /// Load the key database.
    pub const PSP_BL__LOAD_KEY_DATABASE: u32 = 0x80000;
    /// Load the SOC driver.
    pub const PSP_BL__LOAD_SOCDRV: u32 = 0xB0000;
    /// Load the debug driver.
    pub const PSP_BL__LOAD_DBGDRV: u32 = 0xC0000;
    /// Load the interface driver.
    pub const PSP_BL__LOAD_INTFDRV: u32 = 0xD0000;
    /// Load the RAS driver.
    pub const PSP_BL__LOAD_RASDRV: u32 = 0xE0000;
    /// Load the security policy table.
    pub const PSP_BL__LOAD_TOS_SPL_TABLE: u32 = 0x1000_0000;
}

/// Errors of the staging layouts.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The image is empty.
    #[error("the image is empty")]
    Empty,
    /// The image needs more level-1 pages than level 0 can point at.
    #[error("an image of {len} bytes needs {pages} level-1 pages; level 0 holds 512 entries")]
    TooLarge {
        /// Image length.
        len: u64,
        /// Level-1 pages needed.
        pages: u64,
    },
    /// The buffer's length is not the layout's.
    #[error("buffer is {got} bytes; the layout needs {need}")]
    BufferSize {
        /// Bytes given.
        got: u64,
        /// Bytes needed.
        need: u64,
    },
    /// The page address list's length is not the layout's.
    #[error("{got} page addresses given; the buffer has {need} pages")]
    PageCount {
        /// Addresses given.
        got: usize,
        /// Pages in the buffer.
        need: u64,
    },
    /// A page address is not page-aligned.
    #[error("page {index}'s device address {addr:#x} is not {align}-byte aligned")]
    Unaligned {
        /// Page index in the buffer.
        index: usize,
        /// The address.
        addr: u64,
        /// Required alignment.
        align: u64,
    },
    /// The PSP image has no component the boot needs.
    #[error("the PSP image has no {component}")]
    Missing {
        /// The missing component.
        component: &'static str,
    },
    /// Reading the image failed.
    #[error("cannot read the image")]
    Read(#[from] SourceError),
}

/// Page counts of a radix3 layout. Page indices are into the staging buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Radix3Layout {
    /// Image length in bytes.
    pub image_len: u64,
    /// Pages holding the image.
    pub image_pages: u64,
    /// Level-2 table pages.
    pub level2_pages: u64,
    /// Level-1 table pages.
    pub level1_pages: u64,
}

impl Radix3Layout {
    /// The layout for an image of `image_len` bytes.
    ///
    /// # Errors
    /// [`StageError::Empty`], or [`StageError::TooLarge`] past 512 level-1 pages (512 GiB).
    pub fn new(image_len: u64) -> Result<Radix3Layout, StageError> {
        if image_len == 0 {
            return Err(StageError::Empty);
        }
        let image_pages = image_len.div_ceil(GSP_PAGE_SIZE as u64);
        let level2_pages = image_pages.div_ceil(ENTRIES_PER_PAGE);
        let level1_pages = level2_pages.div_ceil(ENTRIES_PER_PAGE);
        if level1_pages > ENTRIES_PER_PAGE {
            return Err(StageError::TooLarge {
                len: image_len,
                pages: level1_pages,
            });
        }
        Ok(Radix3Layout {
            image_len,
            image_pages,
            level2_pages,
            level1_pages,
        })
    }

    /// Pages in the buffer: level 0, level 1, level 2, image.
    pub fn total_pages(&self) -> u64 {
        1 + self.level1_pages + self.level2_pages + self.image_pages
    }

    /// Bytes in the buffer.
    pub fn buffer_len(&self) -> u64 {
        self.total_pages() * GSP_PAGE_SIZE as u64
    }

    /// Index of the first level-1 page.
    pub fn level1_first(&self) -> u64 {
        1
    }

    /// Index of the first level-2 page.
    pub fn level2_first(&self) -> u64 {
        1 + self.level1_pages
    }

    /// Index of the first image page.
    pub fn image_first(&self) -> u64 {
        1 + self.level1_pages + self.level2_pages
    }

    /// Byte offset of the image in the buffer.
    pub fn image_offset(&self) -> u64 {
        self.image_first() * GSP_PAGE_SIZE as u64
    }
}

/// A built radix3 table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Radix3 {
    /// Its layout.
    pub layout: Radix3Layout,
    /// Device address of the level-0 page (GspFwWprMeta.sysmemAddrOfRadix3Elf).
    pub level0: u64,
}

fn check_pages(layout: &Radix3Layout, pages: &[u64]) -> Result<(), StageError> {
    if pages.len() as u64 != layout.total_pages() {
        return Err(StageError::PageCount {
            got: pages.len(),
            need: layout.total_pages(),
        });
    }
    if let Some((index, addr)) = pages
        .iter()
        .enumerate()
        .find(|(_, a)| **a % GSP_PAGE_SIZE as u64 != 0)
    {
        return Err(StageError::Unaligned {
            index,
            addr: *addr,
            align: GSP_PAGE_SIZE as u64,
        });
    }
    Ok(())
}

fn check_buffer(layout: &Radix3Layout, buf: &[u8], pages: &[u64]) -> Result<(), StageError> {
    if buf.len() as u64 != layout.buffer_len() {
        return Err(StageError::BufferSize {
            got: buf.len() as u64,
            need: layout.buffer_len(),
        });
    }
    check_pages(layout, pages)
}

/// A byte or page index of a buffer already in memory, as `usize`. Indices come from a layout
/// whose buffer length was checked against a real buffer, so this fails only on a caller's
/// mismatch, which is reported as a size error.
fn to_usize(v: u64) -> Result<usize, StageError> {
    usize::try_from(v).map_err(|_| StageError::BufferSize {
        got: usize::MAX as u64,
        need: v,
    })
}

/// Writes `entries` as little-endian u64s from page `first` of `buf`, zeroing the rest of the
/// last page.
fn write_table(buf: &mut [u8], first: u64, pages: u64, entries: &[u64]) -> Result<(), StageError> {
    let page = GSP_PAGE_SIZE as u64;
    let start = to_usize(first.saturating_mul(page))?;
    let end = to_usize(first.saturating_add(pages).saturating_mul(page))?;
    let got = buf.len() as u64;
    let table = buf.get_mut(start..end).ok_or(StageError::BufferSize {
        got,
        need: end as u64,
    })?;
    table.fill(0);
    for (slot, e) in table.chunks_exact_mut(8).zip(entries) {
        slot.copy_from_slice(&e.to_le_bytes());
    }
    Ok(())
}

impl Radix3Layout {
    /// Pages holding the three table levels (the start of the buffer).
    pub fn table_pages(&self) -> u64 {
        self.image_first()
    }
}

/// Writes the three table levels into `tables`, the first [`Radix3Layout::table_pages`] pages
/// of the staging buffer; returns the level-0 page's device address.
///
/// `pages[i]` is the device address of page `i` of the whole buffer.
///
/// # Errors
/// [`StageError::BufferSize`], [`StageError::PageCount`], [`StageError::Unaligned`].
pub fn write_tables(
    layout: &Radix3Layout,
    tables: &mut [u8],
    pages: &[u64],
) -> Result<u64, StageError> {
    let need = layout.table_pages() * GSP_PAGE_SIZE as u64;
    if tables.len() as u64 != need {
        return Err(StageError::BufferSize {
            got: tables.len() as u64,
            need,
        });
    }
    check_pages(layout, pages)?;
    let idx = |first: u64, n: u64| -> Result<&[u64], StageError> {
        let range = to_usize(first)?..to_usize(first.saturating_add(n))?;
        pages.get(range).ok_or(StageError::PageCount {
            got: pages.len(),
            need: layout.total_pages(),
        })
    };
    let image = idx(layout.image_first(), layout.image_pages)?;
    let level2 = idx(layout.level2_first(), layout.level2_pages)?;
    let level1 = idx(layout.level1_first(), layout.level1_pages)?;
    write_table(tables, layout.level2_first(), layout.level2_pages, image)?;
    write_table(tables, layout.level1_first(), layout.level1_pages, level2)?;
    write_table(tables, 0, 1, level1)?;
    pages.first().copied().ok_or(StageError::PageCount {
        got: 0,
        need: layout.total_pages(),
    })
}

/// Writes the three table levels for an image already in place at
/// [`Radix3Layout::image_offset`], and zeroes the image's tail.
///
/// `pages[i]` is the device address of page `i` of `buf`.
///
/// # Errors
/// [`StageError::BufferSize`], [`StageError::PageCount`], [`StageError::Unaligned`].
pub fn write_radix3_tables(
    layout: &Radix3Layout,
    buf: &mut [u8],
    pages: &[u64],
) -> Result<Radix3, StageError> {
    check_buffer(layout, buf, pages)?;
    let (tables, image) = buf.split_at_mut(to_usize(layout.image_offset())?);
    let level0 = write_tables(layout, tables, pages)?;
    if let Some(tail) = image.get_mut(to_usize(layout.image_len)?..) {
        tail.fill(0);
    }
    Ok(Radix3 {
        layout: *layout,
        level0,
    })
}

/// Copies `image` into `buf` once and builds its radix3 table (see the module docs).
///
/// # Errors
/// As [`Radix3Layout::new`] and [`write_radix3_tables`].
pub fn radix3(image: &[u8], buf: &mut [u8], pages: &[u64]) -> Result<Radix3, StageError> {
    let layout = Radix3Layout::new(image.len() as u64)?;
    check_buffer(&layout, buf, pages)?;
    let at = to_usize(layout.image_offset())?;
    let got = buf.len() as u64;
    buf.get_mut(at..at.saturating_add(image.len()))
        .ok_or(StageError::BufferSize {
            got,
            need: layout.buffer_len(),
        })?
        .copy_from_slice(image);
    write_radix3_tables(&layout, buf, pages)
}

/// Like [`radix3`], reading `span` of `src` straight into the buffer (one copy, from a map or
/// by positional read).
///
/// # Errors
/// As [`radix3`], and [`StageError::Read`].
pub fn radix3_from<S: ReadAt + ?Sized>(
    src: &S,
    span: Span,
    buf: &mut [u8],
    pages: &[u64],
) -> Result<Radix3, StageError> {
    let layout = Radix3Layout::new(span.size())?;
    check_buffer(&layout, buf, pages)?;
    let at = to_usize(layout.image_offset())?;
    let end = at.saturating_add(to_usize(span.size())?);
    let got = buf.len() as u64;
    let dst = buf.get_mut(at..end).ok_or(StageError::BufferSize {
        got,
        need: layout.buffer_len(),
    })?;
    src.copy_to(span.offset(), dst)?;
    write_radix3_tables(&layout, buf, pages)
}

/// One PSP bootloader step.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PspStep {
    /// The component loaded (`KDB`, `SPL`, …).
    pub component: &'static str,
    /// The bootloader command written to `C2PMSG_35`.
    pub command: u32,
    /// Offset of its slot in the staging buffer (a multiple of 1 MiB).
    pub offset: u64,
    /// Bytes to copy (and to load).
    pub size: u64,
    /// Where those bytes are in the SOS file.
    pub source: Span,
}

/// The PSP bootloader staging layout.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PspLayout {
    /// Steps in boot order.
    pub steps: Vec<PspStep>,
    /// Bytes in the staging buffer (a multiple of 1 MiB).
    pub buffer_len: u64,
}

/// Lays out the bootloader components of a PSP SOS image. `mp0_major` is the PSP's (MP0) major
/// IP version if known; 13 makes the SPL step reuse the KDB.
///
/// # Errors
/// [`StageError::Missing`] when the image has no SYS_DRV or no SOS.
pub fn psp_layout(image: &AmdImage, mp0_major: Option<u16>) -> Result<PspLayout, StageError> {
    use psp_cmd::*;
    let comps = image.psp_components();
    let find = |t: PspFwType| comps.iter().find(|(ty, _)| *ty == t).map(|(_, c)| c.span);
    for (t, name) in [(PspFwType::SysDrv, "SYS_DRV"), (PspFwType::Sos, "SOS")] {
        if find(t).is_none() {
            return Err(StageError::Missing { component: name });
        }
    }
    let spl_from_kdb = mp0_major == Some(13) && find(PspFwType::Spl).is_none();
    let order = [
        (PspFwType::Kdb, "KDB", PSP_BL__LOAD_KEY_DATABASE),
        (PspFwType::Spl, "SPL", PSP_BL__LOAD_TOS_SPL_TABLE),
        (PspFwType::SysDrv, "SYS_DRV", PSP_BL__LOAD_SYSDRV),
        (PspFwType::SocDrv, "SOC_DRV", PSP_BL__LOAD_SOCDRV),
        (PspFwType::IntfDrv, "INTF_DRV", PSP_BL__LOAD_INTFDRV),
        (PspFwType::DbgDrv, "DBG_DRV", PSP_BL__LOAD_DBGDRV),
        (PspFwType::RasDrv, "RAS_DRV", PSP_BL__LOAD_RASDRV),
        (PspFwType::Sos, "SOS", PSP_BL__LOAD_SOSDRV),
    ];
    let mut steps: Vec<PspStep> = Vec::new();
    let mut next = 0u64;
    for (ty, name, command) in order {
        if ty == PspFwType::Spl && spl_from_kdb {
            if let Some(kdb) = steps.iter().find(|s| s.component == "KDB").cloned() {
                steps.push(PspStep {
                    component: "SPL",
                    command,
                    ..kdb
                });
            }
            continue;
        }
        let Some(span) = find(ty) else { continue };
        if span.is_empty() {
            continue;
        }
        steps.push(PspStep {
            component: name,
            command,
            offset: next,
            size: span.size(),
            source: span,
        });
        next = next.saturating_add(span.size().next_multiple_of(PSP_ALIGN));
    }
    Ok(PspLayout {
        steps,
        buffer_len: next,
    })
}

/// Copies every step's bytes into its slot of `buf` (which must be `layout.buffer_len` long),
/// zeroing the rest of each slot.
///
/// # Errors
/// [`StageError::BufferSize`], [`StageError::Read`].
pub fn stage_psp<S: ReadAt + ?Sized>(
    layout: &PspLayout,
    src: &S,
    buf: &mut [u8],
) -> Result<(), StageError> {
    if buf.len() as u64 != layout.buffer_len {
        return Err(StageError::BufferSize {
            got: buf.len() as u64,
            need: layout.buffer_len,
        });
    }
    buf.fill(0);
    let got = buf.len() as u64;
    for step in &layout.steps {
        let end = step.offset.saturating_add(step.size);
        let too_small = StageError::BufferSize { got, need: end };
        let range = usize::try_from(step.offset)
            .ok()
            .zip(usize::try_from(end).ok())
            .ok_or(StageError::BufferSize { got, need: end })?;
        let slot = buf.get_mut(range.0..range.1).ok_or(too_small)?;
        src.copy_to(step.source.offset(), slot)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]
    use super::*;
    use crate::fixture;

    fn entry(buf: &[u8], page: u64, i: u64) -> u64 {
        let at = (page * GSP_PAGE_SIZE as u64 + i * 8) as usize;
        u64::from_le_bytes(buf[at..at + 8].try_into().unwrap())
    }

    /// Page addresses that are not contiguous, to catch index mix-ups.
    fn addrs(n: u64) -> Vec<u64> {
        (0..n).map(|i| 0x10_0000_0000 + (n - i) * 0x3000).collect()
    }

    fn check_every_entry(layout: &Radix3Layout, buf: &[u8], pages: &[u64]) {
        let per = ENTRIES_PER_PAGE;
        for i in 0..layout.image_pages {
            let e = entry(buf, layout.level2_first() + i / per, i % per);
            assert_eq!(
                e,
                pages[(layout.image_first() + i) as usize],
                "level 2 entry {i}"
            );
        }
        for i in 0..layout.level2_pages {
            let e = entry(buf, layout.level1_first() + i / per, i % per);
            assert_eq!(
                e,
                pages[(layout.level2_first() + i) as usize],
                "level 1 entry {i}"
            );
        }
        for i in 0..layout.level1_pages {
            assert_eq!(
                entry(buf, 0, i),
                pages[(layout.level1_first() + i) as usize],
                "level 0 entry {i}"
            );
        }
        // Entries past the last are zero.
        assert_eq!(entry(buf, 0, layout.level1_pages), 0);
        let l2_used = layout.image_pages;
        if !l2_used.is_multiple_of(per) {
            assert_eq!(
                entry(buf, layout.level2_first() + l2_used / per, l2_used % per),
                0
            );
        }
    }

    #[test]
    fn image_ending_mid_page_maps_every_page_and_zeroes_the_tail() {
        let image: Vec<u8> = (0..10_000u32).map(|i| (i % 255) as u8 + 1).collect();
        let layout = Radix3Layout::new(image.len() as u64).unwrap();
        assert_eq!(
            (layout.image_pages, layout.level2_pages, layout.level1_pages),
            (3, 1, 1)
        );
        let mut buf = vec![0xeeu8; layout.buffer_len() as usize];
        let pages = addrs(layout.total_pages());
        let r = radix3(&image, &mut buf, &pages).unwrap();
        assert_eq!(r.level0, pages[0]);
        check_every_entry(&layout, &buf, &pages);
        let at = layout.image_offset() as usize;
        assert_eq!(&buf[at..at + image.len()], &image[..]);
        assert!(buf[at + image.len()..].iter().all(|b| *b == 0));
    }

    #[test]
    fn exact_page_multiple_has_no_extra_page() {
        let layout = Radix3Layout::new(2 * GSP_PAGE_SIZE as u64).unwrap();
        assert_eq!(layout.image_pages, 2);
        let layout = Radix3Layout::new(2 * GSP_PAGE_SIZE as u64 + 1).unwrap();
        assert_eq!(layout.image_pages, 3);
    }

    #[test]
    fn multi_page_level1_gets_one_level0_entry_per_page() {
        // 512 * 512 + 1 image pages: 513 level-2 pages, 2 level-1 pages.
        let len = (ENTRIES_PER_PAGE * ENTRIES_PER_PAGE + 1) * GSP_PAGE_SIZE as u64 - 100;
        let layout = Radix3Layout::new(len).unwrap();
        assert_eq!((layout.level2_pages, layout.level1_pages), (513, 2));
        // Only the table pages are needed (the image would be 1 GiB).
        let mut tables = vec![0xeeu8; (layout.table_pages() * GSP_PAGE_SIZE as u64) as usize];
        let pages = addrs(layout.total_pages());
        assert_eq!(
            write_tables(&layout, &mut tables, &pages).unwrap(),
            pages[0]
        );
        check_every_entry(&layout, &tables, &pages);
    }

    #[test]
    fn level0_boundary_is_512_level1_pages() {
        let max_pages = ENTRIES_PER_PAGE.pow(3);
        let max = Radix3Layout::new(max_pages * GSP_PAGE_SIZE as u64).unwrap();
        assert_eq!(max.level1_pages, ENTRIES_PER_PAGE);
        assert!(matches!(
            Radix3Layout::new(max_pages * GSP_PAGE_SIZE as u64 + 1),
            Err(StageError::TooLarge { .. })
        ));
        assert!(matches!(Radix3Layout::new(0), Err(StageError::Empty)));
    }

    #[test]
    fn wrong_buffer_page_count_and_alignment_are_refused() {
        let image = [1u8; 5000];
        let layout = Radix3Layout::new(5000).unwrap();
        let pages = addrs(layout.total_pages());
        let mut small = vec![0u8; layout.buffer_len() as usize - 1];
        assert!(matches!(
            radix3(&image, &mut small, &pages),
            Err(StageError::BufferSize { .. })
        ));
        let mut buf = vec![0u8; layout.buffer_len() as usize];
        assert!(matches!(
            radix3(&image, &mut buf, &pages[1..]),
            Err(StageError::PageCount { .. })
        ));
        let mut bad = pages.clone();
        bad[2] += 8;
        assert!(matches!(
            radix3(&image, &mut buf, &bad),
            Err(StageError::Unaligned { index: 2, .. })
        ));
    }

    #[test]
    fn radix3_from_source_equals_radix3_from_slice() {
        let bytes = fixture::gsp_elf(9000, "1", &["ga10x"]);
        let gsp = crate::gsp::GspImage::parse(&bytes[..]).unwrap();
        let layout = Radix3Layout::new(gsp.image.size()).unwrap();
        let pages = addrs(layout.total_pages());
        let mut a = vec![0u8; layout.buffer_len() as usize];
        let mut b = a.clone();
        radix3_from(&bytes[..], gsp.image, &mut a, &pages).unwrap();
        let img = &bytes[gsp.image.offset() as usize..gsp.image.end() as usize];
        radix3(img, &mut b, &pages).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn psp_layout_follows_boot_order_in_1mib_slots() {
        // SOS, SYS_DRV, KDB, SPL, SOC_DRV in file order; boot order differs.
        let bytes =
            fixture::amd_psp_v2(&[(1, 0x1800), (2, 0x100), (3, 0x40), (5, 0x20), (7, 0x10)]);
        let img = AmdImage::parse(&bytes[..], "psp_14_0_2_sos.bin").unwrap();
        let layout = psp_layout(&img, Some(14)).unwrap();
        let order: Vec<_> = layout.steps.iter().map(|s| s.component).collect();
        assert_eq!(order, ["KDB", "SPL", "SYS_DRV", "SOC_DRV", "SOS"]);
        for (i, s) in layout.steps.iter().enumerate() {
            assert_eq!(s.offset, i as u64 * PSP_ALIGN);
            assert_eq!(s.offset % PSP_ALIGN, 0);
        }
        assert_eq!(layout.buffer_len, 5 * PSP_ALIGN);
        let mut buf = vec![0xffu8; layout.buffer_len as usize];
        stage_psp(&layout, &bytes[..], &mut buf).unwrap();
        let sos = &layout.steps[4];
        let src = &bytes[sos.source.offset() as usize..sos.source.end() as usize];
        assert_eq!(
            &buf[sos.offset as usize..(sos.offset + sos.size) as usize],
            src
        );
        assert!(
            buf[(sos.offset + sos.size) as usize..]
                .iter()
                .all(|b| *b == 0)
        );
    }

    #[test]
    fn mp0_13_spl_step_reuses_the_kdb_slot() {
        let bytes = fixture::amd_psp_v2(&[(1, 0x100), (2, 0x100), (3, 0x40)]);
        let img = AmdImage::parse(&bytes[..], "psp_13_0_0_sos.bin").unwrap();
        let layout = psp_layout(&img, Some(13)).unwrap();
        let order: Vec<_> = layout
            .steps
            .iter()
            .map(|s| (s.component, s.offset))
            .collect();
        assert_eq!(
            order,
            [
                ("KDB", 0),
                ("SPL", 0),
                ("SYS_DRV", PSP_ALIGN),
                ("SOS", 2 * PSP_ALIGN)
            ]
        );
        assert_eq!(layout.steps[1].command, psp_cmd::PSP_BL__LOAD_TOS_SPL_TABLE);
    }

    #[test]
    fn component_larger_than_1mib_pushes_the_next_slot() {
        let bytes = fixture::amd_psp_v2(&[(2, 0x10_0001), (1, 0x10)]);
        let img = AmdImage::parse(&bytes[..], "psp_13_0_0_sos.bin").unwrap();
        let layout = psp_layout(&img, None).unwrap();
        assert_eq!(layout.steps[1].offset, 2 * PSP_ALIGN);
    }

    #[test]
    fn psp_without_sos_is_refused() {
        let bytes = fixture::amd_psp_v2(&[(2, 0x10)]);
        let img = AmdImage::parse(&bytes[..], "psp_13_0_0_sos.bin").unwrap();
        assert!(matches!(
            psp_layout(&img, None),
            Err(StageError::Missing { component: "SOS" })
        ));
    }
}
