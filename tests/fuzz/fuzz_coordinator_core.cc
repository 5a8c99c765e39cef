// libFuzzer target: a real CoordinatorCore (tuttid without its socket) driven by a sequence of
// frames from a few fake ranks, with Flush and Tick calls and a fake clock in between, the way
// tuttid's event loop drives it (server/service/coordinator.cc). Input format: fuzz_records.h.
//
// Besides what the sanitizers catch (and exceptions, which would end tuttid), the harness checks
// what a rank relies on:
//  - every frame goes to a routing id that sent something, and is a kind tuttid sends to ranks;
//  - each set's Execute stream reaches a rank numbered from 0 without gaps (the client checks it);
//  - after Tick(now), no deadline is left at or before `now` (else tuttid's loop would spin).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>

#include <google/protobuf/stubs/common.h>
#include <spdlog/spdlog.h>

#include "fuzz_records.h"
#include "server/core/coordinator_core.h"
#include "server/core/message_codec.h"

namespace {

using tutti::server::Clock;
using tutti::server::CoordinatorCore;
using tutti::server::Outbox;
namespace wire = tutti::wire;
namespace fuzz = tutti::fuzz;

// FUZZ_TRACE=1: print what the core sends, to see where a seed goes.
bool trace = false;

[[noreturn]] void Fail(const std::string& what) {
  fprintf(stderr, "fuzz_coordinator_core: %s\n", what.c_str());
  abort();
}

std::string PeerId(int index) { return std::string("\0peer", 5) + static_cast<char>('0' + index); }

class Harness {
 public:
  Harness()
      : core_(fuzz::kRendezvousTimeoutMs, fuzz::kEpoch, Policy(), fuzz::kMaxJobs),
        // Job::Welcome starts leases from the real clock; start the fake one there too.
        now_(Clock::now()) {}

  void Run(const uint8_t* data, size_t size) {
    size_t at = 0;
    while (at < size) {
      const uint8_t tag = data[at++];
      const int peer = tag & 3;
      const auto op = static_cast<fuzz::Op>((tag >> 2) & 3);
      now_ += std::chrono::milliseconds(fuzz::kAdvanceMs[tag >> 4]);
      if (op == fuzz::kTick) {
        Flush();
        Tick();
        continue;
      }
      if (size - at < 2) break;
      const size_t length = data[at] | (size_t{data[at + 1]} << 8);
      at += 2;
      if (size - at < length) break;
      const uint8_t* frame = data + at;
      at += length;
      if (LargeWorld(frame, length)) continue;
      const std::string id = PeerId(peer);
      spoke_.insert(id);
      // A CommId the core relays now came from this peer: every other peer may receive it.
      relayed_from_.clear();
      for (int other = 0; other < fuzz::kPeers; ++other)
        if (other != peer) relayed_from_[PeerId(other)] = id;
      core_.HandleFrame(id, frame, length, now_, &out_);
      Check();
      relayed_from_.clear();
      if (op == fuzz::kFrameFlush || op == fuzz::kFrameFlushTick) Flush();
      if (op == fuzz::kFrameFlushTick) Tick();
    }
    Flush();
    now_ += std::chrono::minutes(10);
    Tick();
    core_.GoingAway(&out_);
    Check();
    // Past every deadline a frame can ask for (kMaxTimeoutMs), every job has ended one way or
    // another (left, lost, timed out): one still held would take a --max-jobs slot for good.
    now_ += std::chrono::milliseconds(2 * tutti::server::kMaxTimeoutMs);
    Tick();
    if (core_.job_count() != 0)
      Fail(std::to_string(core_.job_count()) + " jobs outlived every deadline and every rank");
  }

 private:
  // A job costs tuttid memory and time in proportion to the world size its first registration
  // declares (up to kMaxWorldSize, 2^20: some 200 MB and a second under ASan each), so a few such
  // frames per input would turn every run into a timeout or an out-of-memory. Four fake ranks
  // need small worlds only: larger registrations are dropped here.
  static bool LargeWorld(const uint8_t* data, size_t size) {
    wire::Frame frame;
    return frame.ParseFromArray(data, static_cast<int>(size)) && frame.has_register_() &&
           frame.register_().size() > fuzz::kMaxWorldSize;
  }

  static tutti::server::Job::Policy Policy() {
    tutti::server::Job::Policy policy{};
    policy.heartbeat_interval_ms = fuzz::kHeartbeatMs;
    policy.lease_ms = fuzz::kLeaseMs;
    policy.stall_warning_ms = fuzz::kStallWarningMs;
    policy.stall_shutdown_ms = fuzz::kStallShutdownMs;
    return policy;
  }

  void Flush() {
    core_.Flush(&out_);
    Check();
  }

  void Tick() {
    core_.Tick(now_, &out_);
    Check();
    if (auto deadline = core_.NextDeadline(); deadline && *deadline <= now_)
      Fail("a deadline is still due after Tick: tuttid's event loop would spin");
  }

