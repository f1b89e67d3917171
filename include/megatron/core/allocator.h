// Process-wide allocator tuning for training loops. Training frees and re-allocates the same
// large activation buffers every iteration; glibc serves blocks above 32 MiB with mmap and gives
// them back with munmap, so every iteration page-faults its activations in again (measured: 60%
// of a small CPU run's time in the kernel). Keeping freed memory in the heap removes that.
#pragma once

namespace megatron {

// Serve all allocations from the heap and never trim it (glibc's mallopt). Call once, first thing
// in main(). A no-op on C libraries without mallopt.
void keep_freed_memory_for_reuse();

}  // namespace megatron
