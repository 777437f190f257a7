//! Tests for `pci::ids`: an inline fixture, malformed input, and (when installed) the real
//! database checked against `lspci`.
use super::*;

/// Every kind of line, plus what pciutils tolerates: comments anywhere, indented comments,
/// blank lines, CRLF, uppercase hex, a tab after an id, one trailing blank, `S` and reserved
/// blocks, a prog-if directly under a class. The subsystem lines are invented: pci.ids 2025.07.11
/// names no subsystem of these devices (an H200 SXM reports subsystem 10de:18bf).
const FIXTURE: &str = "#\n#\tList of PCI ID's\n#\n#\tVersion: 2099.01.02\n#\n\n\
    0001  SafeNet (wrong ID)\n\
    10de  NVIDIA Corporation\n\
    \t2330  GH100 [H100 SXM5 80GB]\n\
    \t\t10de 16c1  H100 SXM5 80GB\n\
    # a comment inside a vendor block\n\
    \t2335  GH100 [H200 SXM 141GB]\n\
    \t  # an indented comment\n\
    \t\t10de 18bf  H200 SXM 141GB\n\
    \t2336\tGH100 [H100]\n\
    \n\
    1234  Technical Corp.\n\
    \t1111  QEMU Virtual Video Controller\n\
    ABCD  Upper Case Vendor \r\n\
    \tEF01  Upper Case Device\t\n\
    X 12  Reserved block\n\
    \tffff  skipped\n\
    \t\t\tdeeply nested, skipped\n\
    S 1234\n\
    \t0001  generic subsystem, skipped\n\
    C 03  Display controller\n\
    \t00  VGA compatible controller\n\
    \t\t00  VGA controller\n\
    \t\t01  8514 controller\n\
    \t02  3D controller\n\
    C 12  Processing accelerators\n\
    \t00  Processing accelerators\n\
    C 13  Odd class\n\
    \t\t05  Prog-if without a subclass\n";

fn fixture() -> PciIds {
    PciIds::parse(FIXTURE, Path::new("fixture")).expect("fixture is valid")
}

/// The parse error's (line, reason), or a panic naming what parsed instead.
fn parse_error(text: &str) -> (usize, &'static str) {
    match PciIds::parse(text, Path::new("t")) {
        Err(IdsError::Parse { line, reason, .. }) => (line, reason),
        other => panic!("{text:?} should fail to parse, got {other:?}"),
    }
}

