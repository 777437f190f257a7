//! Take-over RPCs: authorise, run on the blocking pool, stream each step, end with the
//! outcome. Conversions of held devices to the wire live here too.

use std::{sync::Arc, time::Instant};

use rig_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::{admin_caller, convert, request_span, status};
use crate::{
    rig::{HeldView, Rig, RigError},
    sys::mmio::Width,
    take::{BarSize, DetachOptions, Mode, ResetMethod, ResizeReport},
};

pub type ProgressStream = ReceiverStream<Result<pb::Progress, Status>>;

/// Runs `work` for an admin caller on the blocking pool, streaming its steps.
pub fn stream<T>(
    rig: &Arc<Rig>,
    method: &'static str,
    req: &Request<T>,
    work: impl FnOnce(&Rig, &mut dyn FnMut(&str)) -> Result<pb::Outcome, RigError> + Send + 'static,
) -> Result<Response<ProgressStream>, Status> {
    let span = request_span(method, req);
    let caller = admin_caller(req)?;
    rig.authorize_admin(caller)
        .map_err(|e| status::from_rig(&e))?;
    let (tx, rx) = mpsc::channel(64);
    let rig = Arc::clone(rig);
    tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            let start = Instant::now();
            let elapsed = || start.elapsed().as_secs_f64();
            let mut progress = |step: &str| {
                tracing::debug!(step, "progress");
                let _ = tx.blocking_send(Ok(pb::Progress {
                    elapsed_s: elapsed(),
                    event: Some(pb::progress::Event::Step(step.to_owned())),
                }));
            };
            let result = work(&rig, &mut progress);
            let msg = match result {
                Ok(done) => {
                    tracing::info!(summary = done.summary, "done");
                    Ok(pb::Progress {
                        elapsed_s: elapsed(),
                        event: Some(pb::progress::Event::Done(done)),
                    })
                }
                Err(e) => {
                    // A requested operation failed: error level (STYLE's policy).
                    tracing::error!("{}", crate::rig::error_line(&e));
                    Err(status::from_rig(&e))
                }
            };
            let _ = tx.blocking_send(msg);
        });
    });
    Ok(Response::new(ReceiverStream::new(rx)))
}

/// Reads the request's options into `DetachOptions`.
pub fn detach_options(r: &pb::DetachRequest) -> Result<DetachOptions, RigError> {
    let mode = match r.mode.as_str() {
        "" | "vfio" => Mode::Vfio,
        "sysfs" => Mode::Sysfs,
        m => {
            return Err(RigError::BadRequest(format!(
                "unknown mode `{m}` (vfio or sysfs)"
            )));
        }
    };
    let bar_size = match r.bar_size.as_str() {
        "" => BarSize::Keep,
        s => s.parse().map_err(RigError::BadRequest)?,
    };
    Ok(DetachOptions {
        mode,
        bar_size,
        entire_group: r.entire_group,
        force: r.force,
        timeout: std::time::Duration::from_secs(r.timeout_s.into()),
    })
}

/// An access width from the request's bits (0: 32, the common register).
pub fn width(bits: u32) -> Result<Width, Status> {
    match bits {
        0 => Ok(Width::W32),
        b => Width::from_bits(b).ok_or_else(|| {
            Status::invalid_argument(format!(
                "a register access is 8, 16, 32 or 64 bits, not {b}"
            ))
        }),
    }
}

pub fn reset_method(s: &str) -> Result<ResetMethod, RigError> {
    s.parse().map_err(RigError::BadRequest)
}

pub fn resize_size(s: &str) -> Result<BarSize, RigError> {
    match s.parse().map_err(RigError::BadRequest)? {
        BarSize::Keep => Err(RigError::BadRequest(
            "a resize needs a size: max or e.g. 32G".into(),
        )),
        b => Ok(b),
    }
}

pub fn held(v: &HeldView) -> pb::HeldDevice {
    pb::HeldDevice {
        bdf: v.bdf.to_string(),
        mode: v.mode.map(|m| m.to_string()).unwrap_or_default(),
        original_driver: v.original_driver.clone().unwrap_or_default(),
        state: v.state.clone(),
        since_unix: v.since,
        bars: v.bars.iter().map(convert::bar).collect(),
        group_members: v.group_members.iter().map(ToString::to_string).collect(),
        overrode: v.overrode.clone(),
    }
}

pub fn resize_outcome(r: &ResizeReport) -> pb::ResizeOutcome {
    pb::ResizeOutcome {
        bar: r.bar.into(),
        before: r.before,
        after: r.after,
        no_room: r.no_room.clone(),
        moved: r
            .moved
            .iter()
            .map(|(b, from, to)| pb::MovedBar {
                bar: (*b).into(),
                from: *from,
                to: *to,
            })
            .collect(),
        small_bar: r.small_bar.clone().unwrap_or_default(),
    }
}