  // Checks and drops what the core sent.
  void Check() {
    for (auto& o : out_) {
      if (trace) Trace(o);
      if (!spoke_.count(o.peer)) Fail("a frame to a routing id that never sent anything");
      const wire::Frame frame = tutti::server::frames::Decode(o);
      switch (frame.body_case()) {
        case wire::Frame::kWelcome:
          // A new job for this routing id: its set streams start over. A rank added to a
          // running elastic job (Welcome.members) joins the world's stream where it is.
          for (auto it = next_seq_.begin(); it != next_seq_.end();)
            it = it->first.first == o.peer ? next_seq_.erase(it) : std::next(it);
          if (frame.welcome().members_size() > 0) joined_midstream_.insert(o.peer);
          else joined_midstream_.erase(o.peer);
          membership_epoch_[o.peer] = frame.welcome().membership_epoch();
          break;
        case wire::Frame::kExecute: {
          const std::pair<std::string, int32_t> key{o.peer, frame.execute().set_id()};
          if (!next_seq_.count(key) && joined_midstream_.count(o.peer))
            next_seq_[key] = frame.execute().seq();
          uint64_t& expected = next_seq_[key];
          if (frame.execute().seq() != expected)
            Fail("set " + std::to_string(frame.execute().set_id()) + ": Execute seq " +
                 std::to_string(frame.execute().seq()) + " where " + std::to_string(expected) +
                 " was due");
          ++expected;
          if (frame.execute().responses_size() == 0 && frame.execute().cache_evicted_size() == 0)
            Fail("an empty Execute");
          break;
        }
        case wire::Frame::kCommId: {
          // Relayed from a set's first member to the others, never back to the sender, and only
          // ids a member could have generated.
          const auto relayed = relayed_from_.find(o.peer);
          if (relayed == relayed_from_.end() || relayed->second == o.peer)
            Fail("a CommId relayed to its sender or to a rank that sent none");
          if (frame.comm_id().id().empty() ||
              frame.comm_id().id().size() > tutti::server::kMaxCommIdBytes ||
              frame.comm_id().device_group() < 0)
            Fail("a CommId relayed with a bad id or device group");
          break;
        }
        case wire::Frame::kReformed: {
          // An elastic job's next epoch (docs/elastic.md): later than the last one this routing
          // id heard, over at least one live slot, ascending.
          const wire::Reformed& reformed = frame.reformed();
          uint64_t& last = membership_epoch_[o.peer];
          if (reformed.membership_epoch() <= last)
            Fail("a Reformed that does not move the membership epoch forward");
          last = reformed.membership_epoch();
          if (reformed.members_size() == 0 ||
              !std::is_sorted(reformed.members().begin(), reformed.members().end()))
            Fail("a Reformed without ascending live slots");
          break;
        }
        case wire::Frame::kSetReply:
        case wire::Frame::kRefusal:
        case wire::Frame::kHeartbeat:
        case wire::Frame::kFault:
        case wire::Frame::kCoordinatorCounters:
        case wire::Frame::kProbe:
        case wire::Frame::kRanksWaiting:
          break;
        default:
          Fail("a frame of a kind tuttid never sends: " + std::to_string(frame.body_case()));
      }
      // What tuttid puts on the wire.
      if (static_cast<int64_t>(o.frame->size() + o.own.size()) > wire::kMaxFrameBytes)
        Fail("a frame over the limit");
    }
    out_.clear();
  }

  static void Trace(const tutti::server::Outgoing& o) {
    const wire::Frame f = tutti::server::frames::Decode(o);
    std::string what;
    switch (f.body_case()) {
      case wire::Frame::kWelcome: what = "welcome"; break;
      case wire::Frame::kSetReply:
        what = "set_reply #" + std::to_string(f.set_reply().request_id()) + " set " +
               std::to_string(f.set_reply().set().id()) + " " + f.set_reply().error().message();
        break;
      case wire::Frame::kRefusal:
        what = "refusal '" + f.refusal().tensor_name() + "' " + f.refusal().error().message();
        break;
      case wire::Frame::kExecute:
        what = "execute set " + std::to_string(f.execute().set_id()) + " seq " +
               std::to_string(f.execute().seq()) + ":";
        for (const auto& r : f.execute().responses()) {
          what += " '" + r.spec().name() + "'";
          if (r.cache_slot()) what += "@" + std::to_string(r.cache_slot() - 1);
          if (r.fused_size()) what += "+" + std::to_string(r.fused_size()) + " fused";
          if (r.device_path() != wire::DEVICE_PATH_HOST)
            what += " path " + std::to_string(r.device_path()) + "/" +
                    std::to_string(r.device_group());
          if (r.has_error()) what += " (" + r.error().message() + ")";
        }
        for (uint32_t slot : f.execute().cache_evicted()) what += " evict " + std::to_string(slot);
        break;
      case wire::Frame::kHeartbeat: what = "heartbeat"; break;
      case wire::Frame::kFault: what = "fault " + f.fault().error().message(); break;
      case wire::Frame::kCoordinatorCounters: what = "counters"; break;
      case wire::Frame::kCommId:
        what = "comm_id set " + std::to_string(f.comm_id().set_id()) + " group " +
               std::to_string(f.comm_id().device_group());
        break;
      default: what = "?"; break;
    }
    fprintf(stderr, "  -> %s: %s\n", o.peer.c_str() + 1, what.c_str());
  }

  CoordinatorCore core_;
  Clock::time_point now_;
  Outbox out_;
  std::set<std::string> spoke_;
  // While a frame is handled: receiver -> the peer whose CommId it may receive.
  std::map<std::string, std::string> relayed_from_;
  std::map<std::pair<std::string, int32_t>, uint64_t> next_seq_;
  std::map<std::string, uint64_t> membership_epoch_;  // the latest each routing id was told
  std::set<std::string> joined_midstream_;  // routing ids welcomed into a running elastic job
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every string field that is not UTF-8; the parse failing is what matters.
  google::protobuf::SetLogHandler(nullptr);
  trace = getenv("FUZZ_TRACE") != nullptr;
  // A refused frame logs a warning: far too many here, unless tracing.
  spdlog::set_level(trace ? spdlog::level::info : spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness harness;
  harness.Run(data, size);
  return 0;
}
