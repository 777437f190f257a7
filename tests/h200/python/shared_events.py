"""Events shared between sessions on the real GPU (tests/h200/compute.sh, phase `ipc`):
CUDA's IPC events, rig's way. Run as root; each party is a forked process that drops to
its own uid before it opens a session:

- the exporter (uid 65534) exports an event and sends its token down a pipe;
- the importer (uid 65534) imports it; its copy channel (an engine of its own, so
  nothing else holds it back) waits on the GPU for the exporter's record behind a
  kernel of about 200 ms, then records an event of its own: that event's GPU time must
  not precede the exporter's release, and, as the control, one recorded there without
  the wait does precede it;
- its host waits for the next record, sleeping, and the CPU that costs is printed;
- another session's copies run while the importer's channel waits;
- a process of uid 65533 is refused the token (`event_refused`);
- the exporter is killed (SIGKILL) with a record behind a kernel still running: the
  importer's host wait and its GPU-side wait both end, as `rig.ExporterGone`, not a hang.

Prints `ipc ...` lines and `ipc ok` at the end; exits 1 on any failure.
"""

import multiprocessing as mp
import os
import signal
import sys
import time
import traceback

SOCKET = os.environ["RIG_SOCKET"]
GPU = os.environ["RIG_GPU"]
with open(os.environ["RIG_CUBIN"], "rb") as f:
    CUBIN = f.read()
NOBODY, OTHER = 65534, 65533
# SM clocks of the kernels the records follow: about 200 ms at the H100's 1.98 GHz,
# well under the time a block may hold the engine beside another session's work.
SPIN = 400_000_000


def as_uid(uid):
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(uid)


def exporter(conn):
    as_uid(NOBODY)
    import numpy as np

    import rig_gpu as rig

    s = rig.Session(GPU, socket=SOCKET)
    rt = s.runtime()
    mod = rt.load(CUBIN)
    flag = s.gpu_memory(4)
    ev = s.export_event()
    conn.send(ev.token)
    while True:
        cmd = conn.recv()
        if cmd == "stop":
            ev.close()
            rt.close()
            s.close()
            conn.send("stopped")
            return
        # A record behind a kernel of about 200 ms (2 s before the exporter dies, so
        # that it dies first), sent at once.
        cycles = SPIN * 10 if cmd == "record then die" else SPIN
        d = rt.launch(mod["spin"], grid=1, block=32, args=[np.uint64(cycles), flag])
        v = rt.record_shared(ev, after=[d])
        conn.send(v)
        if cmd == "record then die":
            time.sleep(600)  # killed here


def other_uid(token, conn):
    as_uid(OTHER)
    import rig_gpu as rig

    try:
        s = rig.Session(GPU, socket=SOCKET)
        try:
            s.import_event(token)
            conn.send("imported: not refused")
        except rig.Refused as e:
            conn.send(e.reason)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        conn.send(f"{type(e).__name__}: {e}")


