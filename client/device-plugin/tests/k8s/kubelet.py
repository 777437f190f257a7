"""A kubelet stand-in for rig-device-plugin, on the kubelet's published Device Plugin API.

Run by client/device-plugin/tests/k8s.rs, which runs rigd (in-process, over a fake
kernel) and the plugin, and performs the state changes this script asks for:

    python kubelet.py --dir DIR --cdi-dir CDI --stubs STUBS

STUBS holds Python stubs generated at test time by grpcio-tools from the vendored
client/device-plugin/proto/k8s/deviceplugin/v1beta1/api.proto (nothing generated is
committed; the plugin's Rust code shares none of it). The fake host (k8s.rs says how it is built):
GPUs 0000:03:00.0 and 0000:04:00.0 under one PCIe switch on NUMA node 0, GPU
0000:05:00.0 under another root port on NUMA node 1, and an edu device 0000:06:00.0
held in sysfs mode under the resource rig.dev/edu.

Talking to the test: this script writes `ASK <action> <args>` on stdout and reads one
line back on stdin, `DONE <ns>` — the nanoseconds the action took in rigd until its
state had changed — or `ERR <text>`. Latencies are the time from writing ASK to seeing
the ListAndWatch update, less that action time (so the pipe's transit is counted
against the plugin, never for it).

It prints one line per check (`ok:`/`FAIL:`), `bench:` lines, and a summary
`kubelet: N passed, M failed`; it exits non-zero when a check failed. It checks:
- registration: both resources register on kubelet.sock with v1beta1, their endpoint
  socket exists, and the options ask for PreStartContainer and GetPreferredAllocation;
- every RPC: GetDevicePluginOptions, ListAndWatch (devices, health, NUMA topology),
  GetPreferredAllocation (the switch pair, must-include), Allocate (CDI names, env,
  annotation, the spec file written; unknown and unhealthy devices refused),
  PreStartContainer (a device leased outside Kubernetes refused);
- health follows rigd both ways: a lease outside Kubernetes and its end, a device
  given back while allocated and taken again, rigd stopped and started again;
- a kubelet restart (its directory emptied, kubelet.sock made anew after 0.3 s): both
  register again and ListAndWatch serves the same devices; and a quick one (the socket
  replaced at once): both register again.
"""

import argparse
import json
import os
import sys
import threading
import time
from concurrent import futures

import grpc

GPUS = ["0000:03:00.0", "0000:04:00.0", "0000:05:00.0"]
EDU = "0000:06:00.0"
KINDS = {"rig.dev/gpu": set(GPUS), "rig.dev/edu": {EDU}}
NUMA = {"0000:03:00.0": 0, "0000:04:00.0": 0, "0000:05:00.0": 1}
OUTSIDER = "0000:05:00.0"  # leased outside Kubernetes, again and again
ALLOCATED = "0000:03:00.0"  # allocated, then given back to its driver
CYCLES = 20
ALLOCATE_CALLS = 300

passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok: {what}", flush=True)
    else:
        failed += 1
        print(f"FAIL: {what}", flush=True)
    return cond


def ask(action, *args):
    """Asks the test to change rigd's state; returns the action's own time in ns."""
    print("ASK", action, *args, flush=True)
    reply = sys.stdin.readline().split(maxsplit=1)
    if not reply or reply[0] != "DONE":
        raise RuntimeError(f"{action}: {' '.join(reply)}")
    return int(reply[1])


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Kubelet:
    """The Registration service on kubelet.sock, with what registered."""

    def __init__(self, pb, pb_grpc, directory):
        self.pb, self.pb_grpc, self.dir = pb, pb_grpc, directory
        self.registered = {}
        self.cond = threading.Condition()
        self.server = None

    def start(self):
        kubelet = self

        class Registration(self.pb_grpc.RegistrationServicer):
            def Register(self, request, context):
                with kubelet.cond:
                    kubelet.registered[request.resource_name] = (request, time.monotonic())
                    kubelet.cond.notify_all()
                return kubelet.pb.Empty()

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.pb_grpc.add_RegistrationServicer_to_server(Registration(), self.server)
        self.server.add_insecure_port("unix://" + os.path.join(self.dir, "kubelet.sock"))
        self.server.start()

    def stop(self):
        """As a kubelet that goes and comes back: stop, then empty the directory."""
        self.server.stop(grace=None).wait()
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        with self.cond:
            self.registered.clear()

    def wait_for(self, kinds, timeout):
        with self.cond:
            self.cond.wait_for(lambda: kinds <= set(self.registered), timeout)
            return dict(self.registered)


