//! `vfio` against its fake: the open sequence, IRQs, ioeventfds, the IOMMU as a DMA
//! pool sees it (and the unmap size check), and the pure parsers at their edges.

use super::*;
use crate::{
    dma::{DmaError, IommuMap},
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeSysfs},
};

const DEV: &str = "0000:05:00.0";

struct World {
    _dir: tempfile::TempDir,
    vfio: FakeVfio,
}

fn world() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeSysfs::new(dir.path()).expect("fake sysfs");
    let d = FakeDevice::new(DEV, 0x1b36, 0x0011, 0x00ff00)
        .with_bar64(0, 0xfe00_0000, 1 << 20, false)
        .with_driver("vfio-pci")
        .in_group(7);
    fake.add(&d).expect("add");
    let kernel = FakeKernel::new(fake.root(), &["vfio-pci"]);
    World {
        vfio: FakeVfio::new(&kernel),
        _dir: dir,
    }
}

fn bdf() -> Bdf {
    DEV.parse().expect("valid")
}

fn held(w: &World) -> Handles {
    open(&w.vfio, bdf(), "7").expect("open")
}

#[test]
fn open_closes_what_it_opened_when_a_later_step_fails() {
    let w = world();
    w.vfio.fail(VfioStep::SetIommu, libc::EINVAL);

    let e = open(&w.vfio, bdf(), "7").expect_err("scripted");

    assert!(matches!(e, VfioError::SetIommu { .. }), "{e}");
    let calls = w.vfio.calls();
    assert_eq!(
        calls[calls.len() - 2..],
        [
            VfioCall::CloseGroup { group: "7".into() },
            VfioCall::CloseContainer
        ]
    );
    // The group can be opened again: the fake, like the kernel, allows one opener.
    w.vfio.script.lock().expect("script").fail.clear();
    drop(held(&w));
}

#[test]
fn a_group_opens_once_at_a_time_and_only_with_a_member_on_vfio_pci() {
    let w = world();
    let h = held(&w);

    let busy = w.vfio.open_group("7").expect_err("EBUSY");
    let absent = w.vfio.open_group("8").expect_err("no node");

    let errno = |e: &VfioError| match e {
        VfioError::OpenGroup { source, .. } => source.raw_os_error(),
        _ => None,
    };
    assert_eq!(errno(&busy), Some(libc::EBUSY));
    assert_eq!(errno(&absent), Some(libc::ENOENT));
    drop(h);
}

#[test]
fn msix_vectors_take_eventfds_up_to_the_count_and_closing_releases_them() {
    let w = world();
    let h = held(&w);
    let fds: Vec<EventFd> = (0..17)
        .map(|_| EventFd::new(libc::EFD_NONBLOCK).expect("eventfd"))
        .collect();
    let refs: Vec<&EventFd> = fds.iter().collect();

    let too_many = h.device.enable_irq(IrqIndex::Msix, &refs);
    h.device
        .enable_irq(IrqIndex::Msix, &refs[..4])
        .expect("four vectors");
    let on = w.vfio.irq_vectors(bdf(), IrqIndex::Msix);
    h.device.disable_irq(IrqIndex::Msi).expect("disable MSI");

    assert!(
        matches!(
            too_many,
            Err(VfioError::IrqCount {
                want: 17,
                have: 16,
                ..
            })
        ),
        "{too_many:?}"
    );
    assert_eq!(on, 4);
    assert_eq!(
        w.vfio.irq_vectors(bdf(), IrqIndex::Msix),
        4,
        "MSI-X untouched"
    );
    h.device.disable_irq(IrqIndex::Msix).expect("disable");
    assert_eq!(w.vfio.irq_vectors(bdf(), IrqIndex::Msix), 0);
    h.device
        .enable_irq(IrqIndex::Msi, &refs[..1])
        .expect("one MSI");
    drop(h);
    assert_eq!(
        w.vfio.irq_vectors(bdf(), IrqIndex::Msi),
        0,
        "closed fd, no IRQs"
    );
}

#[test]
fn an_ioeventfd_lies_inside_its_region_registers_once_and_clears() {
    let w = world();
    let h = held(&w);
    let bar0 = h.device.region(0).expect("region 0");
    let fd = EventFd::new(libc::EFD_NONBLOCK).expect("eventfd");

    let last = bar0
        .ioevent((1 << 20) - 4, Width::W32, 1)
        .expect("last dword");
    let past = bar0.ioevent(1 << 20, Width::W32, 1);
    let straddle = bar0.ioevent((1 << 20) - 2, Width::W32, 1);
    let misaligned = bar0.ioevent(2, Width::W32, 1);
    h.device.set_ioeventfd(&last, &fd).expect("register");
    let twice = h.device.set_ioeventfd(&last, &fd);

    assert_eq!(last.offset, bar0.offset + (1 << 20) - 4);
    for r in [&past, &straddle, &misaligned] {
        assert!(matches!(r, Err(VfioError::IoEventOutside { .. })), "{r:?}");
    }
    assert!(
        matches!(&twice, Err(VfioError::IoEventFd { source, .. }) if source.raw_os_error() == Some(libc::EEXIST)),
        "{twice:?}"
    );
    assert_eq!(w.vfio.ioevents(bdf()), [last]);
    h.device.clear_ioeventfd(&last).expect("clear");
    assert!(w.vfio.ioevents(bdf()).is_empty());
    h.device
        .clear_ioeventfd(&last)
        .expect_err("nothing to clear");
}

