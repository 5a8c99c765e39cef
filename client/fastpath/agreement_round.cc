#include "client/fastpath/agreement_round.h"

#include <cstring>
#include <string>

namespace tutti::client {
namespace {

// One member's message: a fixed header, then its bitmap.
struct Header {
  uint64_t generation;
  uint64_t round;
  uint32_t slots;
  uint32_t leave;
  int32_t rank;
  uint32_t reserved;
};
static_assert(sizeof(Header) == 32);

}  // namespace

Status RunAgreementRound(transport::Context* context, const MemberList& members, int32_t self,
                         uint64_t round, const FastPathInput& input, bool leave,
                         transport::Deadline deadline, std::vector<char>* scratch,
                         RoundOutcome* outcome) {
  const size_t n = members.size();
  const size_t bitmap_bytes = input.bitmap.size();
  const size_t message = sizeof(Header) + bitmap_bytes;
  scratch->resize(n * message);
  char* blocks = scratch->data();
  const size_t me = members.IndexOf(self);
  Header header{input.generation, round, input.slots, leave ? 1u : 0u, self, 0};
  std::memcpy(blocks + me * message, &header, sizeof(header));
  if (bitmap_bytes > 0)
    std::memcpy(blocks + me * message + sizeof(Header), input.bitmap.data(), bitmap_bytes);

  // Ring allgather: at step k, pass on the block that came k steps ago.
  const int32_t next = members.Next(self), previous = members.Previous(self);
  for (size_t k = 0; k + 1 < n; ++k) {
    const size_t send = (me + n - k) % n, recv = (me + n - k - 1) % n;
    TUTTI_RETURN_IF_ERROR(context->SendRecv(next, blocks + send * message, message, previous,
                                            blocks + recv * message, message, deadline));
  }

  outcome->agreed.clear();
  outcome->leave = false;
  std::vector<uint8_t> all(input.bitmap);
  for (size_t i = 0; i < n; ++i) {
    Header theirs;
    std::memcpy(&theirs, blocks + i * message, sizeof(theirs));
    if (theirs.generation != header.generation || theirs.round != header.round ||
        theirs.slots != header.slots || theirs.rank != members[i])
      return Status(Code::kInternal,
                    "fast path out of step: rank " + std::to_string(members[i]) +
                        " is in round " + std::to_string(theirs.round) + " of generation " +
                        std::to_string(theirs.generation) + ", this rank in round " +
                        std::to_string(round) + " of generation " +
                        std::to_string(header.generation));
    if (theirs.leave) outcome->leave = true;
    const auto* bits = reinterpret_cast<const uint8_t*>(blocks + i * message + sizeof(Header));
    for (size_t b = 0; b < bitmap_bytes; ++b) all[b] &= bits[b];
  }
  for (size_t b = 0; b < bitmap_bytes; ++b)
    for (uint32_t bit = 0; bit < 8; ++bit)
      if (all[b] & (1u << bit)) outcome->agreed.push_back(static_cast<uint32_t>(b * 8 + bit));
  return Status::Ok();
}

}  // namespace tutti::client
