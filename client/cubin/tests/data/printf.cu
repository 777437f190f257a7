// printf needs the CUDA runtime's buffer behind a system call: rig refuses the cubin.
#include <cstdio>
extern "C" __global__ void hello(unsigned v) { printf("hello %u\n", v + threadIdx.x); }
