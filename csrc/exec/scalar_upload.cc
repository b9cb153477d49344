#include "exec/scalar_upload.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "exec/context.h"
#include "exec/profile.h"
#include "exec/storage.h"

namespace torch_tpu::exec {

namespace {

constexpr size_t kMaxKeptUploads = 256;

struct KeptUploads {
  std::mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<runtime::Buffer>> by_content;
  std::deque<std::string> oldest_first;
};

// Leaked: the buffers must not be destroyed after the plugin at exit.
KeptUploads& Kept() {
  static auto* kept = new KeptUploads();
  return *kept;
}

// The device, the dtype and the bytes: one upload serves every program that passes these values.
std::string ContentKey(const std::vector<uint8_t>& bytes, ir::DType dtype, int device) {
  std::string key;
  key.reserve(bytes.size() + 2);
  key.push_back(static_cast<char>(device));
  key.push_back(static_cast<char>(dtype));
  key.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return key;
}

std::shared_ptr<runtime::Buffer> Upload(const std::vector<uint8_t>& bytes, ir::DType dtype,
                                        const runtime::Device& device) {
  GetMetrics().scalar_uploads++;
  ProfiledScope profiled(ActivityKind::kTransferToDevice, device.index());
  if (profiled.active()) {
    profiled.activity().name = "copy host to tpu (scalars)";
    profiled.activity().bytes = static_cast<int64_t>(bytes.size());
  }
  const auto count = static_cast<int64_t>(bytes.size() / ir::ByteSize(dtype));
  return GetClient().BufferFromHost(bytes.data(), ToElementType(dtype), {count}, device);
}

}  // namespace

// HostScalar bytes are little-endian values.
std::vector<uint8_t> ScalarPackBytes(const ir::ScalarPack& pack) {
  const size_t size = ir::ByteSize(pack.dtype);
  std::vector<uint8_t> bytes(size * pack.scalars.size());
  for (size_t i = 0; i < pack.scalars.size(); ++i) {
    std::memcpy(bytes.data() + i * size, pack.scalars[i]->scalar.bytes, size);
  }
  return bytes;
}

std::shared_ptr<runtime::Buffer> UploadScalars(const std::vector<uint8_t>& bytes, ir::DType dtype,
                                               const runtime::Device& device) {
  std::string key = ContentKey(bytes, dtype, device.index());
  KeptUploads& kept = Kept();
  {
    std::lock_guard<std::mutex> lock(kept.mutex);
    auto found = kept.by_content.find(key);
    if (found != kept.by_content.end()) return found->second;
  }
  std::shared_ptr<runtime::Buffer> buffer = Upload(bytes, dtype, device);
  std::shared_ptr<runtime::Buffer> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(kept.mutex);
  if (!kept.by_content.emplace(key, buffer).second) return buffer;  // another thread kept one
  kept.oldest_first.push_back(std::move(key));
  if (kept.oldest_first.size() > kMaxKeptUploads) {
    auto oldest = kept.by_content.find(kept.oldest_first.front());
    dropped = std::move(oldest->second);
    kept.by_content.erase(oldest);
    kept.oldest_first.pop_front();
  }
  return buffer;
}

std::shared_ptr<runtime::Buffer> UploadScalarPack(const ir::ScalarPack& pack,
                                                  const runtime::Device& device) {
  return UploadScalars(ScalarPackBytes(pack), pack.dtype, device);
}

void ClearScalarUploads() {
  std::unordered_map<std::string, std::shared_ptr<runtime::Buffer>> dropped;
  KeptUploads& kept = Kept();
  std::lock_guard<std::mutex> lock(kept.mutex);
  dropped.swap(kept.by_content);
  kept.oldest_first.clear();
}

}  // namespace torch_tpu::exec
