//! The take-over vocabulary (`rig_model::take`) ↔ `rig.v1`'s take-over enums and
//! messages, both ways, once: rig-client sends requests and rigd reads them with these
//! pairs; rigd sends held devices and outcomes and rig-client reads them the same way.
//!
//! What the wire's UNSPECIFIED means differs by field, and is decided here: a
//! `TakeMode` carries an optional mode (unset: a busy device's, or a request that
//! leaves the choice to rigd, which picks vfio); a `ResetMethod` of UNSPECIFIED is
//! auto; a `DeviceLeaseMode` or `HeldState` must be set. A `BarSize` with no choice is
//! refused. rigd words its own refusals of a request (naming the request's field);
//! these errors are what a client says of a reply.

use rig_model::take as m;

use super::{ConvertError, Result, n8};
use crate::v1 as pb;

impl From<Option<m::Mode>> for pb::TakeMode {
    fn from(m: Option<m::Mode>) -> Self {
        match m {
            None => Self::Unspecified,
            Some(m::Mode::Vfio) => Self::Vfio,
            Some(m::Mode::Sysfs) => Self::Sysfs,
        }
    }
}

impl From<pb::TakeMode> for Option<m::Mode> {
    fn from(m: pb::TakeMode) -> Self {
        match m {
            pb::TakeMode::Unspecified => None,
            pb::TakeMode::Vfio => Some(m::Mode::Vfio),
            pb::TakeMode::Sysfs => Some(m::Mode::Sysfs),
        }
    }
}

impl From<m::Mode> for pb::DeviceLeaseMode {
    fn from(m: m::Mode) -> Self {
        match m {
            m::Mode::Vfio => Self::Vfio,
            m::Mode::Sysfs => Self::Sysfs,
        }
    }
}

impl TryFrom<pb::DeviceLeaseMode> for m::Mode {
    type Error = ConvertError;

    fn try_from(m: pb::DeviceLeaseMode) -> Result<Self> {
        match m {
            pb::DeviceLeaseMode::Vfio => Ok(Self::Vfio),
            pb::DeviceLeaseMode::Sysfs => Ok(Self::Sysfs),
            pb::DeviceLeaseMode::Unspecified => Err(ConvertError::UnknownEnum {
                field: "DeviceLeased.mode",
                value: m.into(),
            }),
        }
    }
}

impl From<m::ResetMethod> for pb::ResetMethod {
    fn from(m: m::ResetMethod) -> Self {
        match m {
            m::ResetMethod::Auto => Self::Unspecified,
            m::ResetMethod::Flr => Self::Flr,
            m::ResetMethod::Pm => Self::Pm,
            m::ResetMethod::Bus => Self::Bus,
        }
    }
}

impl From<pb::ResetMethod> for m::ResetMethod {
    fn from(m: pb::ResetMethod) -> Self {
        match m {
            pb::ResetMethod::Unspecified => Self::Auto,
            pb::ResetMethod::Flr => Self::Flr,
            pb::ResetMethod::Pm => Self::Pm,
            pb::ResetMethod::Bus => Self::Bus,
        }
    }
}

impl From<m::BarSize> for pb::BarSize {
    fn from(b: m::BarSize) -> Self {
        use pb::bar_size::Size;
        Self {
            size: Some(match b {
                m::BarSize::Keep => Size::Keep(pb::bar_size::Keep {}),
                m::BarSize::Max => Size::Max(pb::bar_size::Max {}),
                m::BarSize::Bytes(n) => Size::Bytes(n),
            }),
        }
    }
}

impl TryFrom<pb::BarSize> for m::BarSize {
    type Error = ConvertError;

    /// A message with no choice this version knows (a newer peer's) is refused.
    fn try_from(b: pb::BarSize) -> Result<Self> {
        use pb::bar_size::Size;
        match b.size {
            Some(Size::Keep(_)) => Ok(Self::Keep),
            Some(Size::Max(_)) => Ok(Self::Max),
            Some(Size::Bytes(n)) => Ok(Self::Bytes(n)),
            None => Err(ConvertError::Missing {
                field: "BarSize.size",
            }),
        }
    }
}