class Watch:
    """One ListAndWatch stream, every update kept with the time it came."""

    def __init__(self, stub, pb):
        self.updates = []
        self.cond = threading.Condition()
        self.call = stub.ListAndWatch(pb.Empty())
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for r in self.call:
                state = {
                    d.ID: (d.health, [n.ID for n in d.topology.nodes] if d.HasField("topology") else None)
                    for d in r.devices
                }
                with self.cond:
                    self.updates.append((time.monotonic_ns(), state))
                    self.cond.notify_all()
        except grpc.RpcError:
            pass

    def latest(self):
        with self.cond:
            return self.updates[-1][1] if self.updates else None

    def wait(self, pred, timeout=10.0, since=0):
        """The first update at index >= since that satisfies pred: (time_ns, state)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            i = since
            while True:
                while i < len(self.updates):
                    t, s = self.updates[i]
                    if pred(s):
                        return t, s
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    return None, (self.updates[-1][1] if self.updates else None)
                self.cond.wait(left)

    def count(self):
        with self.cond:
            return len(self.updates)

    def cancel(self):
        self.call.cancel()


def health(state, dev):
    return state.get(dev, ("absent", None))[0] if state else "absent"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--cdi-dir", required=True)
    ap.add_argument("--stubs", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.stubs)
    from deviceplugin.v1beta1 import api_pb2 as pb, api_pb2_grpc as pb_grpc

    kubelet = Kubelet(pb, pb_grpc, a.dir)
    kubelet.start()
    regs = kubelet.wait_for(set(KINDS), 20)
    check(set(regs) == set(KINDS), f"both resources registered: {sorted(regs)}")
    stubs = {}
    for kind in KINDS:
        if kind not in regs:
            continue
        r, _ = regs[kind]
        check(r.version == "v1beta1", f"{kind}: API version {r.version}")
        check(
            r.options.pre_start_required and r.options.get_preferred_allocation_available,
            f"{kind}: options ask for PreStartContainer and offer GetPreferredAllocation",
        )
        path = os.path.join(a.dir, r.endpoint)
        check(os.path.exists(path), f"{kind}: endpoint {r.endpoint} exists")
        ch = grpc.insecure_channel("unix://" + path)
        stubs[kind] = pb_grpc.DevicePluginStub(ch)
        o = stubs[kind].GetDevicePluginOptions(pb.Empty(), timeout=5)
        check(
            o.pre_start_required and o.get_preferred_allocation_available,
            f"{kind}: GetDevicePluginOptions says the same",
        )
    if failed:
        return
    gpu, edu = stubs["rig.dev/gpu"], stubs["rig.dev/edu"]
    watches = {k: Watch(s, pb) for k, s in stubs.items()}
    gw = watches["rig.dev/gpu"]

    for kind, devs in KINDS.items():
        _, s = watches[kind].wait(lambda s: set(s) == devs and all(h == "Healthy" for h, _ in s.values()))
        check(s is not None and set(s) == devs, f"{kind}: ListAndWatch lists {sorted(devs)} Healthy: {s}")
    s = gw.latest()
    check(
        all(s[d][1] == [NUMA[d]] for d in GPUS),
        f"GPUs carry their NUMA nodes: { {d: s[d][1] for d in GPUS} }",
    )

    # GetPreferredAllocation: the two under one switch; must-include first.
    req = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=list(reversed(GPUS)), allocation_size=2),
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=GPUS, must_include_deviceIDs=["0000:04:00.0"], allocation_size=2
            ),
        ]
    )
    r = gpu.GetPreferredAllocation(req, timeout=5)
    got = [sorted(c.deviceIDs) for c in r.container_responses]
    check(got[0] == ["0000:03:00.0", "0000:04:00.0"], f"preferred pair is the switch pair: {got[0]}")
    check(got[1] == ["0000:03:00.0", "0000:04:00.0"], f"must-include 04:00.0 brings its switch neighbour: {got[1]}")

    # Allocate: CDI names, env, annotation, the spec on disk.
    r = gpu.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[ALLOCATED])]), timeout=5)
    c = r.container_responses[0]
    check([d.name for d in c.cdi_devices] == [f"rig.dev/gpu={ALLOCATED}"], f"Allocate names the CDI device: {list(c.cdi_devices)}")
    check(c.envs.get("RIG_DEVICES") == ALLOCATED and c.envs.get("RIG_DEVICE") == ALLOCATED, f"Allocate's env: {dict(c.envs)}")
    check(c.envs.get("RIG_SOCKET", "").endswith("rigd.sock"), "Allocate names rigd's socket")
    check(c.annotations.get("rig.dev/devices") == ALLOCATED, f"Allocate's annotation: {dict(c.annotations)}")
    spec_file = os.path.join(a.cdi_dir, "rig-rig.dev_gpu-" + ALLOCATED.replace(":", "-") + ".json")
    try:
        spec = json.load(open(spec_file))
        check(
            spec["cdiVersion"] == "0.5.0" and spec["kind"] == "rig.dev/gpu" and spec["devices"][0]["name"] == ALLOCATED,
            f"the CDI spec {os.path.basename(spec_file)} is there, version 0.5.0",
        )
    except (OSError, ValueError, KeyError) as e:
        check(False, f"the CDI spec {spec_file}: {e}")
    r = edu.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[EDU])]), timeout=5)
    check([d.name for d in r.container_responses[0].cdi_devices] == [f"rig.dev/edu={EDU}"], "edu's Allocate names rig.dev/edu")
    try:
        gpu.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["0000:99:00.0"])]), timeout=5)
        check(False, "an unknown device is refused")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.NOT_FOUND, f"an unknown device is refused: {e.code()} {e.details()}")
    try:
        gpu.PreStartContainer(pb.PreStartContainerRequest(devices_ids=[ALLOCATED]), timeout=5)
        check(True, "PreStartContainer on a held device")
    except grpc.RpcError as e:
        check(False, f"PreStartContainer: {e.code()} {e.details()}")

    # Health follows rigd: a lease outside Kubernetes, and its end, CYCLES times.
    to_bad, to_good = [], []
    for i in range(CYCLES):
        n = gw.count()
        t0 = time.monotonic_ns()
        took = ask("lease", OUTSIDER)
        t, _ = gw.wait(lambda s: health(s, OUTSIDER) == "Unhealthy", since=n)
        if t is None:
            check(False, f"cycle {i}: a lease outside Kubernetes makes {OUTSIDER} Unhealthy")
            break
        to_bad.append((t - t0 - took) / 1e6)
        if i == 0:
            for name, call in [
                ("PreStartContainer", lambda: gpu.PreStartContainer(pb.PreStartContainerRequest(devices_ids=[OUTSIDER]), timeout=5)),
                ("Allocate", lambda: gpu.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[OUTSIDER])]), timeout=5)),
            ]:
                try:
                    call()
                    check(False, f"{name} on a device leased outside Kubernetes is refused")
                except grpc.RpcError as e:
                    # The reason is the lease, or (when rigd is still busy finishing
                    # the lease at this poll) the operation under way: both true.
                    check(
                        e.code() == grpc.StatusCode.FAILED_PRECONDITION
                        and ("leased whole" in e.details() or "under way" in e.details()),
                        f"{name} on a device leased outside Kubernetes is refused: {e.details()}",
                    )
        n = gw.count()
        t0 = time.monotonic_ns()
        took = ask("unlease", OUTSIDER)
        t, _ = gw.wait(lambda s: health(s, OUTSIDER) == "Healthy", since=n)
        if t is None:
            check(False, f"cycle {i}: {OUTSIDER} is Healthy again after the lease ends")
            break
        to_good.append((t - t0 - took) / 1e6)
    if check(len(to_good) == CYCLES, f"{CYCLES} lease cycles seen both ways in ListAndWatch"):
        both = to_bad + to_good
        print(
            f"bench: state change -> ListAndWatch: n={len(both)} p50={pct(both, 50):.1f} ms "
            f"p99={pct(both, 99):.1f} ms max={max(both):.1f} ms (to Unhealthy p50={pct(to_bad, 50):.1f}, "
            f"to Healthy p50={pct(to_good, 50):.1f})",
            flush=True,
        )
        check(pct(both, 50) < 100, f"median state change seen in {pct(both, 50):.1f} ms (< 100 ms)")

    # A device taken away while allocated, and taken again.
    n = gw.count()
    ask("giveback", ALLOCATED)
    t, s = gw.wait(lambda s: health(s, ALLOCATED) == "Unhealthy", since=n)
    check(t is not None, f"{ALLOCATED} given back to its driver: Unhealthy, still listed: {s}")
    time.sleep(0.2)
    check(not os.path.exists(spec_file), "its CDI spec is removed")
    n = gw.count()
    ask("take", ALLOCATED)
    t, s = gw.wait(lambda s: health(s, ALLOCATED) == "Healthy", since=n)
    check(t is not None, f"{ALLOCATED} taken again: Healthy again without a plugin restart")
    time.sleep(0.2)
    check(os.path.exists(spec_file), "its CDI spec is back")

    # Allocate latency, side by side with an empty RPC on the same channel (the
    # floor: Python grpcio's own round trip), interleaved so both see the same load.
    lat, floor = [], []
    areq = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["0000:04:00.0"])])
    for _ in range(ALLOCATE_CALLS):
        t0 = time.perf_counter_ns()
        gpu.Allocate(areq, timeout=5)
        t1 = time.perf_counter_ns()
        gpu.GetDevicePluginOptions(pb.Empty(), timeout=5)
        t2 = time.perf_counter_ns()
        lat.append((t1 - t0) / 1e6)
        floor.append((t2 - t1) / 1e6)
    print(
        f"bench: Allocate (one GPU, spec refreshed): n={len(lat)} p50={pct(lat, 50):.2f} ms "
        f"p99={pct(lat, 99):.2f} ms; GetDevicePluginOptions (baseline): p50={pct(floor, 50):.2f} ms "
        f"p99={pct(floor, 99):.2f} ms",
        flush=True,
    )

    # rigd goes and comes back.
    n = gw.count()
    ask("rigd-stop")
    t, s = gw.wait(lambda s: all(health(s, d) == "Unhealthy" for d in GPUS), since=n)
    check(t is not None, f"rigd stopped: every GPU Unhealthy: {s}")
    n = gw.count()
    t0 = time.monotonic_ns()
    ask("rigd-start")
    t, s = gw.wait(lambda s: all(health(s, d) == "Healthy" for d in GPUS), since=n, timeout=15)
    if check(t is not None, f"rigd back: every GPU Healthy again: {s}"):
        print(f"bench: rigd restart -> Healthy again in {(t - t0) / 1e6:.0f} ms", flush=True)

    # The kubelet restarts: its directory emptied, kubelet.sock made anew.
    for w in watches.values():
        w.cancel()
    kubelet.stop()
    time.sleep(0.3)
    t0 = time.monotonic()
    kubelet.start()
    regs = kubelet.wait_for(set(KINDS), 10)
    if check(set(regs) == set(KINDS), f"after a kubelet restart both register again: {sorted(regs)}"):
        worst = max(at for _, at in regs.values()) - t0
        print(f"bench: kubelet restart -> re-registered in {worst * 1000:.0f} ms", flush=True)
        for kind, devs in KINDS.items():
            r, _ = regs[kind]
            ch = grpc.insecure_channel("unix://" + os.path.join(a.dir, r.endpoint))
            w = Watch(pb_grpc.DevicePluginStub(ch), pb)
            _, s = w.wait(lambda s: set(s) == devs and all(h == "Healthy" for h, _ in s.values()))
            check(s is not None and set(s) == devs, f"{kind}: ListAndWatch after the restart: {s}")
            w.cancel()

    # A quick restart: kubelet.sock replaced at once (another inode, never missing for
    # long), as a kubelet restarted by systemd does.
    kubelet.stop()
    kubelet.start()
    regs = kubelet.wait_for(set(KINDS), 10)
    check(set(regs) == set(KINDS), f"after kubelet.sock is replaced both register again: {sorted(regs)}")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a crash is a failed check, with its cause
        check(False, f"the stand-in stopped: {type(e).__name__}: {e}")
    print(f"kubelet: {passed} passed, {failed} failed", flush=True)
    os._exit(0 if failed == 0 and passed > 0 else 1)
