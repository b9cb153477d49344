#include "exec/volatility.h"

#include <mutex>
#include <unordered_map>

#include "exec/context.h"

namespace torch_tpu::exec {

namespace {

// Compiles of one shape-free structure before its site counts as volatile: a few shapes (warm-up,
// a last partial batch) are normal.
constexpr int kVolatileAfterCompiles = 8;

struct SiteCompiles {
  std::mutex mutex;
  std::unordered_map<ir::Signature, int, ir::SignatureHash> counts;
};

SiteCompiles& Sites() {
  static SiteCompiles* sites = new SiteCompiles();
  return *sites;
}

}  // namespace

void NoteCompiledCut(const ir::Program& program) {
  const ir::Signature site = ir::ComputeSignature(program, 0, /*with_shapes=*/false);
  SiteCompiles& sites = Sites();
  int count = 0;
  {
    std::lock_guard<std::mutex> lock(sites.mutex);
    count = ++sites.counts[site];
  }
  if (count != kVolatileAfterCompiles) return;
  GetMetrics().volatile_programs++;
  Warn("torch_tpu: a fused program has compiled " + std::to_string(count) +
       " times with only its shapes changed: a dimension that grows each iteration (a KV "
       "cache), or inputs whose sizes change from batch to batch (padding each batch to its "
       "longest sequence). Each new shape compiles again. Static shapes avoid this: for Hugging "
       "Face generate(), cache_implementation=\"static\"; for batches, padding to a few fixed "
       "lengths (a tokenizer's padding=\"max_length\", or pad_to_multiple_of in its data "
       "collator) and drop_last=True. This site counts in torch_tpu.metrics volatile_programs.");
}

}  // namespace torch_tpu::exec