#[test]
#[expect(
    unsafe_code,
    reason = "IommuMap::map is unsafe; the fake touches no memory"
)]
fn the_hold_s_iommu_maps_for_the_device_and_refuses_a_short_unmap() {
    let w = world();
    let h = held(&w);
    let iommu = h.iommu().expect("iommu info");
    let (iova, host, len) = (Iova(0x20_0000), HostVa(0x7000_0000), 0x20_0000);

    // SAFETY: the fake IOMMU never touches host memory.
    unsafe { iommu.map(iova, host, len) }.expect("map");
    assert_eq!(
        w.vfio.iommu().translate(Iova(0x20_0010)),
        Some(HostVa(0x7000_0010))
    );
    w.vfio.script.lock().expect("script").unmap_reports = Some(0x1000);
    let e = iommu.unmap(iova, len).expect_err("short unmap");

    let DmaError::Unmap { source, .. } = &e else {
        panic!("{e}");
    };
    let inner = source
        .get_ref()
        .and_then(|s| s.downcast_ref::<VfioError>())
        .expect("the typed VFIO error in the chain");
    assert!(
        matches!(
            inner,
            VfioError::UnmapSize {
                len: 0x20_0000,
                unmapped: 0x1000,
                ..
            }
        ),
        "{inner}"
    );
    assert_eq!(iommu.page_sizes(), 0x4020_1000);
    assert_eq!(iommu.iova_ranges().len(), 2);
}

#[test]
fn an_unmap_counts_only_when_the_kernel_unmapped_exactly_the_size_asked() {
    let at = Iova(0x1000);

    check_unmapped(at, 0x2000, 0x2000).expect("exactly what was asked");
    check_unmapped(at, 0, 0).expect("nothing asked, nothing unmapped");
    for unmapped in [0, 0x1fff, 0x2001, u64::MAX] {
        let e = check_unmapped(at, 0x2000, unmapped).expect_err("differs");
        assert!(
            matches!(e, VfioError::UnmapSize { unmapped: u, .. } if u == unmapped),
            "{e}"
        );
    }
}

/// A VFIO_IOMMU_GET_INFO answer: header, then an IOVA-range capability at 24.
fn info_bytes(ranges: &[(u64, u64)], next: u32) -> Vec<u8> {
    let mut b = vec![0u8; 24];
    b[4..8].copy_from_slice(&3u32.to_ne_bytes()); // PGSIZES | CAPS
    b[8..16].copy_from_slice(&0x20_1000u64.to_ne_bytes());
    b[16..20].copy_from_slice(&24u32.to_ne_bytes());
    b.extend(1u32.to_ne_bytes()); // id 1, version 0
    b.extend(next.to_ne_bytes());
    b.extend(u32::try_from(ranges.len()).expect("few").to_ne_bytes());
    b.extend(0u32.to_ne_bytes());
    for (s, e) in ranges {
        b.extend(s.to_ne_bytes());
        b.extend(e.to_ne_bytes());
    }
    b
}

#[test]
fn iommu_info_reads_page_sizes_and_every_iova_range() {
    let ranges = [(0, 0xfedf_ffff), (0xfef0_0000, (1 << 39) - 1)];

    let info = parse_iommu_info(&info_bytes(&ranges, 0));

    assert_eq!(info.page_sizes, 0x20_1000);
    assert_eq!(info.ranges, ranges);
}

#[test]
fn a_truncated_or_looping_capability_chain_yields_what_can_be_read() {
    let ranges = [(0, 0xfff), (0x2000, 0x2fff)];
    let whole = info_bytes(&ranges, 0);

    let cut = parse_iommu_info(&whole[..whole.len() - 1]);
    let looping = parse_iommu_info(&info_bytes(&ranges[..1], 24));
    let empty = parse_iommu_info(&[]);

    assert_eq!(cut.ranges, ranges[..1], "the cut range is dropped");
    assert_eq!(looping.ranges.len(), 16, "a chain pointing at itself stops");
    assert_eq!(
        empty,
        IommuInfo {
            page_sizes: 0,
            ranges: Vec::new()
        }
    );
}

#[test]
fn a_group_of_another_implementation_is_refused() {
    #[derive(Debug)]
    struct Other;
    #[expect(unsafe_code, reason = "implements Container's unsafe map_dma")]
    impl Container for Other {
        fn set_iommu(&self) -> Result<(), VfioError> {
            Ok(())
        }
        fn iommu_info(&self) -> Result<IommuInfo, VfioError> {
            Err(VfioError::NoType1v2)
        }
        unsafe fn map_dma(&self, _: Iova, _: HostVa, _: u64) -> Result<(), VfioError> {
            Ok(())
        }
        fn unmap_dma_bytes(&self, _: Iova, len: u64) -> Result<u64, VfioError> {
            Ok(len)
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }
    let w = world();
    let g = w.vfio.open_group("7").expect("group");

    let e = g.set_container(&Other).expect_err("foreign");

    assert!(matches!(e, VfioError::ContainerKind { .. }), "{e}");
}
