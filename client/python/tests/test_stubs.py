"""The type stubs (python/rig_gpu/_rig.pyi) and the built module agree."""

import ast
import pathlib

import rig_gpu._rig as ext

STUBS = pathlib.Path(__file__).parents[1] / "python" / "rig_gpu" / "_rig.pyi"
# Aliases the stubs define for annotations only.
STUB_ONLY = {"Buffer", "Arg", "Dim"}


def stub_names() -> set[str]:
    tree = ast.parse(STUBS.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names - STUB_ONLY


def test_every_stub_is_in_the_module_and_every_public_name_is_stubbed():
    public = {n for n in dir(ext) if not n.startswith("_")} | {"__version__"}
    assert stub_names() == public


def test_every_stubbed_class_has_its_methods():
    tree = ast.parse(STUBS.read_text())
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(ext, node.name)
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                assert hasattr(cls, item.name), f"{node.name}.{item.name}"
