//! Take-over RPCs: authorise, run on the blocking pool, stream each step, end with the
//! outcome. The typed requests become `take`'s options here (a mode, reset method or
//! BAR size this rigd does not know is refused with the field and the number), and
//! held devices go back on the wire. The words themselves are `rig_model::take`'s and
//! `rig-proto` converts them; this module decides only what a request's unset field
//! means (vfio, keep, auto). Users' text ("max", "32G") is parsed by the client, never
//! here.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use rig_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tonic::{Request, Response, Status};

use super::{convert, gate, request_span, status, watchdog::Health};
use crate::{
    rig::{HeldView, RequestError, Rig, RigError},
    sys::mmio::Width,
    take::{BarSize, DetachOptions, Mode, ResetMethod},
};

/// One message of a take-over's stream: a step, the outcome, or the error.
type Message = Result<pb::Progress, Status>;

pub type ProgressStream = Pin<Box<dyn Stream<Item = Message> + Send>>;

/// How long a step may wait to be sent with the ones after it. Each message wakes the
/// client (a read, a decode, a printed line); in the disposable machine's one-CPU TCG
/// guest that cost 1-3 ms a step, about ten steps per detach+attach of bochs-display.
/// Steps carry rigd's clock, so a batch still says when each happened; the last
/// message ends the stream and goes at once.
// TIMEOUT: 100 ms is below the lag a person watching notices, and longer than a
// take-over of a function without firmware (~60 ms of rigd's work per half in that
// guest), which then sends all its messages in one write; a GPU's unbind of seconds
// still shows its step within 100 ms.
const STEP_BATCH: Duration = Duration::from_millis(100);

/// The messages `rx` receives, each step held back up to [`STEP_BATCH`] to go with
/// the ones after it.
fn batched(rx: mpsc::Receiver<Message>) -> ProgressStream {
    Box::pin(Unbatched {
        batches: Box::pin(ReceiverStream::new(rx).chunks_timeout(64, STEP_BATCH)),
        items: Vec::new().into_iter(),
    })
}

/// Yields each batch's messages in order; tonic encodes the messages that are ready
/// together and writes them at once.
struct Unbatched {
    batches: Pin<Box<dyn Stream<Item = Vec<Message>> + Send>>,
    items: std::vec::IntoIter<Message>,
}

impl Stream for Unbatched {
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        loop {
            if let Some(m) = self.items.next() {
                return Poll::Ready(Some(m));
            }
            match std::task::ready!(self.batches.as_mut().poll_next(cx)) {
                Some(batch) => self.items = batch.into_iter(),
                None => return Poll::Ready(None),
            }
        }
    }
}

/// Runs `work` for an admin caller on the blocking pool, streaming its steps (in
/// batches, [`STEP_BATCH`]); `health` knows of it while it runs, and calls it stuck
/// past `limit`.
pub fn stream<T>(
    rig: &Arc<Rig>,
    (health, limit): (&Health, Duration),
    method: &'static str,
    req: &Request<T>,
    work: impl FnOnce(&Rig, &mut dyn FnMut(&str)) -> Result<pb::Outcome, RigError> + Send + 'static,
) -> Result<Response<ProgressStream>, Status> {
    let span = request_span(method, req);
    // The gate checked the role; this finishes its audit line with the outcome.
    let audit = gate::pending(req);
    let (tx, rx) = mpsc::channel(64);
    let rig = Arc::clone(rig);
    let working = health.begin(method, limit);
    tokio::task::spawn_blocking(move || {
        let _working = working;
        span.in_scope(|| {
            let start = Instant::now();
            let elapsed = || start.elapsed().as_secs_f64();
            // The last step reported: an error that names no step of its own gets it.
            let mut last_step = None::<String>;
            let mut step_start = Instant::now();
            let metric = format!("Rig.{method}");
            let mut progress = |step: &str| {
                tracing::debug!(step, "progress");
                if let Some(prev) = &last_step {
                    super::metrics::global().step(&metric, prev, step_start.elapsed());
                }
                step_start = Instant::now();
                last_step = Some(step.to_owned());
                let _ = tx.blocking_send(Ok(pb::Progress {
                    elapsed_s: elapsed(),
                    event: Some(pb::progress::Event::Step(step.to_owned())),
                }));
            };
            let result = work(&rig, &mut progress);
            if let Some(prev) = &last_step {
                super::metrics::global().step(&metric, prev, step_start.elapsed());
            }
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
                    tracing::error!("{}", super::status::error_line(&e));
                    Err(status::from_error_during(&e, last_step.as_deref()))
                }
            };
            if let Some(a) = audit {
                a.finish(super::audit_outcome(msg.as_ref().err()));
            }
            let _ = tx.blocking_send(msg);
        });
    });
    Ok(Response::new(batched(rx)))
}

