//! The RM's structure layouts, per driver release, and the choice among them.
//!
//! The kernel driver's parameter structs change between release branches, and the RM
//! refuses or misreads a struct of another size (escapes and controls check sizes;
//! RM_ALLOC copies its own size whatever is sent). So rigd reads the release
//! from `NV0000_CTRL_CMD_SYSTEM_GET_BUILD_VERSION_V2`, parses it here
//! ([`parse_release`]) and uses that release's layouts; a release with none is refused
//! with [`LayoutError::UnknownRelease`], which names it and the known ones.
//!
//! What differs, read in NVIDIA/open-gpu-kernel-modules (570.86.16, 570.211.01
//! `498793d5`, 575.64.05, 580.65.06, 580.142 `1a5075f8`, 590.44.01, 590.48.01
//! `2ccbad25`), for the structs the channel sequence uses:
//!
//! | struct | 570 | 575 | 580 | 590 |
//! |---|---|---|---|---|
//! | NVOS46_PARAMETERS (`sys::nvrm`) | 56 | 56 | 64 | 64 |
//! | NV_VASPACE_ALLOCATION_PARAMETERS | 48 | 48 | 56 | 56 |
//! | NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS | 2 | 3 | 3 | 3 |
//!
//! Every other struct in `r580` is byte-for-byte the same text in all seven. `r580`
//! holds them all; `r570` only its two differences; 575 and 590 are combinations of
//! the two and have no file. (590 also changes two UVM structs, UVM_FREE_PARAMS and
//! UVM_UNREGISTER_CHANNEL_PARAMS; rigd makes no UVM call: its address spaces are the
//! RM's own, see `space`.) No 580.159.04 tag exists (the H200's driver); it is taken
//! to share 580.142's layouts, as every 580 tag read does.
//!
//! Not here: issuing the calls (`sys::nvrm`), the sequence (`nvrm`).

pub mod r570;
pub mod r580;
pub mod topo;

use std::{fmt, os::fd::BorrowedFd};

use zerocopy::IntoBytes;

use crate::sys::nvrm::{self, NvHandle, Nvos46ParametersR570, Nvos46ParametersR580, RmError};

/// A driver release branch rigd has layouts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Release {
    R570,
    R575,
    R580,
    R590,
}

impl Release {
    /// Every release with layouts, oldest first.
    pub const KNOWN: [Self; 4] = [Self::R570, Self::R575, Self::R580, Self::R590];

    /// The branch number (the version's major part).
    pub fn major(self) -> u32 {
        match self {
            Self::R570 => 570,
            Self::R575 => 575,
            Self::R580 => 580,
            Self::R590 => 590,
        }
    }

    /// The release of `version`.
    ///
    /// # Errors
    /// [`LayoutError::UnknownRelease`] for a branch without layouts.
    pub fn for_version(version: &DriverVersion) -> Result<Self, LayoutError> {
        Self::KNOWN
            .into_iter()
            .find(|r| r.major() == version.major)
            .ok_or_else(|| LayoutError::UnknownRelease {
                version: version.text.clone(),
            })
    }

    /// The sizes of the structs that differ, as this release has them.
    pub fn sizes(self) -> Sizes {
        Sizes {
            nvos46: match self.map_memory_dma(MapMemoryDma::default()) {
                MapMemoryDmaParams::R570(p) => p.as_bytes().len(),
                MapMemoryDmaParams::R580(p) => p.as_bytes().len(),
            },
            vaspace: self.vaspace(VaSpace::default()).as_bytes().len(),
            gpfifo_schedule: self.gpfifo_schedule(false).as_bytes().len(),
        }
    }

