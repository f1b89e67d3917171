// Allocator tuning (see allocator.h).
#include "megatron/core/allocator.h"

#include <cstdlib>  // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace megatron {

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_MAX, 0);             // no mmap-backed blocks: freed memory stays reusable
  mallopt(M_TRIM_THRESHOLD, -1);      // never return the heap top to the OS mid-run
#endif
}

}  // namespace megatron
