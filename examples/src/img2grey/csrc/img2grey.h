#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#define IMG2GREY_R 0.299f
#define IMG2GREY_G 0.587f
#define IMG2GREY_B 0.114f

inline void img2grey_check(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 3 && x.size(2) == 3, "img2grey: expected a [H, W, 3] tensor, got ", x.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat, "img2grey: expected float32, got ", x.scalar_type());
}
