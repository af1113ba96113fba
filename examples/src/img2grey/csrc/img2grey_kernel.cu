// Device code for img2grey; no torch headers, only the CUDA runtime.
#include <cuda_runtime.h>

__global__ void img2grey_kernel(const float* __restrict__ in, float* __restrict__ out, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = 0.299f * in[3 * i] + 0.587f * in[3 * i + 1] + 0.114f * in[3 * i + 2];
  }
}

extern "C" int img2grey_cuda_launch(const float* in, float* out, long long n) {
  if (n <= 0) {
    return 0;
  }
  const int threads = 256;
  const unsigned int blocks = static_cast<unsigned int>((n + threads - 1) / threads);
  img2grey_kernel<<<blocks, threads>>>(in, out, n);
  return static_cast<int>(cudaGetLastError());
}
