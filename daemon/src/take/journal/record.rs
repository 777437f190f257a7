//! What one journal record says, typed: the device's address, how it is held, the phase
//! and step under way, and the config space saved before rig touched it.
//!
//! On disk a record is JSON whose fields are plain strings ([`RawRecord`]), the same
//! text earlier rigds wrote; [`Record::try_from`] checks every field and refuses a record
//! it cannot trust with a typed [`RecordError`], never a guess: an address that does not
//! parse is not turned into 0000:00:00.0, and hex with a bad digit is not skipped (which
//! would shift every later byte of the config that a reset restores from).
//!
//! Not here: the slots and files the records live in (`journal`), what rig does with a
//! record at start (`take::recover`).

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use super::super::ResetMethod;
use crate::pci::{Bdf, BdfError};

/// How a device is held: the shared vocabulary's, written as "vfio" or "sysfs".
pub use rig_model::take::Mode;

/// A step of a detach, written before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetachStep {
    /// Unbinding the host driver.
    Unbind,
    /// Writing `driver_override`.
    DriverOverride,
    /// Binding vfio-pci (vfio mode).
    BindVfio,
    /// Enabling the driverless function (sysfs mode).
    Enable,
}

/// Which resize is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeStep {
    /// The resize a detach asked for (`--bar-size`).
    Detach,
    /// A resize of a held device's BAR (`None`: the largest resizable one).
    Bar(Option<u8>),
}

/// A step of a give-back, written before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachStep {
    /// Stopping bus mastering.
    Stop,
    /// Resetting the function.
    Reset,
    /// Unbinding what holds this function (the device or a group member).
    Unbind(Bdf),
    /// Probing the original driver of this function.
    Probe(Bdf),
    /// The give-back recovery starts for a record it could not re-adopt.
    Recover,
}

/// A step of taking back a device that was leased whole, written before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReclaimStep {
    /// Clearing bus mastering (first: nothing the holder programmed may reach memory).
    Stop,
    /// Tearing down the interrupts the holder set up.
    Irqs,
    /// Resetting the function, config saved and restored.
    Reset,
    /// Closing rigd's VFIO device fd and opening it again (vfio-pci's own teardown).
    Reopen,
    /// Keeping or clearing the device's DMA pool.
    Pool,
}

/// Where a device is in its life with rig: the step about to be done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Detaching(DetachStep),
    Held,
    Resizing(ResizeStep),
    Resetting(ResetMethod),
    Attaching(AttachStep),
    /// Held, and lent whole to a client (its VFIO device fd or resourceN files).
    Leased,
    /// Being taken back from a whole-device lease.
    Reclaiming(ReclaimStep),
}

/// The config space as it was before rig touched the device: at least the 64-byte
/// header, which is what a reset verifies and writes back (`take::reset`).
#[derive(Clone, PartialEq, Eq)]
pub struct SavedConfig(Vec<u8>);

/// The header every function has (PCI Local Bus 3.0 §6.1).
pub const CONFIG_HEADER_LEN: usize = 64;

/// Why a record cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("Its device address is not one")]
    Address(#[source] BdfError),
    #[error("The address of its group member is not one")]
    Member(#[source] BdfError),
    #[error("Its step `{step}` is not a step of phase `{phase}`")]
    Step { phase: String, step: String },
    #[error("Its phase `{phase}` is not one rig writes")]
    Phase { phase: String },
    #[error("Its saved config is not hex")]
    Hex(#[source] HexError),
    #[error(
        "Its saved config holds {len} bytes, less than the {CONFIG_HEADER_LEN}-byte header a reset restores"
    )]
    ShortConfig { len: usize },
}

/// Why a string is not the hex of some bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    #[error("{len} digits: not a whole number of bytes")]
    OddLength { len: usize },
    #[error("`{found}` at digit {at} is not a hex digit")]
    Digit { at: usize, found: char },
}

