#include "backend/codegen/kernel.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace looptool {

absl::StatusOr<Kernel> Kernel::FromCode(const uint8_t* code, size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (size + page - 1) / page * page;
  void* pages = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", mapped, " bytes of code"));
  }
  std::memcpy(pages, code, size);
  if (mprotect(pages, mapped, PROT_READ | PROT_EXEC) != 0) {
    munmap(pages, mapped);
    return absl::ResourceExhaustedError("cannot make kernel code executable");
  }
  return Kernel(pages, mapped, size);
}

Kernel::Kernel(void* pages, size_t mapped, size_t size)
    : pages_(pages), mapped_(mapped), size_(size), entry_(reinterpret_cast<Entry>(pages)) {}

Kernel::Kernel(Kernel&& other) noexcept
    : pages_(std::exchange(other.pages_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)),
      size_(std::exchange(other.size_, 0)),
      entry_(std::exchange(other.entry_, nullptr)) {}

Kernel& Kernel::operator=(Kernel&& other) noexcept {
  if (this != &other) {
    Release();
    pages_ = std::exchange(other.pages_, nullptr);
    mapped_ = std::exchange(other.mapped_, 0);
    size_ = std::exchange(other.size_, 0);
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

Kernel::~Kernel() { Release(); }

void Kernel::Release() {
  if (pages_) munmap(pages_, mapped_);
  pages_ = nullptr;
}

}  // namespace looptool
