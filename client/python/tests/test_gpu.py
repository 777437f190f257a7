"""GPU memory, cubins and the runtime against a GPU rigd serves through its fake RM:
the bookkeeping is real (leases, quotas, reclaim), the GPU never runs anything."""

import ctypes

import pytest

import rig_gpu as rig

PAGE = 2 << 20


def test_a_gpu_session_learns_its_gpu(socket, gpu_device):
    with rig.Session(gpu_device, socket=socket) as s:
        g = s.gpu
        assert g is not None
        assert g["page_bytes"] == PAGE
        start, end = g["gpu_memory"]
        assert 0 < start < end <= g["va_end"]
        assert g["sms"] == 132


def test_gpu_memory_is_leased_in_pages_and_given_back(socket, gpu_device):
    with rig.Session(gpu_device, socket=socket) as s:
        a = s.gpu_memory(3 * PAGE + 1)
        assert len(a) == 3 * PAGE + 1
        assert a.va % PAGE == 0
        assert s.gpu_memory_leased == 4 * PAGE
        small = s.gpu_memory(256)
        assert small.va % 256 == 0
        assert "GpuBuffer" in repr(small)
        a.free()
        small.free()
        small.free()  # twice is nothing
        with pytest.raises(rig.Closed):
            _ = a.va
        # The library keeps some emptied pages for the next allocation; keep=0 gives
        # every one back.
        assert s.trim(keep=0) >= 1
        assert s.gpu_memory_leased == 0


