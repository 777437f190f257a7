#!/usr/bin/env python3
"""Holds the DaemonSet manifest (packaging/k8s/rig-device-plugin.yaml) to the plugin.

    scripts/k8s-manifest-check.py PLUGIN [DEB]

PLUGIN is a built rig-device-plugin (found by its binary name, whichever crate builds
it); its --help is the truth about its flags and defaults. Checks:
- the container runs /usr/bin/rig-device-plugin, mounted read-only from the same node
  path, which is where the package installs it;
- every flag in args is one the plugin has (--flag=value or --flag value);
- every path the plugin uses (its socket's folder, --kubelet-dir, --cdi-dir), given or
  by default, is a hostPath volume mounted at the same path, so the kubelet and the
  runtime find what the plugin writes where it wrote it;
- --rigctl (the CDI hooks' program, run on the node) is where the package installs it;
- with DEB: the package ships the plugin at that path and this manifest, byte for byte.
Needs python3-yaml. Exits 1 naming every mismatch.
"""

import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFEST = os.path.join(ROOT, "packaging/k8s/rig-device-plugin.yaml")
# Where packaging/deb/build.sh puts them.
SHIPPED_MANIFEST = "usr/share/rig-gpu/k8s/rig-device-plugin.yaml"
PLUGIN_PATH = "/usr/bin/rig-device-plugin"
RIGCTL_PATH = "/usr/bin/rigctl"


def plugin_flags(plugin):
    """{flag: default or None} from clap's --help (defaults may wrap over lines)."""
    text = subprocess.run([plugin, "--help"], check=True, capture_output=True, text=True).stdout
    flags, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s+(?:-\w, )?--([a-z0-9-]+)", line)
        if m:
            current = m.group(1)
            flags[current] = None
        if current:
            flags[current] = (flags[current] or "") + " " + line.strip()
    out = {}
    for flag, block in flags.items():
        d = re.search(r"\[default:\s*([^\]]+)\]", block)
        out[flag] = d.group(1).replace(" ", "") if d else None
    return out


def args_of(container):
    """{flag: [values]} from the container's args."""
    got, args, i = {}, container.get("args", []), 0
    while i < len(args):
        a = args[i]
        if not a.startswith("--"):
            raise SystemExit(f"k8s-manifest-check: args: `{a}` is not a --flag")
        if "=" in a:
            flag, value = a[2:].split("=", 1)
        else:
            flag, value = a[2:], args[i + 1] if i + 1 < len(args) else None
            i += 1
        got.setdefault(flag, []).append(value)
        i += 1
    return got


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    plugin, deb = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None
    with open(MANIFEST) as f:
        doc = yaml.safe_load(f)
    bad = []
    spec = doc["spec"]["template"]["spec"]
    (container,) = [c for c in spec["containers"] if c["name"] == "rig-device-plugin"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = {}
    for m in container.get("volumeMounts", []):
        host = volumes.get(m["name"], {}).get("hostPath", {}).get("path")
        if host != m["mountPath"]:
            bad.append(f"mount {m['name']}: {m['mountPath']} is not the node's {host}")
        mounts[m["mountPath"]] = m

    def mounted(path, what):
        if not any(path == p or path.startswith(p.rstrip("/") + "/") for p in mounts):
            bad.append(f"{what} {path} is not under a hostPath mounted at the same path")

    if container.get("command") != [PLUGIN_PATH]:
        bad.append(f"command is {container.get('command')}, not [{PLUGIN_PATH}]")
    if not mounts.get(PLUGIN_PATH, {}).get("readOnly"):
        bad.append(f"{PLUGIN_PATH} is not mounted read-only from the node")

    flags = plugin_flags(plugin)
    given = args_of(container)
    for flag in given:
        if flag not in flags:
            bad.append(f"--{flag} is not a flag of {os.path.basename(plugin)}")

    def value(flag):
        v = given.get(flag, [flags.get(flag)])[-1]
        if v is None:
            bad.append(f"--{flag}: no value and no default")
        return v

    missing = [f for f in ("socket", "kubelet-dir", "cdi-dir", "rigctl") if f not in flags]
    for flag in missing:
        bad.append(f"the plugin has no --{flag}: this check is out of date")
    if not missing:
        mounted(os.path.dirname(value("socket")), "rigd's socket folder")
        mounted(value("kubelet-dir"), "--kubelet-dir")
        mounted(value("cdi-dir"), "--cdi-dir")
        if value("rigctl") != RIGCTL_PATH:
            bad.append(f"--rigctl {value('rigctl')} is not the package's {RIGCTL_PATH}")

    if deb:
        listing = subprocess.run(["dpkg-deb", "-c", deb], check=True, capture_output=True, text=True).stdout
        files = {line.split()[-1].lstrip(".") for line in listing.splitlines()}
        for path in (PLUGIN_PATH, RIGCTL_PATH, "/" + SHIPPED_MANIFEST):
            if path not in files:
                bad.append(f"{os.path.basename(deb)} has no {path}")
        shipped = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], check=True, capture_output=True).stdout
        tar = subprocess.run(["tar", "-xOf", "-", "./" + SHIPPED_MANIFEST], input=shipped, capture_output=True)
        with open(MANIFEST, "rb") as f:
            if tar.returncode != 0 or tar.stdout != f.read():
                bad.append(f"{os.path.basename(deb)}'s {SHIPPED_MANIFEST} is not {os.path.relpath(MANIFEST, ROOT)}")

    for b in bad:
        print(f"k8s-manifest-check: {b}", file=sys.stderr)
    if bad:
        sys.exit(1)
    print(f"k8s-manifest-check: {os.path.relpath(MANIFEST, ROOT)} matches {os.path.basename(plugin)}'s "
          f"{len(flags)} flags and paths" + (f" and {os.path.basename(deb)}" if deb else ""))


if __name__ == "__main__":
    main()
