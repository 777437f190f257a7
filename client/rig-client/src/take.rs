//! Taking devices: detach, attach, reset, resize, status. Each long operation streams
//! its steps; the caller sees them through a callback and gets the outcome at the end.
//!
//! The take-over messages are converted here, beside the calls. Requests are typed:
//! [`Mode`], [`ResetMethod`] and [`BarSize`] go out as `rig.v1` enums and messages, and
//! the one parser of a person's text for them ("sysfs", "flr", "max", "32G") is their
//! `FromStr` here, which rigctl's arguments use; rigd never parses that text. A held
//! device's mode and state come back as `rig.v1` enums and become [`Mode`] and
//! [`HeldState`] (JSON "vfio"/"sysfs", "held"/"busy", as before); a value this client
//! does not know is a typed [`ClientError::Reply`]. Its BARs use `rig-proto`'s device
//! conversion.

use std::str::FromStr;

use rig_proto::{ConvertError, v1 as pb};
use serde::{Deserialize, Serialize};
use tonic::Streaming;

use crate::{Bar, Client, ClientError, convert};

/// How to take a device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetachRequest {
    pub bdf: String,
    /// rigd's default (vfio) when `None`.
    pub mode: Option<Mode>,
    /// Keep when `None`.
    pub bar_size: Option<BarSize>,
    pub entire_group: bool,
    pub force: bool,
    /// Seconds an unbind may take; the daemon's default when `None`.
    pub timeout_s: Option<u32>,
}

/// One step of a long operation, as the daemon reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// rigd's time since the operation started, when the step began.
    pub elapsed_s: f64,
    pub text: String,
    /// How long the step took, up to the next step or the outcome (rigd's clock);
    /// `None` while it runs (the callback sees each step as it starts).
    #[serde(default)]
    pub duration_s: Option<f64>,
}

/// How an operation ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub summary: String,
    pub warnings: Vec<String>,
    pub device: Option<HeldDevice>,
    pub resize: Option<ResizeOutcome>,
    pub reset_method: Option<String>,
    pub reset_seconds: Option<f64>,
    /// After attach: the driver the device is back with.
    pub driver: Option<String>,
    pub elapsed_s: f64,
    pub steps: Vec<Step>,
}

/// How rig holds a device; serialised as "vfio" or "sysfs".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Bound to vfio-pci; DMA confined by the IOMMU.
    Vfio,
    /// Driverless, driven through sysfs `resourceN`; DMA is unconfined.
    Sysfs,
}

impl Mode {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Vfio => "vfio",
            Self::Sysfs => "sysfs",
        }
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetMethod {
    /// VFIO's reset when held by VFIO, else the kernel's first method.
    #[default]
    Auto,
    /// The kernel's function level reset.
    Flr,
    /// The kernel's power-management reset (D3hot and back).
    Pm,
    /// The kernel's secondary bus reset.
    Bus,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

fn take_mode(m: Option<Mode>) -> pb::TakeMode {
    match m {
        None => pb::TakeMode::Unspecified,
        Some(Mode::Vfio) => pb::TakeMode::Vfio,
        Some(Mode::Sysfs) => pb::TakeMode::Sysfs,
    }
}

fn reset_method(m: ResetMethod) -> pb::ResetMethod {
    match m {
        ResetMethod::Auto => pb::ResetMethod::Unspecified,
        ResetMethod::Flr => pb::ResetMethod::Flr,
        ResetMethod::Pm => pb::ResetMethod::Pm,
        ResetMethod::Bus => pb::ResetMethod::Bus,
    }
}

fn bar_size(b: BarSize) -> pb::BarSize {
    use pb::bar_size::Size;
    pb::BarSize {
        size: Some(match b {
            BarSize::Keep => Size::Keep(pb::bar_size::Keep {}),
            BarSize::Max => Size::Max(pb::bar_size::Max {}),
            BarSize::Bytes(n) => Size::Bytes(n),
        }),
    }
}

/// Where a held device is; serialised as "held" or "busy".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldState {
    /// Held, nothing under way.
    Held,
    /// Another operation on it is under way.
    Busy,
}

impl std::fmt::Display for HeldState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Held => "held",
            Self::Busy => "busy",
        })
    }
}

