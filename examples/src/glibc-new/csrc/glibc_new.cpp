// scale: x * factor, with the factor kept behind a std::shared_ptr.
//
// Compiled WITHOUT the sys/single_threaded.h shim: GCC 12's libstdc++ then
// reads glibc's `__libc_single_threaded` for shared_ptr reference counting,
// so this shared object needs GLIBC_2.32 and cannot be manylinux_2_28 (the
// negative audit case).
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <memory>

namespace {

struct Factor {
  explicit Factor(double v) : value(v) {}
  double value;
};

std::shared_ptr<const Factor> make_factor(double v) { return std::make_shared<const Factor>(v); }

}  // namespace

at::Tensor scale_cpu(const at::Tensor& x, double factor) {
  TORCH_CHECK(x.device().is_cpu(), "scale: expected a CPU tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "scale: expected float32, got ", x.scalar_type());
  std::shared_ptr<const Factor> f = make_factor(factor);
  std::shared_ptr<const Factor> copy = f;  // a copy: atomic increment and decrement
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const float v = static_cast<float>(copy->value);
  for (int64_t i = 0, n = in.numel(); i < n; ++i) {
    dst[i] = src[i] * v;
  }
  return out;
}

TORCH_LIBRARY(KERNEL_NS, m) { m.def("scale(Tensor x, float factor) -> Tensor"); }

TORCH_LIBRARY_IMPL(KERNEL_NS, CPU, m) { m.impl("scale", &scale_cpu); }
