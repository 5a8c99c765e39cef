// The stand-in for ibverbs_setup.cc in a build without libibverbs (TUTTI_IBVERBS=OFF, or AUTO
// where libibverbs-dev was missing): the backend stays in the table, so that
// TUTTI_TRANSPORT=ibverbs is refused with this reason rather than as an unknown name, and so that
// an ibverbs hello from a peer built with it is refused and the pair carried over TCP.
#include "transport/ibverbs/ibverbs_setup.h"

namespace tutti::transport::ibverbs {
namespace {

Status NotBuilt() {
  return Status(Code::kInternal, "ibverbs: this libtutti was built without libibverbs");
}

}  // namespace

bool IbverbsViable(std::string* why) {
  *why = "this libtutti was built without libibverbs (TUTTI_IBVERBS=OFF, or libibverbs-dev "
         "was missing at build time)";
  return false;
}

Status ConnectQueuePair(const Bootstrap&, UniqueFd*, std::unique_ptr<Channel>*, bool*) {
  return NotBuilt();
}

Status AcceptQueuePair(const Bootstrap&, const QpParams&, UniqueFd*, std::unique_ptr<Channel>*) {
  return NotBuilt();
}

}  // namespace tutti::transport::ibverbs
