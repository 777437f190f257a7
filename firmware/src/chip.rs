//! Which GPU is which: NVIDIA chips (from a name or a PCI device id), their architecture and
//! the GSP-RM signature family each one takes; AMD IP versions as given on the command line.
//!
//! The signature table answers "which `.fwsignature_*` section does this GPU take" (nova-core
//! `firmware/gsp.rs`, nouveau `gsp/*.c` `.sig_section`): Turing → `tu10x` except TU116/TU117
//! → `tu11x`; GA100 → `ga100`; GA10x → `ga10x`; AD10x → `ad10x`; GH100 (H100, H200) →
//! `gh100`; GB100/GB102 → `gb10x`; GB20x → `gb20x`.
//!
//! Two places where the files disagree with nova-core, and the files win:
//! - GA100 boots the Turing image (`gsp_tu10x.bin`), but that image carries its own
//!   `.fwsignature_ga100` section (Debian's 535.113.01 and 535.261.03 files; nouveau
//!   `ga100.c` uses it, and linux-firmware builds the GA100 TLV from it). nova-core picks
//!   `.fwsignature_tu10x` for GA100, which is another chip's signature.
//! - Hopper: nova-core asks for `.fwsignature_gh10x`; the images name it `.fwsignature_gh100`
//!   (nouveau `gh100.c` agrees). Both names are tried, `gh100` first.
//!
//! Device ids: NVIDIA gives each chip blocks of 0x80 device ids. The ranges below come from the
//! PCI ID database (`pci.ids`, Debian's 2023-04 snapshot, `/usr/share/misc/pci.ids`) for
//! Turing to Hopper, and for Blackwell from later `pci.ids` entries (2b85 GB202 RTX 5090, 2c02
//! GB203 RTX 5080, 2f04 GB205 RTX 5070, 2d04 GB206 RTX 5060 Ti, 2901 GB100 B200); the GB207
//! block is inferred from the 0x80-block pattern. HDMI audio functions (e.g. 0x228b) fall
//! outside every range. Once BAR0 can be read, `NV_PMC_BOOT_0`/`BOOT_42` are authoritative.

use std::fmt;
use std::str::FromStr;

/// NVIDIA architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum NvArch {
    /// TU10x, TU11x.
    Turing,
    /// GA10x.
    Ampere,
    /// AD10x.
    Ada,
    /// GH100.
    Hopper,
    /// GB10x, GB20x.
    Blackwell,
}

/// GSP-RM signature family: the suffix of a `.fwsignature_*` section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignatureFamily {
    /// `tu10x`.
    Tu10x,
    /// `tu11x`.
    Tu11x,
    /// `ga100`.
    Ga100,
    /// `ga10x`.
    Ga10x,
    /// `ad10x`.
    Ad10x,
    /// `gh100` (alias `gh10x`).
    Gh100,
    /// `gb10x`.
    Gb10x,
    /// `gb20x`.
    Gb20x,
}

impl SignatureFamily {
    /// Section suffixes to look for, preferred first.
    pub fn suffixes(self) -> &'static [&'static str] {
        match self {
            SignatureFamily::Tu10x => &["tu10x"],
            SignatureFamily::Tu11x => &["tu11x"],
            SignatureFamily::Ga100 => &["ga100"],
            SignatureFamily::Ga10x => &["ga10x"],
            SignatureFamily::Ad10x => &["ad10x"],
            SignatureFamily::Gh100 => &["gh100", "gh10x"],
            SignatureFamily::Gb10x => &["gb10x"],
            SignatureFamily::Gb20x => &["gb20x"],
        }
    }

    /// The family's name (first suffix).
    pub fn name(self) -> &'static str {
        self.suffixes()[0]
    }
}

macro_rules! chips {
    ($($chip:ident => $arch:ident, $sig:ident;)*) => {
        /// An NVIDIA GPU chip that boots through GSP-RM.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
        pub enum NvChip { $(
            #[doc = stringify!($chip)]
            $chip,
        )* }

        impl NvChip {
            /// Every chip, oldest first.
            pub const ALL: &'static [NvChip] = &[$(NvChip::$chip),*];

            /// The chip's name, e.g. `GA102`.
            pub fn name(self) -> &'static str {
                match self { $(NvChip::$chip => stringify!($chip)),* }
            }

            /// Its architecture.
            pub fn arch(self) -> NvArch {
                match self { $(NvChip::$chip => NvArch::$arch),* }
            }

            /// The signature family its GSP-RM image must carry.
            pub fn signature_family(self) -> SignatureFamily {
                match self { $(NvChip::$chip => SignatureFamily::$sig),* }
            }
        }
    };
}