impl From<m::HeldState> for pb::HeldState {
    fn from(s: m::HeldState) -> Self {
        match s {
            m::HeldState::Held => Self::Held,
            m::HeldState::Busy => Self::Busy,
        }
    }
}

impl TryFrom<pb::HeldState> for m::HeldState {
    type Error = ConvertError;

    fn try_from(s: pb::HeldState) -> Result<Self> {
        match s {
            pb::HeldState::Held => Ok(Self::Held),
            pb::HeldState::Busy => Ok(Self::Busy),
            pb::HeldState::Unspecified => Err(ConvertError::UnknownEnum {
                field: "HeldDevice.state",
                value: s.into(),
            }),
        }
    }
}

wire_enum!(
    Option<m::Mode> => pb::TakeMode,
    m::Mode => pb::DeviceLeaseMode,
    m::ResetMethod => pb::ResetMethod,
    m::HeldState => pb::HeldState,
);

impl From<&m::LeaseHolder> for pb::HeldLease {
    fn from(l: &m::LeaseHolder) -> Self {
        Self {
            uid: l.uid,
            pid: l.pid,
            since_unix: l.since_unix,
            session: l.session.0,
        }
    }
}

impl From<pb::HeldLease> for m::LeaseHolder {
    fn from(l: pb::HeldLease) -> Self {
        Self {
            uid: l.uid,
            pid: l.pid,
            since_unix: l.since_unix,
            session: rig_model::dma::SessionId(l.session),
        }
    }
}

impl From<&m::ResizeOutcome> for pb::ResizeOutcome {
    fn from(r: &m::ResizeOutcome) -> Self {
        Self {
            bar: r.bar.into(),
            before: r.before,
            after: r.after,
            no_room: r.no_room.clone(),
            moved: r
                .moved
                .iter()
                .map(|&(bar, from, to)| pb::MovedBar {
                    bar: bar.into(),
                    from,
                    to,
                })
                .collect(),
            small_bar: r.small_bar.clone().unwrap_or_default(),
        }
    }
}

impl TryFrom<pb::ResizeOutcome> for m::ResizeOutcome {
    type Error = ConvertError;