/// Reads the request's options into `DetachOptions`: an unspecified mode is vfio, an
/// absent BAR size is keep.
pub fn detach_options(r: &pb::DetachRequest) -> Result<DetachOptions, RigError> {
    let mode = Option::<Mode>::from(known::<pb::TakeMode>(
        "DetachRequest.mode",
        r.mode,
        "vfio, sysfs",
    )?)
    .unwrap_or(Mode::Vfio);
    let bar_size = match &r.bar_size {
        None => BarSize::Keep,
        Some(s) => bar_size("DetachRequest.bar_size", s)?,
    };
    Ok(DetachOptions {
        mode,
        bar_size,
        entire_group: r.entire_group,
        force: r.force,
        timeout: std::time::Duration::from_secs(r.timeout_s.into()),
    })
}

/// An enum field's value, or a refusal naming the field and the number: a newer client
/// may send a value this rigd does not know.
fn known<E: TryFrom<i32>>(
    field: &'static str,
    value: i32,
    knows: &'static str,
) -> Result<E, RigError> {
    E::try_from(value).map_err(|_| {
        RequestError::UnknownValue {
            field,
            value,
            knows,
        }
        .into()
    })
}

/// A BAR size; one whose choice this rigd does not know (a newer client's) is refused.
fn bar_size(field: &'static str, s: &pb::BarSize) -> Result<BarSize, RigError> {
    BarSize::try_from(*s).map_err(|_| RequestError::NoSize { field }.into())
}

/// An access width from the request's bits (0: 32, the common register).
pub fn width(bits: u32) -> Result<Width, RigError> {
    match bits {
        0 => Ok(Width::W32),
        b => Width::from_bits(b).ok_or_else(|| RequestError::Width { bits: b }.into()),
    }
}

/// The request's reset method; unspecified is auto.
pub fn reset_method(r: &pb::ResetRequest) -> Result<ResetMethod, RigError> {
    Ok(ResetMethod::from(known::<pb::ResetMethod>(
        "ResetRequest.method",
        r.method,
        "auto, flr, pm, bus",
    )?))
}

/// The size a resize asks for: max or bytes; keep, or none, is no resize.
pub fn resize_size(r: &pb::ResizeRequest) -> Result<BarSize, RigError> {
    let needs = || RequestError::ResizeWithoutSize.into();
    match r.size.as_ref().map(|s| bar_size("ResizeRequest.size", s)) {
        None | Some(Ok(BarSize::Keep)) => Err(needs()),
        Some(b) => b,
    }
}

/// The view's state: `Rig` says "held" for a device at rest and "busy" while another
/// operation holds its lock; anything else would be a new state this API lacks.
fn held_state(state: &str) -> pb::HeldState {
    match state {
        "held" => pb::HeldState::Held,
        "busy" => pb::HeldState::Busy,
        _ => pb::HeldState::Unspecified,
    }
}

