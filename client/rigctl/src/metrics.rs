//! rigd's metrics endpoint (`[metrics] listen`, docs/roles.md): one scrape over its
//! Unix socket or loopback port (HTTP/1.0 `GET /metrics`, Prometheus text format
//! 0.0.4), and a reader of that text into samples for programs (`rigctl metrics
//! --json`). It is not gRPC: rigd serves it beside its API for Prometheus, and this
//! is for hosts that have no scraper, or none in the machine (the full guest).
//!
//! The parser reads what rigd writes: `# HELP`/`# TYPE` lines, and samples
//! `name{label="value",…} number` with the exposition format's escapes (`\\`, `\"`,
//! `\n`) in label values. A line it cannot read is an error naming the line.

use std::{
    collections::BTreeMap,
    io::{self, Read, Write},
    net::TcpStream,
    os::unix::net::UnixStream,
    path::PathBuf,
    time::Duration,
};

use serde::Serialize;

/// Where rigd serves its metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `unix:/run/rig/metrics.sock`.
    Unix(PathBuf),
    /// `127.0.0.1:9464`.
    Tcp(String),
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix("unix:") {
            Some(p) if p.starts_with('/') => Ok(Self::Unix(PathBuf::from(p))),
            Some(_) => Err(format!("`{s}`: a unix: endpoint needs an absolute path")),
            None if s.contains(':') => Ok(Self::Tcp(s.to_owned())),
            None => Err(format!("`{s}` is neither unix:/PATH nor HOST:PORT")),
        }
    }
}

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("Failed to scrape rigd's metrics at {at}")]
    Io {
        at: String,
        #[source]
        source: io::Error,
    },
    #[error("rigd's metrics endpoint answered `{status}`")]
    Status { status: String },
    #[error("Line {line} of the metrics is not a sample: `{text}`")]
    Parse { line: usize, text: String },
}

/// How long a scrape may take.
// TIMEOUT: rigd renders from memory in milliseconds; 10 s is a daemon that is stuck.
const SCRAPE_WAIT: Duration = Duration::from_secs(10);

/// The body of one `GET /metrics` (the exposition text).
///
/// # Errors
/// [`MetricsError::Io`] (no socket, a refused connection, a timeout),
/// [`MetricsError::Status`] for an answer other than 200.
pub fn scrape(at: &Endpoint) -> Result<String, MetricsError> {
    let name = match at {
        Endpoint::Unix(p) => format!("unix:{}", p.display()),
        Endpoint::Tcp(a) => a.clone(),
    };
    let io = |source| MetricsError::Io {
        at: name.clone(),
        source,
    };
    let request = b"GET /metrics HTTP/1.0\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n";
    let mut raw = Vec::new();
    match at {
        Endpoint::Unix(p) => {
            let mut s = UnixStream::connect(p).map_err(io)?;
            s.set_read_timeout(Some(SCRAPE_WAIT)).map_err(io)?;
            s.write_all(request).map_err(io)?;
            s.read_to_end(&mut raw).map_err(io)?;
        }
        Endpoint::Tcp(a) => {
            let mut s = TcpStream::connect(a.as_str()).map_err(io)?;
            s.set_read_timeout(Some(SCRAPE_WAIT)).map_err(io)?;
            s.write_all(request).map_err(io)?;
            s.read_to_end(&mut raw).map_err(io)?;
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(MetricsError::Status {
            status: status.to_owned(),
        });
    }
    Ok(body.to_owned())
}

/// One sample.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The samples of exposition `text`, in order (comments skipped).
///
/// # Errors
/// [`MetricsError::Parse`] naming the first line that is not a sample.
pub fn parse(text: &str) -> Result<Vec<Sample>, MetricsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || MetricsError::Parse {
            line: i + 1,
            text: line.to_owned(),
        };
        out.push(parse_sample(line).ok_or_else(bad)?);
    }
    Ok(out)
}

fn parse_sample(line: &str) -> Option<Sample> {
    let name_end = line.find(['{', ' '])?;
    let (name, mut rest) = line.split_at(name_end);
    let mut labels = BTreeMap::new();
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices();
        loop {
            // key="value", or the closing brace.
            let (start, c) = chars.next()?;
            if c == '}' {
                rest = r.get(start + 1..)?;
                break;
            }
            if c == ',' {
                continue;
            }
            let eq = r.get(start..)?.find('=')? + start;
            let key = r.get(start..eq)?.to_owned();
            for _ in start + 1..=eq {
                chars.next();
            }
            // skipped to just after '=': the opening quote.
            let (_, q) = chars.next()?;
            if q != '"' {
                return None;
            }
            let mut value = String::new();
            loop {
                let (_, c) = chars.next()?;
                match c {
                    '"' => break,
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    other => value.push(other),
                }
            }
            labels.insert(key, value);
        }
    }
    let mut fields = rest.split_whitespace();
    let value = match fields.next()? {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_with_labels_escapes_and_infinities_parse() {
        let text = "# HELP rig_up rigd answers.\n# TYPE rig_up gauge\nrig_up 1\n\
            rig_rpc_requests_total{method=\"Rig.Detach\",code=\"OK\"} 3\n\
            rig_x{a=\"q\\\"uote,\\\\ and\\nline\",b=\"\"} 2.5e-3\n\
            rig_rpc_duration_seconds_bucket{method=\"Rig.Status\",le=\"+Inf\"} +Inf\n";
        let s = parse(text).expect("parses");
        assert_eq!(s.len(), 4);
        assert_eq!((s[0].name.as_str(), s[0].value), ("rig_up", 1.0));
        assert_eq!(s[1].labels["method"], "Rig.Detach");
        assert_eq!(s[1].labels["code"], "OK");
        assert_eq!(s[2].labels["a"], "q\"uote,\\ and\nline");
        assert_eq!(s[2].labels["b"], "");
        assert!((s[2].value - 0.0025).abs() < 1e-12);
        assert_eq!(s[3].labels["le"], "+Inf");
        assert!(s[3].value.is_infinite());
    }

    #[test]
    fn a_line_that_is_no_sample_is_named() {
        let e = parse("rig_up 1\nrig_broken{a=\"x} 1\n").expect_err("unterminated");
        assert!(matches!(e, MetricsError::Parse { line: 2, .. }), "{e}");
        parse("rig_up one\n").expect_err("not a number");
        "relative"
            .parse::<Endpoint>()
            .expect_err("no unix: prefix, no port");
        assert_eq!(
            "unix:/run/rig/metrics.sock".parse::<Endpoint>(),
            Ok(Endpoint::Unix("/run/rig/metrics.sock".into()))
        );
    }
}
