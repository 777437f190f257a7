use std::{collections::BTreeSet, fs};

use prost::Message;

use super::*;

/// Every `/package.Service/Method` in the proto files rigd serves, and the reflection
/// services tonic adds.
fn proto_methods() -> BTreeSet<String> {
    let set = prost_types::FileDescriptorSet::decode(rig_proto::v1::FILE_DESCRIPTOR_SET)
        .expect("descriptor set decodes");
    let mut methods = BTreeSet::new();
    for file in &set.file {
        let package = file.package();
        for service in &file.service {
            for m in &service.method {
                methods.insert(format!("/{package}.{}/{}", service.name(), m.name()));
            }
        }
    }
    for v in ["v1", "v1alpha"] {
        methods.insert(format!(
            "/grpc.reflection.{v}.ServerReflection/ServerReflectionInfo"
        ));
    }
    methods
}

#[test]
fn the_table_lists_every_rpc_of_every_service_and_nothing_else() {
    let listed: BTreeSet<String> = RPCS.iter().map(|(p, _)| (*p).to_owned()).collect();
    assert_eq!(RPCS.len(), listed.len(), "a path listed twice");
    let proto = proto_methods();
    assert!(proto.len() > 10, "{proto:?}");
    let missing: Vec<_> = proto.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&proto).collect();
    assert!(missing.is_empty(), "RPCs without a role: {missing:?}");
    assert!(stale.is_empty(), "table entries no proto has: {stale:?}");
}

#[test]
fn the_side_table_lists_every_side_socket_request_and_nothing_else() {
    let set = prost_types::FileDescriptorSet::decode(rig_proto::v1::FILE_DESCRIPTOR_SET)
        .expect("descriptor set decodes");
    let side = set
        .file
        .iter()
        .flat_map(|f| &f.message_type)
        .find(|m| m.name() == "SessionRequest")
        .expect("SessionRequest");
    let proto: BTreeSet<&str> = side.field.iter().map(|f| f.name()).collect();
    let listed: BTreeSet<&str> = SIDE.iter().map(|(f, _)| *f).collect();
    assert_eq!(proto, listed);
}

#[test]
fn take_over_registers_bus_mastering_and_leases_are_admin_and_inspection_is_client() {
    for m in [
        "Detach",
        "Attach",
        "Reset",
        "Resize",
        "ReadBar",
        "WriteBar",
        "SetBusMaster",
    ] {
        let need = rpc_need(&format!("/rig.v1.Rig/{m}"));
        assert_eq!(need, Need::Role(Role::Admin), "{m}");
        assert!(need.privileged());
    }
    for p in [
        "/rig.v1.Rig/ListDevices",
        "/rig.v1.Rig/GetDevice",
        "/rig.v1.Dma/OpenSession",
    ] {
        assert_eq!(rpc_need(p), Need::Role(Role::Client), "{p}");
        assert!(!rpc_need(p).privileged());
    }
    assert_eq!(side_need("lease_device"), Need::LeaseWhole);
    assert!(side_need("lease_device").privileged());
    assert_eq!(side_need("lease"), Need::Role(Role::Client));
}

#[test]
fn an_unlisted_path_or_request_needs_the_admin_role() {
    assert_eq!(rpc_need("/rig.v1.Rig/Unknown"), Need::Role(Role::Admin));
    assert_eq!(side_need("format_disk"), Need::Role(Role::Admin));
}