impl SavedConfig {
    /// Keeps `bytes` as a device's saved config.
    ///
    /// # Errors
    /// [`RecordError::ShortConfig`] below the 64-byte header.
    pub fn new(bytes: Vec<u8>) -> Result<Self, RecordError> {
        if bytes.len() < CONFIG_HEADER_LEN {
            return Err(RecordError::ShortConfig { len: bytes.len() });
        }
        Ok(Self(bytes))
    }

    /// The bytes, at least [`CONFIG_HEADER_LEN`] of them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Lowercase hex, two digits a byte.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Debug for SavedConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SavedConfig({} bytes)", self.0.len())
    }
}

impl fmt::Display for DetachStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unbind => "unbind",
            Self::DriverOverride => "driver_override",
            Self::BindVfio => "bind vfio-pci",
            Self::Enable => "enable",
        })
    }
}

impl FromStr for DetachStep {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "unbind" => Self::Unbind,
            "driver_override" => Self::DriverOverride,
            "bind vfio-pci" => Self::BindVfio,
            "enable" => Self::Enable,
            _ => return Err(()),
        })
    }
}

impl fmt::Display for ResizeStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Detach => f.write_str("detach"),
            Self::Bar(Some(b)) => write!(f, "BAR{b}"),
            Self::Bar(None) => f.write_str("BAR?"),
        }
    }
}

impl FromStr for ResizeStep {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "detach" => Ok(Self::Detach),
            "BAR?" => Ok(Self::Bar(None)),
            _ => {
                let n = s.strip_prefix("BAR").ok_or(())?;
                // One decimal digit: BARs are numbered 0 to 5.
                match n.as_bytes() {
                    [d @ b'0'..=b'5'] => Ok(Self::Bar(Some(d - b'0'))),
                    _ => Err(()),
                }
            }
        }
    }
}

impl fmt::Display for AttachStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stop => f.write_str("stop"),
            Self::Reset => f.write_str("reset"),
            Self::Unbind(b) => write!(f, "unbind {b}"),
            Self::Probe(b) => write!(f, "probe {b}"),
            Self::Recover => f.write_str("recover"),
        }
    }
}

impl FromStr for AttachStep {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        let bdf = |b: &str| b.parse::<Bdf>().map_err(|_| ());
        Ok(match s.split_once(' ') {
            None if s == "stop" => Self::Stop,
            None if s == "reset" => Self::Reset,
            None if s == "recover" => Self::Recover,
            Some(("unbind", b)) => Self::Unbind(bdf(b)?),
            Some(("probe", b)) => Self::Probe(bdf(b)?),
            _ => return Err(()),
        })
    }
}

impl fmt::Display for ReclaimStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Stop => "stop",
            Self::Irqs => "irqs",
            Self::Reset => "reset",
            Self::Reopen => "reopen",
            Self::Pool => "pool",
        })
    }
}

impl FromStr for ReclaimStep {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "stop" => Self::Stop,
            "irqs" => Self::Irqs,
            "reset" => Self::Reset,
            "reopen" => Self::Reopen,
            "pool" => Self::Pool,
            _ => return Err(()),
        })
    }
}

impl Phase {
    /// The phase's name and its step, as the journal spells them.
    fn parts(&self) -> (&'static str, Option<String>) {
        match self {
            Self::Detaching(s) => ("detaching", Some(s.to_string())),
            Self::Held => ("held", None),
            Self::Resizing(s) => ("resizing", Some(s.to_string())),
            // "auto", "flr", "pm", "bus".
            Self::Resetting(m) => ("resetting", Some(m.as_str().to_owned())),
            Self::Attaching(s) => ("attaching", Some(s.to_string())),
            Self::Leased => ("leased", None),
            Self::Reclaiming(s) => ("reclaiming", Some(s.to_string())),
        }
    }

