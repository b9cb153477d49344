#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "runtime/pjrt.h"

namespace torch_tpu::exec {

// A scalar pack's values as the bytes of a 1-D array.
std::vector<uint8_t> ScalarPackBytes(const ir::ScalarPack& pack);

// The device copy of a program's scalar argument. A plugin's host-to-device copy costs
// microseconds, and most packs repeat (a strict `x * 0.5`, a step's constants, a learning rate
// that stays put), so copies are kept by content and passed again: programs only read them.
// At most a few hundred are kept, the oldest dropped first (random keys never repeat).
std::shared_ptr<runtime::Buffer> UploadScalars(const std::vector<uint8_t>& bytes, ir::DType dtype,
                                               const runtime::Device& device);
std::shared_ptr<runtime::Buffer> UploadScalarPack(const ir::ScalarPack& pack,
                                                  const runtime::Device& device);

// Drops the kept copies (torch.tpu.empty_cache).
void ClearScalarUploads();

}  // namespace torch_tpu::exec