/// A device rig holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldDevice {
    pub bdf: String,
    /// `None` while another operation holds it (`state` is busy).
    pub mode: Option<Mode>,
    pub original_driver: Option<String>,
    pub state: HeldState,
    pub since_unix: u64,
    pub bars: Vec<Bar>,
    pub group_members: Vec<String>,
    pub overrode: Vec<String>,
    /// Who leases it whole, while someone does.
    #[serde(default)]
    pub lease: Option<LeaseHolder>,
}

/// The holder of a whole-device lease (docs/lease.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHolder {
    pub uid: u32,
    pub pid: i32,
    pub since_unix: u64,
    pub session: u64,
}

/// What a resize did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResizeOutcome {
    pub bar: u8,
    pub before: u64,
    pub after: u64,
    pub no_room: Vec<u64>,
    /// Other BARs the kernel moved: (bar, from, to).
    pub moved: Vec<(u8, u64, u64)>,
    pub small_bar: Option<String>,
}

/// What rigd holds, what its last start recovered from the journal, and the unbinds
/// stuck in the kernel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub devices: Vec<HeldDevice>,
    pub recovered: Vec<String>,
    /// Empty from a rigd older than this field.
    #[serde(default)]
    pub stuck_unbinds: Vec<StuckUnbind>,
}

/// An unbind that timed out and has not returned: one of rigd's workers is in the
/// kernel, and the device refuses another unbind until it returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckUnbind {
    pub bdf: String,
    pub driver: String,
    /// Since the request that started it timed out.
    pub seconds: u64,
}

