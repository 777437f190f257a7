#!/bin/sh
# Builds rig's cubin fixtures from the .cu sources here, on a machine with CUDA (the
# H200 device machine: nvcc, ptxas, cuobjdump, NVRTC and Triton from its Python).
#   build.sh OUTDIR
# Writes each cubin, and beside it cuobjdump's view of it (-elf, -res-usage, -sass),
# which the parser's tests read as the toolchain's own account; versions.txt says what
# made them.
set -u
cd "$(dirname "$0")"
O=${1:?OUTDIR}
mkdir -p "$O"
{
  nvcc --version | tail -2
  ptxas --version | tail -1
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} >"$O/versions.txt" 2>&1
cc() { out=$1; shift; nvcc -cubin "$@" -o "$O/$out" || echo "FAILED: nvcc $* -> $out" >>"$O/versions.txt"; }
cc kernels.sm_90.cubin -arch=sm_90 -O3 kernels.cu
cc kernels.sm_90.lineinfo.cubin -arch=sm_90 -O3 -lineinfo kernels.cu
cc kernels.sm_89.cubin -arch=sm_89 -O3 kernels.cu
cc kernels.sm_90.rdc.cubin -arch=sm_90 -O3 -rdc=true kernels.cu
cc cluster.sm_90.cubin -arch=sm_90 -O3 cluster.cu
cc printf.sm_90.cubin -arch=sm_90 -O3 printf.cu
# CUB's headers live in the toolkit's include/cccl.
cc coop.sm_90.cubin -arch=sm_90 -O2 -I"$(dirname "$(command -v nvcc)")/../include/cccl" coop.cu
nvcc -ptx -arch=sm_90 -O3 -o "$O/kernels.sm_90.ptx" kernels.cu &&
  ptxas -arch=sm_90 -O3 -o "$O/kernels.sm_90.ptxas.cubin" "$O/kernels.sm_90.ptx"
python3 nvrtc.py kernels.cu "$O/kernels.sm_90.nvrtc.cubin" >>"$O/versions.txt" 2>&1
python3 nvrtc.py tinygrad.cu "$O/tinygrad.sm_90.nvrtc.cubin" --minimal >>"$O/versions.txt" 2>&1
python3 triton_add.py "$O" >>"$O/versions.txt" 2>&1
for c in "$O"/*.cubin; do
  cuobjdump -elf "$c" >"$c.elf.txt" 2>&1
  cuobjdump -res-usage "$c" >"$c.res.txt" 2>&1
  cuobjdump -sass "$c" >"$c.sass.txt" 2>&1
done
ls -l "$O"