/// `RIG_TEST_PCI_IDS`, else the first installed database; tests that need it skip
/// without one.
fn real_file() -> Option<PathBuf> {
    std::env::var_os("RIG_TEST_PCI_IDS")
        .map(PathBuf::from)
        .or_else(|| {
            DEFAULT_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
}

fn load_real() -> Option<(PathBuf, PciIds)> {
    let Some(path) = real_file() else {
        eprintln!("skipped: no pci.ids installed");
        return None;
    };
    let ids = PciIds::load(&path).expect("installed pci.ids parses");
    Some((path, ids))
}

#[test]
fn parse_names_vendors_devices_and_subsystems() {
    let ids = fixture();
    assert_eq!(ids.vendor(0x10de), Some("NVIDIA Corporation"));
    assert_eq!(ids.device(0x10de, 0x2335), Some("GH100 [H200 SXM 141GB]"));
    assert_eq!(ids.device(0x10de, 0x2336), Some("GH100 [H100]"));
    assert_eq!(
        ids.device(0x1234, 0x1111),
        Some("QEMU Virtual Video Controller")
    );
    assert_eq!(
        ids.subsystem(0x10de, 0x2330, 0x10de, 0x16c1),
        Some("H100 SXM5 80GB")
    );
    assert_eq!(
        ids.subsystem(0x10de, 0x2335, 0x10de, 0x18bf),
        Some("H200 SXM 141GB")
    );
}

#[test]
fn parse_names_classes_subclasses_and_prog_ifs() {
    let ids = fixture();
    assert_eq!(ids.class(0x03), Some("Display controller"));
    assert_eq!(ids.subclass(0x03, 0x00), Some("VGA compatible controller"));
    assert_eq!(ids.subclass(0x03, 0x02), Some("3D controller"));
    assert_eq!(ids.subclass(0x12, 0x00), Some("Processing accelerators"));
    assert_eq!(ids.prog_if(0x03, 0x00, 0x01), Some("8514 controller"));
    // pciutils files a prog-if directly under a class under subclass 00.
    assert_eq!(
        ids.prog_if(0x13, 0x00, 0x05),
        Some("Prog-if without a subclass")
    );
}

#[test]
fn parse_tolerates_crlf_uppercase_hex_and_one_trailing_blank() {
    let ids = fixture();
    assert_eq!(ids.vendor(0xabcd), Some("Upper Case Vendor"));
    assert_eq!(ids.device(0xabcd, 0xef01), Some("Upper Case Device"));
}

#[test]
fn parse_skips_reserved_and_generic_subsystem_blocks() {
    let ids = fixture();
    assert_eq!(ids.vendor(0x0012), None);
    assert_eq!(ids.device(0x1234, 0x0001), None);
    assert_eq!(ids.devices(0x1234).count(), 1);
}

#[test]
fn parse_reads_version_from_header_comment() {
    assert_eq!(fixture().version(), Some("2099.01.02"));
}

#[test]
fn lookups_of_unlisted_ids_answer_none() {
    let ids = fixture();
    assert_eq!(ids.vendor(0xffff), None);
    assert_eq!(ids.device(0x10de, 0x2331), None);
    assert_eq!(ids.device(0x0001, 0x2330), None);
    assert_eq!(ids.subsystem(0x10de, 0x2330, 0x10de, 0x0000), None);
    assert_eq!(ids.class(0x04), None);
    assert_eq!(ids.subclass(0x03, 0x80), None);
    assert_eq!(ids.prog_if(0x03, 0x00, 0x02), None);
}

#[test]
fn empty_answers_none_everywhere() {
    let ids = PciIds::empty();
    assert!(ids.is_empty());
    assert_eq!(ids.version(), None);
    assert_eq!(ids.vendor(0x10de), None);
    assert_eq!(ids.device(0x10de, 0x2335), None);
    assert_eq!(ids.subsystem(0x10de, 0x2335, 0x10de, 0x18bf), None);
    assert_eq!(ids.class(0x03), None);
    assert_eq!(ids.subclass(0x03, 0x00), None);
    assert_eq!(ids.prog_if(0x03, 0x00, 0x00), None);
    assert_eq!(ids.devices(0x10de).count(), 0);
}

#[test]
fn devices_lists_one_vendor_in_id_order() {
    let devices: Vec<_> = fixture().devices(0x10de).map(|(d, _)| d).collect();
    assert_eq!(devices, [0x2330, 0x2335, 0x2336]);
}

#[test]
fn debug_shows_counts_not_text() {
    let debug = format!("{:?}", fixture());
    assert!(debug.contains("devices: 5"), "{debug}");
    assert!(!debug.contains("NVIDIA"), "{debug}");
}

#[test]
fn malformed_lines_are_parse_errors_with_their_line_number() {
    let cases: &[(&str, usize, &str)] = &[
        ("\t2330  device before any vendor\n", 1, "outside a vendor"),
        (
            "# c\n\n\t\t10de 16c1  subsystem first\n",
            3,
            "outside a device",
        ),
        (
            "10de  V\n\t\t10de 16c1  subsystem under a vendor\n",
            2,
            "outside a device",
        ),
        (
            "C 03  C\n\t00  S\n\t\t\t00  three tabs\n",
            3,
            "deeper than two tabs",
        ),
        (
            "10de  V\n\t2330  D\n\t\t\t10de 16c1  three tabs\n",
            3,
            "deeper than two tabs",
        ),
        ("10dg  bad hex\n", 1, "invalid vendor id"),
        ("+10d  sign\n", 1, "invalid vendor id"),
        (
            "10de  V\n 2330  space instead of tab\n",
            2,
            "invalid vendor id",
        ),
        ("10de  V\n\t233  short\n", 2, "invalid device id"),
        (
            "10de  V\n\t2330  D\n\t\t10de 16c  S\n",
            3,
            "invalid subsystem ids",
        ),
        (
            "10de  V\n\t2330  D\n\t\t10de-16c1  S\n",
            3,
            "invalid subsystem ids",
        ),
        ("10de\n", 1, "not followed by a space"),
        ("10de  \n", 1, "without a name"),
        ("10de\t\t\n", 1, "without a name"),
        ("C 3  short class\n", 1, "invalid class id"),
        ("10de  V\n\t23300  long\n", 2, "not followed by a space"),
        ("C 0x  bad class\n", 1, "invalid class id"),
        ("C 03  C\n\tzz  bad subclass\n", 2, "invalid subclass id"),
        (
            "C 03  C\n\t00  S\n\t\tg0  bad prog-if\n",
            3,
            "invalid prog-if id",
        ),
        ("a  lower-case letter is no block\n", 1, "invalid vendor id"),
    ];
    for &(text, line, reason) in cases {
        let (got_line, got_reason) = parse_error(text);
        assert_eq!(got_line, line, "{text:?}: {got_reason}");
        assert!(got_reason.contains(reason), "{text:?}: {got_reason}");
    }
}

#[test]
fn duplicates_are_parse_errors_at_the_later_line() {
    assert_eq!(parse_error("10de  A\n10DE  B\n"), (2, "duplicate vendor"));
    let repeated_block = "10de  A\n\t2330  D\n1234  B\n10de  A again\n\t2330  D again\n";
    assert_eq!(parse_error(repeated_block), (4, "duplicate vendor"));
    let subsystem = "10de  A\n\t2330  D\n\t\t10de 16c1  S\n\t\t10de 16c1  S\n";
    assert_eq!(parse_error(subsystem), (4, "duplicate subsystem"));
    assert_eq!(
        parse_error("C 03  A\n\t00  B\n\t00  C\n"),
        (3, "duplicate subclass")
    );
}

#[test]
fn load_of_missing_file_is_read_error_that_does_not_repeat_its_cause() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pci.ids");
    let Err(error @ IdsError::Read { .. }) = PciIds::load(&path) else {
        panic!("a missing file must be a read error");
    };
    let cause = std::error::Error::source(&error)
        .expect("io cause")
        .to_string();
    assert!(!error.to_string().contains(&cause), "{error}");
    assert!(error.to_string().contains("pci.ids"), "{error}");
}

#[test]
fn load_replaces_bytes_that_are_not_utf8() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pci.ids");
    std::fs::write(&path, b"10de  NVIDIA \xff Corporation\n").expect("write");
    let ids = PciIds::load(&path).expect("lossy text parses");
    assert_eq!(ids.vendor(0x10de), Some("NVIDIA \u{fffd} Corporation"));
}

