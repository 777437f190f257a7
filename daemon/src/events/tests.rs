//! Shared events against `FakeRm`: one page mapped read-write for the exporter and
//! read-only for each importer, tokens only the same uid may use, the exporter's end
//! written into the page in order, and every map and descriptor freed after either
//! side's end.

use std::sync::Arc;

use rig_model::nv::shared_event::{GONE, LIVE, POISON_AHEAD, REACHED, STATE, TARGET, VALUE};
use rig_sys::{memfd::SealedMemfd, mman::ReadMapping, scm::PeerCred};

use super::*;
use crate::nvrm::{Call, FakeRm};

struct Fixture {
    rm: FakeRm,
    gpu: Arc<Gpu<FakeRm>>,
    sharer: Sharer<FakeRm>,
}

fn fixture() -> Fixture {
    let rm = FakeRm::new();
    let gpu = Arc::new(Gpu::open(rm.clone(), None).expect("fake GPU"));
    let sharer = Sharer::new(Arc::clone(&gpu), "0000:00:06.0".into());
    Fixture { rm, gpu, sharer }
}

fn peer(uid: u32) -> PeerCred {
    PeerCred {
        uid,
        gid: uid,
        pid: 100 + i32::try_from(uid).unwrap_or(0),
    }
}

fn space(f: &Fixture) -> Arc<AddressSpace<FakeRm>> {
    Arc::new(AddressSpace::new(&f.gpu).expect("space"))
}

/// Session 1 (uid 1000) exports an event in `a`.
fn export(f: &Fixture, a: &Arc<AddressSpace<FakeRm>>) -> ExportedEvent {
    f.sharer
        .export(SessionId(1), peer(1000), a)
        .expect("export")
}

/// `session` (uid 1000) imports `out` in `space`.
fn import(
    f: &Fixture,
    session: u64,
    space: &Arc<AddressSpace<FakeRm>>,
    out: &ExportedEvent,
) -> ImportedEvent {
    f.sharer
        .import(SessionId(session), peer(1000), space, &out.token)
        .expect("import")
}

/// The exporter's own mapping of its page, to play its CPU and GPU.
fn writable(fd: OwnedFd) -> rig_sys::mman::Mapping {
    rig_sys::mman::Mapping::shared(
        &SealedMemfd::check(fd).expect("a sealed memfd"),
        rig_sys::mman::Fill::Lazy,
    )
    .expect("maps")
}

fn word(page: &ReadMapping, at: u64) -> u64 {
    page.read_u64(usize::try_from(at).expect("offset"))
        .expect("word")
}

fn mapped(fd: OwnedFd) -> ReadMapping {
    let file = SealedMemfd::check(fd).expect("a sealed memfd");
    ReadMapping::shared(&file).expect("maps")
}

/// The NVOS46 flags of the MapDma at `va`, among the calls from `from` on.
fn map_flags(f: &Fixture, from: usize, va: u64) -> u32 {
    f.rm.calls()[from..]
        .iter()
        .find_map(|c| match c {
            Call::MapDma {
                dma_offset, flags, ..
            } if *dma_offset == va => Some(*flags),
            _ => None,
        })
        .expect("a map at the view's VA")
}

#[test]
fn an_export_maps_one_page_read_write_and_an_import_maps_it_read_only() {
    let f = fixture();
    let (a, b) = (space(&f), space(&f));
    let before = f.rm.calls().len();

    let out = export(&f, &a);
    let descriptors = f.rm.calls()[before..]
        .iter()
        .filter(|c| matches!(c, Call::AllocOsDescriptor { .. }))
        .count();
    assert_eq!(descriptors, 1, "one page registered with the RM");
    assert_eq!(out.bytes, shared_event::BYTES);
    assert_eq!(map_flags(&f, before, out.gpu_va) & 3, 0, "read-write");

    let at = f.rm.calls().len();
    let inn = import(&f, 2, &b, &out);
    assert_eq!(inn.exporter, SessionId(1));
    assert_ne!(inn.id, out.id, "each session has its own handle");
    assert_eq!(map_flags(&f, at, inn.gpu_va) & 3, 1, "READ_ONLY");
    assert!(
        !f.rm.calls()[at..]
            .iter()
            .any(|c| matches!(c, Call::AllocOsDescriptor { .. })),
        "the import maps the exporter's page, it makes none"
    );

    // One page: what the exporter's file holds, the importer's reads.
    let theirs = mapped(inn.file);
    let mine = writable(out.file);
    mine.write_u64(usize::try_from(TARGET).expect("offset"), 42)
        .expect("write");
    assert_eq!(word(&theirs, TARGET), 42);
    assert_eq!(word(&theirs, STATE), LIVE);
}

