"""rigd as a stock gRPC client sees it: Python grpcio with default channel options.

Run by client/rig-client/tests/grpcio.rs against rigd over a fake sysfs tree (a root
port and a GPU at 0000:01:00.0, a host DMA pool named "host"):

    python client.py unix:///path/to/rigd.sock

It has no generated stubs: every message class comes from descriptors that rigd's
reflection serves. It checks, and prints one line per check and a summary line
("grpcio: N passed, N failed"); it exits non-zero if any check failed:
- reflection v1 and v1alpha both list rig's services (grpcurl's `list`), and each
  method's signature is printed from the descriptors (grpcurl's `describe`);
- every method is either called here (read-only) or named as one that changes state,
  so a new RPC fails this script until someone decides which it is;
- every read-only RPC answers, with the fake tree's facts in its reply;
- the socket path as :authority (grpcio's default), "localhost" and an empty one are
  all served;
- refusals (that change nothing) carry typed details: a google.rpc.Status whose one
  ErrorInfo has rig's domain, a stable reason and the device, read with grpcio-status.
"""

import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from grpc_reflection.v1alpha import reflection_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

RIG_SERVICES = {"rig.v1.Rig", "rig.v1.Dma", "rig.v1.Queues"}
GPU = "0000:01:00.0"

# Read-only methods: called, with a request (as JSON) and a check of the reply.
READ_ONLY = {
    "rig.v1.Rig/Version": ({}, lambda r: r["apiVersion"] == 1 and r["daemonVersion"]),
    "rig.v1.Rig/ListDevices": (
        {},
        lambda r: sorted(d["bdf"] for d in r["devices"]) == ["0000:00:01.1", GPU],
    ),
    "rig.v1.Rig/GetDevice": ({"bdf": GPU}, lambda r: r["bdf"] == GPU),
    "rig.v1.Rig/Status": ({}, lambda r: not r.get("devices")),
    "rig.v1.Dma/Status": ({}, lambda r: [p["name"] for p in r["pools"]] == ["host"]),
    "rig.v1.Dma/Channels": ({}, lambda r: not r.get("channels")),
    "rig.v1.Queues/Status": ({}, lambda r: not r.get("queues")),
}
# Methods that change what rigd holds (take-over, registers, bus mastering, sessions):
# not called here.
CHANGING = {
    "rig.v1.Rig/Detach",
    "rig.v1.Rig/Attach",
    "rig.v1.Rig/Reset",
    "rig.v1.Rig/Resize",
    "rig.v1.Rig/ReadBar",
    "rig.v1.Rig/WriteBar",
    "rig.v1.Rig/SetBusMaster",
    "rig.v1.Dma/OpenSession",
}

# Requests rigd refuses before doing anything, and what the refusal must say:
# (method, request, gRPC code, ErrorInfo reason, metadata it must hold).
REFUSALS = [
    ("rig.v1.Rig/GetDevice", {"bdf": "0000:09:00.0"}, grpc.StatusCode.NOT_FOUND,
     "NO_DEVICE", {"device": "0000:09:00.0"}),
    ("rig.v1.Rig/GetDevice", {"bdf": "zz"}, grpc.StatusCode.INVALID_ARGUMENT,
     "BAD_ADDRESS", {}),
    ("rig.v1.Dma/OpenSession", {"device": "nothing"}, grpc.StatusCode.NOT_FOUND,
     "NO_POOL", {"device": "nothing"}),
    # A streamed take-over refused before its first step: a mode this rigd does not know.
    ("rig.v1.Rig/Detach", {"bdf": GPU, "mode": 99}, grpc.StatusCode.INVALID_ARGUMENT,
     "BAD_REQUEST", {}),
]
DOMAIN = "rig.dev"

TIMEOUT = 10  # seconds per call; each is a local round trip of milliseconds

results = {"passed": 0, "failed": 0}


def check(name, ok, detail=""):
    results["passed" if ok else "failed"] += 1
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + str(detail) if detail else ''}")
    return ok


def list_services(channel, version):
    """grpcurl's `list`, on reflection `version` ("v1" or "v1alpha").

    v1's messages are v1alpha's under another package, field for field, so the v1alpha
    classes encode v1 requests and decode v1 replies."""
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    replies = list(
        call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=TIMEOUT)
    )
    return {s.name for r in replies for s in r.list_services_response.service}


