// Kernels that use warp-synchronous intrinsics, cooperative groups and CUB, the way a
// new user writes them (client/cubin, docs/compute.md "Cooperative groups"). nvcc 13
// marks their instructions with EIATTR_COOP_GROUP_INSTR_OFFSETS,
// EIATTR_COOP_GROUP_MASK_REGIDS and EIATTR_INT_WARP_WIDE_INSTR_OFFSETS; CUDA launches
// all but grid_sum and grid_env with an ordinary launch, those two with a cooperative one.
// Built by build.sh; the H200 harness runs each through rig and through CUDA and checks
// every result against the host's (tests/h200/coop).

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_reduce.cuh>

namespace cg = cooperative_groups;

// The sum shuffle_atomic adds into: a __device__ variable of the module.
__device__ unsigned long long total;

extern "C" {

// The issue's kernel: a grid-stride sum, a warp reduction with __shfl_down_sync, and one
// atomicAdd per warp on a __device__ variable.
__global__ void shuffle_atomic(const unsigned* __restrict__ x, unsigned n) {
    unsigned long long v = 0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += x[i];
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    if ((threadIdx.x & 31) == 0) atomicAdd(&total, v);
}

// Reads the __device__ sum out and zeroes it for the next run.
__global__ void take_total(unsigned long long* out) {
    *out = total;
    total = 0;
}

// Warps cut short by the bound: only threads below n take part, so every mask is partial.
// Per warp: the coalesced group's sum (cg::reduce), its size, a ballot of odd values, and a
// 16-thread tile's sum by shuffles, each written by the group's first thread.
__global__ void partial_warp(const unsigned* __restrict__ x, unsigned* out, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned warp = i / 32;
    if (i < n) {
        cg::coalesced_group active = cg::coalesced_threads();
        unsigned sum = cg::reduce(active, x[i], cg::plus<unsigned>());
        unsigned odd = __ballot_sync(__activemask(), x[i] & 1u);
        __syncwarp(active.ballot(1));
        if (active.thread_rank() == 0) {
            out[warp * 4 + 0] = sum;
            out[warp * 4 + 1] = active.size();
            out[warp * 4 + 2] = odd;
        }
    }
    // Whole tiles of 16 (every thread of the block, in or out of bounds).
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(cg::this_thread_block());
    unsigned v = i < n ? x[i] : 0u;
    for (unsigned d = tile.size() / 2; d > 0; d /= 2) v += tile.shfl_down(v, d);
    if (tile.thread_rank() == 0 && (threadIdx.x & 31) == 0) out[warp * 4 + 3] = v;
}

// CUB's block-wide reduction and inclusive scan of 256 threads, and a warp reduction.
__global__ void cub_block(const int* __restrict__ x, int* scan, int* block_sums, int* warp_sums) {
    using Reduce = cub::BlockReduce<int, 256>;
    using Scan = cub::BlockScan<int, 256>;
    using Warp = cub::WarpReduce<int>;
    __shared__ union {
        typename Reduce::TempStorage reduce;
        typename Scan::TempStorage scan;
        typename Warp::TempStorage warp[8];
    } temp;
    unsigned i = blockIdx.x * 256 + threadIdx.x;
    int v = x[i];
    int sum = Reduce(temp.reduce).Sum(v);
    if (threadIdx.x == 0) block_sums[blockIdx.x] = sum;
    __syncthreads();
    int s;
    Scan(temp.scan).InclusiveSum(v, s);
    scan[i] = s;
    __syncthreads();
    int w = Warp(temp.warp[threadIdx.x / 32]).Sum(v);
    if ((threadIdx.x & 31) == 0) warp_sums[i / 32] = w;
}

// A cooperative kernel: each block sums its part into partial[], the grid syncs, block 0
// sums the partials; then the grid syncs again and every block checks the total.
// Launched only cooperatively: without a grid workspace, grid.sync() traps.
__global__ void grid_sum(const unsigned* __restrict__ x, unsigned n, unsigned long long* partial,
                         unsigned long long* out, unsigned* agree) {
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();
    __shared__ unsigned long long acc;
    if (block.thread_rank() == 0) acc = 0;
    block.sync();
    unsigned long long v = 0;
    for (unsigned long long i = grid.thread_rank(); i < n; i += grid.size()) v += x[i];
    atomicAdd(&acc, v);
    block.sync();
    if (block.thread_rank() == 0) partial[blockIdx.x] = acc;
    grid.sync();
    if (blockIdx.x == 0 && block.thread_rank() == 0) {
        unsigned long long t = 0;
        for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];
        *out = t;
    }
    grid.sync();
    if (block.thread_rank() == 0) agree[blockIdx.x] = *(volatile unsigned long long*)out == 0 ? 0u : 1u;
}

// What the launch gave the grid: envreg1 and envreg2 (the grid workspace's address, as
// cooperative_groups/details/driver_abi.h reads it), grid.is_valid(), and the workspace's
// two words before any sync. One thread writes them.
__global__ void grid_env(unsigned* out) {
    unsigned hi, lo;
    asm("mov.u32 %0, %%envreg1;" : "=r"(hi));
    asm("mov.u32 %0, %%envreg2;" : "=r"(lo));
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = hi;
        out[1] = lo;
        out[2] = cg::this_grid().is_valid() ? 1u : 0u;
        const unsigned* ws = (const unsigned*)(((unsigned long long)hi << 32) | lo);
        out[3] = ws ? ws[0] : 0xffffffffu;
        out[4] = ws ? ws[1] : 0xffffffffu;
    }
}

}  // extern "C"
