//! lspci's device selection for `rigctl list`: `-s [[[[DOMAIN]:]BUS]:][DEVICE][.[FUNC]]`
//! (a slot) and `-d [VENDOR]:[DEVICE][:CLASS[:PROG_IF]]` (ids), parsed and matched as
//! pciutils does, so that a selection copied from an lspci command line picks the same
//! functions here.
//!
//! Flow: clap parses the flags with [`Slot::parse`] and [`Ids::parse`] (a bad one is
//! clap's usage error, exit 2, with lspci's own words: "Invalid bus number"); `list`
//! keeps the devices that [`Slot::matches`] and [`Ids::matches`]. No state, no I/O.
//!
//! Reference: lspci(8), "-s" and "-d", and pciutils' `lib/filter.c`
//! (`pci_filter_parse_slot`, `pci_filter_parse_id`, `pci_filter_match`, pciutils 3.8
//! on): every number is hexadecimal; a part left empty or given as `*` matches any
//! value; with one colon the parts are bus and device, with two domain, bus and device;
//! a class may hold `x` digits that match any digit (`03xx`), and its four digits are
//! base class and subclass (`0302`), so `03` alone means class 0x0003; the numbers may
//! carry a leading `0x` (except the class, where `x` is a digit), as lspci 3.9
//! accepts; a selection of 64 characters or more is refused as too long.
//!
//! Not here: which devices rigd lists (`--gpus` asks rigd), and printing them (`list`).

use rig_client::Device;

/// Why a selection is malformed: lspci's words for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("Expression too long")]
    TooLong,
    #[error("Too many fields")]
    TooManyFields,
    #[error("At least two fields must be given")]
    TooFewFields,
    #[error("Invalid domain number")]
    Domain,
    #[error("Invalid bus number")]
    Bus,
    #[error("Invalid slot/function number")]
    SlotFunction,
    #[error("Invalid slot number")]
    Slot,
    #[error("Invalid function number")]
    Function,
    #[error("Invalid vendor ID")]
    Vendor,
    #[error("Invalid device ID")]
    Device,
    #[error("Invalid class code")]
    Class,
    #[error("Invalid programming interface code")]
    ProgIf,
}

/// pciutils' BUF_SIZE: a selection must be shorter.
const MAX_LEN: usize = 64;

/// `-s`: each part `None` for any value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    domain: Option<u32>,
    bus: Option<u32>,
    device: Option<u32>,
    function: Option<u32>,
}

/// `-d`: each part `None` for any value; the class with its mask (`x` digits clear).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ids {
    vendor: Option<u32>,
    device: Option<u32>,
    class: Option<(u32, u32)>,
    prog_if: Option<u32>,
}

impl Slot {
    /// Parses lspci's `-s` argument.
    ///
    /// # Errors
    /// [`FilterError`], in lspci's order of checks.
    pub fn parse(s: &str) -> Result<Self, FilterError> {
        if s.len() >= MAX_LEN {
            return Err(FilterError::TooLong);
        }
        let fields = split(s, ':', 3).ok_or(FilterError::TooManyFields)?;
        let mut slot = Self::default();
        let mut i = 0;
        if fields.len() == 3 {
            slot.domain = hex(fields[0], 0x7fff_ffff).ok_or(FilterError::Domain)?;
            i += 1;
        }
        if fields.len() > i + 1 {
            slot.bus = hex(fields[i], 0xff).ok_or(FilterError::Bus)?;
            i += 1;
        }
        // PANIC: split returns at least one field, and i stops one short of its count.
        let dev = fields[i];
        if defined(dev) {
            let parts = split(dev, '.', 2).ok_or(FilterError::SlotFunction)?;
            slot.device = hex(parts[0], 0x1f).ok_or(FilterError::Slot)?;
            if let Some(f) = parts.get(1) {
                slot.function = hex(f, 7).ok_or(FilterError::Function)?;
            }
        }
        Ok(slot)
    }

    /// Whether `bdf` (`0000:03:00.0`) is in the slot; an address that does not parse
    /// is in none but the slot that names nothing.
    pub fn matches(&self, bdf: &str) -> bool {
        let Some([domain, bus, device, function]) = address(bdf) else {
            return *self == Self::default();
        };
        [
            (self.domain, domain),
            (self.bus, bus),
            (self.device, device),
            (self.function, function),
        ]
        .iter()
        .all(|(want, have)| want.is_none_or(|w| w == *have))
    }
}