pub fn held(v: &HeldView) -> pb::HeldDevice {
    pb::HeldDevice {
        bdf: v.bdf.to_string(),
        // Unspecified when the view has none (busy).
        mode: pb::TakeMode::from(v.mode).into(),
        original_driver: v.original_driver.clone().unwrap_or_default(),
        state: held_state(&v.state).into(),
        since_unix: v.since,
        bars: v.bars.iter().map(convert::bar).collect(),
        group_members: v.group_members.iter().map(ToString::to_string).collect(),
        overrode: v.overrode.clone(),
        lease: v.lease.as_ref().map(pb::HeldLease::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(text: &str) -> Message {
        Ok(pb::Progress {
            elapsed_s: 0.0,
            event: Some(pb::progress::Event::Step(text.to_owned())),
        })
    }

    fn text(m: Option<Message>) -> String {
        match m.expect("a message").expect("a step").event {
            Some(pb::progress::Event::Step(s)) => s,
            e => panic!("not a step: {e:?}"),
        }
    }

    #[test]
    fn held_mode_and_state_go_on_the_wire_as_enums() {
        assert_eq!(pb::TakeMode::from(Some(Mode::Vfio)), pb::TakeMode::Vfio);
        assert_eq!(pb::TakeMode::from(Some(Mode::Sysfs)), pb::TakeMode::Sysfs);
        assert_eq!(pb::TakeMode::from(None), pb::TakeMode::Unspecified);
        assert_eq!(held_state("held"), pb::HeldState::Held);
        assert_eq!(held_state("busy"), pb::HeldState::Busy);
        assert_eq!(held_state("resizing"), pb::HeldState::Unspecified);
    }

    fn refusal(r: Result<impl std::fmt::Debug, RigError>) -> String {
        match r {
            Err(RigError::BadRequest(e)) => e.to_string(),
            other => panic!("not a bad request: {other:?}"),
        }
    }

    #[test]
    fn typed_requests_become_take_options_with_unspecified_as_the_default() {
        use pb::bar_size::Size;
        let size = |s| Some(pb::BarSize { size: Some(s) });
        let d = detach_options(&pb::DetachRequest::default()).expect("defaults");
        assert_eq!((d.mode, d.bar_size), (Mode::Vfio, BarSize::Keep));
        let d = detach_options(&pb::DetachRequest {
            mode: pb::TakeMode::Sysfs.into(),
            bar_size: size(Size::Bytes(256 << 20)),
            timeout_s: 7,
            ..Default::default()
        })
        .expect("sysfs");
        assert_eq!(
            (d.mode, d.bar_size, d.timeout),
            (
                Mode::Sysfs,
                BarSize::Bytes(256 << 20),
                Duration::from_secs(7)
            )
        );
        let reset = |method: pb::ResetMethod| pb::ResetRequest {
            method: method.into(),
            ..Default::default()
        };
        for (wire, want) in [
            (pb::ResetMethod::Unspecified, ResetMethod::Auto),
            (pb::ResetMethod::Flr, ResetMethod::Flr),
            (pb::ResetMethod::Pm, ResetMethod::Pm),
            (pb::ResetMethod::Bus, ResetMethod::Bus),
        ] {
            assert_eq!(reset_method(&reset(wire)).expect("known"), want);
        }
        let resize = |size| pb::ResizeRequest {
            size,
            ..Default::default()
        };
        assert_eq!(
            resize_size(&resize(size(Size::Max(pb::bar_size::Max {})))).expect("max"),
            BarSize::Max
        );
        assert_eq!(
            resize_size(&resize(size(Size::Bytes(32 << 30)))).expect("bytes"),
            BarSize::Bytes(32 << 30)
        );
    }

    #[test]
    fn unknown_numbers_and_sizeless_resizes_are_refused_with_the_field() {
        let line = refusal(detach_options(&pb::DetachRequest {
            mode: 3,
            ..Default::default()
        }));
        assert_eq!(
            line,
            "DetachRequest.mode = 3 is a value this rigd does not know (vfio, sysfs)"
        );
        let line = refusal(reset_method(&pb::ResetRequest {
            method: -1,
            ..Default::default()
        }));
        assert_eq!(
            line,
            "ResetRequest.method = -1 is a value this rigd does not know (auto, flr, pm, bus)"
        );
        let line = refusal(detach_options(&pb::DetachRequest {
            bar_size: Some(pb::BarSize { size: None }),
            ..Default::default()
        }));
        assert!(
            line.starts_with("DetachRequest.bar_size holds no size"),
            "{line}"
        );
        let needs = "a resize needs a size: max or e.g. 32G";
        assert_eq!(refusal(resize_size(&pb::ResizeRequest::default())), needs);
        let keep = pb::ResizeRequest {
            size: Some(pb::BarSize {
                size: Some(pb::bar_size::Size::Keep(pb::bar_size::Keep {})),
            }),
            ..Default::default()
        };
        assert_eq!(refusal(resize_size(&keep)), needs);
        let sizeless = pb::ResizeRequest {
            size: Some(pb::BarSize { size: None }),
            ..Default::default()
        };
        assert!(refusal(resize_size(&sizeless)).starts_with("ResizeRequest.size holds no size"));
    }

    #[tokio::test(start_paused = true)]
    async fn steps_go_together_after_the_batch_time_and_the_end_goes_at_once() {
        let (tx, rx) = mpsc::channel(64);
        let mut s = batched(rx);
        tx.send(step("a")).await.expect("send");
        tx.send(step("b")).await.expect("send");

        let early = tokio::time::timeout(STEP_BATCH / 2, s.next()).await;
        let first = tokio::time::Instant::now();
        let a = text(s.next().await);
        let b = text(s.next().await);
        let waited = first.elapsed();
        tx.send(step("c")).await.expect("send");
        drop(tx);
        let last = tokio::time::Instant::now();
        let c = text(s.next().await);

        assert!(early.is_err(), "a step went before its batch time");
        assert_eq!([a, b, c], ["a", "b", "c"]);
        assert!(waited <= STEP_BATCH, "{waited:?}");
        assert_eq!(last.elapsed(), Duration::ZERO, "the end waits for nothing");
        assert!(s.next().await.is_none());
    }
}
