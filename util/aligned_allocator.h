// CacheLineAllocator: a std::allocator whose blocks start at a fixed offset past a page
// boundary, a multiple of 64 bytes (0 by default), so that tensor buffers begin on a cache line
// (a zmm load of the first elements never splits one) and sit at the same place within their
// pages in every process: a kernel's speed depends on its buffers' relative placement (4 KiB
// aliasing between loads and stores), and a schedule timed in one process must time the same
// in another. Blocks of 1 MiB or more have their pages populated at once (kPopulatedBytes).
#ifndef LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_
#define LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace looptool {

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  static constexpr std::size_t kPage = 4096;

  CacheLineAllocator() = default;
  // Blocks start `offset_bytes` (rounded down to a cache line, modulo a page) past a page.
  explicit CacheLineAllocator(std::size_t offset_bytes)
      : offset(offset_bytes % kPage / kAlignment * kAlignment) {}
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>& other) : offset(other.offset) {}  // NOLINT

  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + offset + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, bytes == 0 ? kPage : bytes);
    if (!p) throw std::bad_alloc();
    // Large blocks' pages made present and writable in one call, not a fault per page as they
    // are first written (a no-op where malloc reuses pages it has; ignored where the kernel
    // lacks the call). The pages are malloc's: what a caller's buffer of the size would get.
    if (bytes >= kPopulatedBytes) madvise(p, bytes, MADV_POPULATE_WRITE);
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset);
  }
  void deallocate(T* p, std::size_t) { std::free(reinterpret_cast<char*>(p) - offset); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>& other) const { return offset == other.offset; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>& other) const { return offset != other.offset; }

  std::size_t offset = 0;

 private:
#ifndef MADV_POPULATE_WRITE
  static constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
  static constexpr std::size_t kPopulatedBytes = std::size_t{1} << 20;
};

}  // namespace looptool

#endif  // LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_