impl Ids {
    /// Parses lspci's `-d` argument.
    ///
    /// # Errors
    /// [`FilterError`], in lspci's order of checks.
    pub fn parse(s: &str) -> Result<Self, FilterError> {
        if s.len() >= MAX_LEN {
            return Err(FilterError::TooLong);
        }
        let fields = split(s, ':', 4).ok_or(FilterError::TooManyFields)?;
        if fields.len() < 2 {
            return Err(FilterError::TooFewFields);
        }
        let field = |i: usize| fields.get(i).copied();
        Ok(Self {
            vendor: hex(fields[0], 0xffff).ok_or(FilterError::Vendor)?,
            device: hex(fields[1], 0xffff).ok_or(FilterError::Device)?,
            class: field(2)
                .map_or(Some(None), |c| class(c, 0xffff))
                .ok_or(FilterError::Class)?,
            prog_if: field(3)
                .map_or(Some(None), |p| hex(p, 0xff))
                .ok_or(FilterError::ProgIf)?,
        })
    }

    /// Whether `d`'s ids, class (base class and subclass) and programming interface
    /// are the selection's.
    pub fn matches(&self, d: &Device) -> bool {
        let class16 = d.class_code >> 8;
        let prog_if = d.class_code & 0xff;
        self.vendor.is_none_or(|v| v == u32::from(d.vendor_id))
            && self.device.is_none_or(|v| v == u32::from(d.device_id))
            && self.class.is_none_or(|(v, mask)| (v ^ class16) & mask == 0)
            && self.prog_if.is_none_or(|v| v == prog_if)
    }
}

/// `s` cut at each `sep`, or `None` for more than `max` fields.
fn split(s: &str, sep: char, max: usize) -> Option<Vec<&str>> {
    let fields: Vec<&str> = s.split(sep).collect();
    (fields.len() <= max).then_some(fields)
}

/// A part that names a value: not empty, not `*`.
fn defined(field: &str) -> bool {
    !field.is_empty() && field != "*"
}

/// A hexadecimal part up to `max`: `Some(None)` for any value, `None` when malformed.
fn hex(field: &str, max: u32) -> Option<Option<u32>> {
    if !defined(field) {
        return Some(None);
    }
    let digits = field
        .strip_prefix("0x")
        .or_else(|| field.strip_prefix("0X"))
        .unwrap_or(field);
    let mut v: u64 = 0;
    for c in digits.chars() {
        v = (v << 4) | u64::from(c.to_digit(16)?);
        if v > u64::from(max) {
            return None;
        }
    }
    Some(Some(u32::try_from(v).ok()?))
}

/// A class part up to `max`, whose `x` digits match any digit: `Some(None)` for any
/// value, `Some(Some((value, mask)))`, or `None` when malformed. pciutils checks the
/// bound with each `x` counted as 1, so `x` cannot make a class too long.
fn class(field: &str, max: u32) -> Option<Option<(u32, u32)>> {
    if !defined(field) {
        return Some(None);
    }
    let (mut value, mut mask, mut bound) = (0u32, !0u32, 0u64);
    for c in field.chars() {
        let (d, m, b) = match c {
            'x' | 'X' => (0, 0, 1),
            _ => {
                let d = c.to_digit(16)?;
                (d, 0xf, d)
            }
        };
        value = (value << 4) | d;
        mask = (mask << 4) | m;
        bound = (bound << 4) | u64::from(b);
        if bound > u64::from(max) {
            return None;
        }
    }
    Some(Some((value, mask)))
}

/// `dddd:bb:dd.f` as its four numbers.
fn address(bdf: &str) -> Option<[u32; 4]> {
    let (domain, rest) = bdf.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let n = |s: &str| u32::from_str_radix(s, 16).ok();
    Some([n(domain)?, n(bus)?, n(device)?, n(function)?])
}