    /// An empty `small_bar` is none (rigd never sends an empty warning).
    fn try_from(r: pb::ResizeOutcome) -> Result<Self> {
        Ok(Self {
            bar: n8("ResizeOutcome.bar", r.bar)?,
            before: r.before,
            after: r.after,
            no_room: r.no_room,
            moved: r
                .moved
                .into_iter()
                .map(|m| Ok((n8("MovedBar.bar", m.bar)?, m.from, m.to)))
                .collect::<Result<_>>()?,
            small_bar: (!r.small_bar.is_empty()).then_some(r.small_bar),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::{collection::vec, option, prelude::*};

    use super::*;
    use crate::convert::WireEnum;

    fn mode() -> impl Strategy<Value = m::Mode> {
        prop_oneof![Just(m::Mode::Vfio), Just(m::Mode::Sysfs)]
    }

    fn reset_method() -> impl Strategy<Value = m::ResetMethod> {
        prop_oneof![
            Just(m::ResetMethod::Auto),
            Just(m::ResetMethod::Flr),
            Just(m::ResetMethod::Pm),
            Just(m::ResetMethod::Bus),
        ]
    }

    fn bar_size() -> impl Strategy<Value = m::BarSize> {
        prop_oneof![
            Just(m::BarSize::Keep),
            Just(m::BarSize::Max),
            any::<u64>().prop_map(m::BarSize::Bytes),
        ]
    }

    fn held_state() -> impl Strategy<Value = m::HeldState> {
        prop_oneof![Just(m::HeldState::Held), Just(m::HeldState::Busy)]
    }

    fn lease_holder() -> impl Strategy<Value = m::LeaseHolder> {
        any::<(u32, i32, u64, u64)>().prop_map(|(uid, pid, since_unix, session)| m::LeaseHolder {
            uid,
            pid,
            since_unix,
            session: rig_model::dma::SessionId(session),
        })
    }

    fn resize_outcome() -> impl Strategy<Value = m::ResizeOutcome> {
        (
            any::<(u8, u64, u64)>(),
            vec(any::<u64>(), 0..4),
            vec(any::<(u8, u64, u64)>(), 0..4),
            option::of("\\PC{1,12}"),
        )
            .prop_map(|((bar, before, after), no_room, moved, small_bar)| {
                m::ResizeOutcome {
                    bar,
                    before,
                    after,
                    no_room,
                    moved,
                    small_bar,
                }
            })
    }

    proptest! {
        #[test]
        fn every_take_over_word_survives_the_wire_both_as_enum_and_as_number(
            mode in option::of(mode()),
            lent in mode(),
            method in reset_method(),
            state in held_state(),
        ) {
            prop_assert_eq!(Option::<m::Mode>::from(pb::TakeMode::from(mode)), mode);
            prop_assert_eq!(Option::<m::Mode>::from_wire(mode.wire().into()), Some(mode));
            prop_assert_eq!(m::Mode::try_from(pb::DeviceLeaseMode::from(lent)), Ok(lent));
            prop_assert_eq!(m::Mode::from_wire(lent.wire().into()), Some(lent));
            prop_assert_eq!(m::ResetMethod::from(pb::ResetMethod::from(method)), method);
            prop_assert_eq!(m::ResetMethod::from_wire(method.wire().into()), Some(method));
            prop_assert_eq!(m::HeldState::try_from(pb::HeldState::from(state)), Ok(state));
            prop_assert_eq!(m::HeldState::from_wire(state.wire().into()), Some(state));
        }

        #[test]
        fn bar_sizes_holders_and_resizes_come_back_as_they_went(
            size in bar_size(),
            holder in lease_holder(),
            resize in resize_outcome(),
        ) {
            prop_assert_eq!(m::BarSize::try_from(pb::BarSize::from(size)), Ok(size));
            prop_assert_eq!(m::LeaseHolder::from(pb::HeldLease::from(&holder)), holder);
            prop_assert_eq!(
                m::ResizeOutcome::try_from(pb::ResizeOutcome::from(&resize)),
                Ok(resize)
            );
        }

        #[test]
        fn the_round_trip_holds_through_the_encoded_bytes(resize in resize_outcome(), size in bar_size()) {
            use prost::Message;
            let bytes = pb::ResizeOutcome::from(&resize).encode_to_vec();
            let wire = pb::ResizeOutcome::decode(bytes.as_slice()).expect("our own encoding decodes");
            prop_assert_eq!(m::ResizeOutcome::try_from(wire), Ok(resize));
            let bytes = pb::BarSize::from(size).encode_to_vec();
            let wire = pb::BarSize::decode(bytes.as_slice()).expect("our own encoding decodes");
            prop_assert_eq!(m::BarSize::try_from(wire), Ok(size));
        }
    }

    #[test]
    fn the_wires_unspecified_means_what_each_field_says() {
        assert_eq!(Option::<m::Mode>::from(pb::TakeMode::Unspecified), None);
        assert_eq!(
            m::ResetMethod::from(pb::ResetMethod::Unspecified),
            m::ResetMethod::Auto
        );
        assert_eq!(
            m::Mode::try_from(pb::DeviceLeaseMode::Unspecified),
            Err(ConvertError::UnknownEnum {
                field: "DeviceLeased.mode",
                value: 0
            })
        );
        assert_eq!(
            m::HeldState::from_field("HeldDevice.state", 0),
            Err(ConvertError::UnknownEnum {
                field: "HeldDevice.state",
                value: 0
            })
        );
        assert_eq!(m::HeldState::from_wire(7), None, "a newer rigd's state");
        assert_eq!(
            m::BarSize::try_from(pb::BarSize { size: None }),
            Err(ConvertError::Missing {
                field: "BarSize.size"
            })
        );
    }

    #[test]
    fn a_bar_index_past_a_byte_is_refused_not_saturated() {
        let wire = pb::ResizeOutcome {
            bar: 256,
            ..Default::default()
        };
        assert_eq!(
            m::ResizeOutcome::try_from(wire),
            Err(ConvertError::OutOfRange {
                field: "ResizeOutcome.bar",
                value: 256,
                bits: 8
            })
        );
    }
}
