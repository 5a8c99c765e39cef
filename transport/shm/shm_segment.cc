#include "transport/shm/shm_segment.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace tutti::transport {
namespace {

constexpr size_t kPage = 4096;

size_t DataOffset() { return (sizeof(ShmHeader) + kPage - 1) / kPage * kPage; }

Status Failed(const std::string& what) {
  return Status(Code::kInternal, "shared memory: " + what + ": " + std::strerror(errno));
}

}  // namespace

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

Status ShmSegment::MapFd(int fd, size_t bytes, ShmSegment* segment) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Failed("mmap");
  segment->base_ = static_cast<char*>(base);
  segment->bytes_ = bytes;
  segment->data_offset_ = DataOffset();
  segment->header_ = reinterpret_cast<ShmHeader*>(base);
  return Status::Ok();
}

Status ShmSegment::Create(size_t capacity, ShmSegment* segment, UniqueFd* fd) {
  UniqueFd memfd(memfd_create("tutti-shm", MFD_CLOEXEC));
  if (!memfd) return Failed("memfd_create");
  const size_t bytes = DataOffset() + 2 * capacity;
  if (ftruncate(memfd.get(), static_cast<off_t>(bytes)) != 0) return Failed("ftruncate");
  TUTTI_RETURN_IF_ERROR(MapFd(memfd.get(), bytes, segment));
  // The pages are fresh zeros; constructing the header in place makes the atomics official.
  ShmHeader* header = new (segment->base_) ShmHeader{};
  header->capacity = capacity;
  header->magic = kShmMagic;
  segment->capacity_ = capacity;
  *fd = std::move(memfd);
  return Status::Ok();
}

Status ShmSegment::Map(int fd, ShmSegment* segment) {
  struct stat info {};
  if (fstat(fd, &info) != 0) return Failed("fstat");
  const size_t bytes = static_cast<size_t>(info.st_size);
  if (bytes < DataOffset())
    return Status(Code::kInternal, "shared memory: the peer's segment is too small");
  TUTTI_RETURN_IF_ERROR(MapFd(fd, bytes, segment));
  const ShmHeader* header = segment->header_;
  const uint64_t capacity = header->capacity;
  if (header->magic != kShmMagic || capacity < 64 || capacity > (bytes - DataOffset()) / 2 ||
      DataOffset() + 2 * capacity != bytes || (capacity & (capacity - 1)) != 0)
    return Status(Code::kInternal, "shared memory: the peer's segment has a foreign layout");
  segment->capacity_ = capacity;
  return Status::Ok();
}

}  // namespace tutti::transport
