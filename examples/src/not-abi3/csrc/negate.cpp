// negate: -x elementwise (float32, CPU).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

at::Tensor negate_cpu(const at::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "negate: expected a CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "negate: expected float32, got ", x.scalar_type());
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  for (int64_t i = 0, n = in.numel(); i < n; ++i) {
    dst[i] = -src[i];
  }
  return out;
}

TORCH_LIBRARY(KERNEL_NS, m) { m.def("negate(Tensor x) -> Tensor"); }

TORCH_LIBRARY_IMPL(KERNEL_NS, CPU, m) { m.impl("negate", &negate_cpu); }