/// A function with these ids and nothing else read, for tests.
#[cfg(test)]
pub(crate) fn test_device(bdf: &str, vendor_id: u16, device_id: u16, class_code: u32) -> Device {
    Device {
        bdf: bdf.to_owned(),
        vendor_id,
        device_id,
        subsystem_vendor_id: 0,
        subsystem_device_id: 0,
        revision: 0,
        class_code,
        names: rig_client::Names::default(),
        gpu: None,
        config_access: rig_client::ConfigAccess {
            readable: 256,
            size: 256,
            limited: None,
        },
        header: rig_client::Header {
            header_type: 0,
            multifunction: false,
            command: 0,
            status: 0,
            cache_line_size: 0,
            latency_timer: 0,
            interrupt_line: 0,
            interrupt_pin: 0,
            bist: 0,
        },
        bridge: None,
        bars: Vec::new(),
        rom: None,
        capabilities: Vec::new(),
        extended_capabilities: Vec::new(),
        chain_problems: Vec::new(),
        sysfs: rig_client::Sysfs::default(),
        link: rig_client::LinkBudget::default(),
        config: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(s: &str) -> Slot {
        Slot::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn a_slot_reads_its_parts_from_the_right_as_lspci_does() {
        assert_eq!(
            slot("1:c5:1f.7"),
            Slot {
                domain: Some(1),
                bus: Some(0xc5),
                device: Some(0x1f),
                function: Some(7)
            }
        );
        assert_eq!(
            slot("03:00"),
            Slot {
                bus: Some(3),
                device: Some(0),
                ..Slot::default()
            }
        );
        // "0" is device 0 on any bus; ".4" function 4 of every device; "0:" all of bus 0.
        assert_eq!(slot("0").device, Some(0));
        assert_eq!(slot("0").bus, None);
        assert_eq!(
            slot(".4"),
            Slot {
                function: Some(4),
                ..Slot::default()
            }
        );
        assert_eq!(
            slot("0:"),
            Slot {
                bus: Some(0),
                ..Slot::default()
            }
        );
    }

    #[test]
    fn empty_and_star_parts_match_any_value() {
        for s in ["", "*", ":", "*:*", "*:*:*.*", "::.", "."] {
            assert_eq!(slot(s), Slot::default(), "{s:?}");
        }
        assert!(slot("*:*.*").matches("0000:03:00.0"));
        assert_eq!(Ids::parse(":"), Ok(Ids::default()));
        assert_eq!(Ids::parse("*:*:*:*"), Ok(Ids::default()));
    }

    #[test]
    fn slot_numbers_are_hex_up_to_their_field_and_lspci_names_the_bad_one() {
        assert_eq!(slot("ff:1f.7").bus, Some(0xff));
        assert_eq!(slot("7fffffff:0:0").domain, Some(0x7fff_ffff));
        assert_eq!(slot("0x3:0x0.0x1").bus, Some(3));
        let bad = [
            ("0:0:0:0", FilterError::TooManyFields),
            ("80000000:0:0", FilterError::Domain),
            ("100:0", FilterError::Bus),
            ("g:0", FilterError::Bus),
            ("20", FilterError::Slot),
            ("1.8", FilterError::Function),
            ("1.2.3", FilterError::SlotFunction),
            ("-1", FilterError::Slot),
            (&"0".repeat(64), FilterError::TooLong),
        ];
        for (s, e) in bad {
            assert_eq!(Slot::parse(s), Err(e), "{s:?}");
        }
        // 63 characters is not too long.
        Slot::parse(&format!("{}1", "0".repeat(62)))
            .expect("62 zeros and a 1: within lspci's length");
    }

    #[test]
    fn ids_take_two_to_four_fields_in_hex_and_lspci_names_the_bad_one() {
        assert_eq!(
            Ids::parse("10de:2335:0302:00"),
            Ok(Ids {
                vendor: Some(0x10de),
                device: Some(0x2335),
                class: Some((0x0302, !0)),
                prog_if: Some(0)
            })
        );
        let bad = [
            ("", FilterError::TooFewFields),
            ("10de", FilterError::TooFewFields),
            ("1:2:3:4:5", FilterError::TooManyFields),
            ("10000:", FilterError::Vendor),
            (":2335x", FilterError::Device),
            ("::10000", FilterError::Class),
            ("::0g", FilterError::Class),
            (":::100", FilterError::ProgIf),
        ];
        for (s, e) in bad {
            assert_eq!(Ids::parse(s), Err(e), "{s:?}");
        }
    }

    #[test]
    fn a_slot_matches_the_parts_it_names_and_only_those() {
        assert!(slot("03:00.0").matches("0000:03:00.0"));
        assert!(slot("03:00.0").matches("0001:03:00.0"), "any domain");
        assert!(!slot("0001:03:00.0").matches("0000:03:00.0"));
        assert!(slot("10000:03:").matches("10000:03:1f.3"), "a VMD domain");
        assert!(!slot("03:00.1").matches("0000:03:00.0"));
        assert!(!slot("04:").matches("0000:03:00.0"));
        assert!(slot(".0").matches("0000:c5:1f.0"));
        assert!(!slot("03:").matches("not-an-address"));
        assert!(Slot::default().matches("not-an-address"));
    }

    #[test]
    fn a_class_with_x_digits_matches_any_digit_there_and_four_digits_are_base_and_sub() {
        let gpu = test_device("0000:03:00.0", 0x10de, 0x2335, 0x03_02_00);
        let vga = test_device("0000:04:00.0", 0x1002, 0x744c, 0x03_00_00);
        let nic = test_device("0000:05:00.0", 0x15b3, 0x1021, 0x02_07_00);
        let ids = |s: &str| Ids::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        let picked = |s: &str| {
            [&gpu, &vga, &nic]
                .iter()
                .filter(|d| ids(s).matches(d))
                .map(|d| d.bdf.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(picked("10de:"), ["0000:03:00.0"]);
        assert_eq!(picked(":744c"), ["0000:04:00.0"]);
        assert_eq!(picked("::03xx"), ["0000:03:00.0", "0000:04:00.0"]);
        assert_eq!(picked("::0302"), ["0000:03:00.0"]);
        assert_eq!(picked("::x2xx"), ["0000:05:00.0"]);
        assert!(picked("::03").is_empty(), "class 0x0003, as in lspci");
        assert_eq!(picked("::02xx:00"), ["0000:05:00.0"]);
        assert!(picked("::02xx:01").is_empty());
        assert!(picked("10de:744c").is_empty());
    }
}
