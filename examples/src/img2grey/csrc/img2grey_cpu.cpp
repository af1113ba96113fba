// img2grey: RGB [H, W, 3] float32 -> grey [H, W] (ITU-R BT.601 luma weights).
//
// Registered under a namespace unique to the build, KERNEL_NS (passed with
// -DKERNEL_NS=_img2grey_<hash>), as the kernels convention wants.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "img2grey.h"

at::Tensor img2grey_cpu(const at::Tensor& x) {
  img2grey_check(x);
  TORCH_CHECK(x.device().is_cpu(), "img2grey: expected a CPU tensor");
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty({x.size(0), x.size(1)}, x.options());
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t n = x.size(0) * x.size(1);
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = IMG2GREY_R * src[3 * i] + IMG2GREY_G * src[3 * i + 1] + IMG2GREY_B * src[3 * i + 2];
  }
  return out;
}

TORCH_LIBRARY(KERNEL_NS, m) { m.def("img2grey(Tensor x) -> Tensor"); }

TORCH_LIBRARY_IMPL(KERNEL_NS, CPU, m) { m.impl("img2grey", &img2grey_cpu); }
