// CacheLineAllocator: a std::allocator whose blocks start on a 64-byte boundary, so that tensor
// buffers begin on a cache line (and a zmm load of the first elements never splits one).
#ifndef LOOPTOOL_BACKEND_UTIL_ALIGNED_ALLOCATOR_H_
#define LOOPTOOL_BACKEND_UTIL_ALIGNED_ALLOCATOR_H_

#include <cstddef>
#include <cstdlib>
#include <new>

namespace looptool {

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: allocator conversion

  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_UTIL_ALIGNED_ALLOCATOR_H_
