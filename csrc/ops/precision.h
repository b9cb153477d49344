// The process-wide matmul/convolution precision mode (DESIGN.md "Platforms and numerics").
// The ATen layer mirrors torch.get_float32_matmul_precision() into it; lowerings read it, and
// since the mode changes the ops they record, it becomes part of each program's signature.
#pragma once

namespace torch_tpu::ops {

enum class Precision {
  kDefault,  // bf16 operands, f32 accumulation ("medium")
  kHigh,     // three bf16 passes (bf16x3) ("high")
  kHighest,  // f32 ("highest", PyTorch's default)
};

Precision MatmulPrecision();
void SetMatmulPrecision(Precision precision);

}  // namespace torch_tpu::ops