/// Fuzz-ish: every truncation and many single-byte edits of the fixture parse or fail
/// with a line number inside the text, and never panic.
#[test]
fn edited_fixture_never_panics() {
    let lines = |t: &str| t.split('\n').count();
    let check = |text: &str| match PciIds::parse(text, Path::new("t")) {
        Ok(_) => {}
        Err(IdsError::Parse { line, .. }) => assert!((1..=lines(text)).contains(&line)),
        Err(e) => panic!("{e:?}"),
    };
    let bytes = FIXTURE.as_bytes();
    for cut in (0..=FIXTURE.len()).filter(|&i| FIXTURE.is_char_boundary(i)) {
        check(FIXTURE.get(..cut).expect("char boundary"));
    }
    for i in 0..bytes.len() {
        for b in [
            b'\t', b' ', b'\n', b'\r', b'#', b'C', b'S', b'0', b'f', b'z',
        ] {
            let mut edited = bytes.to_vec();
            edited[i] = b;
            check(&String::from_utf8_lossy(&edited));
        }
    }
}

#[test]
fn real_file_names_gpus_qemu_devices_and_classes() {
    let Some((_, ids)) = load_real() else { return };
    assert!(ids.version().is_some());
    assert_eq!(ids.vendor(0x10de), Some("NVIDIA Corporation"));
    let h100 = ids
        .device(0x10de, 0x2330)
        .expect("10de:2330 is in every pci.ids since 2023.04.10");
    assert!(h100.contains("H100"), "{h100}");
    // 10de:2335 came after Debian bookworm's 2023.04.10 file, which lacks it.
    if let Some(h200) = ids.device(0x10de, 0x2335) {
        assert!(h200.contains("H200"), "{h200}");
    }
    // The 2023.04 and 2025.07 files do not list vendor 1234, the unregistered id of
    // QEMU's bochs/std VGA (lspci prints "Device 1234:1111"); check it if one ever does.
    if let Some(vga) = ids.device(0x1234, 0x1111) {
        assert!(vga.contains("VGA") || vga.contains("Video"), "{vga}");
    }
    assert_eq!(ids.device(0x1af4, 0x1000), Some("Virtio network device"));
    assert_eq!(
        ids.subsystem(0x1013, 0x00b8, 0x1af4, 0x1100),
        Some("QEMU Virtual Machine")
    );
    assert_eq!(ids.class(0x03), Some("Display controller"));
    assert_eq!(ids.subclass(0x03, 0x00), Some("VGA compatible controller"));
    assert_eq!(ids.subclass(0x03, 0x02), Some("3D controller"));
    assert_eq!(ids.subclass(0x12, 0x00), Some("Processing accelerators"));
    assert_eq!(ids.prog_if(0x03, 0x00, 0x00), Some("VGA controller"));
}

