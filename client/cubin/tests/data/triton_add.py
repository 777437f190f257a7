"""Compiles a Triton vector add for the GPU here and keeps its cubin and metadata:
triton_add.py OUTDIR -> triton_add.sm_90.cubin, triton_add.json."""
import json, sys
import torch, triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

o = sys.argv[1]
n = 4096
x = torch.arange(n, device="cuda", dtype=torch.float32)
y = torch.ones(n, device="cuda", dtype=torch.float32)
out = torch.empty_like(x)
k = add_kernel[(n // 1024,)](x, y, out, n, BLOCK=1024)
torch.cuda.synchronize()
assert torch.equal(out, x + y), "triton add wrong"
open(f"{o}/triton_add.sm_90.cubin", "wb").write(k.asm["cubin"])
md = {k2: (v if isinstance(v, (int, str, float, bool, list)) else str(v)) for k2, v in k.metadata._asdict().items()} if hasattr(k.metadata, "_asdict") else {k2: str(v) for k2, v in vars(k.metadata).items()}
json.dump({"triton": triton.__version__, "metadata": md}, open(f"{o}/triton_add.json", "w"), indent=1, default=str)
print("triton", triton.__version__, "cubin", len(k.asm["cubin"]))
