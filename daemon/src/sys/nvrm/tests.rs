//! Layouts and ioctl numbers of the RM escapes, checked against the headers.

use super::*;

#[test]
fn escape_numbers_match_the_reference_table() {
    assert_eq!(NV_ESC_RM_ALLOC_NVOS21_CMD, 0xC020_462B);
    assert_eq!(NV_ESC_RM_ALLOC_NVOS64_CMD, 0xC030_462B);
    assert_eq!(NV_ESC_RM_CONTROL_CMD, 0xC020_462A);
    assert_eq!(NV_ESC_RM_FREE_CMD, 0xC010_4629);
    assert_eq!(NV_ESC_RM_MAP_MEMORY_CMD, 0xC038_464E);
    assert_eq!(NV_ESC_RM_ALLOC_MEMORY_CMD, 0xC038_4627);
    assert_eq!(NV_ESC_RM_UNMAP_MEMORY_DMA_CMD, 0xC030_4658);
    assert_eq!(Nvos46ParametersR570::CMD, 0xC038_4657);
    assert_eq!(Nvos46ParametersR580::CMD, 0xC040_4657);
    assert_eq!(NV_ESC_CARD_INFO_CMD, 0xD200_46C8);
    assert_eq!(NV_ESC_REGISTER_FD_CMD, 0xC004_46C9);
    assert_eq!(NV_ESC_CHECK_VERSION_STR_CMD, 0xC048_46D2);
    assert_eq!(NV_ESC_ALLOC_OS_EVENT_CMD, 0xC010_46CE);
    assert_eq!(NV_ESC_FREE_OS_EVENT_CMD, 0xC010_46CF);
}

#[test]
fn nvos46_r580_puts_dma_offset_at_48_and_status_at_56() {
    let p = Nvos46ParametersR580 {
        flags2: 0x1111_1111,
        kind_override: 0x2222_2222,
        dma_offset: 0x0102_0304_0506_0708,
        status: 0x3333_3333,
        ..Default::default()
    };
    let b = p.as_bytes();
    assert_eq!(b[36..40], 0x1111_1111u32.to_ne_bytes());
    assert_eq!(b[40..44], 0x2222_2222u32.to_ne_bytes());
    assert_eq!(b[48..56], 0x0102_0304_0506_0708u64.to_ne_bytes());
    assert_eq!(b[56..60], 0x3333_3333u32.to_ne_bytes());
}

#[test]
fn nvos46_r570_puts_dma_offset_at_40_and_status_at_48() {
    let p = Nvos46ParametersR570 {
        flags: 0x4444_4444,
        dma_offset: 0x0102_0304_0506_0708,
        status: 0x3333_3333,
        ..Default::default()
    };
    let b = p.as_bytes();
    assert_eq!(b[32..36], 0x4444_4444u32.to_ne_bytes());
    assert_eq!(b[40..48], 0x0102_0304_0506_0708u64.to_ne_bytes());
    assert_eq!(b[48..52], 0x3333_3333u32.to_ne_bytes());
}

#[test]
fn card_info_fields_sit_at_the_header_offsets() {
    let c = NvIoctlCardInfo {
        valid: 1,
        pci_info: NvPciInfo {
            domain: 0x0102_0304,
            bus: 0x41,
            slot: 0x06,
            function: 0x01,
            vendor_id: 0x10de,
            device_id: 0x2335,
            ..Default::default()
        },
        gpu_id: 0x600,
        fb_size: 0xAAAA_BBBB_CCCC_DDDD,
        minor_number: 7,
        dev_name: *b"nvidia7\0\0\0",
        ..Default::default()
    };
    let b = c.as_bytes();
    assert_eq!(b[0], 1);
    assert_eq!(b[4..8], 0x0102_0304u32.to_ne_bytes());
    assert_eq!(b[8..11], [0x41, 0x06, 0x01]);
    assert_eq!(b[12..14], 0x10deu16.to_ne_bytes());
    assert_eq!(b[14..16], 0x2335u16.to_ne_bytes());
    assert_eq!(b[16..20], 0x600u32.to_ne_bytes());
    assert_eq!(b[48..56], 0xAAAA_BBBB_CCCC_DDDDu64.to_ne_bytes());
    assert_eq!(b[56..60], 7u32.to_ne_bytes());
    assert_eq!(&b[60..67], b"nvidia7");
}

#[test]
fn escape_refuses_an_argument_of_another_size_before_the_kernel_sees_it() {
    let f = std::fs::File::open("/dev/null").expect("open /dev/null");
    let mut short = [0u8; 8];
    let e = escape(
        std::os::fd::AsFd::as_fd(&f),
        "NV_ESC_RM_FREE",
        NV_ESC_RM_FREE_CMD,
        &mut short,
    )
    .expect_err("size differs");
    assert!(
        matches!(&e, RmError::Ioctl { source, .. } if source.raw_os_error() == Some(libc::EINVAL))
    );
}

#[test]
fn gr_get_info_params_put_the_list_at_8_and_the_route_at_16() {
    let p = Nv2080CtrlGrGetInfoParams {
        gr_info_list_size: 5,
        gr_info_list: 0x0102_0304_0506_0708,
        route_flags: 0x1111_1111,
        route: 0x2222_2222_3333_3333,
        ..Default::default()
    };
    let b = p.as_bytes();
    assert_eq!(b[0..4], 5u32.to_ne_bytes());
    assert_eq!(b[8..16], 0x0102_0304_0506_0708u64.to_ne_bytes());
    assert_eq!(b[16..20], 0x1111_1111u32.to_ne_bytes());
    assert_eq!(b[24..32], 0x2222_2222_3333_3333u64.to_ne_bytes());
}

#[test]
fn controls_whose_params_carry_a_pointer_are_refused_by_rm_control() {
    let f = std::fs::File::open("/dev/null").expect("/dev/null");
    let mut p = Nv2080CtrlGrGetInfoParams::default();
    let e = rm_control(
        std::os::fd::AsFd::as_fd(&f),
        1,
        2,
        NV2080_CTRL_CMD_GR_GET_INFO,
        &mut p,
    )
    .expect_err("a pointer for the RM to write through");
    assert!(matches!(e, RmError::Ioctl { .. }), "{e}");
}