#[test]
fn a_token_imports_only_for_the_same_uid_and_only_the_token_given() {
    let f = fixture();
    let (a, b) = (space(&f), space(&f));
    let out = export(&f, &a);
    let maps = f.rm.live_maps();

    let e = f
        .sharer
        .import(SessionId(2), peer(1001), &b, &out.token)
        .expect_err("another uid");
    assert!(
        matches!(
            e,
            EventError::OtherUid {
                uid: 1001,
                owner: 1000
            }
        ),
        "{e}"
    );
    assert_eq!(e.class().reason, Reason::EventRefused);

    let mut wrong = out.token;
    wrong[15] ^= 1;
    for token in [&wrong[..], &out.token[..15], &[][..]] {
        let e = f
            .sharer
            .import(SessionId(2), peer(1000), &b, token)
            .expect_err("not the token");
        assert!(matches!(e, EventError::UnknownToken { .. }), "{e}");
        assert_eq!(e.class().reason, Reason::UnknownEvent);
    }
    assert_eq!(f.rm.live_maps(), maps, "a refused import maps nothing");

    // A handle is looked up in its own session only.
    let e = f
        .sharer
        .close(SessionId(2), out.id)
        .expect_err("not its handle");
    assert!(matches!(e, EventError::UnknownEvent { .. }), "{e}");
}

#[test]
fn the_exporters_end_writes_how_far_it_got_and_lets_every_wait_pass() {
    let f = fixture();
    let (a, b) = (space(&f), space(&f));
    let out = export(&f, &a);
    let inn = import(&f, 2, &b, &out);
    let page = mapped(inn.file);
    let mine = writable(out.file);
    let put = |at: u64, v: u64| {
        mine.write_u64(usize::try_from(at).expect("offset"), v)
            .expect("write");
    };
    // The exporter recorded 7; its GPU had released 5 when it ended.
    put(TARGET, 7);
    put(VALUE, 5);

    let ended = f.sharer.end(SessionId(1));

    assert_eq!(ended.events, 1);
    assert_eq!(ended.importers, BTreeSet::from([SessionId(2)]));
    assert_eq!(word(&page, STATE), GONE);
    assert_eq!(word(&page, REACHED), 5);
    assert_eq!(
        word(&page, VALUE),
        7 + POISON_AHEAD,
        "past every value waited for"
    );
    let e = f
        .sharer
        .import(SessionId(3), peer(1000), &space(&f), &out.token)
        .expect_err("gone");
    assert!(
        matches!(e, EventError::Gone { exporter } if exporter == SessionId(1)),
        "{e}"
    );

    // The importer's view stays until it ends; then the page goes.
    assert_eq!(f.sharer.count(), 1);
    assert_eq!(f.sharer.end(SessionId(2)).events, 1);
    assert_eq!(f.sharer.count(), 0);
}