/// Fuzz-ish: prefixes of the real file cut at 64 points parse or fail, never panic.
#[test]
fn real_file_prefixes_never_panic() {
    let Some((path, _)) = load_real() else { return };
    let text = std::fs::read_to_string(&path).expect("read");
    for k in 1..=64 {
        let mut cut = text.len() * k / 64;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let prefix = text.get(..cut).expect("char boundary");
        match PciIds::parse(prefix, &path) {
            Ok(_) | Err(IdsError::Parse { .. }) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
}

/// Names for this machine's devices agree with `lspci -mmnn` reading the same file
/// (udev's hwdb off, so only the file speaks). lspci's fallbacks are mirrored: a subclass
/// falls back to its class, a subsystem equal to the device to the device's name, and an
/// unknown id prints as "Vendor", "Device", "Class" or "Unknown vendor".
#[test]
fn real_file_agrees_with_lspci_on_this_machines_devices() {
    let Some((path, ids)) = load_real() else {
        return;
    };
    let output = std::process::Command::new("lspci")
        .args(["-mmnn", "-O", "hwdb.disable=1", "-i"])
        .arg(&path)
        .output();
    let Ok(output) = output.map_err(|e| eprintln!("skipped: no lspci ({e})")) else {
        return;
    };
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut checked = 0;
    for line in stdout.lines() {
        // slot "class [ccss]" "vendor [vvvv]" "device [dddd]" -r.. -p.. "sv [..]" "sd [..]"
        let fields: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
        let field = |i: usize| fields.get(i).and_then(|f| split_mixed(f));
        let (Some((class_name, cs)), Some((v_name, v)), Some((d_name, d))) =
            (field(0), field(1), field(2))
        else {
            panic!("unexpected lspci line: {line}");
        };
        let [class, subclass] = cs.to_be_bytes();
        let want_class = ids.subclass(class, subclass).or_else(|| ids.class(class));
        assert_eq!(want_class.unwrap_or("Class"), class_name, "{line}");
        assert_eq!(ids.vendor(v).unwrap_or("Vendor"), v_name, "{line}");
        assert_eq!(ids.device(v, d).unwrap_or("Device"), d_name, "{line}");
        if let (Some((sv_name, sv)), Some((sd_name, sd))) = (field(3), field(4)) {
            let want = ids.subsystem(v, d, sv, sd);
            let want = want.or_else(|| ids.device(v, d).filter(|_| (sv, sd) == (v, d)));
            assert_eq!(
                ids.vendor(sv).unwrap_or("Unknown vendor"),
                sv_name,
                "{line}"
            );
            assert_eq!(want.unwrap_or("Device"), sd_name, "{line}");
        }
        checked += 1;
    }
    eprintln!("checked {checked} devices against lspci");
}

/// `Name [1a2b]` → ("Name", 0x1a2b); `None` for an empty field.
fn split_mixed(field: &str) -> Option<(&str, u16)> {
    let (name, id) = field.rsplit_once(" [")?;
    Some((name, u16::from_str_radix(id.strip_suffix(']')?, 16).ok()?))
}
