// Torch registration for img2grey-cuda: schemas (TORCH_LIBRARY) and the CUDA
// implementations (TORCH_LIBRARY_IMPL(..., CUDA, ...)) under the build's own
// namespace KERNEL_NS (-DKERNEL_NS=_img2grey_cuda_<hash>). The device code is
// in kernels.cu; this file runs it on torch's current stream of the input's device.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

extern "C" int img2grey_cuda_launch(const float* in, float* out, long long n, void* stream);
extern "C" int silu_and_mul_cuda_launch(const void* in, void* out, long long rows, long long d, int dtype,
                                        void* stream);

namespace {

void* current_stream(const at::Tensor& x) { return c10::cuda::getCurrentCUDAStream(x.device().index()).stream(); }

at::Tensor img2grey(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "img2grey: expected a CUDA tensor");
  TORCH_CHECK(x.dim() == 3 && x.size(2) == 3, "img2grey: expected a [H, W, 3] tensor, got ", x.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat, "img2grey: expected float32, got ", x.scalar_type());
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty({x.size(0), x.size(1)}, x.options());
  const int err = img2grey_cuda_launch(in.data_ptr<float>(), out.data_ptr<float>(), x.size(0) * x.size(1),
                                       current_stream(x));
  TORCH_CHECK(err == 0, "img2grey: CUDA launch failed with error ", err);
  return out;
}

at::Tensor silu_and_mul(const at::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "silu_and_mul: expected a CUDA tensor");
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) % 2 == 0, "silu_and_mul: last dimension must be even, got ", x.sizes());
  int dtype = -1;
  switch (x.scalar_type()) {
    case at::kFloat:
      dtype = 0;
      break;
    case at::kHalf:
      dtype = 1;
      break;
    case at::kBFloat16:
      dtype = 2;
      break;
    default:
      TORCH_CHECK(false, "silu_and_mul: expected float32, float16 or bfloat16, got ", x.scalar_type());
  }
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor in = x.contiguous();
  const int64_t d = x.size(-1) / 2;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = d;
  at::Tensor out = at::empty(shape, x.options());
  const int64_t rows = d == 0 ? 0 : x.numel() / (2 * d);
  const int err = silu_and_mul_cuda_launch(in.data_ptr(), out.data_ptr(), rows, d, dtype, current_stream(x));
  TORCH_CHECK(err == 0, "silu_and_mul: CUDA launch failed with error ", err);
  return out;
}

}  // namespace

TORCH_LIBRARY(KERNEL_NS, m) {
  m.def("img2grey(Tensor x) -> Tensor");
  m.def("silu_and_mul(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(KERNEL_NS, CUDA, m) {
  m.impl("img2grey", &img2grey);
  m.impl("silu_and_mul", &silu_and_mul);
}
