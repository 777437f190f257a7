//! What a person sees while a take-over runs: the steps rigd streams (`Rig.Detach`,
//! `Attach`, `Reset`, `Resize` return `stream Progress`, one message as each step
//! starts, rigd's clock in `elapsed_s`), on stderr so that stdout stays the result.
//!
//! On a terminal the running step is one line redrawn every [`TICK`] with how long it
//! has run so far (the step rigd said it is in, and rigd's time since it said so: a
//! long unbind wait or a bus reset shows its seconds climb); when the next step comes
//! the line is finished with the step's duration. Elsewhere (a pipe, a log, a test)
//! each step is one plain line as it starts, `  [  0.12s] unbind … from nvidia`, and
//! nothing is redrawn. Under `--json` nothing is drawn: the steps and their durations
//! are in the outcome. What is not known is not drawn: rigd reports steps, not
//! fractions of one, so there is no percentage.

use std::{
    io::{IsTerminal, Write},
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use rig_client::Step;

/// How often the running step's line is redrawn on a terminal.
// TIMEOUT: 100 ms reads as live, and matches rigd's own batching of steps (a step
// arrives at most 100 ms after it started: daemon/src/service/take.rs STEP_BATCH).
const TICK: Duration = Duration::from_millis(100);

/// How steps are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// One line redrawn in place (stderr is a terminal).
    Live,
    /// One plain line per step.
    Plain,
    /// Nothing (`--json`).
    Quiet,
}

impl Style {
    /// Live on a terminal, plain lines otherwise, quiet under `--json`.
    pub fn detect(json: bool) -> Self {
        if json {
            Self::Quiet
        } else if std::io::stderr().is_terminal() {
            Self::Live
        } else {
            Self::Plain
        }
    }
}

/// The step running now, as the live line draws it.
#[derive(Debug)]
struct Running {
    text: String,
    /// rigd's clock when it started.
    started_s: f64,
}

#[derive(Debug, Default)]
struct Shared {
    /// When rigd's clock read 0, on this machine's clock (from the first step).
    origin: Option<Instant>,
    running: Option<Running>,
    done: bool,
}

/// Draws the steps of one operation; [`Progress::finish`] ends its line.
pub struct Progress {
    style: Style,
    shared: Arc<Mutex<Shared>>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

/// A plain step line: rigd's time since the operation started, and the step.
pub fn plain_line(s: &Step) -> String {
    format!("  [{:6.2}s] {}", s.elapsed_s, s.text)
}

/// The line of a step done: as [`plain_line`], with how long it took.
fn done_line(text: &str, started_s: f64, took_s: f64) -> String {
    format!("  [{started_s:6.2}s] {text} ({took_s:.2} s)")
}

impl Progress {
    /// Starts drawing; on a terminal a task redraws the running step (call from
    /// within the runtime).
    pub fn start(style: Style) -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let ticker = (style == Style::Live).then(|| {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(TICK);
                loop {
                    tick.tick().await;
                    let st = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    if st.done {
                        break;
                    }
                    if let (Some(origin), Some(r)) = (st.origin, &st.running) {
                        let now_s = origin.elapsed().as_secs_f64();
                        let line = done_line(&r.text, r.started_s, (now_s - r.started_s).max(0.0));
                        let mut err = std::io::stderr().lock();
                        let _ = write!(err, "\r\x1b[K{line}");
                        let _ = err.flush();
                    }
                }
            })
        });
        Self {
            style,
            shared,
            ticker,
        }
    }

    /// A step rigd reported.
    pub fn step(&self, s: &Step) {
        match self.style {
            Style::Quiet => {}
            Style::Plain => crate::out::errln!("{}", plain_line(s)),
            Style::Live => {
                let mut st = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                st.origin.get_or_insert_with(|| {
                    now.checked_sub(Duration::from_secs_f64(s.elapsed_s.max(0.0)))
                        .unwrap_or(now)
                });
                let mut err = std::io::stderr().lock();
                if let Some(prev) = st.running.take() {
                    let _ = writeln!(
                        err,
                        "\r\x1b[K{}",
                        done_line(&prev.text, prev.started_s, s.elapsed_s - prev.started_s)
                    );
                }
                let _ = write!(err, "\r\x1b[K{}", plain_line(s));
                let _ = err.flush();
                drop(err);
                st.running = Some(Running {
                    text: s.text.clone(),
                    started_s: s.elapsed_s,
                });
            }
        }
    }

    /// Ends the drawing: the last step's line gets its duration up to `end_s`
    /// (rigd's clock at the outcome), or, when the operation failed (`None`), is
    /// left as it was so the error below it names it.
    pub async fn finish(mut self, end_s: Option<f64>) {
        let last = {
            let mut st = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
            st.done = true;
            st.running.take()
        };
        if let Some(t) = self.ticker.take() {
            let _ = t.await;
        }
        if self.style != Style::Live {
            return;
        }
        if let Some(r) = last {
            let mut err = std::io::stderr().lock();
            let line = match end_s {
                Some(end) => done_line(&r.text, r.started_s, end - r.started_s),
                None => format!(
                    "{} (failed)",
                    plain_line(&Step {
                        elapsed_s: r.started_s,
                        text: r.text,
                        duration_s: None,
                    })
                ),
            };
            let _ = writeln!(err, "\r\x1b[K{line}");
        }
    }
}
