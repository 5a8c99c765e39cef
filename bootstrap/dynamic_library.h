// A shared library opened at run time (dlopen), for the launcher libraries tutti uses only where
// a launcher offers them: libtutti.so never links them. The handle is never closed: PMIx and
// PMI2 keep threads and connections of their own that must outlive any one tutti_init.
#pragma once

#include <dlfcn.h>

#include <string>

#include "common/status.h"

namespace tutti::bootstrap {

class DynamicLibrary {
 public:
  // `why`: what needs it, for the message if it cannot be loaded ("srun --mpi=pmi2 ...").
  Status Open(const char* file, const std::string& why) {
    handle_ = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
    if (handle_ != nullptr) return Status::Ok();
    const char* error = dlerror();
    return Status(Code::kInvalidArgument, why + ", but " + file + " cannot be loaded (" +
                                              (error != nullptr ? error : "unknown error") +
                                              "): install it, or set TUTTI_COORDINATOR");
  }

  // Resolves `symbol` into `*fn`; false (and `*missing` names it) if the library lacks it.
  template <typename Fn>
  bool Resolve(const char* symbol, Fn* fn, std::string* missing) {
    *fn = reinterpret_cast<Fn>(dlsym(handle_, symbol));
    if (*fn == nullptr && missing->empty()) *missing = symbol;
    return *fn != nullptr;
  }

 private:
  void* handle_ = nullptr;
};

}  // namespace tutti::bootstrap
