// A kernel that must be launched as clusters of 2 blocks: rig refuses it (a cluster
// launch is not something its QMD builder does).
extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(unsigned* out) {
    out[blockIdx.x] = 1u;
}