    /// NV_VASPACE_ALLOCATION_PARAMETERS for FERMI_VASPACE_A.
    pub fn vaspace(self, v: VaSpace) -> VaSpaceParams {
        match self {
            Self::R570 | Self::R575 => VaSpaceParams::R570(r570::NvVaspaceAllocationParameters {
                index: v.index,
                flags: v.flags,
                va_size: v.va_size,
                big_page_size: v.big_page_size,
                va_base: v.va_base,
                ..Default::default()
            }),
            Self::R580 | Self::R590 => VaSpaceParams::R580(r580::NvVaspaceAllocationParameters {
                index: v.index,
                flags: v.flags,
                va_size: v.va_size,
                big_page_size: v.big_page_size,
                va_base: v.va_base,
                ..Default::default()
            }),
        }
    }

    /// NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS with `bEnable` set as asked.
    pub fn gpfifo_schedule(self, enable: bool) -> ScheduleParams {
        let b_enable = u8::from(enable);
        match self {
            Self::R570 => ScheduleParams::R570(r570::Nva06cCtrlGpfifoScheduleParams {
                b_enable,
                b_skip_submit: 0,
            }),
            Self::R575 | Self::R580 | Self::R590 => {
                ScheduleParams::R575(r580::Nva06cCtrlGpfifoScheduleParams {
                    b_enable,
                    ..Default::default()
                })
            }
        }
    }

    /// NVOS46_PARAMETERS for NV_ESC_RM_MAP_MEMORY_DMA.
    pub fn map_memory_dma(self, m: MapMemoryDma) -> MapMemoryDmaParams {
        match self {
            Self::R570 | Self::R575 => MapMemoryDmaParams::R570(Nvos46ParametersR570 {
                h_client: m.h_client,
                h_device: m.h_device,
                h_dma: m.h_dma,
                h_memory: m.h_memory,
                offset: m.offset,
                length: m.length,
                flags: m.flags,
                dma_offset: m.dma_offset,
                ..Default::default()
            }),
            Self::R580 | Self::R590 => MapMemoryDmaParams::R580(Nvos46ParametersR580 {
                h_client: m.h_client,
                h_device: m.h_device,
                h_dma: m.h_dma,
                h_memory: m.h_memory,
                offset: m.offset,
                length: m.length,
                flags: m.flags,
                dma_offset: m.dma_offset,
                ..Default::default()
            }),
        }
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.major())
    }
}

/// The known releases as "570, 575, 580, 590".
fn known_list() -> String {
    Release::KNOWN
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sizes, in bytes, of the structs that change between releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub nvos46: usize,
    pub vaspace: usize,
    pub gpfifo_schedule: usize,
}

impl fmt::Display for Sizes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "NVOS46_PARAMETERS {} B, NV_VASPACE_ALLOCATION_PARAMETERS {} B, \
             NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS {} B",
            self.nvos46, self.vaspace, self.gpfifo_schedule
        )
    }
}

/// A FERMI_VASPACE_A request, whatever the release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VaSpace {
    pub index: u32,
    pub flags: u32,
    pub va_size: u64,
    pub va_base: u64,
    pub big_page_size: u32,
}

/// NV_VASPACE_ALLOCATION_PARAMETERS in a release's layout.
#[derive(Debug, Clone, Copy)]
pub enum VaSpaceParams {
    R570(r570::NvVaspaceAllocationParameters),
    R580(r580::NvVaspaceAllocationParameters),
}

impl VaSpaceParams {
    /// The bytes for RM_ALLOC.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::R570(p) => p.as_bytes(),
            Self::R580(p) => p.as_bytes(),
        }
    }

    /// The bytes for RM_ALLOC, which writes them back.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        match self {
            Self::R570(p) => p.as_mut_bytes(),
            Self::R580(p) => p.as_mut_bytes(),
        }
    }
}

/// NVA06C_CTRL_GPFIFO_SCHEDULE_PARAMS in a release's layout.
#[derive(Debug, Clone, Copy)]
pub enum ScheduleParams {
    R570(r570::Nva06cCtrlGpfifoScheduleParams),
    /// 575 and later.
    R575(r580::Nva06cCtrlGpfifoScheduleParams),
}

