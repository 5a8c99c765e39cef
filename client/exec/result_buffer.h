// Memory for results the library hands to the application (allgather, reducescatter, alltoall),
// taken from the application's allocator when it gave one (a GPU build can then reuse its own
// pool instead of an allocation per op), else from malloc.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace tutti::client {

struct Allocator {
  void* (*allocate)(size_t bytes, void* user) = nullptr;
  void (*deallocate)(void* pointer, size_t bytes, void* user) = nullptr;
  void* user = nullptr;
};

class ResultBuffer {
 public:
  ResultBuffer() = default;
  ~ResultBuffer() { Release(); }
  ResultBuffer(const ResultBuffer&) = delete;
  ResultBuffer& operator=(const ResultBuffer&) = delete;

  // Kept by value: a request (and its result) may outlive the runtime that ran it.
  void set_allocator(const Allocator& allocator) { allocator_ = allocator; }

  // Replaces the contents with `bytes` uninitialized bytes; false if the allocator had none.
  bool Allocate(size_t bytes) {
    Release();
    if (bytes == 0) return true;
    void* memory = allocator_.allocate ? allocator_.allocate(bytes, allocator_.user) : std::malloc(bytes);
    if (memory == nullptr) return false;
    data_ = static_cast<char*>(memory);
    size_ = bytes;
    return true;
  }

  // Takes `data` (`bytes` long, allocated elsewhere, e.g. device memory), to be given back
  // through `owner`'s deallocate.
  void Adopt(void* data, size_t bytes, const Allocator& owner) {
    Release();
    allocator_ = owner;
    data_ = static_cast<char*>(data);
    size_ = bytes;
  }

  char* data() const { return data_; }
  size_t size() const { return size_; }

  // Gives the memory back to the allocator now.
  void Release() {
    if (data_ == nullptr) return;
    if (allocator_.deallocate)
      allocator_.deallocate(data_, size_, allocator_.user);
    else
      std::free(data_);
    data_ = nullptr;
    size_ = 0;
  }

 private:
  Allocator allocator_;
  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tutti::client