fn opt(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn mode(value: i32) -> Result<Option<Mode>, ConvertError> {
    match pb::TakeMode::try_from(value) {
        Ok(pb::TakeMode::Vfio) => Ok(Some(Mode::Vfio)),
        Ok(pb::TakeMode::Sysfs) => Ok(Some(Mode::Sysfs)),
        Ok(pb::TakeMode::Unspecified) => Ok(None),
        Err(_) => Err(ConvertError::UnknownEnum {
            field: "HeldDevice.mode",
            value,
        }),
    }
}

fn state(value: i32) -> Result<HeldState, ConvertError> {
    match pb::HeldState::try_from(value) {
        Ok(pb::HeldState::Held) => Ok(HeldState::Held),
        Ok(pb::HeldState::Busy) => Ok(HeldState::Busy),
        Ok(pb::HeldState::Unspecified) | Err(_) => Err(ConvertError::UnknownEnum {
            field: "HeldDevice.state",
            value,
        }),
    }
}

fn held(h: pb::HeldDevice) -> Result<HeldDevice, ClientError> {
    Ok(HeldDevice {
        bdf: h.bdf,
        mode: mode(h.mode)?,
        original_driver: opt(h.original_driver),
        state: state(h.state)?,
        since_unix: h.since_unix,
        bars: h
            .bars
            .into_iter()
            .map(convert::bar)
            .collect::<Result<_, _>>()?,
        group_members: h.group_members,
        overrode: h.overrode,
        lease: h.lease.map(|l| LeaseHolder {
            uid: l.uid,
            pid: l.pid,
            since_unix: l.since_unix,
            session: l.session,
        }),
    })
}

fn outcome(o: pb::Outcome, steps: Vec<Step>, elapsed_s: f64) -> Result<Outcome, ClientError> {
    Ok(Outcome {
        summary: o.summary,
        warnings: o.warnings,
        device: o.device.map(held).transpose()?,
        resize: o.resize.map(|r| ResizeOutcome {
            bar: u8::try_from(r.bar).unwrap_or(u8::MAX),
            before: r.before,
            after: r.after,
            no_room: r.no_room,
            moved: r
                .moved
                .into_iter()
                .map(|m| (u8::try_from(m.bar).unwrap_or(u8::MAX), m.from, m.to))
                .collect(),
            small_bar: opt(r.small_bar),
        }),
        reset_method: opt(o.reset_method),
        reset_seconds: (o.reset_seconds > 0.0).then_some(o.reset_seconds),
        driver: opt(o.driver),
        elapsed_s,
        steps,
    })
}

/// Reads a progress stream to its end, calling `on_step` for each step.
async fn follow(
    mut s: Streaming<pb::Progress>,
    on_step: &mut dyn FnMut(&Step),
) -> Result<Outcome, ClientError> {
    let mut steps: Vec<Step> = Vec::new();
    while let Some(p) = s.message().await.map_err(ClientError::rpc)? {
        match p.event {
            Some(pb::progress::Event::Step(text)) => {
                let step = Step {
                    elapsed_s: p.elapsed_s,
                    text,
                    duration_s: None,
                };
                on_step(&step);
                if let Some(prev) = steps.last_mut() {
                    prev.duration_s = Some(p.elapsed_s - prev.elapsed_s);
                }
                steps.push(step);
            }
            Some(pb::progress::Event::Done(o)) => {
                if let Some(prev) = steps.last_mut() {
                    prev.duration_s = Some(p.elapsed_s - prev.elapsed_s);
                }
                return outcome(o, steps, p.elapsed_s);
            }
            None => {}
        }
    }
    Err(ClientError::Rpc {
        code: tonic::Code::Unknown,
        info: None,
        message: "rigd ended the operation without an outcome".into(),
    })
}

impl Client {
    /// Takes a device from its driver (root or the admin group).
    ///
    /// # Errors
    /// [`ClientError::Rpc`]: `PermissionDenied` for a caller who may not,
    /// `FailedPrecondition` with the holders when refused, `DeadlineExceeded` when the
    /// unbind did not return.
    pub async fn detach(
        &mut self,
        r: &DetachRequest,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::DetachRequest {
            bdf: r.bdf.clone(),
            mode: take_mode(r.mode).into(),
            bar_size: r.bar_size.map(bar_size),
            entire_group: r.entire_group,
            force: r.force,
            timeout_s: r.timeout_s.unwrap_or(0),
        };
        let r = self.inner.detach(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Gives a device back to its original driver.
    ///
    /// # Errors
    /// As [`Client::detach`].
    pub async fn attach(
        &mut self,
        bdf: &str,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::AttachRequest {
            bdf: bdf.to_owned(),
        };
        let r = self.inner.attach(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Resets a held device.
    ///
    /// # Errors
    /// As [`Client::detach`].
    pub async fn reset(
        &mut self,
        bdf: &str,
        method: ResetMethod,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::ResetRequest {
            bdf: bdf.to_owned(),
            method: reset_method(method).into(),
        };
        let r = self.inner.reset(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Resizes BAR `bar` of a held device to `size` (max, or bytes).
    ///
    /// # Errors
    /// As [`Client::detach`]; `InvalidArgument` for [`BarSize::Keep`].
    pub async fn resize(
        &mut self,
        bdf: &str,
        bar: u8,
        size: BarSize,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::ResizeRequest {
            bdf: bdf.to_owned(),
            bar: bar.into(),
            size: Some(bar_size(size)),
        };
        let r = self.inner.resize(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// What rigd holds.
    ///
    /// # Errors
    /// [`ClientError::Rpc`].
    pub async fn status(&mut self) -> Result<Status, ClientError> {
        let r = self.inner.status(pb::StatusRequest {}).await;
        let r = self.reply(r).await?;
        Ok(Status {
            devices: r.devices.into_iter().map(held).collect::<Result<_, _>>()?,
            recovered: r.recovered,
            stuck_unbinds: r
                .stuck_unbinds
                .into_iter()
                .map(|s| StuckUnbind {
                    bdf: s.bdf,
                    driver: s.driver,
                    seconds: s.seconds,
                })
                .collect(),
        })
    }
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
    fn requests_go_out_as_the_wire_enums_with_unspecified_for_the_defaults() {
        use pb::bar_size::Size;
        assert_eq!(take_mode(None), pb::TakeMode::Unspecified);
        assert_eq!(take_mode(Some(Mode::Sysfs)), pb::TakeMode::Sysfs);
        assert_eq!(take_mode(Some(Mode::Vfio)), pb::TakeMode::Vfio);
        assert_eq!(
            reset_method(ResetMethod::Auto),
            pb::ResetMethod::Unspecified
        );
        assert_eq!(reset_method(ResetMethod::Flr), pb::ResetMethod::Flr);
        assert_eq!(reset_method(ResetMethod::Pm), pb::ResetMethod::Pm);
        assert_eq!(reset_method(ResetMethod::Bus), pb::ResetMethod::Bus);
        assert_eq!(
            bar_size(BarSize::Bytes(32 << 30)).size,
            Some(Size::Bytes(32 << 30))
        );
        assert_eq!(
            bar_size(BarSize::Max).size,
            Some(Size::Max(pb::bar_size::Max {}))
        );
        assert_eq!(
            bar_size(BarSize::Keep).size,
            Some(Size::Keep(pb::bar_size::Keep {}))
        );
    }
}