def unary(channel, pool, service, method):
    m = pool.FindServiceByName(service).FindMethodByName(method)
    req = message_factory.GetMessageClass(m.input_type)
    rep = message_factory.GetMessageClass(m.output_type)
    return req, channel.unary_unary(
        f"/{service}/{method}",
        request_serializer=req.SerializeToString,
        response_deserializer=rep.FromString,
    )


def error_info(e):
    """The one ErrorInfo of a failed call's google.rpc.Status, or why there is none."""
    status = rpc_status.from_call(e)  # also checks it agrees with the call's code and message
    if status is None:
        return None, "no grpc-status-details-bin"
    infos = []
    for any_detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if any_detail.Unpack(info):
            infos.append(info)
    if len(infos) != 1:
        return None, f"{len(infos)} ErrorInfo details in {status}"
    return infos[0], ""


def refusal(channel, pool, path, body, code, reason, metadata):
    service, method = path.split("/")
    m = pool.FindServiceByName(service).FindMethodByName(method)
    req = message_factory.GetMessageClass(m.input_type)
    rep = message_factory.GetMessageClass(m.output_type)
    kind = channel.unary_stream if m.server_streaming else channel.unary_unary
    call = kind(
        f"/{path}", request_serializer=req.SerializeToString, response_deserializer=rep.FromString
    )
    name = f"{path} {body} is refused with {code.name} and reason {reason}"
    try:
        reply = call(json_format.ParseDict(body, req()), timeout=TIMEOUT)
        if m.server_streaming:
            list(reply)
        return check(name, False, "it succeeded")
    except grpc.RpcError as e:
        if e.code() != code:
            return check(name, False, f"{e.code()}: {e.details()}")
        info, why = error_info(e)
        if info is None:
            return check(name, False, why)
        got = (info.domain, info.reason, {k: info.metadata[k] for k in metadata if k in info.metadata})
        return check(name, got == (DOMAIN, reason, metadata) and "\n" not in e.details(),
                     f"{got}; {e.details()!r}")


def main(target):
    # Default options: grpcio sends the socket path, percent-encoded, as :authority.
    channel = grpc.insecure_channel(target)

    for version in ("v1", "v1alpha"):
        try:
            names = list_services(channel, version)
        except grpc.RpcError as e:
            check(f"reflection {version} lists services", False, f"{e.code()}: {e.details()}")
            continue
        check(
            f"reflection {version} lists services",
            RIG_SERVICES <= names and f"grpc.reflection.{version}.ServerReflection" in names,
            sorted(names),
        )

    # Descriptors from reflection alone (grpcio-reflection's database speaks v1alpha).
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    methods = set()
    for service in sorted(RIG_SERVICES):
        s = pool.FindServiceByName(service)
        for m in s.methods:
            stream = "stream " if m.server_streaming else ""
            print(
                f"     {s.full_name}.{m.name}({m.input_type.full_name}) "
                f"returns ({stream}{m.output_type.full_name})"
            )
            methods.add(f"{service}/{m.name}")
    unknown = methods - READ_ONLY.keys() - CHANGING
    gone = (READ_ONLY.keys() | CHANGING) - methods
    check("every method is read-only or changing, none unnamed", not unknown, sorted(unknown))
    check("every method named here exists", not gone, sorted(gone))

    for path, (body, expect) in sorted(READ_ONLY.items()):
        service, method = path.split("/")
        req, call = unary(channel, pool, service, method)
        try:
            reply = call(json_format.ParseDict(body, req()), timeout=TIMEOUT)
        except grpc.RpcError as e:
            check(path, False, f"{e.code()}: {e.details()}")
            continue
        as_dict = json_format.MessageToDict(reply)
        check(path, bool(expect(as_dict)), as_dict if len(str(as_dict)) < 300 else "")

    # Other :authority values clients send: grpc-go and grpcurl send "localhost",
    # some clients an empty one.
    for authority in ("localhost", ""):
        other = grpc.insecure_channel(target, options=[("grpc.default_authority", authority)])
        req, call = unary(other, pool, "rig.v1.Rig", "Version")
        try:
            ok = call(req(), timeout=TIMEOUT).api_version == 1
            check(f":authority {authority!r} is served", ok)
        except grpc.RpcError as e:
            check(f":authority {authority!r} is served", False, f"{e.code()}: {e.details()}")
        other.close()

    for path, body, code, reason, metadata in REFUSALS:
        refusal(channel, pool, path, body, code, reason, metadata)

    channel.close()
    print(f"grpcio: {results['passed']} passed, {results['failed']} failed")
    return 0 if results["failed"] == 0 and results["passed"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