def importer(conn_exp, pid_exp, out):
    as_uid(NOBODY)
    import rig_gpu as rig

    fails = []

    def check(ok, what):
        print(f"ipc {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            fails.append(what)

    token = conn_exp.recv()
    s = rig.Session(GPU, socket=SOCKET)
    rt = s.runtime()
    # A bystander: another session, whose copies must not wait behind the importer's
    # channel while that channel waits on the GPU.
    s2 = rig.Session(GPU, socket=SOCKET)
    rt2 = s2.runtime()
    src, dst = s2.host(64 << 20), s2.gpu_memory(64 << 20)
    imp = s.import_event(token)
    check(imp.target == 0 and imp.exporter > 0, f"imported: target {imp.target}, exporter session {imp.exporter}")

    # 1. Without a wait: this runtime's event is recorded while the exporter's kernel
    # still runs, before its release (the control).
    conn_exp.send("record")
    v = conn_exp.recv()
    free = rt.record("copy")
    t_free = rt.event_time(free)
    rt.wait_event(imp, timeout=10)
    _, t_rel = imp.released
    check(t_free < t_rel, f"control: an event without the wait is {(t_rel - t_free) / 1e6:.1f} ms before the release of {v}")

    # 2. The GPU-side wait: the acquire, then an event; the host does not wait.
    conn_exp.send("record")
    v = conn_exp.recv()
    t0 = time.monotonic()
    w = rt.wait_shared(imp, "copy")
    after = rt.record("copy")
    host_s = time.monotonic() - t0
    rt2.wait(rt2.copy(dst, src), timeout=10)
    by = rt2.record("copy")
    t_by = rt2.event_time(by, timeout=10)
    t_after = rt.event_time(after, timeout=10)
    value, t_rel = imp.released
    check(t_by < t_rel, f"another session's 64 MiB copy finished {(t_rel - t_by) / 1e6:.1f} ms before the release the waiting channel waits for")
    check(w == v and value >= v, f"wait_shared waited for {w} (recorded {v}), released {value}")
    check(t_after >= t_rel, f"the importer's event is {(t_after - t_rel) / 1e3:.1f} us after the release, GPU time")
    check(host_s < 0.05, f"the host queued the wait and the event in {host_s * 1e3:.2f} ms")
    check(imp.check(v), "check: the exporter's work released it")

    # 3. A host wait that sleeps: CPU time over a ~200 ms kernel.
    conn_exp.send("record")
    v = conn_exp.recv()
    c0, t0 = time.thread_time(), time.monotonic()
    got = rt.wait_event(imp, timeout=10)
    cpu, waited = time.thread_time() - c0, time.monotonic() - t0
    check(got == v, f"host wait for {v}: {waited * 1e3:.1f} ms, {cpu * 1e3:.2f} ms of CPU")
    check(waited < 0.05 or cpu < 0.01, "a sleeping wait costs little CPU")

    # 4. Another uid is refused the token (the parent runs it and reports).
    out.send("other uid")
    reason = out.recv()
    check(reason == "event_refused", f"uid {OTHER} importing: {reason}")

    # 5. The exporter dies with a record behind a kernel still running.
    conn_exp.send("record then die")
    v = conn_exp.recv()
    w = rt.wait_shared(imp, "copy")
    mine = rt.record("copy")
    os.kill(pid_exp, signal.SIGKILL)
    t0 = time.monotonic()
    try:
        rt.wait_event(imp, timeout=20)
        check(imp.check(v), f"the exporter's release of {v} landed before its end")
        print("ipc note: the release landed before rigd stopped the exporter's channel", flush=True)
    except rig.ExporterGone as e:
        check(True, f"host wait after SIGKILL: ExporterGone in {(time.monotonic() - t0) * 1e3:.0f} ms: {e}")
        try:
            rt.event_time(mine, timeout=20)
            check(True, "the GPU-side wait passed: the importer's later work completed")
        except Exception as e2:  # noqa: BLE001
            check(False, f"the importer's work after the wait: {type(e2).__name__}: {e2}")
        try:
            imp.check(w)
            check(False, "check after the exporter's end should raise")
        except rig.ExporterGone:
            check(True, "check: ExporterGone for the value the GPU wait was for")
    except Exception as e:  # noqa: BLE001
        check(False, f"host wait after SIGKILL: {type(e).__name__}: {e}")
    # rigd ends the exporter's session on its own time: wait until the page says so.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            imp.check(v + 1)
            time.sleep(0.001)
        except rig.ExporterGone:
            break
    check(time.monotonic() < deadline, f"the page says the exporter ended, with {imp.released[0] >> 62 and 'every wait let pass'}")
    try:
        s.import_event(token)
        check(False, "an import after the exporter's end")
    except rig.Refused as e:
        check(e.reason == "event_gone", f"an import after the exporter's end: {e.reason}")
    imp.close()
    for r in (rt, rt2):
        r.close()
    for x in (src, dst):
        x.free()
    for x in (s, s2):
        x.close()
    out.send(fails)


def main():
    ctx = mp.get_context("fork")
    exp_here, exp_there = ctx.Pipe()
    imp_exp_here, imp_exp_there = ctx.Pipe()
    out_here, out_there = ctx.Pipe()
    # The exporter talks to the importer: the parent only relays the token and kills.
    e = ctx.Process(target=exporter, args=(exp_there,))
    e.start()
    token = exp_here.recv()

    def relay():
        exporting = True
        while True:
            if imp_exp_here.poll(0.01):
                m = imp_exp_here.recv()
                exp_here.send(m)
            if exporting and exp_here.poll(0.01):
                try:
                    imp_exp_here.send(exp_here.recv())
                except EOFError:  # the exporter was killed
                    exporting = False
            if out_here.poll(0):
                m = out_here.recv()
                if m == "other uid":
                    a, b = ctx.Pipe()
                    p = ctx.Process(target=other_uid, args=(token, b))
                    p.start()
                    out_here.send(a.recv() if a.poll(30) else "no answer")
                    p.join(30)
                else:
                    return m
            if not i.is_alive() and not out_here.poll(0):
                return ["the importer died"]

    imp_exp_here.send(token)
    i = ctx.Process(target=importer, args=(imp_exp_there, e.pid, out_there))
    i.start()
    try:
        fails = relay()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        fails = ["the relay failed"]
    i.join(60)
    e.join(5)
    if e.is_alive():
        e.kill()
    print(f"ipc exporter exit {e.exitcode} (SIGKILL is {-signal.SIGKILL}), importer exit {i.exitcode}", flush=True)
    if fails or i.exitcode != 0:
        print(f"ipc FAILED: {fails}", flush=True)
        sys.exit(1)
    print("ipc ok", flush=True)


if __name__ == "__main__":
    main()
