#pragma once

namespace torch_tpu::runtime {

// On the CPU plugin a device buffer is a block of the process's malloc heap. glibc gives a freed
// heap top back to the OS once it passes a trim threshold that tracks the largest freed block, so
// a step that frees its outputs and allocates them again page-faults (and zeroes) every page
// anew: about a quarter of a strict GPT-2 training step. These keep the heap instead, as a
// caching allocator would.

// Serves blocks below 32 MiB from the heap and keeps up to 512 MiB of free heap for reuse (the
// worker threads' arenas included). Changes nothing when the user configured malloc
// (MALLOC_*_THRESHOLD_, MALLOC_TOP_PAD_, glibc.malloc tunables) or set TORCH_TPU_KEEP_HOST_HEAP=0.
void KeepHostHeap();

// Gives kept free heap back to the OS (torch.tpu.empty_cache()): malloc_trim, which releases every
// free page except the free tops of worker threads' arenas (glibc trims those on their own frees).
// A no-op when the heap is not kept.
void ReleaseHostHeap();

}  // namespace torch_tpu::runtime