impl ScheduleParams {
    /// The bytes for RM_CONTROL.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Self::R570(p) => p.as_bytes(),
            Self::R575(p) => p.as_bytes(),
        }
    }

    /// The bytes for RM_CONTROL, which writes them back.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        match self {
            Self::R570(p) => p.as_mut_bytes(),
            Self::R575(p) => p.as_mut_bytes(),
        }
    }
}

/// An RM_MAP_MEMORY_DMA request, whatever the release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapMemoryDma {
    pub h_client: NvHandle,
    pub h_device: NvHandle,
    pub h_dma: NvHandle,
    pub h_memory: NvHandle,
    pub offset: u64,
    pub length: u64,
    pub flags: u32,
    /// In with `NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE`; the GPU VA comes back.
    pub dma_offset: u64,
}

/// NVOS46_PARAMETERS in a release's layout.
#[derive(Debug, Clone, Copy)]
pub enum MapMemoryDmaParams {
    R570(Nvos46ParametersR570),
    R580(Nvos46ParametersR580),
}

impl MapMemoryDmaParams {
    /// Issues NV_ESC_RM_MAP_MEMORY_DMA; returns the GPU VA.
    ///
    /// # Errors
    /// As [`nvrm::rm_map_memory_dma`].
    pub fn issue(&mut self, ctl: BorrowedFd<'_>) -> Result<u64, RmError> {
        match self {
            Self::R570(p) => nvrm::rm_map_memory_dma(ctl, p),
            Self::R580(p) => nvrm::rm_map_memory_dma(ctl, p),
        }
    }
}

/// A driver version as the RM reports it, e.g. "580.159.04".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverVersion {
    /// The branch: 580.
    pub major: u32,
    /// 159.
    pub minor: u32,
    /// 4, when there is a third part.
    pub patch: Option<u32>,
    /// The text as the RM wrote it ("580.159.04").
    pub text: String,
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a build version does not select layouts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The fixed buffer holds no NUL: the RM's string did not fit, or this is not it.
    #[error("the RM's version buffer holds no NUL-terminated string")]
    NotTerminated,
    /// The string is empty.
    #[error("the RM reported an empty driver version")]
    Empty,
    /// The string is not `MAJOR.MINOR[.PATCH]` in decimal digits.
    #[error("the RM reported driver version {text:?}, which is not MAJOR.MINOR[.PATCH]")]
    Malformed { text: String },
    /// A well-formed version of a branch without layouts here.
    #[error(
        "NVIDIA driver {version} is of a release rigd has no layouts for (known releases: {})",
        known_list()
    )]
    UnknownRelease { version: String },
}

/// Parses a driver version from a fixed, NUL-terminated buffer such as
/// `driverVersionBuffer` of GET_BUILD_VERSION_V2.
///
/// # Errors
/// [`LayoutError::NotTerminated`], [`LayoutError::Empty`] or [`LayoutError::Malformed`].
pub fn parse_version(buf: &[u8]) -> Result<DriverVersion, LayoutError> {
    let end = buf
        .iter()
        .position(|&b| b == 0)
        .ok_or(LayoutError::NotTerminated)?;
    let raw = buf.get(..end).ok_or(LayoutError::NotTerminated)?;
    if raw.is_empty() {
        return Err(LayoutError::Empty);
    }
    let malformed = || LayoutError::Malformed {
        text: String::from_utf8_lossy(raw).into_owned(),
    };
    let text = std::str::from_utf8(raw).map_err(|_| malformed())?;
    let parts = text
        .split('.')
        .map(|p| {
            (!p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<u32>().ok())
                .flatten()
        })
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(malformed)?;
    let (major, minor, patch) = match parts.as_slice() {
        [major, minor] => (*major, *minor, None),
        [major, minor, patch] => (*major, *minor, Some(*patch)),
        _ => return Err(malformed()),
    };
    Ok(DriverVersion {
        major,
        minor,
        patch,
        text: text.to_owned(),
    })
}

