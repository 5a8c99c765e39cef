// Floods from raw ZeroMQ clients against a real tuttid: a job announcing a million distinct tensor
// names, and one address registering in a loop. Each is refused with TUTTI_ERR_LIMIT_EXCEEDED and
// the exact message, tuttid's memory stays bounded, and a real job finishes meanwhile.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "multiproc/cluster.h"
#include "multiproc/raw_client.h"

namespace tutti::testing {
namespace {

// Resident memory of process `pid` in MiB, from /proc.
double ResidentMiB(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  return -1;
}

// The endpoint of tuttid as reached from source address `source` ("tcp://SRC:0;HOST:PORT").
std::string FromSource(const std::string& endpoint, const std::string& source) {
  return "tcp://" + source + ":0;" + endpoint.substr(std::string("tcp://").size());
}

wire::Frame RegisterAs(const std::string& job, int32_t rank, int32_t size) {
  wire::Frame frame = Register(rank, size);
  frame.mutable_register_()->set_job(job);
  return frame;
}

TEST(Floods, AMillionTensorNamesAreRefusedPastTheLimitWhileAnotherJobFinishes) {
  Tuttid tuttid({"--max-pending-tensors", "10000"});
  const double rss_before = ResidentMiB(tuttid.process().pid());
  RawClient rank0(tuttid.endpoint()), rank1(tuttid.endpoint());
  rank0.Send(Encoded(RegisterAs("flood", 0, 2)));
  rank1.Send(Encoded(RegisterAs("flood", 1, 2)));
  ASSERT_EQ(rank0.Refusal(), "not a refusal");  // the Welcome
  ASSERT_EQ(rank1.Refusal(), "not a refusal");

  auto bystanders = StartRanks(tuttid, "basic", 2);
  constexpr int kNames = 1000000, kPerFrame = 50000;
  for (int first = 0; first < kNames; first += kPerFrame) {
    wire::Frame announce;
    auto* set = announce.mutable_announce()->add_sets();
    for (int i = first; i < first + kPerFrame; ++i) {
      auto* spec = set->add_tensors();
      spec->set_name("t" + std::to_string(i));
      spec->set_kind(wire::COLLECTIVE_ALLREDUCE);
      spec->set_dtype(3);  // TUTTI_DTYPE_FLOAT32
      spec->add_shape(1);
      spec->set_reduce_op(1);  // sum
    }
    rank0.Send(Encoded(announce));
  }
  // The first refusal names the limit and the first tensor past it; the rank stops reading
  // after it, which tuttid must survive too (it drops what the rank leaves unread).
  EXPECT_EQ(rank0.Refusal(),
            "-18 limit exceeded: job 'flood' already has 10000 tensors announced by some members "
            "only (tuttid --max-pending-tensors); 't10000' was refused");
  ExpectAllSucceed(bystanders);
  // tuttid still answers newcomers at once after the flood...
  RawClient late(tuttid.endpoint());
  late.Send(Encoded(RegisterAs("after-the-flood", 0, 1)));
  EXPECT_EQ(late.Refusal(), "not a refusal");
  // ...and holds 10000 pending tensors, not a million (a pending tensor costs ~1 KiB). Under
  // AddressSanitizer freed memory waits in a 256 MiB quarantine, so only the release build can
  // tell.
  const double rss_after = ResidentMiB(tuttid.process().pid());
#ifndef TUTTI_SANITIZED
  EXPECT_LT(rss_after - rss_before, 200) << rss_before << " MiB -> " << rss_after << " MiB";
#else
  (void)rss_after;
  (void)rss_before;
#endif
}

TEST(Floods, RegistrationsInALoopFromOneAddressAreLimitedAndOthersAreNot) {
  Tuttid tuttid({"--max-registrations-per-second", "20", "--registration-burst", "40"});
  const std::string flooder = FromSource(tuttid.endpoint(), "127.0.0.2");
  auto bystanders = StartRanks(tuttid, "basic", 2);  // from 127.0.0.1, meanwhile
  int welcomed = 0, limited = 0;
  std::string refusal;
  const auto start = Clock::now();
  for (int i = 0; i < 200; ++i) {
    // Connect, register a job of one rank, disconnect: the loop an attacker or a crash-looping
    // launcher runs.
    RawClient client(flooder);
    client.Send(Encoded(RegisterAs("loop-" + std::to_string(i), 0, 1)));
    const std::string answer = client.Refusal();
    if (answer == "not a refusal") {
      ++welcomed;
    } else {
      ++limited;
      refusal = answer;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(refusal,
            "-18 limit exceeded: too many registrations from 127.0.0.2 (at most 20 a second, "
            "tuttid --max-registrations-per-second); retry later");
  EXPECT_GE(welcomed, 40);
  EXPECT_LE(welcomed, 40 + 20 * seconds + 1) << "in " << seconds << " s";
  EXPECT_GT(limited, 0);
  ExpectAllSucceed(bystanders);
}

TEST(Floods, JobsThatNeverCompleteAreLimitedPerAddress) {
  Tuttid tuttid({"--max-rendezvous-jobs-per-address", "5", "--log-level", "info"});
  const std::string flooder = FromSource(tuttid.endpoint(), "127.0.0.2");
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 6; ++i) {
    const std::string job = "waiting-" + std::to_string(i);
    clients.push_back(std::make_unique<RawClient>(flooder));
    clients.back()->Send(Encoded(RegisterAs(job, 0, 2)));  // rank 1 never comes
    // Separate sockets have no order between them: wait until tuttid took this one.
    if (i < 5) {
      ASSERT_TRUE(tuttid.process().ReadUntilContaining("job '" + job + "': created", In(60)))
          << tuttid.process().transcript();
    }
  }
  EXPECT_EQ(clients.back()->Refusal(),
            "-18 limit exceeded: 127.0.0.2 already started 5 jobs whose ranks have not all joined "
            "(tuttid --max-rendezvous-jobs-per-address)");
  // Another address is not affected.
  auto others = StartRanks(tuttid, "basic", 2);
  ExpectAllSucceed(others);
}

TEST(Floods, RanksDeclaredByWaitingJobsAreLimitedPerAddress) {
  // tuttid keeps state for every rank a job declares, from its first registration on.
  Tuttid tuttid({"--max-rendezvous-ranks-per-address", "1000", "--log-level", "info"});
  const std::string flooder = FromSource(tuttid.endpoint(), "127.0.0.2");
  RawClient first(flooder), second(flooder);
  first.Send(Encoded(RegisterAs("wide-0", 0, 600)));
  ASSERT_TRUE(tuttid.process().ReadUntilContaining("job 'wide-0': created", In(60)))
      << tuttid.process().transcript();
  second.Send(Encoded(RegisterAs("wide-1", 0, 500)));
  EXPECT_EQ(second.Refusal(),
            "-18 limit exceeded: jobs started from 127.0.0.2 already wait for 600 ranks, and a job "
            "of 500 more would pass tuttid's limit of 1000 (--max-rendezvous-ranks-per-address)");
}

}  // namespace
}  // namespace tutti::testing
