//! rigd's log in the journal: a tracing layer that sends each event as one entry by the
//! journal's native protocol (`sys::journal`), for rigd under systemd (main.rs picks it
//! when stderr is the journal's stream).
//!
//! An entry carries `MESSAGE` as rigd's text log writes an event (the message, then
//! its fields as `key=value`), so `journalctl -u rigd` reads as the text log does, less
//! the timestamp, which the journal keeps; `PRIORITY` from the level (error 3, warn 4,
//! info 6, debug and trace 7); `SYSLOG_IDENTIFIER=rigd`; `CODE_FILE`, `CODE_LINE` and
//! `RIG_TARGET` (the module); and each field of the event and of its spans as a field
//! of its own, `RIG_` and its name in capitals: `RIG_BDF` (the device), `RIG_STEP` (a
//! take-over's step), the request's `RIG_METHOD`, `RIG_UID`, `RIG_PID`. So
//! `journalctl -u rigd RIG_BDF=0000:03:00.0` lists one device's entries.
//!
//! Why not tracing-journald: it sends the bare message as `MESSAGE` and the fields
//! only beside it, so `journalctl -u rigd` would say `leased whole` without the device,
//! the holder or the session. An entry that cannot be sent (the journal is gone or
//! behind) is dropped, as a full stream would drop it; there is nowhere to report it.

use std::{fmt::Write as _, io, path::Path};

use tracing::{
    Event, Level, Subscriber,
    field::{Field, Visit},
    span,
};
use tracing_subscriber::{Layer, layer::Context, registry::LookupSpan};

use crate::sys::journal::Journal;

/// Where journald listens for native entries.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// The layer; [`JournalLayer::new`] checks the journal's socket is there.
#[derive(Debug)]
pub struct JournalLayer {
    journal: Journal,
}

impl JournalLayer {
    /// Entries to the journal's socket at `path` ([`JOURNAL_SOCKET`]).
    ///
    /// # Errors
    /// When the socket cannot be made, or nothing listens at `path` (an empty entry,
    /// which journald ignores, is sent to find out).
    pub fn new(path: &Path) -> io::Result<Self> {
        let journal = Journal::new(path)?;
        journal.send(&[])?;
        Ok(Self { journal })
    }
}

/// An event's or span's fields: as text, and as journal fields.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    text: String,
    named: Vec<(String, String)>,
}

impl Fields {
    fn add(&mut self, field: &Field, text: String, raw: String) {
        if field.name() == "message" {
            self.message = raw;
            return;
        }
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        let _ = write!(self.text, "{}={text}", field.name());
        self.named.push((journal_name(field.name()), raw));
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        // As tracing's text log writes a string: quoted.
        self.add(field, format!("{value:?}"), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let v = format!("{value:?}");
        self.add(field, v.clone(), v);
    }
}

/// `RIG_` and a field's name in capitals, anything but letters and digits as `_`.
fn journal_name(name: &str) -> String {
    let mut out = String::from("RIG_");
    out.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    out
}

fn priority(level: Level) -> &'static str {
    match level {
        Level::ERROR => "3",
        Level::WARN => "4",
        Level::INFO => "6",
        Level::DEBUG | Level::TRACE => "7",
    }
}

/// A span's journal fields, kept in its extensions.
struct SpanFields(Vec<(String, String)>);

impl<S> Layer<S> for JournalLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(f.named));
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        values.record(&mut f);
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<SpanFields>()
        {
            fields.0.extend(f.named);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let meta = event.metadata();
        let mut message = f.message;
        if !f.text.is_empty() {
            if !message.is_empty() {
                message.push(' ');
            }
            message.push_str(&f.text);
        }
        let line = meta.line().map(|l| l.to_string()).unwrap_or_default();
        let mut named: Vec<(String, String)> = Vec::new();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<SpanFields>() {
                    named.extend(fields.0.iter().cloned());
                }
            }
        }
        named.extend(f.named);
        let mut entry = vec![
            ("MESSAGE", message.as_str()),
            ("PRIORITY", priority(*meta.level())),
            ("SYSLOG_IDENTIFIER", "rigd"),
            ("RIG_TARGET", meta.target()),
        ];
        if let Some(file) = meta.file() {
            entry.push(("CODE_FILE", file));
            entry.push(("CODE_LINE", line.as_str()));
        }
        entry.extend(named.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let _ = self.journal.send(&entry);
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeMap, os::unix::net::UnixDatagram};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::sys::journal::decode;

    fn entry(sock: &UnixDatagram) -> BTreeMap<String, String> {
        let mut buf = vec![0u8; 8192];
        let n = sock.recv(&mut buf).expect("an entry");
        decode(&buf[..n]).expect("decodes").into_iter().collect()
    }

    #[test]
    fn an_event_is_one_entry_with_its_text_priority_and_fields_and_its_spans() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        let sock = UnixDatagram::bind(&path).expect("bind");
        sock.set_nonblocking(true).expect("nonblocking");
        let layer = JournalLayer::new(&path).expect("layer");
        let _probe = entry(&sock);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request", method = "Rig.Detach", uid = 1000);
            let _in = span.enter();
            let bdf = "0000:03:00.0";
            tracing::warn!(%bdf, step = "unbind", "leased whole");
        });
        let e = entry(&sock);
        assert_eq!(
            e["MESSAGE"],
            "leased whole bdf=0000:03:00.0 step=\"unbind\""
        );
        assert_eq!(e["PRIORITY"], "4");
        assert_eq!(e["SYSLOG_IDENTIFIER"], "rigd");
        assert_eq!(e["RIG_BDF"], "0000:03:00.0");
        assert_eq!(e["RIG_STEP"], "unbind");
        assert_eq!(e["RIG_METHOD"], "Rig.Detach");
        assert_eq!(e["RIG_UID"], "1000");
        assert!(e["RIG_TARGET"].starts_with("rigd"), "{e:?}");
        assert!(sock.recv(&mut [0u8; 16]).is_err(), "exactly one entry");
    }

    #[test]
    fn no_journal_listening_is_an_error_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        JournalLayer::new(&dir.path().join("none")).expect_err("nothing listens there");
    }

    #[test]
    fn field_names_become_upper_snake_with_the_rig_prefix() {
        assert_eq!(journal_name("bdf"), "RIG_BDF");
        assert_eq!(journal_name("max_qid"), "RIG_MAX_QID");
        assert_eq!(journal_name("a.b"), "RIG_A_B");
    }
}
