#include "coordinator_scale/wire_frames.h"

#include <cstring>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "proto/cache_bits.h"

namespace tutti::bench {
namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

std::string Stamped(wire::Frame& frame, const Stamp& stamp) {
  frame.set_membership_epoch(stamp.membership_epoch);
  return wire::Encode(frame, stamp.coordinator_epoch);
}

// Reads the fields of one occurrence of Frame.welcome into `summary` (later ones win, as when
// protobuf merges them).
bool ReadWelcome(CodedInputStream* in, WelcomeSummary* summary) {
  while (uint32_t tag = in->ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    switch (field) {
      case 1:  // peers: counted, skipped
      case 6:  // static_sets
        if (!WireFormatLite::SkipField(in, tag)) return false;
        ++(field == 1 ? summary->peers : summary->static_sets);
        break;
      case 2: case 3: case 4: case 5:
        if (!in->ReadVarint32(&u32)) return false;
        (field == 2   ? summary->local_rank
         : field == 3 ? summary->local_size
         : field == 4 ? summary->cross_rank
                      : summary->cross_size) = static_cast<int32_t>(u32);
        break;
      case 8:
        if (!in->ReadLittleEndian64(&u64)) return false;
        summary->coordinator_epoch = u64;
        break;
      case 13:
        if (!in->ReadVarint64(&u64)) return false;
        summary->membership_epoch = u64;
        break;
      default:
        if (!WireFormatLite::SkipField(in, tag)) return false;
    }
  }
  return true;
}

}  // namespace

std::string RoutingId(int job_index, int32_t rank) {
  // Random-looking, as the client's are (and as ZeroMQ's and tuttid's tables of them see them),
  // but the same in every run: splitmix64 of (job, rank).
  uint64_t x = (static_cast<uint64_t>(job_index) << 32) | static_cast<uint32_t>(rank);
  std::string id(16, '\0');
  for (size_t i = 0; i < id.size(); i += 8) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(&id[i], &z, sizeof(z));
  }
  id[0] = 't';  // ZeroMQ reserves ids that start with a zero byte
  return id;
}

std::string RegisterFrame(const JobShape& job, int32_t rank) {
  wire::Frame frame;
  wire::Register* r = frame.mutable_register_();
  r->set_job(job.job);
  r->set_token(job.token);
  r->set_rank(rank);
  r->set_size(job.size);
  // A host identity as client/host_identity.cc makes them: "hostname/boot id/netns".
  const int32_t host = rank / std::max(job.ranks_per_host, 1);
  r->set_host("node" + std::to_string(host) + "/3f1c9a2e-5b7d-4e21-9c4a-8d2b6f0e1a77/4026531840");
  r->set_data_endpoint("10." + std::to_string(host / 65536 % 256) + "." +
                       std::to_string(host / 256 % 256) + "." + std::to_string(host % 256) + ":" +
                       std::to_string(40000 + rank % job.ranks_per_host));
  r->set_rendezvous_timeout_ms(job.rendezvous_timeout_ms);
  r->set_cache_capacity(job.cache_capacity);
  r->set_fusion_threshold(job.fusion_threshold);
  r->set_no_fast_path(true);
  r->set_transport("auto");
  for (const auto& set : job.static_sets)
    r->add_static_sets()->mutable_ranks()->Add(set.begin(), set.end());
  return wire::Encode(frame);
}

std::vector<wire::TensorSpec> StepTensors(int count) {
  std::vector<wire::TensorSpec> specs(count);
  for (int i = 0; i < count; ++i) {
    wire::TensorSpec& spec = specs[i];
    spec.set_name("model.layers." + std::to_string(i / 4) + ".mlp.weight_" +
                  std::to_string(i % 4) + ".grad");
    spec.set_kind(wire::COLLECTIVE_ALLREDUCE);
    spec.set_dtype(3);  // TUTTI_DTYPE_FLOAT32
    spec.add_shape(256 * (1 + i % 16));
    spec.set_reduce_op(1);  // TUTTI_OP_SUM
    spec.set_prescale(1);
    spec.set_postscale(1);
  }
  return specs;
}

std::string AnnounceFull(const Stamp& stamp, int32_t set_id,
                         const std::vector<wire::TensorSpec>& specs) {
  wire::Frame frame;
  wire::SetTensors* set = frame.mutable_announce()->add_sets();
  set->set_set_id(set_id);
  for (const auto& spec : specs) *set->add_tensors() = spec;
  return Stamped(frame, stamp);
}

std::string AnnounceCached(const Stamp& stamp, int32_t set_id, const std::vector<uint32_t>& slots) {
  wire::Frame frame;
  wire::SetTensors* set = frame.mutable_announce()->add_sets();
  set->set_set_id(set_id);
  wire::EncodeCacheBits(slots, set);
  return Stamped(frame, stamp);
}

std::string SetAddFrame(const Stamp& stamp, uint64_t request_id, const std::vector<int32_t>& ranks,
                        int64_t timeout_ms) {
  wire::Frame frame;
  frame.mutable_set_add()->set_request_id(request_id);
  frame.mutable_set_add()->mutable_ranks()->Add(ranks.begin(), ranks.end());
  frame.mutable_set_add()->set_timeout_ms(timeout_ms);
  return Stamped(frame, stamp);
}

std::string SetRemoveFrame(const Stamp& stamp, uint64_t request_id, int32_t set_id,
                           int64_t timeout_ms) {
  wire::Frame frame;
  frame.mutable_set_remove()->set_request_id(request_id);
  frame.mutable_set_remove()->set_set_id(set_id);
  frame.mutable_set_remove()->set_timeout_ms(timeout_ms);
  return Stamped(frame, stamp);
}

std::string JoinFrame(const Stamp& stamp, uint64_t request_id, int32_t set_id, int64_t timeout_ms) {
  wire::Frame frame;
  frame.mutable_join()->set_request_id(request_id);
  frame.mutable_join()->set_set_id(set_id);
  frame.mutable_join()->set_timeout_ms(timeout_ms);
  return Stamped(frame, stamp);
}

std::string ByeFrame(const Stamp& stamp) {
  wire::Frame frame;
  frame.mutable_bye();
  return Stamped(frame, stamp);
}

bool SummarizeWelcome(const void* data, size_t size, WelcomeSummary* summary) {
  *summary = WelcomeSummary{};
  summary->bytes = size;
  CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(size));
  in.SetTotalBytesLimit(static_cast<int>(wire::kMaxFrameBytes));
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) != 11) {  // Frame.welcome
      if (WireFormatLite::GetTagFieldNumber(tag) > 4) return true;  // another body: not a Welcome
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    const auto limit = in.PushLimit(static_cast<int>(length));
    if (!ReadWelcome(&in, summary)) return false;
    in.PopLimit(limit);
    summary->welcome = true;
  }
  return in.ConsumedEntireMessage();
}

int TensorsReleased(const wire::Execute& execute) {
  int tensors = 0;
  for (const auto& response : execute.responses()) tensors += 1 + response.fused_size();
  return tensors;
}

}  // namespace tutti::bench
