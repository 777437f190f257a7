"""Compiles a .cu file to an sm_90 cubin with NVRTC (cuda-bindings):
nvrtc.py SRC OUT [OPTION...] (options after -default-device, e.g. tinygrad's --minimal)."""
import sys
from cuda.bindings import nvrtc

src, out, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
err, major, minor = nvrtc.nvrtcVersion()
print(f"nvrtc {major}.{minor}")
err, prog = nvrtc.nvrtcCreateProgram(open(src, "rb").read(), src.encode(), 0, [], [])
opts = [b"--gpu-architecture=sm_90", b"-default-device"] + [o.encode() for o in extra]
(err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
    _, n = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, log)
    sys.exit(f"nvrtc failed: {err}\n{log.decode(errors='replace')}")
_, n = nvrtc.nvrtcGetCUBINSize(prog)
buf = b" " * n
nvrtc.nvrtcGetCUBIN(prog, buf)
open(out, "wb").write(buf)
print(f"nvrtc cubin {out}: {n} bytes")
