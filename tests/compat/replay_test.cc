// A rank of the previous protocol (5) against the current tuttid, without building old code:
// protocol5_job.frames holds what two ranks of commit 58e2465~1 sent a real tuttid of this
// branch during a job (README.md says how it was recorded). Replayed in order against the
// socket-free CoordinatorCore, the ranks must register, negotiate and run their allreduces to
// the end, and every answer must decode under protocol 5's schema (tutti_v5.proto) with nothing
// a protocol-5 rank would not know: that rank ignores the version of frames it receives
// (58e2465~1:client/control/coordinator_link.cc checks the magic only), so the schema is what
// decides whether it can read them.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "proto/versions.h"
#include "server/core/coordinator_core.h"
#include "server/core/frames.h"
#include "tutti_v5.pb.h"

namespace tutti::server {
namespace {

struct Recorded {
  int64_t ms;
  bool in;  // rank -> tuttid
  int connection;
  std::string bytes;
};

std::vector<Recorded> Load() {
  std::ifstream file(TUTTI_COMPAT_DIR "/protocol5_job.frames");
  EXPECT_TRUE(file.good()) << "missing " TUTTI_COMPAT_DIR "/protocol5_job.frames";
  std::vector<Recorded> frames;
  std::string line;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Recorded r;
    std::string direction, hex;
    fields >> r.ms >> direction >> r.connection >> hex;
    r.in = direction == "in";
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      r.bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    frames.push_back(std::move(r));
  }
  return frames;
}

std::string Peer(int connection) { return "v5-rank-" + std::to_string(connection); }

// What the protocol-5 rank reads: tuttid's shared encoding followed by its own part.
wire::v5::Frame AsV5(const Outgoing& o) {
  wire::v5::Frame frame;
  EXPECT_TRUE(frame.ParseFromString(*o.frame + o.own));
  return frame;
}

// Nothing protocol 5 does not know. The lite runtime gives no access to unknown fields, so the
// frame is read with the current schema for each thing protocol 6 added (tutti_v5.proto against
// proto/tutti.proto): Frame.term, the HA bodies, TensorSpec.compression.
void ExpectKnownToV5(const Outgoing& o, const wire::v5::Frame& f, const std::string& to) {
  EXPECT_EQ(f.magic(), wire::kMagic);
  EXPECT_NE(f.body_case(), wire::v5::Frame::BODY_NOT_SET) << "a body protocol 5 lacks, to " << to;
  const wire::Frame now = frames::Decode(o);
  EXPECT_EQ(now.term(), 0u) << "Frame.term to " << to;
  EXPECT_LE(static_cast<int>(now.body_case()), static_cast<int>(wire::Frame::kAtBoundary))
      << "body " << static_cast<int>(now.body_case()) << " (protocol 6 on) to " << to;
  for (const auto& r : now.execute().responses())
    EXPECT_FALSE(r.spec().has_compression()) << "TensorSpec.compression to " << to;
}

TEST(CompatProtocol5, RecordedRanksRegisterNegotiateAndRunTheirAllreducesToTheEnd) {
  const std::vector<Recorded> recorded = Load();
  ASSERT_FALSE(recorded.empty());
  // The recording is of protocol-5 ranks, and of a job that went well against the real tuttid.
  std::map<int, int> recorded_executes;
  for (const Recorded& r : recorded) {
    wire::Frame f;
    ASSERT_TRUE(f.ParseFromString(r.bytes));
    if (r.in) {
      ASSERT_EQ(f.version(), 5u) << "frame at " << r.ms << " ms";
      continue;
    }
    ASSERT_FALSE(f.has_refusal()) << f.refusal().error().message();
    if (f.has_execute()) ++recorded_executes[r.connection];
  }
  ASSERT_EQ(recorded_executes.size(), 2u);

  Job::Policy policy{};
  policy.heartbeat_interval_ms = 1000;  // tuttid's defaults (CoordinatorOptions)
  policy.lease_ms = 5000;
  CoordinatorCore core(60000, /*epoch=*/0x5eed, policy, 16);
  const Clock::time_point start{};
  std::map<std::string, std::vector<Outgoing>> sent;
  for (const Recorded& r : recorded) {
    if (!r.in) continue;
    Outbox out;
    const auto now = start + std::chrono::milliseconds(r.ms);
    core.HandleFrame(Peer(r.connection), r.bytes.data(), r.bytes.size(), now, &out);
    core.Flush(&out);
    core.Tick(now, &out);
    for (Outgoing& o : out) sent[o.peer].push_back(std::move(o));
  }

  for (const auto& [connection, executes] : recorded_executes) {
    const std::string peer = Peer(connection);
    SCOPED_TRACE(peer);
    int welcomes = 0, execute_frames = 0;
    uint64_t next_seq = 0;
    std::map<std::string, int> answered;  // tensor name -> responses in full
    for (const Outgoing& o : sent[peer]) {
      const wire::v5::Frame f = AsV5(o);
      ExpectKnownToV5(o, f, peer);
      ASSERT_FALSE(f.has_refusal()) << f.refusal().error().message();
      welcomes += f.has_welcome();
      if (!f.has_execute()) continue;
      ++execute_frames;
      EXPECT_EQ(f.execute().seq(), next_seq++);  // per set, no gaps: the rank counts on it
      for (const auto& r : f.execute().responses()) {
        EXPECT_EQ(r.error().code(), 0) << r.error().message();
        if (r.has_spec()) ++answered[r.spec().name()];
      }
    }
    EXPECT_EQ(welcomes, 1);
    // The same conversation as with the real tuttid: the ranks' later frames (cache bits, the
    // fast path's exit) only make sense after exactly these answers.
    EXPECT_EQ(execute_frames, executes);
    EXPECT_EQ(answered["grad.w"], 1);  // negotiated in full once, then by cache reference
    EXPECT_EQ(answered["grad.b"], 1);
  }
  // Both ranks said Bye as members: the job ran to its end and is forgotten.
  EXPECT_EQ(core.job_count(), 0u);
}

}  // namespace
}  // namespace tutti::server
