// The one list of data-plane backends. Adding a backend means adding its folder and one line
// here.
#include "transport/backend.h"

#include "transport/ibverbs/ibverbs_backend.h"
#include "transport/pipe/pipe_backend.h"
#include "transport/shm/shm_backend.h"
#include "transport/tcp/tcp_backend.h"

namespace tutti::transport {
namespace {

std::vector<std::unique_ptr<Backend>>& Owned() {
  static std::vector<std::unique_ptr<Backend>> owned;
  return owned;
}

std::vector<const Backend*>& Table() {
  static std::vector<const Backend*> table = [] {
    Owned().push_back(MakeTcpBackend());
    Owned().push_back(MakeShmBackend());
    Owned().push_back(MakePipeBackend());
    Owned().push_back(MakeIbverbsBackend());
    std::vector<const Backend*> listed;
    for (const auto& backend : Owned()) listed.push_back(backend.get());
    return listed;
  }();
  return table;
}

}  // namespace

const std::vector<const Backend*>& Backends() { return Table(); }

const Backend* FindBackend(Link link) {
  for (const Backend* backend : Backends())
    if (backend->link() == link) return backend;
  return nullptr;
}

const Backend* FindBackend(const std::string& name) {
  for (const Backend* backend : Backends())
    if (name == backend->name()) return backend;
  return nullptr;
}

void RegisterBackend(std::unique_ptr<Backend> backend) {
  std::vector<const Backend*>& table = Table();
  table.push_back(backend.get());
  Owned().push_back(std::move(backend));
}

}  // namespace tutti::transport