#[test]
fn either_side_ending_first_leaves_nothing_mapped_or_registered() {
    for importer_first in [true, false] {
        let f = fixture();
        let (a, b) = (space(&f), space(&f));
        let maps = f.rm.live_maps();
        let out = export(&f, &a);
        let inn = import(&f, 2, &b, &out);
        let h =
            f.rm.calls()
                .iter()
                .find_map(|c| match c {
                    Call::AllocOsDescriptor { handle, .. } => Some(*handle),
                    _ => None,
                })
                .expect("the page's descriptor");
        let freed = || {
            f.rm.calls()
                .iter()
                .any(|c| matches!(c, Call::Free { object, .. } if *object == h))
        };

        let order = if importer_first { [2, 1] } else { [1, 2] };
        let ended = f.sharer.end(SessionId(order[0]));
        assert_eq!(ended.events, 1);
        assert_eq!(
            ended.importers.is_empty(),
            importer_first,
            "only the exporter's end wakes importers"
        );
        assert!(!freed(), "one view is left: the page stays");
        drop(inn);
        f.sharer.end(SessionId(order[1]));
        assert!(freed(), "the page's descriptor is freed with its last view");
        assert_eq!(f.rm.live_maps(), maps);
        assert_eq!(f.sharer.count(), 0);
    }
}

#[test]
fn the_exporters_close_ends_the_event_and_an_importers_close_only_its_view() {
    let f = fixture();
    let (a, b, c) = (space(&f), space(&f), space(&f));
    let out = export(&f, &a);
    let one = import(&f, 2, &b, &out);
    let two = import(&f, 3, &c, &out);
    let page = mapped(two.file);

    let ended = f.sharer.close(SessionId(2), one.id).expect("close");
    assert!(ended.importers.is_empty());
    assert_eq!(word(&page, STATE), LIVE, "an importer's close ends nothing");
    assert!(f.sharer.gpu_va(SessionId(2), one.id).is_none());

    let ended = f.sharer.close(SessionId(1), out.id).expect("close");
    assert_eq!(ended.importers, BTreeSet::from([SessionId(3)]));
    assert_eq!(word(&page, STATE), GONE);
    assert!(f.sharer.gpu_va(SessionId(3), two.id).is_some());
    // What `rigctl dma` lists: the exporter and the closed importer hold nothing; the
    // other importer holds the gone event until it closes it.
    assert_eq!(
        f.sharer.held(),
        vec![EventsHeld {
            session: SessionId(3),
            exported: 0,
            imported: 1
        }]
    );
    f.sharer.close(SessionId(3), two.id).expect("close");
    assert!(f.sharer.held().is_empty());
}

#[test]
fn each_session_is_listed_with_what_it_exported_and_imported() {
    let f = fixture();
    let (a, b) = (space(&f), space(&f));
    let first = export(&f, &a);
    let _second = export(&f, &a);
    let _in_a = import(&f, 1, &a, &first);
    let _in_b = import(&f, 2, &b, &first);
    let held = |session, exported, imported| EventsHeld {
        session: SessionId(session),
        exported,
        imported,
    };
    assert_eq!(f.sharer.held(), vec![held(1, 2, 1), held(2, 0, 1)]);
}

#[test]
fn a_session_holds_at_most_its_share_of_events() {
    let f = fixture();
    let a = space(&f);
    for _ in 0..MAX_PER_SESSION {
        f.sharer
            .export(SessionId(1), peer(1000), &a)
            .expect("export");
    }
    let e = f
        .sharer
        .export(SessionId(1), peer(1000), &a)
        .expect_err("over the limit");
    assert!(matches!(e, EventError::Limit { .. }), "{e}");
    assert_eq!(e.class().reason, Reason::EventLimit);
    assert_eq!(f.sharer.end(SessionId(1)).events, MAX_PER_SESSION);
    assert_eq!(f.sharer.count(), 0);
}

#[test]
fn a_session_that_imports_its_own_event_ends_it_only_by_its_export() {
    let f = fixture();
    let (a, b) = (space(&f), space(&f));
    let out = export(&f, &a);
    let own = import(&f, 1, &a, &out);
    let other = import(&f, 2, &b, &out);
    let page = mapped(other.file);

    assert!(
        f.sharer
            .close(SessionId(1), own.id)
            .expect("close")
            .importers
            .is_empty()
    );
    assert_eq!(word(&page, STATE), LIVE, "closing the import ends nothing");
    let ended = f.sharer.close(SessionId(1), out.id).expect("close");
    assert_eq!(ended.importers, BTreeSet::from([SessionId(2)]));
    assert_eq!(word(&page, STATE), GONE);
}
