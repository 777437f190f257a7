//! Prometheus metrics, opt-in (`[metrics] listen`), on a Unix socket of its own or a
//! loopback port: `GET /metrics` over HTTP/1.1 served by hyper, the text written by
//! prometheus-client (the OpenMetrics text format, which Prometheus's text parser reads
//! too: `Content-Type` says OpenMetrics only to a scraper that asks for it).
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
//! Names: a counter's family is registered without `_total`, which prometheus-client
//! adds to its samples (`rig_rpc_requests_total{method,code}`).

use std::{
    collections::BTreeMap,
    convert::Infallible,
    sync::{Arc, LazyLock},
    time::Duration,
};

use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Bytes, header};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::{config::MetricsListen, rig::Rig};

/// Latency buckets, in seconds: 50 µs (a unary call on a quiet host is ~30 µs) to 60 s
/// (a GPU's unbind).
const BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0, 60.0,
];

fn latency() -> Histogram {
    Histogram::new(BUCKETS.iter().copied())
}

/// The labels of each family: one struct per set, field names as label names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MethodCode {
    method: String,
    code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MethodLabel {
    method: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct Reason {
    reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SideRequest {
    request: String,
    outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MethodStep {
    method: String,
    step: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// What rigd counts as it runs.
#[derive(Debug)]
pub struct Registry {
    rpcs: Family<MethodCode, Counter>,
    rpc_seconds: Histograms<MethodLabel>,
    errors: Family<Reason, Counter>,
    side: Family<SideRequest, Counter>,
    steps: Histograms<MethodStep>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            rpcs: Family::default(),
            rpc_seconds: Family::new_with_constructor(latency),
            errors: Family::default(),
            side: Family::default(),
            steps: Family::new_with_constructor(latency),
        }
    }
}

static GLOBAL: LazyLock<Registry> = LazyLock::new(Registry::default);

/// The process's registry.
pub fn global() -> &'static Registry {
    &GLOBAL
}

impl Registry {
    /// One RPC: its method (`Rig.Detach`), its gRPC code's name, its latency.
    pub fn rpc(&self, method: &str, code: &str, took: Duration) {
        self.rpcs
            .get_or_create(&MethodCode {
                method: method.to_owned(),
                code: code.to_owned(),
            })
            .inc();
        self.rpc_seconds
            .get_or_create(&MethodLabel {
                method: method.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// One error status or side-socket refusal, by its reason.
    pub fn error(&self, reason: &str) {
        self.errors
            .get_or_create(&Reason {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// One side-socket request (`lease`, `open_queue`…) and whether it was answered
    /// with an error.
    pub fn side(&self, request: &str, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        self.side
            .get_or_create(&SideRequest {
                request: request.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// One step of a take-over (`Rig.Detach`, `unbind`) and how long it took.
    pub fn step(&self, method: &str, step: &str, took: Duration) {
        self.steps
            .get_or_create(&MethodStep {
                method: method.to_owned(),
                step: step.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// Puts the counted families into `r` (they are shared handles: what is counted
    /// later shows in `r` too).
    fn register_counts(&self, r: &mut prometheus_client::registry::Registry) {
        r.register(
            "rig_rpc_requests",
            "gRPC calls by method and status code",
            self.rpcs.clone(),
        );
        r.register(
            "rig_rpc_duration_seconds",
            "gRPC latency by method (a streamed call until its stream starts)",
            self.rpc_seconds.clone(),
        );
        r.register(
            "rig_errors",
            "Errors returned, by ErrorInfo reason (docs/errors.md)",
            self.errors.clone(),
        );
        r.register(
            "rig_side_requests",
            "DMA side-socket requests by kind and outcome",
            self.side.clone(),
        );
        r.register(
            "rig_takeover_step_seconds",
            "Take-over steps' durations, by RPC and step",
            self.steps.clone(),
        );
    }
}

/// A gauge family read at the scrape: label sets as (name, value) pairs. Every gauge
/// here counts something (devices, blocks, bytes, sessions), so integers: `rig_up 1`.
type Gauges = Family<Vec<(&'static str, String)>, Gauge>;

fn gauges(r: &mut prometheus_client::registry::Registry, name: &str, help: &str) -> Gauges {
    let g = Gauges::default();
    r.register(name, help, g.clone());
    g
}

fn set(g: &Gauges, labels: &[(&'static str, &str)], v: impl TryInto<i64>) {
    let labels = labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
    g.get_or_create(&labels)
        .set(v.try_into().unwrap_or(i64::MAX));
}

/// The whole exposition: `rig`'s state now, then the registry's counts.
pub fn render(rig: &Rig, registry: &Registry) -> String {
    let mut r = prometheus_client::registry::Registry::default();
    set(&gauges(&mut r, "rig_up", "1 while rigd serves"), &[], 1);
    set(
        &gauges(&mut r, "rig_build_info", "rigd's version"),
        &[("version", env!("CARGO_PKG_VERSION"))],
        1,
    );
    let (held, _) = rig.status();
    let device_held = gauges(
        &mut r,
        "rig_device_held",
        "Devices rigd holds, by mode and state (1 each)",
    );
    let leased_whole = gauges(
        &mut r,
        "rig_device_leased_whole",
        "1 for a held device leased whole to a client",
    );
    for v in &held {
        let mode = v.mode.map(|m| m.to_string()).unwrap_or_default();
        let dev = v.bdf.to_string();
        set(
            &device_held,
            &[("device", &dev), ("mode", &mode), ("state", &v.state)],
            1,
        );
        set(
            &leased_whole,
            &[("device", &dev)],
            i64::from(v.lease.is_some()),
        );
    }
    let health = gauges(
        &mut r,
        "rig_gpu_health",
        "Served GPUs by health: serving, stalled (a reclaim's RM call past its bound) or lost (needs a reset), 1 each",
    );
    for (gpu, h) in rig.gpu_health() {
        for state in ["serving", "stalled", "lost"] {
            set(
                &health,
                &[("gpu", &gpu), ("state", state)],
                i64::from(h.word() == state),
            );
        }
    }
    let dma = rig.dma().status(None);
    let block = crate::dma::BLOCK_SIZE;
    let blocks = gauges(
        &mut r,
        "rig_dma_pool_blocks",
        "DMA pool blocks (2 MiB) by pool and state",
    );
    let pinned = gauges(
        &mut r,
        "rig_dma_pinned_bytes",
        "Pinned bytes per pool (free, leased and quarantined blocks)",
    );
    for p in &dma.pools {
        for (state, n) in [
            ("free", p.free_blocks),
            ("leased", p.leased_blocks),
            ("quarantined", p.quarantined_blocks),
            ("pinning", p.pinning_blocks),
        ] {
            set(
                &blocks,
                &[
                    ("pool", &p.name),
                    ("mode", crate::dma::PoolMode::name_of(p.addressing)),
                    ("state", state),
                ],
                n,
            );
        }
        let bytes = u64::from(p.free_blocks + p.leased_blocks + p.quarantined_blocks) * block;
        set(&pinned, &[("pool", &p.name)], bytes);
    }
    let leased_bytes = gauges(
        &mut r,
        "rig_dma_leased_bytes",
        "Bytes leased to clients per pool",
    );
    let mut leased: BTreeMap<&str, u64> = dma.pools.iter().map(|p| (p.name.as_str(), 0)).collect();
    for c in &dma.clients {
        *leased.entry(c.device.as_str()).or_default() += c.bytes;
    }
    for (pool, bytes) in &leased {
        set(&leased_bytes, &[("pool", pool)], *bytes);
    }
    let sessions = gauges(
        &mut r,
        "rig_dma_sessions",
        "DMA sessions (clients), claimed or not yet",
    );
    let claimed = dma.clients.iter().filter(|c| c.claimed).count();
    set(&sessions, &[("claimed", "true")], claimed);
    set(
        &sessions,
        &[("claimed", "false")],
        dma.clients.len() - claimed,
    );
    let mut uids: Vec<u32> = dma.clients.iter().map(|c| c.uid).collect();
    uids.sort_unstable();
    uids.dedup();
    set(
        &gauges(&mut r, "rig_clients", "Distinct uids with a DMA session"),
        &[],
        uids.len(),
    );
    let queues_lent = gauges(
        &mut r,
        "rig_queues_lent",
        "Hardware queues lent, per device",
    );
    let mut queues: BTreeMap<String, u64> = held.iter().map(|v| (v.bdf.to_string(), 0)).collect();
    for q in rig.queue_status() {
        *queues.entry(q.status.bdf.to_string()).or_default() += 1;
    }
    for (dev, n) in &queues {
        set(&queues_lent, &[("device", dev)], *n);
    }
    let channels_lent = gauges(
        &mut r,
        "rig_channels_lent",
        "Channels lent on RM-served GPUs, per GPU",
    );
    let mut chans: BTreeMap<String, u64> = BTreeMap::new();
    for c in rig.channel_status(None) {
        *chans.entry(c.gpu.clone()).or_default() += 1;
    }
    for (gpu, n) in &chans {
        set(&channels_lent, &[("gpu", gpu)], *n);
    }
    registry.register_counts(&mut r);
    let mut out = String::new();
    // PANIC: writing to a String cannot fail.
    prometheus_client::encoding::text::encode(&mut out, &r).expect("a String takes any text");
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

/// The Content-Type of the exposition: OpenMetrics to a scraper that accepts it, else
/// the classic text format's, whose parsers read this text as well.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Serves HTTP/1.1 on `s`, one request (`GET /metrics` or `/`; else 404 or 405).
async fn scrape<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(rig: Arc<Rig>, s: S) {
    let service = hyper::service::service_fn(move |req| answer(Arc::clone(&rig), req));
    // Title-case header names (`Content-Type`), as the hand-written responder wrote them:
    // HTTP says case does not matter, but small scrapers compare them as written.
    let _ = hyper::server::conn::http1::Builder::new()
        .title_case_headers(true)
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_WAIT)
        .keep_alive(false)
        .serve_connection(TokioIo::new(s), service)
        .await;
}

async fn answer<B>(rig: Arc<Rig>, req: Request<B>) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(ctype),
        );
        r
    };
    if req.method() != Method::GET {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".to_owned(),
        ));
    }
    if !matches!(req.uri().path(), "/metrics" | "/") {
        return Ok(reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "only /metrics\n".to_owned(),
        ));
    }
    let openmetrics = req.headers().get_all(header::ACCEPT).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.contains("application/openmetrics-text"))
    });
    let ctype = if openmetrics { OPENMETRICS } else { CLASSIC };
    Ok(
        match tokio::task::spawn_blocking(move || render(&rig, global())).await {
            Ok(body) => reply(StatusCode::OK, ctype, body),
            Err(_) => reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                String::new(),
            ),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(r: &Registry) -> String {
        let mut reg = prometheus_client::registry::Registry::default();
        r.register_counts(&mut reg);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &reg).expect("encodes");
        out
    }

    #[test]
    fn label_values_escape_backslash_quote_and_newline() {
        let r = Registry::default();
        r.error("a\\b\"c\nd");
        let out = counts(&r);
        assert!(
            out.contains("rig_errors_total{reason=\"a\\\\b\\\"c\\nd\"} 1\n"),
            "{out}"
        );
    }

    #[test]
    fn a_histogram_is_cumulative_with_inf_sum_and_count() {
        let r = Registry::default();
        r.step("M", "s", Duration::from_micros(200));
        r.step("M", "s", Duration::from_secs(2));
        let out = counts(&r);
        let bucket = |le: &str, n: u64| {
            format!("rig_takeover_step_seconds_bucket{{le=\"{le}\",method=\"M\",step=\"s\"}} {n}\n")
        };
        for (le, n) in [("0.0001", 0), ("0.00025", 1), ("2.5", 2), ("+Inf", 2)] {
            assert!(out.contains(&bucket(le, n)), "{le} {n}: {out}");
        }
        assert!(
            out.contains("rig_takeover_step_seconds_count{method=\"M\",step=\"s\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("rig_takeover_step_seconds_sum{method=\"M\",step=\"s\"} 2.0002\n"),
            "{out}"
        );
    }

    #[test]
    fn counts_render_by_method_code_and_reason() {
        let r = Registry::default();
        r.rpc("Rig.Version", "OK", Duration::from_micros(30));
        r.rpc("Rig.Version", "OK", Duration::from_micros(40));
        r.rpc("Rig.Detach", "PermissionDenied", Duration::from_micros(40));
        r.error("NOT_ADMIN");
        let out = counts(&r);
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
