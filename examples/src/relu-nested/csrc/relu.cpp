// relu: max(x, 0) elementwise, for float32 and float64 CPU tensors.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

template <typename T>
static void relu_loop(const T* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = src[i] > T(0) ? src[i] : T(0);
  }
}

at::Tensor relu_cpu(const at::Tensor& x) {
  TORCH_CHECK(x.device().is_cpu(), "relu: expected a CPU tensor");
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  switch (x.scalar_type()) {
    case at::kFloat:
      relu_loop(in.data_ptr<float>(), out.data_ptr<float>(), in.numel());
      break;
    case at::kDouble:
      relu_loop(in.data_ptr<double>(), out.data_ptr<double>(), in.numel());
      break;
    default:
      TORCH_CHECK(false, "relu: expected float32 or float64, got ", x.scalar_type());
  }
  return out;
}

TORCH_LIBRARY(KERNEL_NS, m) { m.def("relu(Tensor x) -> Tensor"); }

TORCH_LIBRARY_IMPL(KERNEL_NS, CPU, m) { m.impl("relu", &relu_cpu); }
