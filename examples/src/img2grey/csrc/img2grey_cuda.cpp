// CUDA dispatch for img2grey. Deliberately free of torch's CUDA headers (the
// CPU torch wheel lacks c10/cuda/impl/cuda_cmake_macros.h): the device code
// lives in img2grey_kernel.cu behind a plain extern "C" launcher that runs on
// the default stream.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "img2grey.h"

extern "C" int img2grey_cuda_launch(const float* in, float* out, long long n);

at::Tensor img2grey_cuda(const at::Tensor& x) {
  img2grey_check(x);
  TORCH_CHECK(x.device().is_cuda(), "img2grey: expected a CUDA tensor");
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty({x.size(0), x.size(1)}, x.options());
  const int err = img2grey_cuda_launch(in.data_ptr<float>(), out.data_ptr<float>(), x.size(0) * x.size(1));
  TORCH_CHECK(err == 0, "img2grey: CUDA launch failed with error ", err);
  return out;
}

TORCH_LIBRARY_IMPL(KERNEL_NS, CUDA, m) { m.impl("img2grey", &img2grey_cuda); }
