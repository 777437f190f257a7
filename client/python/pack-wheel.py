#!/usr/bin/env python3
"""Packs the `rig-gpu` wheel from an extension module cargo already built.

    client/python/pack-wheel.py --so target/release/lib_rig.so --out DIR

The test command builds the extension in its one release build of the workspace
(tests/vm/build-guest.sh, `--lib`: the same compilation as everything else) and packs
it here, instead of asking maturin to compile the tree a second time with the features
of this crate alone. The wheel is what maturin makes of pyproject.toml (the same name,
module path, tags and files): a PEP 427 zip of python/rig_gpu/, the module as
rig_gpu/_rig.abi3.so, and its dist-info. Prints the wheel's path.

The distribution is `rig-gpu` and the import package `rig_gpu`: the index's `rig`
(SpiNNaker's tools) already installs a package `rig`, and two distributions that
install one package overwrite each other (CHANGELOG.md, 0.2.0).
"""

import argparse
import base64
import hashlib
import pathlib
import re
import sys
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
DIST = "rig-gpu"
# The import package, and the wheel's file-name form of DIST (PEP 427).
PACKAGE = NAME = "rig_gpu"
# CPython's stable ABI from 3.11 (Cargo.toml: pyo3's abi3-py311); this machine's
# architecture, no manylinux audit (the wheel is for this machine and its like).
TAG = "cp311-abi3-linux_x86_64"


def version() -> str:
    """The workspace's version (the crate's is `version.workspace = true`)."""
    text = (HERE.parents[1] / "Cargo.toml").read_text()
    m = re.search(r'^\[workspace\.package\][^\[]*?^version = "([^"]+)"', text, re.M | re.S)
    if not m:
        sys.exit("pack-wheel: no [workspace.package] version in Cargo.toml")
    return m.group(1)


def record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--so", required=True, type=pathlib.Path, help="the built lib_rig.so")
    ap.add_argument("--out", required=True, type=pathlib.Path, help="where the wheel goes")
    a = ap.parse_args()
    if not a.so.is_file():
        sys.exit(f"pack-wheel: no extension module at {a.so}")
    v = version()
    dist = f"{NAME}-{v}.dist-info"
    files: list[tuple[str, bytes]] = []
    for p in sorted((HERE / "python" / PACKAGE).iterdir()):
        if p.is_file() and p.suffix in (".py", ".pyi", ".typed"):
            files.append((f"{PACKAGE}/{p.name}", p.read_bytes()))
    files.append((f"{PACKAGE}/_rig.abi3.so", a.so.read_bytes()))
    summary = re.search(r'^description = "([^"]+)"', (HERE / "pyproject.toml").read_text(), re.M)
    files.append((f"{dist}/METADATA", (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST}\n"
        f"Version: {v}\n"
        f"Summary: {summary.group(1) if summary else 'rig from Python'}\n"
        "License: MIT OR Apache-2.0\n"
        "Requires-Python: >=3.11\n"
        # rig_gpu.tinygrad's pin (pyproject.toml's optional dependency).
        "Provides-Extra: tinygrad\n"
        'Requires-Dist: tinygrad==0.13.0; extra == "tinygrad"\n').encode()))
    print(write_wheel(a.out, NAME, v, TAG, files, purelib=False))


def write_wheel(out: pathlib.Path, name: str, v: str, tag: str, files: list[tuple[str, bytes]],
                purelib: bool) -> pathlib.Path:
    """Writes `files` (the package's and its METADATA) with WHEEL and RECORD as
    out/name-v-tag.whl; returns its path. client/python/tests/standin.py makes its
    stand-in wheels with it."""
    dist = f"{name}-{v}.dist-info"
    files = files + [(f"{dist}/WHEEL", (
        "Wheel-Version: 1.0\n"
        "Generator: rig pack-wheel.py\n"
        f"Root-Is-Purelib: {'true' if purelib else 'false'}\n"
        f"Tag: {tag}\n").encode())]
    record = "\n".join(record_line(p, d) for p, d in files) + f"\n{dist}/RECORD,,\n"
    files.append((f"{dist}/RECORD", record.encode()))
    out.mkdir(parents=True, exist_ok=True)
    wheel = out / f"{name}-{v}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files:
            info = zipfile.ZipInfo(p, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if p.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, d)
    return wheel


if __name__ == "__main__":
    main()
