"""Sessions, host memory through the buffer protocol, and how rigd's refusals reach
Python."""

import gc
import threading

import pytest

import rig_gpu as rig


def test_a_session_opens_on_a_pool_and_closes(socket, host_device):
    s = rig.Session(host_device, socket=socket)
    assert s.id > 0 and s.device == host_device
    assert s.block_bytes == 2 << 20
    assert s.gpu is None, "a host pool is not a GPU"
    assert not s.closed
    assert repr(s).startswith("<rig.Session ")
    s.close()
    assert s.closed
    with pytest.raises(rig.Closed):
        s.host(64)


def test_no_daemon_is_a_client_error_naming_the_socket(tmp_path, host_device):
    path = str(tmp_path / "nothing.sock")
    with pytest.raises(rig.ClientError) as e:
        rig.Session(host_device, socket=path)
    assert path in str(e.value)
    assert isinstance(e.value, rig.RigError)
    assert isinstance(e.value, ConnectionError), "also Python's own"


def test_the_socket_is_a_path_or_rig_socket_from_the_environment(socket, host_device):
    import pathlib

    with rig.Session(host_device, socket=pathlib.Path(socket)) as s:
        assert s.id > 0
    # conftest's rigd is at $RIG_SOCKET: a session without `socket` finds it there.
    with rig.Session(host_device) as s:
        assert s.id > 0


def test_rigs_errors_are_also_the_builtins_code_already_catches():
    for cls, builtin in [
        (rig.ClientError, ConnectionError),
        (rig.Timeout, TimeoutError),
        (rig.Closed, ValueError),
    ]:
        assert issubclass(cls, rig.RigError) and issubclass(cls, builtin), cls
        assert cls.__module__ == "rig_gpu._rig" and cls.__doc__, cls
    try:
        raise rig.Timeout("waited 1 s")
    except TimeoutError as e:
        assert str(e) == "waited 1 s"


def test_an_unknown_device_is_refused(socket):
    with pytest.raises(rig.RigError):
        rig.Session("0000:7f:1f.7", socket=socket)


def test_host_memory_is_read_and_written_in_place_through_memoryview(socket, host_device):
    with rig.Session(host_device, socket=socket) as s:
        b = s.host(4096, align=4096)
        assert len(b) == 4096
        m = memoryview(b)
        assert m.nbytes == 4096 and not m.readonly and m.contiguous
        m[0:5] = b"hello"
        m[4095] = 7
        assert b.read(0, 5) == b"hello"
        assert b.read(4095, 1) == b"\x07"
        b.write(b"world", offset=100)
        assert bytes(m[100:105]) == b"world"
        # A second buffer of the same block does not overlap the first.
        c = s.host(4096)
        memoryview(c)[:] = b"\xff" * 4096
        assert bytes(m[0:5]) == b"hello"
        m.release()


def test_a_buffer_with_a_live_view_cannot_be_freed(socket, host_device):
    with rig.Session(host_device, socket=socket) as s:
        b = s.host(128)
        m = memoryview(b)
        with pytest.raises(BufferError):
            b.free()
        m.release()
        b.free()
        with pytest.raises(rig.Closed):
            memoryview(b)
        with pytest.raises(rig.Closed):
            len(b)


def test_a_view_outlives_its_session_object(socket, host_device):
    # The view holds the buffer, the buffer its lease's mapping and the session.
    s = rig.Session(host_device, socket=socket)
    m = memoryview(s.host(64))
    s.close()
    del s
    gc.collect()
    m[0:3] = b"abc"
    assert bytes(m[0:3]) == b"abc"
    m.release()


def test_out_of_range_reads_and_writes_are_value_errors(socket, host_device):
    with rig.Session(host_device, socket=socket) as s:
        b = s.host(64)
        with pytest.raises(ValueError):
            b.read(60, 8)
        with pytest.raises(ValueError):
            b.write(b"x" * 65)


def test_over_the_quota_is_refused_with_rigds_reason(socket, host_device):
    with rig.Session(host_device, socket=socket) as s:
        with pytest.raises(rig.Refused) as e:
            s.host(1 << 40)
        assert e.value.reason in ("quota", "oversized", "exhausted"), e.value.reason
        # The refusal left the session serving.
        assert len(s.host(64)) == 64


def test_calls_release_the_gil(socket, host_device):
    # Threads each open a session and allocate at once; with the GIL held across the
    # round trips to rigd they would run one after another, but they all finish.
    errors = []

    def work():
        try:
            with rig.Session(host_device, socket=socket) as s:
                for _ in range(20):
                    s.host(4096).free()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)


def test_a_forked_child_is_told_not_left_hanging(socket, host_device):
    import os

    with rig.Session(host_device, socket=socket) as s:
        s.host(64)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: every call raises at once
            os.close(r)
            code = b"?"
            try:
                s.host(64)
                code = b"n"  # no error: wrong
            except rig.RigError as e:
                code = b"y" if "fork" in str(e) else b"m"
            except BaseException:  # noqa: BLE001 - any other outcome is a failure
                code = b"x"
            os.write(w, code)
            os._exit(0)
        os.close(w)
        got = os.read(r, 1)
        os.waitpid(pid, 0)
        os.close(r)
        assert got == b"y", got
        # The parent's session is unharmed.
        assert len(s.host(64)) == 64
