//! Resizable BAR: ask for the largest size (or the one requested), fall back on ENOSPC.
//!
//! Writing resourceN_resize fails with ENOSPC when the bridge window above has no
//! room, and a smaller size may then fit (docs/hardware/pci-takeover.md, "Resizable
//! BAR"); any other refusal (EBUSY, a bridge that cannot move, no privilege) holds for
//! every size and the BAR keeps its own. The kernel moves the device's other BARs as it
//! resizes, so every BAR is read again afterwards. Only with no driver bound.

use super::{Progress, Taker};
use rig_model::CapDetail;

use crate::{
    error::{Class, Classify, Reason},
    pci::{self, Bdf, ids::PciIds},
};

/// What size to ask for, and what a resize did: the shared vocabulary's. Users' text
/// ("max", "32G") is parsed by the client; rigd gets the typed request.
pub use rig_model::take::{BarSize, ResizeOutcome};

/// Why a resize could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    #[error("{bdf} has no resizable BAR (no Resizable BAR capability)")]
    NotResizable { bdf: Bdf },
    #[error(
        "BAR{bar} of {bdf} is not resizable (its Resizable BAR capability lists only {listed:?})"
    )]
    BarNotResizable { bdf: Bdf, bar: u8, listed: Vec<u8> },
    #[error(
        "The kernel offers no resource{bar}_resize for {bdf} (kernel before 5.15, or the BAR is not resizable)"
    )]
    NoResizeFile { bdf: Bdf, bar: u8 },
    #[error("{bdf} is bound to {driver}: a BAR can be resized only with no driver bound")]
    DriverBound { bdf: Bdf, driver: String },
    #[error("BAR{bar} of {bdf} cannot be {size} bytes; it supports {supported:?}")]
    Unsupported {
        bdf: Bdf,
        bar: u8,
        size: u64,
        supported: Vec<u64>,
    },
    #[error(
        "The kernel refused to resize BAR{bar} of {bdf} to {size} bytes; the BAR keeps its size"
    )]
    Refused {
        bdf: Bdf,
        bar: u8,
        size: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("Failed to read {bdf}")]
    Read {
        bdf: Bdf,
        #[source]
        source: pci::PciError,
    },
}

impl Classify for ResizeError {
    fn class(&self) -> Class {
        let (reason, bdf) = match self {
            Self::Unsupported { bdf, .. } => (Reason::BarSizeUnsupported, bdf),
            Self::BarNotResizable { bdf, .. } => (Reason::BarNotResizable, bdf),
            Self::NotResizable { bdf } => (Reason::NotResizable, bdf),
            Self::NoResizeFile { bdf, .. } => (Reason::NoResizeFile, bdf),
            Self::DriverBound { bdf, .. } => (Reason::DriverBound, bdf),
            Self::Refused { bdf, .. } | Self::Read { bdf, .. } => (Reason::ResizeFailed, bdf),
        };
        Class::new(reason).on(bdf).at("resize")
    }
}

/// Resizes `bar` (or, with `None`, the BAR that can grow largest: the VRAM aperture)
/// of the driverless function `bdf`.
///
/// # Errors
/// [`ResizeError`]; running out of room at every size is not an error but a report
/// with `no_room` and `small_bar` set.
pub fn resize(
    taker: &Taker,
    bdf: Bdf,
    bar: Option<u8>,
    size: BarSize,
    progress: Progress<'_>,
) -> Result<ResizeOutcome, ResizeError> {
    let root = taker.sysfs.root();
    if let Some(driver) = root.link_name(bdf, "driver") {
        return Err(ResizeError::DriverBound { bdf, driver });
    }
    let ids = PciIds::empty();
    let read = || pci::inspect(root, &ids, bdf).map_err(|source| ResizeError::Read { bdf, source });
    let dev = read()?;
    let entries: Vec<(u8, Vec<u64>, u64)> = dev
        .extended_capabilities
        .iter()
        .filter_map(|c| match &c.detail {
            Some(CapDetail::ResizableBar {
                virtual_function: false,
                entries,
            }) => Some(
                entries
                    .iter()
                    .map(|e| (e.bar, e.supported_sizes.clone(), e.current_size)),
            ),
            _ => None,
        })
        .flatten()
        .collect();
    if entries.is_empty() {
        return Err(ResizeError::NotResizable { bdf });
    }
    let chosen = match bar {
        Some(b) => {
            entries
                .iter()
                .find(|e| e.0 == b)
                .ok_or_else(|| ResizeError::BarNotResizable {
                    bdf,
                    bar: b,
                    listed: entries.iter().map(|e| e.0).collect(),
                })?
        }
        None => entries
            .iter()
            .max_by_key(|e| e.1.last().copied().unwrap_or(0))
            .expect("entries is not empty"),
    };
    let (bar, supported, current) = (chosen.0, chosen.1.clone(), chosen.2);
    if !dev.sysfs.resize_files.contains(&bar) {
        return Err(ResizeError::NoResizeFile { bdf, bar });
    }
    let largest = supported.last().copied().unwrap_or(current);
    let target = match size {
        BarSize::Keep => current,
        BarSize::Max => largest,
        BarSize::Bytes(b) if supported.contains(&b) => b,
        BarSize::Bytes(b) => {
            return Err(ResizeError::Unsupported {
                bdf,
                bar,
                size: b,
                supported,
            });
        }
    };
    let before_addrs: Vec<(u8, u64)> = dev.bars.iter().map(|b| (b.index, b.address)).collect();
    let mut report = ResizeOutcome {
        bar,
        before: current,
        after: current,
        no_room: Vec::new(),
        moved: Vec::new(),
        small_bar: None,
    };
    // Larger sizes first, from the target down to just above the current size;
    // a shrink (target below current) is tried as asked.
    let mut candidates: Vec<u64> = supported
        .iter()
        .copied()
        .filter(|&s| s <= target && (s > current || s == target))
        .collect();
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    if target != current {
        for s in candidates {
            let code = s.trailing_zeros().saturating_sub(20);
            progress(&format!("resize BAR{bar} to {}", human(s)));
            match taker.sysfs.resize(bdf, bar, code) {
                Ok(()) => {
                    report.after = s;
                    break;
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    progress(&format!(
                        "no room for {} above BAR{bar}; trying smaller",
                        human(s)
                    ));
                    report.no_room.push(s);
                }
                Err(source) => {
                    return Err(ResizeError::Refused {
                        bdf,
                        bar,
                        size: s,
                        source,
                    });
                }
            }
        }
    }
    let after = read()?;
    report.moved = after
        .bars
        .iter()
        .filter(|b| b.index != bar)
        .filter_map(|b| {
            let old = before_addrs.iter().find(|(i, _)| *i == b.index)?.1;
            (old != b.address).then_some((b.index, old, b.address))
        })
        .collect();
    if report.after < largest {
        report.small_bar = Some(format!(
            "small BAR: BAR{bar} is {} of the {} the device supports",
            human(report.after),
            human(largest)
        ));
    }
    Ok(report)
}

/// 256M, 32G.
pub fn human(b: u64) -> String {
    match b.trailing_zeros() {
        40.. => format!("{}T", b >> 40),
        30.. => format!("{}G", b >> 30),
        20.. => format!("{}M", b >> 20),
        _ => format!("{b}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_with_the_largest_whole_suffix() {
        assert_eq!(human(256 << 20), "256M");
        assert_eq!(human(1 << 40), "1T");
    }
}