/// The release whose layouts serve the driver version in `buf` (see
/// [`parse_version`]).
///
/// # Errors
/// As [`parse_version`], and [`LayoutError::UnknownRelease`].
pub fn parse_release(buf: &[u8]) -> Result<Release, LayoutError> {
    Release::for_version(&parse_version(buf)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_h200s_driver_selects_580() {
        assert_eq!(parse_release(b"580.159.04\0"), Ok(Release::R580));
    }

    #[test]
    fn a_two_part_version_parses() {
        let v = parse_version(b"580.142\0garbage after the NUL").expect("parses");
        assert_eq!((v.major, v.minor, v.patch), (580, 142, None));
        assert_eq!(parse_release(b"580.142\0"), Ok(Release::R580));
    }

    #[test]
    fn releases_570_575_and_590_select_their_own_layouts() {
        assert_eq!(parse_release(b"570.211.01\0"), Ok(Release::R570));
        assert_eq!(parse_release(b"575.64.05\0"), Ok(Release::R575));
        assert_eq!(parse_release(b"590.48.01\0"), Ok(Release::R590));
    }

    #[test]
    fn a_fixed_buffer_is_read_up_to_its_first_nul() {
        let mut buf = [0u8; 256];
        buf[..10].copy_from_slice(b"590.48.01\0");
        assert_eq!(parse_release(&buf), Ok(Release::R590));
    }

    #[test]
    fn an_unknown_release_is_refused_with_one_line_naming_it_and_the_known_ones() {
        let e = parse_release(b"595.45.04\0").expect_err("no 595 layouts");
        assert_eq!(
            e,
            LayoutError::UnknownRelease {
                version: "595.45.04".into()
            }
        );
        let line = e.to_string();
        assert_eq!(
            line,
            "NVIDIA driver 595.45.04 is of a release rigd has no layouts for \
             (known releases: 570, 575, 580, 590)"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn garbage_is_malformed() {
        for g in [
            &b"abc\0"[..],
            b"580\0",
            b"580.\0",
            b"580.x.1\0",
            b"5.8.0.1\0",
            b"\xff.1\0",
        ] {
            assert!(
                matches!(parse_version(g), Err(LayoutError::Malformed { .. })),
                "{g:?}"
            );
        }
    }

    #[test]
    fn an_empty_string_is_refused() {
        assert_eq!(parse_version(b"\0"), Err(LayoutError::Empty));
    }

    #[test]
    fn a_buffer_without_nul_is_refused() {
        assert_eq!(
            parse_version(b"580.159.04"),
            Err(LayoutError::NotTerminated)
        );
        assert_eq!(parse_version(b""), Err(LayoutError::NotTerminated));
    }

    #[test]
    fn each_release_selects_the_sizes_its_headers_have() {
        let s = |nvos46, vaspace, gpfifo_schedule| Sizes {
            nvos46,
            vaspace,
            gpfifo_schedule,
        };
        assert_eq!(Release::R570.sizes(), s(56, 48, 2));
        assert_eq!(Release::R575.sizes(), s(56, 48, 3));
        assert_eq!(Release::R580.sizes(), s(64, 56, 3));
        assert_eq!(Release::R590.sizes(), s(64, 56, 3));
    }

    #[test]
    fn map_memory_dma_uses_the_release_number_of_its_layout() {
        use crate::sys::nvrm::MapMemoryDmaParams as _;
        assert_eq!(Nvos46ParametersR570::CMD, 0xC038_4657);
        assert_eq!(Nvos46ParametersR580::CMD, 0xC040_4657);
        assert!(matches!(
            Release::R575.map_memory_dma(MapMemoryDma::default()),
            MapMemoryDmaParams::R570(_)
        ));
        assert!(matches!(
            Release::R590.map_memory_dma(MapMemoryDma::default()),
            MapMemoryDmaParams::R580(_)
        ));
    }
}