chips! {
    TU102 => Turing, Tu10x;
    TU104 => Turing, Tu10x;
    TU106 => Turing, Tu10x;
    TU116 => Turing, Tu11x;
    TU117 => Turing, Tu11x;
    GA100 => Ampere, Ga100;
    GA102 => Ampere, Ga10x;
    GA103 => Ampere, Ga10x;
    GA104 => Ampere, Ga10x;
    GA106 => Ampere, Ga10x;
    GA107 => Ampere, Ga10x;
    AD102 => Ada, Ad10x;
    AD103 => Ada, Ad10x;
    AD104 => Ada, Ad10x;
    AD106 => Ada, Ad10x;
    AD107 => Ada, Ad10x;
    GH100 => Hopper, Gh100;
    GB100 => Blackwell, Gb10x;
    GB102 => Blackwell, Gb10x;
    GB202 => Blackwell, Gb20x;
    GB203 => Blackwell, Gb20x;
    GB205 => Blackwell, Gb20x;
    GB206 => Blackwell, Gb20x;
    GB207 => Blackwell, Gb20x;
}

/// PCI device id ranges (inclusive) of NVIDIA GPU functions, per chip. See the module docs.
pub const NV_DEVICE_RANGES: &[(u16, u16, NvChip)] = &[
    (0x1e00, 0x1e7f, NvChip::TU102),
    (0x1e80, 0x1eff, NvChip::TU104),
    (0x1f00, 0x1f7f, NvChip::TU106),
    (0x1f80, 0x1fff, NvChip::TU117),
    (0x2080, 0x20ff, NvChip::GA100),
    (0x2180, 0x21ff, NvChip::TU116),
    (0x2200, 0x227f, NvChip::GA102),
    (0x2300, 0x237f, NvChip::GH100),
    (0x2400, 0x247f, NvChip::GA103),
    (0x2480, 0x24ff, NvChip::GA104),
    (0x2500, 0x257f, NvChip::GA106),
    (0x2580, 0x25ff, NvChip::GA107),
    (0x2680, 0x26ff, NvChip::AD102),
    (0x2700, 0x277f, NvChip::AD103),
    (0x2780, 0x27ff, NvChip::AD104),
    (0x2800, 0x287f, NvChip::AD106),
    (0x2880, 0x28ff, NvChip::AD107),
    (0x2900, 0x297f, NvChip::GB100),
    (0x2980, 0x29ff, NvChip::GB102),
    (0x2b80, 0x2bff, NvChip::GB202),
    (0x2c00, 0x2c7f, NvChip::GB203),
    (0x2d00, 0x2d7f, NvChip::GB206),
    (0x2d80, 0x2dff, NvChip::GB207),
    (0x2f00, 0x2f7f, NvChip::GB205),
];

/// PCI vendor id of NVIDIA.
pub const PCI_VENDOR_ID_NVIDIA: u16 = 0x10de;
/// PCI vendor id of AMD/ATI.
pub const PCI_VENDOR_ID_ATI: u16 = 0x1002;

impl NvChip {
    /// The chip of an NVIDIA PCI device id, if it is a GSP-booted GPU this crate knows.
    pub fn from_device_id(id: u16) -> Option<NvChip> {
        NV_DEVICE_RANGES
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&id))
            .map(|(_, _, chip)| *chip)
    }

    /// The directory under `nvidia/` that holds its firmware (`ga102`).
    pub fn dir(self) -> String {
        self.name().to_ascii_lowercase()
    }

    /// Boots through FMC (Hopper, Blackwell) rather than Booter (Turing to Ada).
    pub fn uses_fmc(self) -> bool {
        matches!(self.arch(), NvArch::Hopper | NvArch::Blackwell)
    }

    /// The driver package's GSP-RM image for this chip (`gsp_tu10x.bin` or `gsp_ga10x.bin`).
    pub fn driver_gsp_image(self) -> &'static str {
        match self.signature_family() {
            SignatureFamily::Tu10x | SignatureFamily::Tu11x | SignatureFamily::Ga100 => {
                "gsp_tu10x.bin"
            }
            _ => "gsp_ga10x.bin",
        }
    }
}

impl fmt::Display for NvChip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the chip tables.
#[derive(Debug, thiserror::Error)]
pub enum ChipError {
    /// A chip name this crate does not know.
    #[error(
        "unknown NVIDIA chip {name:?} (known: TU102…TU117, GA100…GA107, AD102…AD107, GH100, GB100, GB102, GB202…GB207)"
    )]
    UnknownChip {
        /// The name given.
        name: String,
    },
    /// A malformed AMD IP version argument.
    #[error("IP version {arg:?} is not of the form NAME=MAJOR.MINOR.REV (e.g. mp0=13.0.10)")]
    IpVersion {
        /// The argument.
        arg: String,
    },
}

