// Device code for img2grey-cuda. No torch headers: only the CUDA runtime, behind
// extern "C" launchers that take the stream to run on (torch's current stream).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

__global__ void img2grey_kernel(const float* __restrict__ in, float* __restrict__ out, long long n) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = 0.299f * in[3 * i] + 0.587f * in[3 * i + 1] + 0.114f * in[3 * i + 2];
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// One block per row: out[r, j] = silu(x[r, j]) * x[r, d + j], computed in float.
template <typename T>
__global__ void silu_and_mul_kernel(const T* __restrict__ in, T* __restrict__ out, long long d) {
  const long long row = blockIdx.x;
  const T* x = in + row * 2 * d;
  T* y = out + row * d;
  for (long long j = threadIdx.x; j < d; j += blockDim.x) {
    const float a = to_float(x[j]);
    const float b = to_float(x[d + j]);
    y[j] = from_float<T>(a / (1.0f + expf(-a)) * b);
  }
}

template <typename T>
int launch_silu_and_mul(const void* in, void* out, long long rows, long long d, cudaStream_t stream) {
  const int threads = d >= 1024 ? 1024 : static_cast<int>(((d + 31) / 32) * 32);
  silu_and_mul_kernel<T><<<static_cast<unsigned int>(rows), threads, 0, stream>>>(
      static_cast<const T*>(in), static_cast<T*>(out), d);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

extern "C" int img2grey_cuda_launch(const float* in, float* out, long long n, void* stream) {
  if (n <= 0) {
    return 0;
  }
  const int threads = 256;
  const unsigned int blocks = static_cast<unsigned int>((n + threads - 1) / threads);
  img2grey_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(in, out, n);
  return static_cast<int>(cudaGetLastError());
}

// dtype: 0 float32, 1 float16, 2 bfloat16.
extern "C" int silu_and_mul_cuda_launch(const void* in, void* out, long long rows, long long d, int dtype,
                                        void* stream) {
  if (rows <= 0 || d <= 0) {
    return 0;
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case 0:
      return launch_silu_and_mul<float>(in, out, rows, d, s);
    case 1:
      return launch_silu_and_mul<__half>(in, out, rows, d, s);
    case 2:
      return launch_silu_and_mul<__nv_bfloat16>(in, out, rows, d, s);
    default:
      return -1;
  }
}
