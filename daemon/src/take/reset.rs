//! Function reset with bus mastering off, config saved before and verified after.

use std::time::Instant;

use super::{Progress, TakeError, Taken, Taker, journal::CONFIG_HEADER_LEN};
use crate::{
    error::{Class, Classify, Reason},
    pci::Bdf,
};

/// Which reset to use: the shared vocabulary's (users' text is parsed by the client).
pub use rig_model::take::ResetMethod;

/// The method's name in sysfs `reset_method`; `None` for auto, which picks by hold.
fn sysfs_name(m: ResetMethod) -> Option<&'static str> {
    match m {
        ResetMethod::Auto => None,
        ResetMethod::Flr | ResetMethod::Pm | ResetMethod::Bus => Some(m.as_str()),
    }
}

/// What a reset did.
#[derive(Debug, Clone, PartialEq)]
pub struct ResetReport {
    /// "vfio", or the sysfs method: "flr", "pm", "bus", or "kernel default".
    pub method: String,
    pub seconds: f64,
    /// Config offsets rig had to write back because the reset did not restore them.
    pub restored: Vec<u16>,
}

/// Why a reset failed.
#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    #[error("{bdf} offers no reset method (sysfs reset_method is empty)")]
    NoMethod { bdf: Bdf },
    #[error("{bdf} does not offer reset method {method} (it offers: {available})")]
    Unsupported {
        bdf: Bdf,
        method: &'static str,
        available: String,
    },
    #[error("Failed to reset {bdf} by {method}")]
    Failed {
        bdf: Bdf,
        method: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "Config space of {bdf} did not read back as saved after the reset (offsets {offsets:?})"
    )]
    Restore { bdf: Bdf, offsets: Vec<u16> },
    #[error(
        "The config saved before resetting {bdf} holds {len} bytes, too few to restore its header from"
    )]
    ShortSaved { bdf: Bdf, len: usize },
    #[error("Failed to read or write {bdf}'s config around the reset")]
    Config {
        bdf: Bdf,
        #[source]
        source: Box<TakeError>,
    },
}

impl Classify for ResetError {
    fn class(&self) -> Class {
        let (reason, bdf) = match self {
            Self::NoMethod { bdf } => (Reason::NoResetMethod, bdf),
            Self::Unsupported { bdf, .. } => (Reason::ResetMethodUnsupported, bdf),
            Self::Restore { bdf, .. } | Self::ShortSaved { bdf, .. } => (Reason::ResetRestore, bdf),
            Self::Failed { bdf, .. } | Self::Config { bdf, .. } => (Reason::ResetFailed, bdf),
        };
        Class::new(reason).on(bdf).at("reset")
    }
}

/// Header registers that hold state a reset clears and the kernel restores:
/// (offset, length). Command, cache line, latency, the six BARs, interrupt line.
const RESTORED: [(u16, u16); 4] = [(0x04, 2), (0x0c, 2), (0x10, 24), (0x3c, 1)];

/// Resets `t`'s function by `method`.
///
/// # Errors
/// [`ResetError`]: no method, an unsupported one, the reset failing, or config that
/// would not read back as saved.
pub fn reset(
    taker: &Taker,
    t: &Taken,
    method: ResetMethod,
    progress: Progress<'_>,
) -> Result<ResetReport, ResetError> {
    let bdf = t.bdf;
    let config_err = |e: TakeError| ResetError::Config {
        bdf,
        source: Box::new(e),
    };
    taker.stop_bus_master(bdf).map_err(config_err)?;
    // The registers checked after the reset all lie in the 64-byte header: read only
    // it, and refuse a short read rather than compare (and restore from) part of it.
    let read = || {
        let mut header = vec![0u8; CONFIG_HEADER_LEN];
        let n = taker
            .sysfs
            .root()
            .read_config_at(bdf, 0, &mut header)
            .map_err(|source| config_err(TakeError::Read { bdf, source }))?;
        if n < CONFIG_HEADER_LEN {
            return Err(config_err(TakeError::Read {
                bdf,
                source: crate::pci::PciError::ShortConfig { bdf, len: n },
            }));
        }
        Ok(header)
    };
    let saved = read()?;
    let start = Instant::now();
    let vfio_reset = t
        .hold
        .vfio()
        .filter(|v| v.device.info().is_ok_and(|i| i.can_reset()));
    let name = match (method, vfio_reset) {
        (ResetMethod::Auto, Some(v)) => {
            progress("reset through VFIO_DEVICE_RESET");
            v.device.reset().map_err(|e| ResetError::Failed {
                bdf,
                method: "vfio".into(),
                source: std::io::Error::other(e),
            })?;
            "vfio".to_owned()
        }
        _ => sysfs_reset(taker, bdf, method, progress)?,
    };
    let seconds = start.elapsed().as_secs_f64();
    let restored = restore(taker, bdf, &saved, read)?;
    Ok(ResetReport {
        method: name,
        seconds,
        restored,
    })
}

fn sysfs_reset(
    taker: &Taker,
    bdf: Bdf,
    method: ResetMethod,
    progress: Progress<'_>,
) -> Result<String, ResetError> {
    let root = taker.sysfs.root();
    let available = root
        .read_attr(bdf, "reset_method")
        .ok()
        .flatten()
        .unwrap_or_default();
    if available.is_empty() {
        return Err(ResetError::NoMethod { bdf });
    }
    let want = sysfs_name(method);
    if let Some(m) = want
        && !available.split_whitespace().any(|a| a == m)
    {
        return Err(ResetError::Unsupported {
            bdf,
            method: m,
            available,
        });
    }
    let label = want.unwrap_or("kernel default").to_owned();
    progress(&format!("reset through sysfs ({label})"));
    let result = taker.sysfs.reset(bdf, want);
    if want.is_some() {
        // Writing reset_method narrowed the device's methods: put the list back.
        let _ = taker.sysfs.set_reset_methods(bdf, &available);
    }
    result.map_err(|source| ResetError::Failed {
        bdf,
        method: label.clone(),
        source,
    })?;
    Ok(label)
}

/// Verifies the state registers read back as saved, writing back what differs once.
fn restore(
    taker: &Taker,
    bdf: Bdf,
    saved: &[u8],
    read: impl Fn() -> Result<Vec<u8>, ResetError>,
) -> Result<Vec<u16>, ResetError> {
    let differs = |now: &[u8]| -> Vec<(u16, u16)> {
        RESTORED
            .iter()
            .copied()
            .filter(|&(o, l)| {
                let r = usize::from(o)..usize::from(o + l);
                saved.get(r.clone()) != now.get(r)
            })
            .collect()
    };
    let now = read()?;
    let bad = differs(&now);
    if bad.is_empty() {
        return Ok(Vec::new());
    }
    for &(o, l) in &bad {
        let bytes =
            saved
                .get(usize::from(o)..usize::from(o + l))
                .ok_or(ResetError::ShortSaved {
                    bdf,
                    len: saved.len(),
                })?;
        taker
            .sysfs
            .write_config(bdf, u64::from(o), bytes)
            .map_err(|source| ResetError::Config {
                bdf,
                source: Box::new(TakeError::Step {
                    bdf,
                    step: "restore config",
                    source,
                }),
            })?;
    }
    let still = differs(&read()?);
    if !still.is_empty() {
        return Err(ResetError::Restore {
            bdf,
            offsets: still.into_iter().map(|(o, _)| o).collect(),
        });
    }
    Ok(bad.into_iter().map(|(o, _)| o).collect())
}