    fn from_parts(phase: &str, step: Option<&str>) -> Result<Self, RecordError> {
        let bad_step = || RecordError::Step {
            phase: phase.to_owned(),
            step: step.unwrap_or_default().to_owned(),
        };
        let step_of = || step.ok_or_else(bad_step);
        Ok(match phase {
            "held" if step.is_none() => Self::Held,
            "leased" if step.is_none() => Self::Leased,
            "held" | "leased" => return Err(bad_step()),
            "detaching" => Self::Detaching(step_of()?.parse().map_err(|()| bad_step())?),
            "resizing" => Self::Resizing(step_of()?.parse().map_err(|()| bad_step())?),
            "attaching" => Self::Attaching(step_of()?.parse().map_err(|()| bad_step())?),
            "reclaiming" => Self::Reclaiming(step_of()?.parse().map_err(|()| bad_step())?),
            "resetting" => {
                Self::Resetting(step_of()?.parse::<ResetMethod>().map_err(|_| bad_step())?)
            }
            _ => {
                return Err(RecordError::Phase {
                    phase: phase.to_owned(),
                });
            }
        })
    }
}

/// `detaching:unbind`, `held`, `attaching:probe 0000:00:03.0`: the phase as the crash
/// tests name their points, and as a log line shows it.
impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (p, Some(s)) => write!(f, "{p}:{s}"),
            (p, None) => f.write_str(p),
        }
    }
}

/// One device's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub bdf: Bdf,
    pub mode: Mode,
    /// The driver to give the device back to; `None` if it had none.
    pub original_driver: Option<String>,
    pub phase: Phase,
    /// Seconds since the epoch when rig took it.
    pub since: u64,
    /// The config space as it was before rig touched it, for restores.
    pub saved_config: SavedConfig,
    /// Other functions of its IOMMU group taken with it (`--entire-group`), with
    /// their drivers.
    pub group_members: Vec<(Bdf, Option<String>)>,
}

/// A record as its JSON spells it: strings where [`Record`] has types.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawRecord {
    pub bdf: String,
    pub mode: Mode,
    pub original_driver: Option<String>,
    pub phase: RawPhase,
    pub since: u64,
    pub saved_config: String,
    pub group_members: Vec<(String, Option<String>)>,
}

/// `{"phase": "detaching", "step": "unbind"}`; `held` has no step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawPhase {
    pub phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

impl From<&Record> for RawRecord {
    fn from(r: &Record) -> Self {
        let (phase, step) = r.phase.parts();
        Self {
            bdf: r.bdf.to_string(),
            mode: r.mode,
            original_driver: r.original_driver.clone(),
            phase: RawPhase {
                phase: phase.to_owned(),
                step,
            },
            since: r.since,
            saved_config: r.saved_config.to_hex(),
            group_members: r
                .group_members
                .iter()
                .map(|(b, d)| (b.to_string(), d.clone()))
                .collect(),
        }
    }
}

impl TryFrom<RawRecord> for Record {
    type Error = RecordError;

    fn try_from(r: RawRecord) -> Result<Self, RecordError> {
        let bdf = r.bdf.parse().map_err(RecordError::Address)?;
        let phase = Phase::from_parts(&r.phase.phase, r.phase.step.as_deref())?;
        let saved_config = SavedConfig::new(parse_hex(&r.saved_config).map_err(RecordError::Hex)?)?;
        let group_members = r
            .group_members
            .into_iter()
            .map(|(b, d)| Ok((b.parse().map_err(RecordError::Member)?, d)))
            .collect::<Result<_, RecordError>>()?;
        Ok(Self {
            bdf,
            mode: r.mode,
            original_driver: r.original_driver,
            phase,
            since: r.since,
            saved_config,
            group_members,
        })
    }
}

/// Bytes as lowercase hex. Two table lookups a byte: the `format!` per byte this
/// replaced took 2.5 ms for 256 bytes in the disposable machine's TCG guest, on every
/// detach and attach (a GPU's config is 4 KiB).
pub fn hex(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * b.len());
    for x in b {
        s.push(char::from(DIGITS[usize::from(x >> 4)]));
        s.push(char::from(DIGITS[usize::from(x & 0xf)]));
    }
    s
}

