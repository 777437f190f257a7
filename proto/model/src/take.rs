//! The take-over vocabulary: how rig holds a device ([`Mode`], [`HeldState`]), what a
//! person asks of it ([`ResetMethod`], [`BarSize`]), who leases it whole
//! ([`LeaseHolder`]) and what a resize did ([`ResizeOutcome`]).
//!
//! Flow: rigctl parses a person's text into these types (their `FromStr` is the one
//! parser of that text; rigd never parses it) → `rig-client` → `rig-proto` (`convert::
//! take`, once each way) → rigd's `service::take` → `take`, which works in the same
//! types and journals [`Mode`] and [`ResetMethod`] in their [`as_str`](Mode::as_str)
//! spelling. Held devices come back the same way.
//!
//! One module for all of it because each type is a word of one conversation (detach,
//! attach, reset, resize, status) that rigd, the wire and every client must spell
//! alike; they were spelled once in rigd and again in rig-client. The spellings are
//! the JSON schema (docs/rigctl-json.md, "Take-over") and the journal's
//! text: snake_case, never renamed.
//!
//! Not here: doing any of it (rigd's `take`), the wire messages (`rig-proto`), the
//! held device as a whole (rigd's `rig::HeldView`, rig-client's `take::HeldDevice`),
//! which carry rigd's and the client's own types.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::dma::SessionId;

/// How rig holds a device; serialised as "vfio" or "sysfs".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Bound to vfio-pci; DMA confined by the IOMMU.
    Vfio,
    /// Driverless, driven through sysfs `resourceN`; DMA is unconfined.
    Sysfs,
}

impl Mode {
    /// Every mode, in the order a command line lists them.
    pub const ALL: [Self; 2] = [Self::Vfio, Self::Sysfs];

    /// "vfio" or "sysfs": what rigctl takes, the journal writes and JSON prints.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Vfio => "vfio",
            Self::Sysfs => "sysfs",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = ArgError;

    /// "vfio" or "sysfs".
    fn from_str(s: &str) -> Result<Self, ArgError> {
        match s {
            "vfio" => Ok(Self::Vfio),
            "sysfs" => Ok(Self::Sysfs),
            _ => Err(ArgError::Mode(s.to_owned())),
        }
    }
}

/// Which reset to use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetMethod {
    /// VFIO's reset (VFIO_DEVICE_RESET) when held by VFIO, else the kernel's first
    /// method.
    #[default]
    Auto,
    /// The kernel's function level reset.
    Flr,
    /// The kernel's power-management reset (D3hot and back).
    Pm,
    /// The kernel's secondary bus reset.
    Bus,
}

impl ResetMethod {
    /// Every method, in the order a command line lists them.
    pub const ALL: [Self; 4] = [Self::Auto, Self::Flr, Self::Pm, Self::Bus];

    /// "auto", "flr", "pm" or "bus": the kernel's `reset_method` names for the last
    /// three, and the journal's spelling of all four.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Flr => "flr",
            Self::Pm => "pm",
            Self::Bus => "bus",
        }
    }
}

impl fmt::Display for ResetMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ResetMethod {
    type Err = ArgError;

    /// "auto", "flr", "pm" or "bus".
    fn from_str(s: &str) -> Result<Self, ArgError> {
        match s {
            "auto" => Ok(Self::Auto),
            "flr" => Ok(Self::Flr),
            "pm" => Ok(Self::Pm),
            "bus" => Ok(Self::Bus),
            _ => Err(ArgError::ResetMethod(s.to_owned())),
        }
    }
}

/// The size to give a BAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarSize {
    /// The size it has (a detach's default; no size for a resize).
    Keep,
    /// The largest the device offers and its bridge has room for.
    Max,
    /// Exactly this many bytes.
    Bytes(u64),
}

impl FromStr for BarSize {
    type Err = ArgError;

    /// "keep", "max", or a size: bytes, or with a K/M/G/T suffix ("256M", "32G").
    fn from_str(s: &str) -> Result<Self, ArgError> {
        match s {
            "keep" => Ok(Self::Keep),
            "max" => Ok(Self::Max),
            _ => parse_size(s)
                .map(Self::Bytes)
                .ok_or_else(|| ArgError::Size(s.to_owned())),
        }
    }
}

