// CacheLineAllocator: a std::allocator whose blocks start at a fixed offset past a page
// boundary, a multiple of 64 bytes (0 by default), so that tensor buffers begin on a cache line
// (a zmm load of the first elements never splits one) and sit at the same place within their
// pages in every process: a kernel's speed depends on its buffers' relative placement (4 KiB
// aliasing between loads and stores), and a schedule timed in one process must time the same
// in another. Blocks of 1 MiB or more are mapped with their pages populated (kMappedBytes).
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
    const std::size_t bytes = Bytes(n);
    void* p;
    if (bytes >= kMappedBytes) {
      p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
               -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
    } else {
      p = std::aligned_alloc(kPage, bytes);
      if (!p) throw std::bad_alloc();
    }
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset);
  }
  void deallocate(T* p, std::size_t n) {
    char* block = reinterpret_cast<char*>(p) - offset;
    const std::size_t bytes = Bytes(n);
    if (bytes >= kMappedBytes) {
      munmap(block, bytes);
    } else {
      std::free(block);
    }
  }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>& other) const { return offset == other.offset; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>& other) const { return offset != other.offset; }

  std::size_t offset = 0;

 private:
  // Blocks of this many bytes or more are mapped with their pages populated at once: one call
  // instead of a page fault per 4 KiB page as the buffer is first written (the pages stay small,
  // so a kernel's TLB behaviour is what it would be in a caller's malloc'd buffer).
  static constexpr std::size_t kMappedBytes = std::size_t{1} << 20;
  std::size_t Bytes(std::size_t n) const {
    const std::size_t bytes = (n * sizeof(T) + offset + kPage - 1) / kPage * kPage;
    return bytes == 0 ? kPage : bytes;
  }
};

}  // namespace looptool

#endif  // LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_