#[test]
fn method_names_drop_the_package() {
    assert_eq!(method_name("/rig.v1.Rig/Detach"), "Rig.Detach");
    assert_eq!(method_name("/rig.v1.Dma/Status"), "Dma.Status");
    assert_eq!(
        method_name("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
        "ServerReflection.ServerReflectionInfo"
    );
}

#[test]
fn the_groups_line_of_a_status_file_parses_and_a_missing_one_is_empty() {
    let status = "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGroups:\t24 27 950 \nNgid:\t0\n";
    assert_eq!(parse_groups(status), [24, 27, 950]);
    assert_eq!(parse_groups("Groups:\t\n"), Vec::<u32>::new());
    assert_eq!(parse_groups("Name:\tx\n"), Vec::<u32>::new());
}

/// A policy over a group file and a fake /proc where pid 77 is in group 950
/// (supplementary) and pid 78 in 951.
fn world(roles: &str) -> (tempfile::TempDir, Policy) {
    let dir = tempfile::tempdir().expect("tempdir");
    let groups = dir.path().join("group");
    fs::write(
        &groups,
        "root:x:0:\nrigadm:x:950:\nrig:x:951:\nother:x:952:\n",
    )
    .expect("group");
    for (pid, g) in [(77, 950), (78, 951)] {
        let p = dir.path().join(format!("proc/{pid}"));
        fs::create_dir_all(&p).expect("proc");
        fs::write(p.join("status"), format!("Name:\tx\nGroups:\t100 {g}\n")).expect("status");
    }
    let mut config = Config::parse(roles, Path::new("t.toml")).expect("config");
    config.paths.group_file = Some(groups);
    config.paths.proc = dir.path().join("proc");
    let (policy, problems) = Policy::new(&config);
    assert!(problems.is_empty(), "{problems:?}");
    (dir, policy)
}

fn c(uid: u32, gid: u32, pid: i32) -> PeerCred {
    PeerCred { uid, gid, pid }
}

#[test]
fn root_and_admin_group_members_primary_or_supplementary_are_admins() {
    let (_d, p) = world("[roles]\nadmins = [\"rigadm\"]\n");
    assert_eq!(p.role_of(c(0, 0, 0)), Some(Role::Admin));
    assert_eq!(p.role_of(c(1000, 950, 0)), Some(Role::Admin), "primary");
    assert_eq!(
        p.role_of(c(1000, 100, 77)),
        Some(Role::Admin),
        "supplementary"
    );
    assert_eq!(p.role_of(c(1000, 100, 78)), Some(Role::Client));
    p.require(Role::Admin, c(1000, 100, 77), "Rig.Detach")
        .expect("an admin");
}

#[test]
fn a_refusal_names_the_role_the_granting_group_and_what_the_caller_has() {
    let (_d, p) = world("[roles]\nadmins = [\"rigadm\"]\n");
    let e = p
        .require(Role::Admin, c(1000, 100, 78), "Rig.Detach")
        .expect_err("a client");
    assert_eq!(
        e.to_string(),
        "Rig.Detach needs the admin role, which root and members of group `rigadm` have (uid 1000 has the client role)"
    );
    assert_eq!(e.granting_groups(), "rigadm");
}

#[test]
fn with_client_groups_an_outsider_has_no_role_and_is_refused_even_inspection() {
    let (_d, p) = world("[roles]\nadmins = [\"rigadm\"]\nclients = [\"rig\"]\n");
    assert_eq!(p.role_of(c(1000, 100, 78)), Some(Role::Client));
    assert_eq!(p.role_of(c(1000, 100, 77)), Some(Role::Admin));
    let e = p
        .require(Role::Client, c(1001, 952, 0), "Rig.ListDevices")
        .expect_err("outsider");
    assert_eq!(
        e.to_string(),
        "Rig.ListDevices needs the client role, which root and members of groups `rigadm`, `rig` have (uid 1001 has no role)"
    );
    assert_eq!(e.granting_groups(), "rigadm,rig");
    p.require(Role::Client, c(1000, 950, 0), "Rig.ListDevices")
        .expect("an admin is a client");
}

#[test]
fn without_an_admin_group_only_root_is_an_admin() {
    let (_d, p) = world("");
    assert_eq!(p.role_of(c(1000, 950, 77)), Some(Role::Client));
    let e = p
        .require(Role::Admin, c(1000, 950, 77), "Rig.Reset")
        .expect_err("no admin group");
    assert!(e.to_string().contains("only root has"), "{e}");
}

#[test]
fn the_old_server_admin_group_still_grants_the_admin_role() {
    let (_d, p) = world("[server]\nadmin_group = \"rigadm\"\n");
    assert_eq!(p.role_of(c(1000, 950, 0)), Some(Role::Admin));
}

#[test]
fn an_unknown_group_grants_nothing_and_strict_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let groups = dir.path().join("group");
    fs::write(&groups, "rig:x:951:\n").expect("group");
    let mut config =
        Config::parse("[roles]\nclients = [\"nope\"]\n", Path::new("t.toml")).expect("config");
    config.paths.group_file = Some(groups);
    config.paths.proc = dir.path().join("proc");
    let (p, problems) = Policy::new(&config);
    assert_eq!(problems.len(), 1);
    assert_eq!(p.role_of(c(1000, 951, 0)), None, "closed, not open");
    let e = Policy::strict(&config).expect_err("strict");
    assert!(
        crate::service::status::error_line(&e).contains("`nope`"),
        "{e}"
    );
}

