// The process-wide matmul/convolution precision mode (DESIGN.md "Platforms and numerics"),
// DEFAULT unless set. torch_tpu owns it rather than reading torch's float32 matmul precision,
// whose default ("highest") is the wrong default here and which also steers CPU kernels; the
// Python layer forwards torch.set_float32_matmul_precision calls to it. Lowerings read it, and
// since the mode changes the ops they record, it becomes part of each program's signature.
#pragma once

namespace torch_tpu::ops {

enum class Precision {
  kDefault,  // bf16 operands, f32 accumulation ("medium")
  kHigh,     // three bf16 passes (bf16x3) ("high")
  kHighest,  // f32 ("highest")
};

Precision MatmulPrecision();
void SetMatmulPrecision(Precision precision);

}  // namespace torch_tpu::ops
