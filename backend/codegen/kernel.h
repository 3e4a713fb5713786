// Kernel: a compiled loop nest. Owns its read-execute code pages; the entry point is valid
// until the Kernel is destroyed. Move-only.
#ifndef LOOPTOOL_BACKEND_CODEGEN_KERNEL_H_
#define LOOPTOOL_BACKEND_CODEGEN_KERNEL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace looptool {

class Kernel {
 public:
  // `void kernel(float* const* tensors)`: one base pointer per tensor of the program, by id.
  using Entry = void (*)(float* const* tensors);

  // Copies position-independent machine code into fresh pages and makes them read-execute.
  // RESOURCE_EXHAUSTED when the pages cannot be mapped.
  static absl::StatusOr<Kernel> FromCode(const uint8_t* code, size_t size);

  Kernel(Kernel&& other) noexcept;
  Kernel& operator=(Kernel&& other) noexcept;
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  ~Kernel();

  void Run(float* const* tensors) const { entry_(tensors); }
  Entry entry() const { return entry_; }
  // The entry point as another signature (the peak kernel takes an iteration count).
  template <typename Fn>
  Fn EntryAs() const {
    return reinterpret_cast<Fn>(pages_);
  }
  size_t code_size() const { return size_; }

 private:
  Kernel(void* pages, size_t mapped, size_t size);
  void Release();

  void* pages_ = nullptr;
  size_t mapped_ = 0;
  size_t size_ = 0;
  Entry entry_ = nullptr;
};

}  // namespace looptool

#endif  // LOOPTOOL_BACKEND_CODEGEN_KERNEL_H_