#[test]
fn leases_whole_go_to_admins_and_to_callers_a_rule_names_with_the_device() {
    let (_d, p) = world(
        "[roles]\nadmins = [\"rigadm\"]\n[[lease.allow]]\ndevices = [\"0000:01:00.0\"]\ngroups = [\"rig\"]\n",
    );
    let dev: Bdf = "0000:01:00.0".parse().expect("bdf");
    let other: Bdf = "0000:02:00.0".parse().expect("bdf");
    assert!(p.may_lease(c(1000, 100, 77), other), "admin");
    assert!(
        p.may_lease(c(1000, 100, 78), dev),
        "rule by supplementary group"
    );
    assert!(
        !p.may_lease(c(1000, 100, 78), other),
        "rule names another device"
    );
    assert!(!p.may_lease(c(1001, 952, 0), dev), "nobody names it");
}

#[test]
fn groups_read_once_are_kept_a_while_and_a_new_policy_reads_them_afresh() {
    let (dir, p) = world("[roles]\nadmins = [\"rigadm\"]\n");
    assert_eq!(p.role_of(c(1000, 100, 78)), Some(Role::Client));
    // pid 78 joins rigadm: the policy in force still has the groups it read.
    fs::write(dir.path().join("proc/78/status"), "Groups:\t950\n").expect("status");
    assert_eq!(p.role_of(c(1000, 100, 78)), Some(Role::Client), "kept");
    // Another uid on the same pid is another caller.
    assert_eq!(p.role_of(c(1001, 100, 78)), Some(Role::Admin));
    let mut config =
        Config::parse("[roles]\nadmins = [\"rigadm\"]\n", Path::new("t.toml")).expect("config");
    config.paths.group_file = Some(dir.path().join("group"));
    config.paths.proc = dir.path().join("proc");
    let fresh = Policy::strict(&config).expect("policy");
    assert_eq!(
        fresh.role_of(c(1000, 100, 78)),
        Some(Role::Admin),
        "read afresh"
    );
}

#[test]
fn the_connections_groups_decide_and_a_reused_pids_proc_entry_is_not_read() {
    let (_d, p) = world("[roles]\nadmins = [\"rigadm\"]\nclients = [\"rig\"]\n");
    // Pid 77's /proc entry says rigadm (950): a process that reused the pid after the
    // caller connected. The socket's groups (SO_PEERGROUPS) say only rig (951).
    let caller = c(1000, 100, 77);
    assert_eq!(p.role_of_with(caller, Some(&[951])), Some(Role::Client));
    let refused = p
        .require_with(Role::Admin, caller, Some(&[951]), "Rig.Detach")
        .expect_err("the connection's groups grant no admin role");
    assert_eq!(refused.role, Role::Admin);
    // An empty list from the socket is an answer too: no /proc fallback.
    assert_eq!(p.role_of_with(caller, Some(&[])), None);
    // Without the socket's groups (a kernel before 4.13) /proc decides.
    assert_eq!(p.role_of_with(caller, None), Some(Role::Admin));
}
