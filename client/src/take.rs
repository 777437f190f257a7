//! Taking devices: detach, attach, reset, resize, status. Each long operation streams
//! its steps; the caller sees them through a callback and gets the outcome at the end.
//!
//! The take-over messages are converted here, beside the calls: a held device's mode
//! and state come as `rig.v1` enums and become [`Mode`] and [`HeldState`] (JSON
//! "vfio"/"sysfs", "held"/"busy", as before); a value this client does not know is a
//! typed [`ClientError::Reply`]. Its BARs use `rig-proto`'s device conversion.

use rig_proto::{ConvertError, v1 as pb};
use serde::{Deserialize, Serialize};
use tonic::Streaming;

use crate::{Bar, Client, ClientError, convert};

/// How to take a device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetachRequest {
    pub bdf: String,
    /// "vfio" (default) or "sysfs".
    pub mode: Option<String>,
    /// "keep" (default), "max", or a size such as "256M".
    pub bar_size: Option<String>,
    pub entire_group: bool,
    pub force: bool,
    /// Seconds an unbind may take; the daemon's default when `None`.
    pub timeout_s: Option<u32>,
}

/// One step of a long operation, as the daemon reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub elapsed_s: f64,
    pub text: String,
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

/// What rigd holds, and what its last start recovered from the journal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub devices: Vec<HeldDevice>,
    pub recovered: Vec<String>,
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
    let mut steps = Vec::new();
    while let Some(p) = s.message().await.map_err(ClientError::rpc)? {
        match p.event {
            Some(pb::progress::Event::Step(text)) => {
                let step = Step {
                    elapsed_s: p.elapsed_s,
                    text,
                };
                on_step(&step);
                steps.push(step);
            }
            Some(pb::progress::Event::Done(o)) => return outcome(o, steps, p.elapsed_s),
            None => {}
        }
    }
    Err(ClientError::Rpc {
        code: tonic::Code::Unknown,
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
            mode: r.mode.clone().unwrap_or_default(),
            bar_size: r.bar_size.clone().unwrap_or_default(),
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

    /// Resets a held device: "auto", "flr", "pm" or "bus".
    ///
    /// # Errors
    /// As [`Client::detach`].
    pub async fn reset(
        &mut self,
        bdf: &str,
        method: &str,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::ResetRequest {
            bdf: bdf.to_owned(),
            method: method.to_owned(),
        };
        let r = self.inner.reset(req).await;
        let s = self.reply(r).await?;
        follow(s, on_step).await
    }

    /// Resizes BAR `bar` of a held device to `size` ("max" or e.g. "32G").
    ///
    /// # Errors
    /// As [`Client::detach`].
    pub async fn resize(
        &mut self,
        bdf: &str,
        bar: u8,
        size: &str,
        on_step: &mut dyn FnMut(&Step),
    ) -> Result<Outcome, ClientError> {
        let req = pb::ResizeRequest {
            bdf: bdf.to_owned(),
            bar: bar.into(),
            size: size.to_owned(),
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
        })
    }
}
