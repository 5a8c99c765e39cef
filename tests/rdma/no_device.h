// What the tests expect of the ibverbs backend on a machine without an RDMA device, and how they
// tell whether this is one. The kernel lists RDMA devices under /sys/class/infiniband whatever
// libibverbs says, so that is the independent witness: where it lists one, the "refused" tests
// skip and tests/rdma (rdma_tests) must run instead. TUTTI_TEST_IBVERBS_BUILT comes from CMake
// (whether libtutti was built with libibverbs).
#pragma once

#include <dirent.h>

#include <string>

namespace tutti::testing {

// The device the kernel lists, or "" if none.
inline std::string ListedRdmaDevice() {
  std::string name;
  if (DIR* dir = opendir("/sys/class/infiniband")) {
    while (dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') {
        name = entry->d_name;
        break;
      }
    closedir(dir);
  }
  return name;
}

// Why discovery refuses the backend here: the reason TUTTI_TRANSPORT=ibverbs is refused with.
inline std::string NoRdmaDeviceReason() {
#if TUTTI_TEST_IBVERBS_BUILT
  return "no RDMA device";
#else
  return "this libtutti was built without libibverbs (TUTTI_IBVERBS=OFF, or libibverbs-dev was "
         "missing at build time)";
#endif
}

}  // namespace tutti::testing
