// The tpu device generator: a (seed, offset) pair. Each random op consumes one offset, and the
// pair is passed to the program as runtime parameters (the key of rng_bit_generator).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <mutex>
#include <utility>

namespace torch_tpu::aten {

class TpuGenerator : public c10::GeneratorImpl {
 public:
  explicit TpuGenerator(c10::DeviceIndex device);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }
  // (seed, offset) for one random op; advances the offset.
  std::pair<uint64_t, uint64_t> NextKey();

 private:
  TpuGenerator* clone_impl() const override;
  uint64_t seed_ = 67280421310721ull;
  uint64_t offset_ = 0;
  std::mutex mutex_;
};

const at::Generator& DefaultGenerator(c10::DeviceIndex device);
void RegisterDeviceHooks();
void SynchronizeDevice();

}  // namespace torch_tpu::aten
