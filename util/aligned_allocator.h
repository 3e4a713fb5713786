// CacheLineAllocator: a std::allocator whose blocks start at a fixed offset past a page
// boundary, a multiple of 64 bytes (0 by default), so that tensor buffers begin on a cache line
// (a zmm load of the first elements never splits one) and sit at the same place within their
// pages in every process: a kernel's speed depends on its buffers' relative placement (4 KiB
// aliasing between loads and stores), and a schedule timed in one process must time the same
// in another. Blocks of 1 MiB or more have their pages populated at once (kPopulatedBytes).
// Blocks of 4 MiB or more (kHugeBytes, numpy's threshold for the same advice) are fresh pages
// mapped for them, starting on a 2 MiB boundary (plus the offset), spanning whole 2 MiB pages
// and advised to the kernel as transparent huge pages before they are populated, as numpy's
// arrays of the size are: in 4 KiB pages a kernel's speed over a large tensor depends on where
// its pages fall in physical memory (which cache sets they share), so it changes from one
// process, or one buffer, to the next; in huge pages less (on a VM the host's backing of them
// still counts). Where the host's transparent huge pages are `never`, the advice does nothing
// and the pages are 4 KiB ones, as before.
#ifndef LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_
#define LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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

  // The bytes a block of `n` elements takes: its whole pages, the offset included; from
  // kHugeBytes on, its whole 2 MiB pages.
  std::size_t BlockBytes(std::size_t n) const {
    const std::size_t bytes = (n * sizeof(T) + offset + kPage - 1) / kPage * kPage;
    return bytes >= kHugeBytes ? (bytes + kHugePage - 1) / kHugePage * kHugePage : bytes;
  }

  T* allocate(std::size_t n) {
    const std::size_t bytes = BlockBytes(n);
    void* p = bytes >= kHugeBytes ? MapHuge(bytes)
                                  : std::aligned_alloc(kPage, bytes == 0 ? kPage : bytes);
    if (!p) throw std::bad_alloc();
    // Large blocks' pages made present and writable in one call, not a fault per page as they
    // are first written (a no-op where malloc reuses pages it has; ignored where the kernel
    // lacks the call). Below kHugeBytes the pages are malloc's: what a caller's buffer of the
    // size would get; from it on, MapHuge's.
    if (bytes >= kPopulatedBytes) madvise(p, bytes, MADV_POPULATE_WRITE);
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset);
  }
  void deallocate(T* p, std::size_t n) {
    void* block = reinterpret_cast<char*>(p) - offset;
    const std::size_t bytes = BlockBytes(n);
    if (bytes >= kHugeBytes) {
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
#ifndef MADV_POPULATE_WRITE
  static constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
  static constexpr std::size_t kPopulatedBytes = std::size_t{1} << 20;

  // `bytes` (a multiple of kHugePage) of fresh pages mapped on a kHugePage boundary and advised
  // as huge pages before any is present, so that their population faults huge pages in (malloc
  // could hand back pages it already holds, present as 4 KiB ones); nullptr where the mapping
  // fails. The advice is ignored where the kernel has no transparent huge pages.
  static void* MapHuge(std::size_t bytes) {
    void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const std::uintptr_t end = start + bytes + kHugePage;
    if (end > aligned + bytes) {
      munmap(reinterpret_cast<void*>(aligned + bytes), end - aligned - bytes);
    }
    void* p = reinterpret_cast<void*>(aligned);
    madvise(p, bytes, MADV_HUGEPAGE);
    return p;
  }

 public:
  static constexpr std::size_t kHugeBytes = std::size_t{4} << 20;
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
};

}  // namespace looptool

#endif  // LOOPTOOL_UTIL_ALIGNED_ALLOCATOR_H_
