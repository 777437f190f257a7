"""Per test file: passed / failed / skipped from pytest's JUnit XML of tinygrad's own
tests on RIG and on CUDA (tests/h200/compute.sh, phase `tinygrad`), and each failure's
first line. Usage: summarize.py DIR (holding RIG-<file>.xml and CUDA-<file>.xml)."""

import collections
import pathlib
import sys
import xml.etree.ElementTree as ET


def counts(path: pathlib.Path):
    c = collections.Counter()
    fails = []
    if not path.exists():
        return None, fails
    for case in ET.parse(path).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        if "failure" in tags or "error" in tags:
            c["failed"] += 1
            el = case.find("failure") if case.find("failure") is not None else case.find("error")
            msg = (el.get("message") or el.text or "").strip().splitlines()
            fails.append(f"{case.get('classname')}.{case.get('name')}: {msg[0][:200] if msg else '?'}")
        elif "skipped" in tags:
            c["skipped"] += 1
        else:
            c["passed"] += 1
    return c, fails


def main() -> None:
    d = pathlib.Path(sys.argv[1])
    files = sorted({p.name.split("-", 1)[1] for p in d.glob("*-*.xml")})
    print("| file | RIG passed / failed / skipped | CUDA passed / failed / skipped |")
    print("|---|---|---|")
    failures = {}
    for f in files:
        cells = []
        for b in ("RIG", "CUDA"):
            c, fails = counts(d / f"{b}-{f}")
            cells.append("not run" if c is None else f"{c['passed']} / {c['failed']} / {c['skipped']}")
            failures[(b, f)] = fails
        print(f"| {f.removesuffix('.xml').replace('__', '/')} | {cells[0]} | {cells[1]} |")
    for (b, f), fails in failures.items():
        if fails:
            print(f"\n{b} {f}: {len(fails)} failed")
            for line in fails:
                print("  " + line)


if __name__ == "__main__":
    main()
