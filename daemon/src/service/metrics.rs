//! Prometheus metrics: the text exposition format 0.0.4, opt-in (`[metrics] listen`),
//! on a Unix socket of its own or a loopback port, over a minimal HTTP/1.1 responder
//! (`GET /metrics`; one request per connection).
//!
//! Counted as they happen, in one process-wide registry ([`global`]: one rigd per
//! process; tests that check counts run their rigd alone): RPCs by method and code and
//! their latency (`service::gate`; a streamed RPC until its stream starts), errors by
//! ErrorInfo reason (`service::status::status`, the one place statuses are made, and
//! the side socket's refusals), side-socket requests, take-over steps' durations
//! (`service::take`). Read from `Rig` at each scrape: devices held and their state,
//! whole-device leases, DMA pools' blocks and pinned and leased bytes per device,
//! sessions (clients), lent queues and channels.
//!
//! Format: prometheus.io/docs/instrumenting/exposition_formats (0.0.4): `# HELP`,
//! `# TYPE`, then samples; label values escape `\`, `"` and newline; histograms have
//! cumulative `_bucket{le=…}` with `+Inf`, `_sum` and `_count`.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    sync::{Arc, LazyLock, Mutex, PoisonError},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::{config::MetricsListen, rig::Rig};

/// Latency buckets, in seconds: 50 µs (a unary call on a quiet host is ~30 µs) to 60 s
/// (a GPU's unbind).
const BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Debug, Clone, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS.len()];
        }
        for (c, le) in self.counts.iter_mut().zip(BUCKETS) {
            if seconds <= *le {
                *c += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct Counts {
    rpcs: BTreeMap<(String, String), u64>,
    rpc_seconds: BTreeMap<String, Histogram>,
    errors: BTreeMap<String, u64>,
    side: BTreeMap<(String, String), u64>,
    steps: BTreeMap<(String, String), Histogram>,
}

/// What rigd counts as it runs.
#[derive(Debug, Default)]
pub struct Registry {
    counts: Mutex<Counts>,
}

static GLOBAL: LazyLock<Registry> = LazyLock::new(Registry::default);

/// The process's registry.
pub fn global() -> &'static Registry {
    &GLOBAL
}

impl Registry {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One RPC: its method (`Rig.Detach`), its gRPC code's name, its latency.
    pub fn rpc(&self, method: &str, code: &str, took: Duration) {
        let mut c = self.counts();
        *c.rpcs
            .entry((method.to_owned(), code.to_owned()))
            .or_default() += 1;
        c.rpc_seconds
            .entry(method.to_owned())
            .or_default()
            .observe(took.as_secs_f64());
    }

    /// One error status or side-socket refusal, by its reason.
    pub fn error(&self, reason: &str) {
        *self.counts().errors.entry(reason.to_owned()).or_default() += 1;
    }

    /// One side-socket request (`lease`, `open_queue`…) and whether it was answered
    /// with an error.
    pub fn side(&self, request: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        *self
            .counts()
            .side
            .entry((request.to_owned(), outcome.to_owned()))
            .or_default() += 1;
    }

    /// One step of a take-over (`Rig.Detach`, `unbind`) and how long it took.
    pub fn step(&self, method: &str, step: &str, took: Duration) {
        self.counts()
            .steps
            .entry((method.to_owned(), step.to_owned()))
            .or_default()
            .observe(took.as_secs_f64());
    }

    fn render_counts(&self, out: &mut String) {
        let c = self.counts();
        family(
            out,
            "rig_rpc_requests_total",
            "counter",
            "gRPC calls by method and status code.",
        );
        for ((m, code), n) in &c.rpcs {
            sample(
                out,
                "rig_rpc_requests_total",
                &[("method", m), ("code", code)],
                *n as f64,
            );
        }
        family(
            out,
            "rig_rpc_duration_seconds",
            "histogram",
            "gRPC latency by method (a streamed call until its stream starts).",
        );
        for (m, h) in &c.rpc_seconds {
            histogram(out, "rig_rpc_duration_seconds", &[("method", m)], h);
        }
        family(
            out,
            "rig_errors_total",
            "counter",
            "Errors returned, by ErrorInfo reason (docs/errors.md).",
        );
        for (r, n) in &c.errors {
            sample(out, "rig_errors_total", &[("reason", r)], *n as f64);
        }
        family(
            out,
            "rig_side_requests_total",
            "counter",
            "DMA side-socket requests by kind and outcome.",
        );
        for ((r, o), n) in &c.side {
            sample(
                out,
                "rig_side_requests_total",
                &[("request", r), ("outcome", o)],
                *n as f64,
            );
        }
        family(
            out,
            "rig_takeover_step_seconds",
            "histogram",
            "Take-over steps' durations, by RPC and step.",
        );
        for ((m, s), h) in &c.steps {
            histogram(
                out,
                "rig_takeover_step_seconds",
                &[("method", m), ("step", s)],
                h,
            );
        }
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A label value as the format wants it: `\` → `\\`, `"` → `\"`, newline → `\n`.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn labels(ls: &[(&str, &str)]) -> String {
    if ls.is_empty() {
        return String::new();
    }
    let inner: Vec<_> = ls
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn sample(out: &mut String, name: &str, ls: &[(&str, &str)], v: f64) {
    let _ = writeln!(out, "{name}{} {v}", labels(ls));
}

fn histogram(out: &mut String, name: &str, ls: &[(&str, &str)], h: &Histogram) {
    for (i, le) in BUCKETS.iter().enumerate() {
        let le = le.to_string();
        let mut l = ls.to_vec();
        l.push(("le", &le));
        let n = h.counts.get(i).copied().unwrap_or(0);
        sample(out, &format!("{name}_bucket"), &l, n as f64);
    }
    let mut l = ls.to_vec();
    l.push(("le", "+Inf"));
    sample(out, &format!("{name}_bucket"), &l, h.count as f64);
    sample(out, &format!("{name}_sum"), ls, h.sum);
    sample(out, &format!("{name}_count"), ls, h.count as f64);
}

/// The whole exposition: `rig`'s state now, then the registry's counts.
pub fn render(rig: &Rig, registry: &Registry) -> String {
    let mut out = String::new();
    family(&mut out, "rig_up", "gauge", "1 while rigd serves.");
    sample(&mut out, "rig_up", &[], 1.0);
    family(&mut out, "rig_build_info", "gauge", "rigd's version.");
    sample(
        &mut out,
        "rig_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    let (held, _) = rig.status();
    family(
        &mut out,
        "rig_device_held",
        "gauge",
        "Devices rigd holds, by mode and state (1 each).",
    );
    for v in &held {
        let mode = v.mode.map(|m| m.to_string()).unwrap_or_default();
        let dev = v.bdf.to_string();
        sample(
            &mut out,
            "rig_device_held",
            &[("device", &dev), ("mode", &mode), ("state", &v.state)],
            1.0,
        );
    }
    family(
        &mut out,
        "rig_device_leased_whole",
        "gauge",
        "1 for a held device leased whole to a client.",
    );
    for v in &held {
        let dev = v.bdf.to_string();
        sample(
            &mut out,
            "rig_device_leased_whole",
            &[("device", &dev)],
            if v.lease.is_some() { 1.0 } else { 0.0 },
        );
    }
    let dma = rig.dma().status(None);
    let block = crate::dma::BLOCK_SIZE as f64;
    family(
        &mut out,
        "rig_dma_pool_blocks",
        "gauge",
        "DMA pool blocks (2 MiB) by pool and state.",
    );
    for p in &dma.pools {
        for (state, n) in [
            ("free", p.free_blocks),
            ("leased", p.leased_blocks),
            ("quarantined", p.quarantined_blocks),
            ("pinning", p.pinning_blocks),
        ] {
            sample(
                &mut out,
                "rig_dma_pool_blocks",
                &[
                    ("pool", &p.name),
                    ("mode", crate::dma::PoolMode::name_of(p.addressing)),
                    ("state", state),
                ],
                f64::from(n),
            );
        }
    }
    family(
        &mut out,
        "rig_dma_pinned_bytes",
        "gauge",
        "Pinned bytes per pool (free, leased and quarantined blocks).",
    );
    for p in &dma.pools {
        let pinned = f64::from(p.free_blocks + p.leased_blocks + p.quarantined_blocks) * block;
        sample(
            &mut out,
            "rig_dma_pinned_bytes",
            &[("pool", &p.name)],
            pinned,
        );
    }
    family(
        &mut out,
        "rig_dma_leased_bytes",
        "gauge",
        "Bytes leased to clients per pool.",
    );
    let mut leased: BTreeMap<&str, u64> = dma.pools.iter().map(|p| (p.name.as_str(), 0)).collect();
    for c in &dma.clients {
        *leased.entry(c.device.as_str()).or_default() += c.bytes;
    }
    for (pool, bytes) in &leased {
        sample(
            &mut out,
            "rig_dma_leased_bytes",
            &[("pool", pool)],
            *bytes as f64,
        );
    }
    family(
        &mut out,
        "rig_dma_sessions",
        "gauge",
        "DMA sessions (clients), claimed or not yet.",
    );
    let claimed = dma.clients.iter().filter(|c| c.claimed).count();
    sample(
        &mut out,
        "rig_dma_sessions",
        &[("claimed", "true")],
        claimed as f64,
    );
    sample(
        &mut out,
        "rig_dma_sessions",
        &[("claimed", "false")],
        (dma.clients.len() - claimed) as f64,
    );
    let mut uids: Vec<u32> = dma.clients.iter().map(|c| c.uid).collect();
    uids.sort_unstable();
    uids.dedup();
    family(
        &mut out,
        "rig_clients",
        "gauge",
        "Distinct uids with a DMA session.",
    );
    sample(&mut out, "rig_clients", &[], uids.len() as f64);
    family(
        &mut out,
        "rig_queues_lent",
        "gauge",
        "Hardware queues lent, per device.",
    );
    let mut queues: BTreeMap<String, u64> = held.iter().map(|v| (v.bdf.to_string(), 0)).collect();
    for q in rig.queue_status() {
        *queues.entry(q.status.bdf.to_string()).or_default() += 1;
    }
    for (dev, n) in &queues {
        sample(&mut out, "rig_queues_lent", &[("device", dev)], *n as f64);
    }
    family(
        &mut out,
        "rig_channels_lent",
        "gauge",
        "Channels lent on RM-served GPUs, per GPU.",
    );
    let mut chans: BTreeMap<String, u64> = BTreeMap::new();
    for c in rig.channel_status(None) {
        *chans.entry(c.gpu.clone()).or_default() += 1;
    }
    for (gpu, n) in &chans {
        sample(&mut out, "rig_channels_lent", &[("gpu", gpu)], *n as f64);
    }
    registry.render_counts(&mut out);
    out
}

/// Why the metrics listener could not start.
#[derive(Debug, thiserror::Error)]
#[error("Failed to listen for metrics on {listen}")]
pub struct MetricsError {
    listen: String,
    #[source]
    source: std::io::Error,
}

/// Binds `listen` and serves scrapes until the task is dropped. A Unix socket is
/// 0660 with group `gid`, else 0600, like rigd's own.
///
/// # Errors
/// [`MetricsError`] when the address cannot be bound.
pub async fn serve(
    rig: Arc<Rig>,
    listen: MetricsListen,
    gid: Option<u32>,
) -> Result<tokio::task::JoinHandle<()>, MetricsError> {
    let err = |source| MetricsError {
        listen: format!("{listen:?}"),
        source,
    };
    match listen.clone() {
        MetricsListen::Tcp(addr) => {
            let l = tokio::net::TcpListener::bind(addr).await.map_err(err)?;
            Ok(tokio::spawn(async move {
                loop {
                    if let Ok((s, _)) = l.accept().await {
                        tokio::spawn(scrape(Arc::clone(&rig), s));
                    }
                }
            }))
        }
        MetricsListen::Unix(path) => {
            let bound =
                super::socket::bind(&path, gid).map_err(|e| err(std::io::Error::other(e)))?;
            bound.listener.set_nonblocking(true).map_err(err)?;
            let l = tokio::net::UnixListener::from_std(bound.listener.try_clone().map_err(err)?)
                .map_err(err)?;
            Ok(tokio::spawn(async move {
                let _bound = bound;
                loop {
                    if let Ok((s, _)) = l.accept().await {
                        tokio::spawn(scrape(Arc::clone(&rig), s));
                    }
                }
            }))
        }
    }
}

/// How long a scraper may take to send its request.
// TIMEOUT: Prometheus sends its request at once; 5 s keeps a stuck peer from holding a
// task.
const REQUEST_WAIT: Duration = Duration::from_secs(5);

/// Answers one HTTP request on `s`: `GET /metrics` (or `/`), else 404 or 405.
async fn scrape<S: AsyncRead + AsyncWrite + Unpin>(rig: Arc<Rig>, mut s: S) {
    let mut buf = Vec::with_capacity(1024);
    let head = tokio::time::timeout(REQUEST_WAIT, async {
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(chunk.get(..n)?);
        }
        Some(())
    })
    .await;
    if !matches!(head, Ok(Some(()))) {
        return;
    }
    let line = buf.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, body, ctype) = match (method, path) {
        ("GET", "/metrics" | "/") => {
            let r = Arc::clone(&rig);
            match tokio::task::spawn_blocking(move || render(&r, global())).await {
                Ok(b) => ("200 OK", b, "text/plain; version=0.0.4; charset=utf-8"),
                Err(_) => ("500 Internal Server Error", String::new(), "text/plain"),
            }
        }
        ("GET", _) => ("404 Not Found", "only /metrics\n".to_owned(), "text/plain"),
        _ => (
            "405 Method Not Allowed",
            "GET only\n".to_owned(),
            "text/plain",
        ),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes()).await;
    let _ = s.write_all(body.as_bytes()).await;
    let _ = s.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(labels(&[("a", "1"), ("b", "x\"")]), "{a=\"1\",b=\"x\\\"\"}");
    }

    #[test]
    fn a_histogram_is_cumulative_with_inf_sum_and_count() {
        let mut h = Histogram::default();
        h.observe(0.0002);
        h.observe(2.0);
        let mut out = String::new();
        histogram(&mut out, "x", &[("method", "M")], &h);
        assert!(
            out.contains("x_bucket{method=\"M\",le=\"0.0001\"} 0\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{method=\"M\",le=\"0.00025\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{method=\"M\",le=\"2.5\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("x_bucket{method=\"M\",le=\"+Inf\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("x_count{method=\"M\"} 2\n"), "{out}");
        assert!(out.contains("x_sum{method=\"M\"} 2.0002\n"), "{out}");
    }

    #[test]
    fn counts_render_by_method_code_and_reason() {
        let r = Registry::default();
        r.rpc("Rig.Version", "OK", Duration::from_micros(30));
        r.rpc("Rig.Version", "OK", Duration::from_micros(40));
        r.rpc("Rig.Detach", "PermissionDenied", Duration::from_micros(40));
        r.error("NOT_ADMIN");
        let mut out = String::new();
        r.render_counts(&mut out);
        assert!(
            out.contains("rig_rpc_requests_total{method=\"Rig.Version\",code=\"OK\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("rig_errors_total{reason=\"NOT_ADMIN\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("# TYPE rig_rpc_duration_seconds histogram\n"),
            "{out}"
        );
    }
}