/// The bytes `s` is the hex of (either case).
///
/// # Errors
/// [`HexError`]: a character that is not a hex digit (the first one), or an odd number
/// of digits.
pub fn parse_hex(s: &str) -> Result<Vec<u8>, HexError> {
    if let Some((at, found)) = s.char_indices().find(|(_, c)| !c.is_ascii_hexdigit()) {
        return Err(HexError::Digit { at, found });
    }
    if !s.len().is_multiple_of(2) {
        return Err(HexError::OddLength { len: s.len() });
    }
    // Every byte is an ASCII hex digit now.
    let nibble = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    };
    Ok(s.as_bytes()
        .chunks_exact(2)
        .map(|p| nibble(p[0]) << 4 | nibble(p[1]))
        .collect())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bdf(s: &str) -> Bdf {
        s.parse().expect("test address")
    }

    fn raw() -> RawRecord {
        RawRecord {
            bdf: "0000:00:03.0".into(),
            mode: Mode::Vfio,
            original_driver: Some("bochs-drm".into()),
            phase: RawPhase {
                phase: "attaching".into(),
                step: Some("probe 0000:00:03.0".into()),
            },
            since: 7,
            saved_config: "ab".repeat(64),
            group_members: vec![("0000:00:03.1".into(), None)],
        }
    }

    #[test]
    fn a_record_reads_back_as_the_json_earlier_rigds_wrote() {
        let text = r#"{"bdf":"0000:00:03.0","mode":"vfio","original_driver":"bochs-drm","phase":{"phase":"attaching","step":"probe 0000:00:03.0"},"since":7,"saved_config":"ABAB","group_members":[]}"#;
        let mut raw: RawRecord = serde_json::from_str(text).expect("json");
        raw.saved_config = raw.saved_config.repeat(32);
        let r = Record::try_from(raw).expect("valid");
        assert_eq!(
            r.phase,
            Phase::Attaching(AttachStep::Probe(bdf("0000:00:03.0")))
        );
        assert_eq!(r.saved_config.as_bytes(), [0xab; 64]);
        let held = r#"{"bdf":"0000:00:03.0","mode":"sysfs","original_driver":null,"phase":{"phase":"held"},"since":1,"saved_config":"","group_members":[]}"#;
        let raw: RawRecord = serde_json::from_str(held).expect("json");
        assert_eq!(raw.phase.step, None);
    }

    #[test]
    fn every_phase_round_trips_through_its_spelling() {
        let b = bdf("0000:01:00.0");
        let phases = [
            Phase::Detaching(DetachStep::Unbind),
            Phase::Detaching(DetachStep::DriverOverride),
            Phase::Detaching(DetachStep::BindVfio),
            Phase::Detaching(DetachStep::Enable),
            Phase::Held,
            Phase::Resizing(ResizeStep::Detach),
            Phase::Resizing(ResizeStep::Bar(Some(2))),
            Phase::Resizing(ResizeStep::Bar(None)),
            Phase::Resetting(ResetMethod::Auto),
            Phase::Resetting(ResetMethod::Flr),
            Phase::Resetting(ResetMethod::Pm),
            Phase::Resetting(ResetMethod::Bus),
            Phase::Attaching(AttachStep::Stop),
            Phase::Attaching(AttachStep::Reset),
            Phase::Attaching(AttachStep::Unbind(b)),
            Phase::Attaching(AttachStep::Probe(b)),
            Phase::Attaching(AttachStep::Recover),
            Phase::Leased,
            Phase::Reclaiming(ReclaimStep::Stop),
            Phase::Reclaiming(ReclaimStep::Irqs),
            Phase::Reclaiming(ReclaimStep::Reset),
            Phase::Reclaiming(ReclaimStep::Reopen),
            Phase::Reclaiming(ReclaimStep::Pool),
        ];
        for p in phases {
            let (name, step) = p.parts();
            assert_eq!(Phase::from_parts(name, step.as_deref()), Ok(p), "{p}");
        }
        // The crash tests' names (tests/vm/guest/scenarios/take-crash.sh).
        assert_eq!(
            Phase::Detaching(DetachStep::BindVfio).to_string(),
            "detaching:bind vfio-pci"
        );
        assert_eq!(
            Phase::Attaching(AttachStep::Probe(b)).to_string(),
            "attaching:probe 0000:01:00.0"
        );
        assert_eq!(Phase::Held.to_string(), "held");
    }

    #[test]
    fn bad_hex_is_refused_where_it_is_bad_not_skipped() {
        assert_eq!(parse_hex("00fF10"), Ok(vec![0, 0xff, 0x10]));
        assert_eq!(parse_hex(""), Ok(vec![]));
        assert_eq!(
            parse_hex("0g12"),
            Err(HexError::Digit { at: 1, found: 'g' })
        );
        assert_eq!(parse_hex("123"), Err(HexError::OddLength { len: 3 }));
        assert_eq!(
            parse_hex("12 4"),
            Err(HexError::Digit { at: 2, found: ' ' })
        );
        assert_eq!(parse_hex("1é"), Err(HexError::Digit { at: 1, found: 'é' }));
        assert_eq!(
            parse_hex("1234z"),
            Err(HexError::Digit { at: 4, found: 'z' })
        );
        assert_eq!(parse_hex("éé"), Err(HexError::Digit { at: 0, found: 'é' }));
        let mut r = raw();
        r.saved_config.replace_range(10..11, "x");
        assert_eq!(
            Record::try_from(r),
            Err(RecordError::Hex(HexError::Digit { at: 10, found: 'x' }))
        );
    }

    #[test]
    fn a_short_saved_config_is_refused_with_its_length() {
        let mut r = raw();
        r.saved_config = "00".repeat(63);
        assert_eq!(
            Record::try_from(r),
            Err(RecordError::ShortConfig { len: 63 })
        );
        assert_eq!(
            SavedConfig::new(vec![0; 64]).map(|c| c.as_bytes().len()),
            Ok(64)
        );
    }

    #[test]
    fn a_record_with_a_bad_address_phase_or_step_is_refused() {
        let mut r = raw();
        r.bdf = "0000:00:33.0".into();
        assert!(matches!(Record::try_from(r), Err(RecordError::Address(_))));
        let mut r = raw();
        r.group_members[0].0 = "junk".into();
        assert!(matches!(Record::try_from(r), Err(RecordError::Member(_))));
        for (phase, step) in [
            ("held", Some("x")),
            ("detaching", None),
            ("detaching", Some("bind nvidia")),
            ("resizing", Some("BAR6")),
            ("resizing", Some("BAR12")),
            ("resetting", Some("warm")),
            ("attaching", Some("probe 0000:00:3.g")),
            ("attaching", Some("unbind")),
            ("leased", Some("x")),
            ("reclaiming", None),
            ("reclaiming", Some("flush")),
        ] {
            let mut r = raw();
            r.phase = RawPhase {
                phase: phase.into(),
                step: step.map(Into::into),
            };
            assert!(
                matches!(Record::try_from(r), Err(RecordError::Step { .. })),
                "{phase} {step:?}"
            );
        }
        let mut r = raw();
        r.phase.phase = "floating".into();
        assert_eq!(
            Record::try_from(r),
            Err(RecordError::Phase {
                phase: "floating".into()
            })
        );
    }

    proptest! {
        #[test]
        fn hex_round_trips_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            prop_assert_eq!(parse_hex(&hex(&bytes)), Ok(bytes.clone()));
            prop_assert_eq!(parse_hex(&hex(&bytes).to_uppercase()), Ok(bytes));
        }

        #[test]
        fn parse_hex_never_panics(s in "\\PC{0,40}") {
            let _ = parse_hex(&s);
        }
    }
}