def test_gpu_memory_over_the_uids_quota_is_refused(socket, gpu_device):
    with rig.Session(gpu_device, socket=socket) as s:
        quota = s.gpu["gpu_memory_quota_bytes"]
        held = [s.gpu_memory(PAGE) for _ in range(quota // PAGE)]
        with pytest.raises(rig.Refused) as e:
            s.gpu_memory(PAGE)
        assert e.value.reason == "quota", e.value.reason
        assert str(e.value), "the message says why"
        # More than one lease may ever hold is another refusal.
        with pytest.raises(rig.Refused) as e:
            s.gpu_memory(1 << 40)
        assert e.value.reason == "oversized", e.value.reason
        # Freed, the quota serves again.
        held.pop().free()
        held.append(s.gpu_memory(PAGE))
        # Everything back before the session ends (its end is reclaimed by rigd in the
        # background; the uid's quota is the next test's too).
        for b in held:
            b.free()
        s.trim(keep=0)
        assert s.gpu_memory_leased == 0


def test_a_host_pool_serves_no_gpu_memory(socket, host_device):
    with rig.Session(host_device, socket=socket) as s:
        with pytest.raises(rig.Refused) as e:
            s.gpu_memory(4096)
        assert e.value.reason == "not_served"


def test_arch_is_the_sm_of_the_cubins_rig_loads(cubin):
    # The fixture is nvcc's sm_90 build: rig reads it because rig.ARCH is its SM.
    assert rig.ARCH == "sm_90"
    assert rig.inspect(cubin)


def test_inspect_reads_a_cubins_kernels(cubin):
    kernels = {k.name: k for k in rig.inspect(cubin)}
    assert kernels, "the fixture has kernels"
    for k in kernels.values():
        assert k.registers > 0
        assert all(p in (1, 2, 4, 8) or p % 4 == 0 for p in k.params)
    assert "KernelInfo" in repr(next(iter(kernels.values())))


def test_inspect_refuses_what_is_not_a_cubin(cubin):
    with pytest.raises(rig.CubinError):
        rig.inspect(b"\x7fELF" + b"\0" * 60)
    with pytest.raises(rig.CubinError):
        rig.inspect(b"")
    # A truncated cubin is refused, never half read.
    with pytest.raises(rig.CubinError):
        rig.inspect(cubin[: len(cubin) // 2])


def test_a_runtime_whose_gpu_never_answers_times_out_with_the_channels_state(socket, gpu_device):
    # Opening a runtime uploads its copy kernel and waits for the copy engine; the fake
    # GPU never releases, so the wait ends in rig.Timeout naming the semaphore's value.
    with rig.Session(gpu_device, socket=socket) as s:
        with pytest.raises(rig.Timeout) as e:
            s.runtime(timeout=0.3)
        assert "did not land" in str(e.value)
        # Still serving: GPU memory works after it.
        assert len(s.gpu_memory(4096)) == 4096


def test_a_bad_timeout_is_a_value_error(socket, gpu_device):
    with rig.Session(gpu_device, socket=socket) as s:
        with pytest.raises(ValueError):
            s.runtime(timeout=-1.0)


def test_the_session_says_which_lease_holds_an_address(socket, gpu_device):
    with rig.Session(gpu_device, socket=socket) as s:
        g = s.gpu_memory(3 * PAGE)
        h = s.host(4096)
        inside = s.find(g.va + PAGE + 12)
        assert inside is not None and not inside.host
        assert inside.va <= g.va and g.va + len(g) <= inside.va + inside.size
        assert inside.host_address is None
        assert inside == s.find(g.va), "one lease, one region"
        assert "gpu" in repr(inside)
        # A host buffer: found by its GPU address and by its address in this process,
        # the same lease both ways.
        hv = s.find(h.va)
        assert hv is not None and hv.host and hv.host_address is not None
        view = memoryview(h)
        cpu = ctypes.addressof(ctypes.c_char.from_buffer(view))
        assert s.find_host(cpu) == hv
        assert hv.host_address + (h.va - hv.va) == cpu
        # Past the end, below the GPU memory range, and nowhere at all.
        assert s.find(inside.va + inside.size) != inside
        assert s.find(inside.va - 1) != inside
        assert s.find(0) is None
        assert s.find_host(1) is None
        del view
        g.free()
        s.trim(keep=0)
        assert s.find(inside.va) is None, "given back, the lease is no longer there"


def test_devices_lists_what_rigd_serves_with_its_shape(socket, gpu_device, host_device):
    served = rig.devices(socket=socket)
    by_bdf = {d["bdf"]: d for d in served}
    g = by_bdf[gpu_device]
    assert g["health"] == "serving" and g["reason"] == ""
    assert (g["arch"], g["sms"]) == ("sm_90", 132), g
    # The fake RM names no asynchronous copy engine: copies run in the GR0 group.
    assert g["copy_engines"] == [], g
    # rigd watches the fake GPU's interrupts, so its channels' waits may sleep.
    assert isinstance(g["interrupts"], int), g
    assert host_device not in by_bdf, "a DMA pool's device is not a served GPU"
    with pytest.raises(rig.ClientError):
        rig.devices(socket="/nonexistent/rigd.sock")


def test_an_event_is_shared_by_token_and_its_exporters_close_is_typed(socket, gpu_device):
    with rig.Session(gpu_device, socket=socket) as a, rig.Session(gpu_device, socket=socket) as b:
        ev = a.export_event()
        assert len(ev.token) == 16
        assert ev.last == 0
        with pytest.raises(rig.Refused) as e:
            b.import_event(bytes(16))
        assert e.value.reason == "unknown_event", e.value.reason
        with pytest.raises(ValueError):
            b.import_event(b"short")
        imp = b.import_event(ev.token)
        assert imp.target == 0, "nothing recorded yet"
        assert imp.released == (0, 0)
        assert imp.check(0)
        assert not imp.check(1), "not released, the exporter lives"
        ev.close()
        ev.close()  # twice is nothing
        # The exporter gave it back before releasing 1: waits for it are told so.
        with pytest.raises(rig.ExporterGone):
            imp.check(1)
        with pytest.raises(rig.Refused) as e:
            b.import_event(ev.token)
        assert e.value.reason == "event_gone", e.value.reason
        imp.close()
        with pytest.raises(rig.Closed):
            _ = imp.target
