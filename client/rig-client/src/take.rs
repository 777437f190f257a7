//! Taking devices: detach, attach, reset, resize, status. Each long operation streams
//! its steps; the caller sees them through a callback and gets the outcome at the end.
//!
//! Requests are typed with `rig_model::take`'s words, re-exported here: [`Mode`],
//! [`ResetMethod`] and [`BarSize`] go out through `rig-proto`'s conversions, and the
//! one parser of a person's text for them ("sysfs", "flr", "max", "32G") is their
//! `FromStr`, which rigctl's arguments use; rigd never parses that text. A held
//! device's mode, state, lease and resize come back through the same conversions
//! (JSON "vfio"/"sysfs", "held"/"busy", as before); a value this client does not know
//! is a typed [`ClientError::Reply`]. The messages made of this crate's own types
//! ([`HeldDevice`], [`Outcome`], [`Status`]) are assembled here, beside the calls.

use rig_proto::{convert::WireEnum, v1 as pb};
use serde::{Deserialize, Serialize};
use tonic::Streaming;

use crate::{Bar, ClientError, convert};

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

/// The take-over words are the shared vocabulary's, spelled as rigd spells them.
pub use rig_model::take::{
    ArgError, BarSize, HeldState, LeaseHolder, Mode, ResetMethod, ResizeOutcome,
};

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

/// What rigd holds, what its last start recovered from the journal, and the unbinds
/// stuck in the kernel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    pub devices: Vec<HeldDevice>,
    pub recovered: Vec<String>,
    /// Empty from a rigd older than this field.
    #[serde(default)]
    pub stuck_unbinds: Vec<StuckUnbind>,
    /// The GPUs rigd serves through their driver, and whether each lends now; empty
    /// from a rigd older than this field.
    #[serde(default)]
    pub served: Vec<ServedGpu>,
}

/// A GPU rigd serves through its driver, and its health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedGpu {
    pub bdf: String,
    /// `serving`, `stalled` (a reclaim's RM call has waited past rigd's bound) or
    /// `lost` (the RM says it needs a reset); `unknown` from a newer rigd.
    pub health: String,
    /// Why it lends nothing now; empty while it serves.
    pub reason: String,
    /// When it was lost (ms since the epoch); 0 unless lost.
    pub since_unix_ms: u64,
    /// Its compute engine's shape (SMs, warps); `None` when the RM would not say, or
    /// from a rigd older than this field.
    #[serde(default)]
    pub geometry: Option<rig_model::nv::ComputeGeometry>,
    /// The copy engines (COPY0 + n) its sessions' copy channels are spread over;
    /// empty: each session's GR0 group (or a rigd older than this field).
    #[serde(default)]
    pub copy_engines: Vec<u32>,
    /// The GPU's non-stall interrupts rigd has seen (waits sleep until one); `None`:
    /// rigd does not watch them, so waits never sleep (or a rigd older than this
    /// field).
    #[serde(default)]
    pub interrupts: Option<u64>,
    /// Of the channels looked at on those interrupts: how many were woken, and how
    /// many passed over because their wake words said an interrupt was another's;
    /// `None` as for `interrupts`.
    #[serde(default)]
    pub wakes_given: Option<u64>,
    /// See `wakes_given`.
    #[serde(default)]
    pub wakes_passed: Option<u64>,
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

pub(crate) fn held(h: pb::HeldDevice) -> Result<HeldDevice, ClientError> {
    Ok(HeldDevice {
        bdf: h.bdf,
        mode: Option::<Mode>::from_field("HeldDevice.mode", h.mode)?,
        original_driver: opt(h.original_driver),
        state: HeldState::from_field("HeldDevice.state", h.state)?,
        since_unix: h.since_unix,
        bars: h
            .bars
            .into_iter()
            .map(convert::bar)
            .collect::<Result<_, _>>()?,
        group_members: h.group_members,
        overrode: h.overrode,
        lease: h.lease.map(LeaseHolder::from),
    })
}

fn outcome(o: pb::Outcome, steps: Vec<Step>, elapsed_s: f64) -> Result<Outcome, ClientError> {
    Ok(Outcome {
        summary: o.summary,
        warnings: o.warnings,
        device: o.device.map(held).transpose()?,
        resize: o.resize.map(ResizeOutcome::try_from).transpose()?,
        reset_method: opt(o.reset_method),
        reset_seconds: (o.reset_seconds > 0.0).then_some(o.reset_seconds),
        driver: opt(o.driver),
        elapsed_s,
        steps,
    })
}

/// Reads a progress stream to its end, calling `on_step` for each step.
pub(crate) async fn follow(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_go_out_as_the_wire_enums_with_unspecified_for_the_defaults() {
        use pb::bar_size::Size;
        let take_mode = pb::TakeMode::from;
        let reset_method = pb::ResetMethod::from;
        let bar_size = pb::BarSize::from;
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
