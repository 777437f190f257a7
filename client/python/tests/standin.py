#!/usr/bin/env python3
"""Writes a stand-in of the index's `rig` distribution (SpiNNaker's tools, 2.4.1): a
pure wheel whose import package is `rig`, as the real one's is, with a module that says
whose it is. scripts/python-test.sh installs it beside the `rig-gpu` wheel to show the
two no longer overwrite each other (CHANGELOG.md, 0.2.0).

    client/python/tests/standin.py OUT_DIR   # prints the wheel's path
"""

import importlib.util
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("pack_wheel", HERE.parent / "pack-wheel.py")
pack_wheel = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pack_wheel)

VERSION = "2.4.1"
files = [
    ("rig/__init__.py", b'"""Stand-in for the index\'s rig (SpiNNaker tools)."""\nWHOSE = "spinnaker"\n'),
    (f"rig-{VERSION}.dist-info/METADATA",
     f"Metadata-Version: 2.1\nName: rig\nVersion: {VERSION}\n"
     "Summary: stand-in: A collection of tools for developing SpiNNaker applications\n".encode()),
]
print(pack_wheel.write_wheel(pathlib.Path(sys.argv[1]), "rig", VERSION, "py3-none-any", files, purelib=True))