impl FromStr for NvChip {
    type Err = ChipError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        NvChip::ALL
            .iter()
            .copied()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| ChipError::UnknownChip { name: s.to_owned() })
    }
}

/// The signature family a chip takes (the function form of [`NvChip::signature_family`]).
pub fn signature_family(chip: NvChip) -> SignatureFamily {
    chip.signature_family()
}

/// One AMD IP block's version, e.g. `mp0=13.0.10`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct IpVersion {
    /// The IP, lower case: `mp0` (PSP), `mp1` (SMU), `gc`, `sdma`, `vcn`, `dcn`, `vpe`, `isp`…
    pub ip: String,
    /// Major.
    pub major: u16,
    /// Minor.
    pub minor: u16,
    /// Revision.
    pub rev: u16,
}

impl IpVersion {
    /// `major_minor_rev`, the way amdgpu spells versions in file names.
    pub fn underscored(&self) -> String {
        format!("{}_{}_{}", self.major, self.minor, self.rev)
    }
}

impl fmt::Display for IpVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}.{}.{}", self.ip, self.major, self.minor, self.rev)
    }
}

impl FromStr for IpVersion {
    type Err = ChipError;

    fn from_str(arg: &str) -> Result<Self, Self::Err> {
        let err = || ChipError::IpVersion {
            arg: arg.to_owned(),
        };
        let (ip, ver) = arg.split_once('=').ok_or_else(err)?;
        let ip = ip.trim().to_ascii_lowercase();
        if ip.is_empty() || !ip.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(err());
        }
        let mut parts = ver
            .trim()
            .split('.')
            .map(|p| p.parse::<u16>().map_err(|_| err()));
        let major = parts.next().ok_or_else(err)??;
        let minor = parts.next().ok_or_else(err)??;
        let rev = parts.next().unwrap_or(Ok(0))?;
        if parts.next().is_some() {
            return Err(err());
        }
        Ok(IpVersion {
            ip,
            major,
            minor,
            rev,
        })
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn signature_families_follow_the_files_sections() {
        let cases = [
            (NvChip::TU102, "tu10x"),
            (NvChip::TU116, "tu11x"),
            (NvChip::TU117, "tu11x"),
            (NvChip::GA100, "ga100"),
            (NvChip::GA102, "ga10x"),
            (NvChip::AD104, "ad10x"),
            (NvChip::GH100, "gh100"),
            (NvChip::GB102, "gb10x"),
            (NvChip::GB207, "gb20x"),
        ];
        for (chip, fam) in cases {
            assert_eq!(signature_family(chip).name(), fam, "{chip}");
        }
    }

    #[test]
    fn device_ids_map_to_chips_at_range_edges() {
        assert_eq!(NvChip::from_device_id(0x2330), Some(NvChip::GH100)); // H100 SXM5
        assert_eq!(NvChip::from_device_id(0x2335), Some(NvChip::GH100)); // H200
        assert_eq!(NvChip::from_device_id(0x2204), Some(NvChip::GA102)); // RTX 3090
        assert_eq!(NvChip::from_device_id(0x2684), Some(NvChip::AD102)); // RTX 4090
        assert_eq!(NvChip::from_device_id(0x2b85), Some(NvChip::GB202)); // RTX 5090
        assert_eq!(NvChip::from_device_id(0x1e00), Some(NvChip::TU102));
        assert_eq!(NvChip::from_device_id(0x1dff), None);
        assert_eq!(NvChip::from_device_id(0x228b), None); // GA104 HDMI audio
    }

    #[test]
    fn ranges_do_not_overlap() {
        let mut r = NV_DEVICE_RANGES.to_vec();
        r.sort();
        for w in r.windows(2) {
            assert!(w[0].1 < w[1].0, "{:x?} overlaps {:x?}", w[0], w[1]);
        }
    }

    #[test]
    fn chip_names_parse_case_insensitively() {
        assert_eq!("gh100".parse::<NvChip>().unwrap(), NvChip::GH100);
        let err = "GX999".parse::<NvChip>().unwrap_err();
        assert!(matches!(err, ChipError::UnknownChip { .. }));
    }

    #[test]
    fn ip_versions_parse_with_optional_revision() {
        let v: IpVersion = "MP0=13.0.10".parse().unwrap();
        assert_eq!((v.ip.as_str(), v.major, v.minor, v.rev), ("mp0", 13, 0, 10));
        assert_eq!("gc=11.0".parse::<IpVersion>().unwrap().rev, 0);
        for bad in ["gc11.0.0", "gc=11.0.0.1", "gc=x.0.0", "=1.2.3"] {
            assert!(
                matches!(bad.parse::<IpVersion>(), Err(ChipError::IpVersion { .. })),
                "{bad}"
            );
        }
    }
}
