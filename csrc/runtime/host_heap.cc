#include "runtime/host_heap.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace torch_tpu::runtime {

namespace {

std::atomic<bool> g_kept{false};

// The user configured malloc, or opted out.
bool MallocLeftAlone() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) return true;
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* keep = std::getenv("TORCH_TPU_KEEP_HOST_HEAP");
  return keep != nullptr && std::strcmp(keep, "0") == 0;
}

}  // namespace

void KeepHostHeap() {
#if defined(__GLIBC__)
  if (MallocLeftAlone()) return;
  // 32 MiB is the largest threshold glibc's own adaptation reaches; setting either value also
  // stops that adaptation, so both are set.
  // The plugin's worker threads allocate from arenas of their own, made of 64 MiB heaps. glibc
  // unmaps such a heap as soon as it is all free, whatever the trim threshold, unless its free
  // space is below the top pad: a 64 MiB pad keeps those heaps too. (For the main heap the pad
  // only reserves address space beyond each growth; the pages are not touched until used.)
  g_kept.store(mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&
               mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1 && mallopt(M_TOP_PAD, 64 << 20) == 1);
#endif
}

void ReleaseHostHeap() {
#if defined(__GLIBC__)
  if (g_kept.load()) malloc_trim(0);
#endif
}

}  // namespace torch_tpu::runtime
