// One kernel per fault kind a client's kernel can cause, for tests/h200/faults.sh (built
// there with nvcc -cubin -arch=sm_90), each run once per campaign in a session of its
// own. A module apart from check.cu, so that the checks load whatever these need.

extern "C" {

// A load from wherever it is told (an address its space does not map): an MMU fault.
__global__ void load_at(const unsigned* p, unsigned* out) { *out = *p; }

// A trap instruction: the SM raises a warp exception.
__global__ void trap_now(unsigned* out) {
    *out = 1u;
    __trap();
}

// A 4-byte load from an address that is not 4-byte aligned: a misaligned access.
__global__ void misaligned(const unsigned char* p, unsigned* out) {
    *out = *(const unsigned*)(p + 1);
}

}  // extern "C"