/// "256M" → 268435456; `None` for anything else, or a size past 2^64.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, shift) = [('K', 10), ('M', 20), ('G', 30), ('T', 40)]
        .into_iter()
        .find_map(|(c, shift)| {
            s.strip_suffix(c)
                .or_else(|| s.strip_suffix(c.to_ascii_lowercase()))
                .map(|n| (n, shift))
        })
        .unwrap_or((s, 0));
    num.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// Text that names no take-over option: what rigctl's arguments are refused with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    #[error("unknown mode `{0}` (vfio or sysfs)")]
    Mode(String),
    #[error("unknown reset method `{0}` (auto, flr, pm, bus)")]
    ResetMethod(String),
    #[error("`{0}` is not a size: use keep, max, or e.g. 256M, 32G")]
    Size(String),
}

/// Where a held device is; serialised as "held" or "busy".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldState {
    /// Held, nothing under way.
    Held,
    /// Another operation on it is under way.
    Busy,
}

impl HeldState {
    /// "held" or "busy".
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Busy => "busy",
        }
    }
}

impl fmt::Display for HeldState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The holder of a whole-device lease (docs/lease.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LeaseHolder {
    pub uid: u32,
    pub pid: i32,
    /// When the lease began, in seconds since the epoch.
    pub since_unix: u64,
    /// The DMA session the device is lent in.
    pub session: SessionId,
}

/// What a resize did.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ResizeOutcome {
    pub bar: u8,
    /// The BAR's size before and after, in bytes.
    pub before: u64,
    pub after: u64,
    /// Sizes refused for lack of room, largest first.
    pub no_room: Vec<u64>,
    /// Other BARs the kernel moved: (bar, from, to).
    pub moved: Vec<(u8, u64, u64)>,
    /// Set when the BAR stays smaller than the largest size the device offers.
    pub small_bar: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_suffixes_and_reject_junk() {
        assert_eq!("256M".parse::<BarSize>(), Ok(BarSize::Bytes(256 << 20)));
        assert_eq!("32G".parse::<BarSize>(), Ok(BarSize::Bytes(32 << 30)));
        assert_eq!("max".parse::<BarSize>(), Ok(BarSize::Max));
        "lots".parse::<BarSize>().expect_err("not a size");
        assert_eq!(parse_size("99999999999T"), None);
        assert_eq!("keep".parse::<BarSize>(), Ok(BarSize::Keep));
        assert_eq!("4k".parse::<BarSize>(), Ok(BarSize::Bytes(4096)));
        assert_eq!("1T".parse::<BarSize>(), Ok(BarSize::Bytes(1 << 40)));
        assert_eq!("4096".parse::<BarSize>(), Ok(BarSize::Bytes(4096)));
        assert_eq!(parse_size("16777215T"), Some(16_777_215 << 40));
        assert_eq!(parse_size("16777216T"), None);
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn unknown_words_are_refused_with_the_choices() {
        assert_eq!("sysfs".parse::<Mode>(), Ok(Mode::Sysfs));
        assert_eq!("vfio".parse::<Mode>(), Ok(Mode::Vfio));
        assert_eq!(
            "magic".parse::<Mode>().expect_err("magic").to_string(),
            "unknown mode `magic` (vfio or sysfs)"
        );
        assert_eq!("bus".parse::<ResetMethod>(), Ok(ResetMethod::Bus));
        assert_eq!(
            "warm".parse::<ResetMethod>().expect_err("warm").to_string(),
            "unknown reset method `warm` (auto, flr, pm, bus)"
        );
        assert_eq!(
            "lots".parse::<BarSize>().expect_err("lots").to_string(),
            "`lots` is not a size: use keep, max, or e.g. 256M, 32G"
        );
    }

    #[test]
    fn each_word_parses_back_to_what_printed_it_as_serde_spells_it() {
        for m in [Mode::Vfio, Mode::Sysfs] {
            assert_eq!(m.as_str().parse::<Mode>(), Ok(m));
            assert_eq!(serde_json::to_string(&m).expect("json"), format!("\"{m}\""));
        }
        for m in [
            ResetMethod::Auto,
            ResetMethod::Flr,
            ResetMethod::Pm,
            ResetMethod::Bus,
        ] {
            assert_eq!(m.as_str().parse::<ResetMethod>(), Ok(m));
            assert_eq!(serde_json::to_string(&m).expect("json"), format!("\"{m}\""));
        }
        for s in [HeldState::Held, HeldState::Busy] {
            assert_eq!(serde_json::to_string(&s).expect("json"), format!("\"{s}\""));
        }
    }
}
