"""Launch arguments and buffer writes from numpy, the buffer protocol and plain Python."""

import struct

import numpy as np
import pytest

import rig_gpu as rig
from rig_gpu import _rig


def test_ints_and_floats_take_the_parameters_width():
    assert _rig._launch_args([4, 8, 1], [7, -1, 255]) == [
        struct.pack("<I", 7),
        struct.pack("<q", -1),
        b"\xff",
    ]
    assert _rig._launch_args([4, 8], [1.5, 1.5]) == [struct.pack("<f", 1.5), struct.pack("<d", 1.5)]
    with pytest.raises(ValueError, match="does not fit a parameter of 1 bytes"):
        _rig._launch_args([1], [256])


def test_a_numpy_scalar_passes_its_bytes_when_its_width_is_the_parameters():
    got = _rig._launch_args(
        [4, 4, 8, 2, 1],
        [np.float32(1.5), np.int32(-3), np.uint64(2**63), np.float16(0.5), np.bool_(True)],
    )
    assert got == [
        struct.pack("<f", 1.5),
        struct.pack("<i", -3),
        struct.pack("<Q", 2**63),
        np.float16(0.5).tobytes(),
        b"\x01",
    ]
    # A 0-d array is a scalar too.
    assert _rig._launch_args([4], [np.array(2.0, dtype=np.float32)]) == [struct.pack("<f", 2.0)]
    with pytest.raises(ValueError, match=r"a float64 \(8 bytes\) does not fit a parameter of 4 bytes"):
        _rig._launch_args([4], [np.float64(1.0)])
    with pytest.raises(TypeError, match="numpy scalar"):
        _rig._launch_args([4], [np.zeros(3, dtype=np.float32)])


def test_a_host_buffer_takes_any_contiguous_buffer(socket, host_device):
    with rig.Session(host_device, socket=socket) as s:
        b = s.host(4096, align=4096)
        a = np.arange(8, dtype=np.float32)
        b.write(a)
        assert np.frombuffer(b.read(0, 32), dtype=np.float32).tolist() == a.tolist()
        b.write(bytearray(b"\x01\x02"), 100)
        b.write(memoryview(b"\x03\x04"), 102)
        assert b.read(100, 4) == b"\x01\x02\x03\x04"
        with pytest.raises(TypeError, match="C-contiguous"):
            b.write(a[::2])
        with pytest.raises(TypeError):
            b.write("text")


def test_a_graph_without_launches_refuses_an_index_past_them():
    # Launches need a loaded module (a GPU); what needs none: an empty graph names what
    # is missing, as IndexError, and is one of rig's objects.
    g = rig.Graph()
    assert len(g) == 0 and repr(g) == "<rig.Graph launches=0>"
    with pytest.raises(IndexError, match="The graph has 0 launches; there is no launch 0"):
        g.set_arg(0, 0, 1)
    with pytest.raises(IndexError, match="no launch 3"):
        g.set_dims(3, 1, 1)
    with pytest.raises(IndexError, match="no launch 1"):
        g.dims(1)
    with pytest.raises(IndexError, match="no launch 0"):
        g.params(0)
    with pytest.raises(TypeError, match="A grid or block is an int or a tuple"):
        g.set_dims(0, "x", 1)
