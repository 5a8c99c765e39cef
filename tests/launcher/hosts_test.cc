// Units of tuttirun across hosts: -H and --hostfile parsing, the placement of ranks on slots, and
// the ssh command line (quoting, the environment forwarding rule). No processes: the end-to-end
// tests with real sshds are tests/python/test_ssh_hosts.py. The remote command is checked by
// running it here with /bin/sh, which is what the remote login shell does with it, under
// RankProcess's remote mode (a stdin pipe held open, as ssh's is).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/hosts.h"
#include "launcher/rank_process.h"
#include "launcher/ssh_command.h"

namespace tutti::launcher {
namespace {

std::vector<HostSlots> Hosts(const std::string& text) {
  std::vector<HostSlots> hosts;
  std::string error;
  EXPECT_TRUE(ParseHostList(text, &hosts, &error)) << error;
  return hosts;
}

std::string HostListError(const std::string& text) {
  std::vector<HostSlots> hosts;
  std::string error;
  EXPECT_FALSE(ParseHostList(text, &hosts, &error)) << text;
  return error;
}

std::string HostfileError(const std::string& text) {
  std::vector<HostSlots> hosts;
  std::string error;
  EXPECT_FALSE(ParseHostfileText(text, "hosts.txt", &hosts, &error)) << text;
  return error;
}

TEST(HostList, ParsesHostsAndSlotsInOrder) {
  const auto hosts = Hosts("host1:2,10.0.0.7:4, node-3 ,alice@h4:1");
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "host1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].name, "10.0.0.7");
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_EQ(hosts[2].name, "node-3");  // without slots: 1, as with mpirun -H
  EXPECT_EQ(hosts[2].slots, 1);
  EXPECT_EQ(hosts[3].name, "alice@h4");
  EXPECT_EQ(TotalSlots(hosts), 8);
}

TEST(HostList, RefusesWhatIsNotAHostList) {
  const std::string expected = " (expected HOST:SLOTS,HOST:SLOTS,...)";
  EXPECT_EQ(HostListError(""), "-H '': an empty entry" + expected);
  EXPECT_EQ(HostListError("a:1,,b:1"), "-H 'a:1,,b:1': an empty entry" + expected);
  EXPECT_EQ(HostListError("a:1,"), "-H 'a:1,': an empty entry" + expected);
  EXPECT_EQ(HostListError("a:0"), "-H 'a:0': 'a:0': slots must be a number from 1 to 1048576" +
                                      expected);
  EXPECT_EQ(HostListError("a:two"),
            "-H 'a:two': 'a:two': slots must be a number from 1 to 1048576" + expected);
  EXPECT_EQ(HostListError("a:1,a:2"), "-H 'a:1,a:2': host 'a' is listed twice" + expected);
  EXPECT_EQ(HostListError("-oProxyCommand=x:1"),
            "-H '-oProxyCommand=x:1': host '-oProxyCommand=x' starts with '-'" + expected);
  EXPECT_EQ(HostListError("a;b:1"),
            "-H 'a;b:1': host 'a;b' has a character a host name cannot have (';')" + expected);
  EXPECT_EQ(HostListError("::1:2"),
            "-H '::1:2': host '::1': IPv6 addresses are not supported; give the host's name" +
                expected);
  EXPECT_EQ(HostListError(":2"), "-H ':2': an empty host name" + expected);
}

TEST(Hostfile, ParsesHorovodrunsFormAndOthers) {
  std::vector<HostSlots> hosts;
  std::string error;
  ASSERT_TRUE(ParseHostfileText("# the cluster\n"
                                "host1 slots=2\n"
                                "\n"
                                "  host2   slots=4   # the big one\n"
                                "host3:3\r\n"
                                "host4\n",
                                "hosts.txt", &hosts, &error))
      << error;
  ASSERT_EQ(hosts.size(), 4u);
  EXPECT_EQ(hosts[0].name, "host1");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].name, "host2");
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_EQ(hosts[2].name, "host3");
  EXPECT_EQ(hosts[2].slots, 3);
  EXPECT_EQ(hosts[3].name, "host4");
  EXPECT_EQ(hosts[3].slots, 1);
}

TEST(Hostfile, NamesTheLineOfAnError) {
  EXPECT_EQ(HostfileError("a slots=1\nb max_slots=2\n"),
            "hosts.txt:2: expected 'HOST slots=N', 'HOST:N' or 'HOST', not 'b max_slots=2'");
  EXPECT_EQ(HostfileError("a slots=1 extra\n"),
            "hosts.txt:1: expected 'HOST slots=N', 'HOST:N' or 'HOST', not 'a slots=1 extra'");
  EXPECT_EQ(HostfileError("a slots=0\n"),
            "hosts.txt:1: 'a slots=0': slots must be a number from 1 to 1048576");
  EXPECT_EQ(HostfileError("a slots=1\n\na:2\n"), "hosts.txt:3: host 'a' is listed twice");
  EXPECT_EQ(HostfileError("# nothing\n\n"), "hosts.txt: no hosts in it");
}

TEST(Hostfile, ReadsAFileAndSaysWhenItCannot) {
  std::vector<HostSlots> hosts;
  std::string error;
  EXPECT_FALSE(ParseHostfile("/nonexistent/hosts", &hosts, &error));
  EXPECT_EQ(error, "--hostfile /nonexistent/hosts: cannot be read");
  char path[] = "/tmp/hosts_test.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "h1 slots=2\nh2 slots=x\n";
  EXPECT_FALSE(ParseHostfile(path, &hosts, &error));
  EXPECT_EQ(error, std::string("--hostfile ") + path + ":2: 'h2 slots=x': slots must be a number "
                                                       "from 1 to 1048576");
  std::ofstream(path) << "h1 slots=2\nh2 slots=1\n";
  EXPECT_TRUE(ParseHostfile(path, &hosts, &error)) << error;
  EXPECT_EQ(TotalSlots(hosts), 3);
  ::unlink(path);
}

TEST(Placement, FillsHostsInOrderWithHorovodrunsNumbering) {
  const auto p = PlaceRanks(Hosts("a:2,b:2"), 4);
  ASSERT_EQ(p.size(), 4u);
  const std::vector<std::string> host{"a", "a", "b", "b"};
  const std::vector<int> local{0, 1, 0, 1}, cross{0, 0, 1, 1};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(p[r].rank, r);
    EXPECT_EQ(p[r].host, host[r]) << r;
    EXPECT_EQ(p[r].local_rank, local[r]) << r;
    EXPECT_EQ(p[r].local_size, 2) << r;
    EXPECT_EQ(p[r].cross_rank, cross[r]) << r;
    EXPECT_EQ(p[r].cross_size, 2) << r;
  }
}

TEST(Placement, UnevenHostsAndFewerRanksThanSlots) {
  // a:3,b:1,c:2 with 5 ranks: a gets 0-2, b gets 3, c gets 4; c's second slot stays free.
  const auto p = PlaceRanks(Hosts("a:3,b:1,c:2"), 5);
  ASSERT_EQ(p.size(), 5u);
  EXPECT_EQ(p[2].host, "a");
  EXPECT_EQ(p[2].local_size, 3);
  EXPECT_EQ(p[2].local_rank, 2);
  EXPECT_EQ(p[2].cross_rank, 0);
  EXPECT_EQ(p[2].cross_size, 1);  // only a has a local rank 2
  EXPECT_EQ(p[3].host, "b");
  EXPECT_EQ(p[3].local_size, 1);
  EXPECT_EQ(p[3].cross_rank, 1);
  EXPECT_EQ(p[3].cross_size, 3);  // a, b and c have a local rank 0
  EXPECT_EQ(p[4].host, "c");
  EXPECT_EQ(p[4].local_size, 1);
  EXPECT_EQ(p[4].cross_rank, 2);
  EXPECT_EQ(p[1].cross_size, 1);  // c's local rank 1 is not used
}

TEST(ShellQuote, QuotesEveryWord) {
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$HOME `x` \"y\" \\ *"), "'$HOME `x` \"y\" \\ *'");
}

TEST(SshArgv, UserOptionsComeFirstThenOursThenPortKeyAndHost) {
  SshSettings settings;
  settings.port = 2222;
  settings.identity_file = "/k/id";
  settings.options = {"User=alice", "StrictHostKeyChecking=no"};
  const std::vector<std::string> expected{
      "ssh", "-o", "User=alice", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", "-o",
      "StrictHostKeyChecking=accept-new", "-o", "LogLevel=ERROR", "-o", "ServerAliveInterval=10",
      "-o", "ServerAliveCountMax=3", "-p", "2222", "-i", "/k/id", "--", "h1", "true"};
  EXPECT_EQ(SshArgv(settings, "h1", "true"), expected);
  const auto plain = SshArgv(SshSettings{}, "h1", "true");
  EXPECT_EQ(plain.size(), 14u);
  EXPECT_EQ(plain[11], "--");
}

// Runs `command` with /bin/sh -c, as the remote login shell would, through RankProcess's remote
// mode: its stdin a pipe that stays open, as ssh's does (the wrapper takes end of file for
// "stop"). Returns stdout, stderr and the exit status.
struct Ran {
  std::string out, err;
  int status = -1;
};

Ran RunShell(const std::string& command) {
  RankProcess process(0);
  process.StartRemote({"/bin/sh", "-c", command}, {"PATH=/usr/bin:/bin"});
  Ran ran;
  const RankProcess::LineSink sink = [&](int, Stream s, std::string_view line) {
    (s == Stream::kOut ? ran.out : ran.err).append(std::string(line) + "\n");
  };
  while (process.streams_open()) {
    std::vector<pollfd> fds;
    std::vector<Stream> streams;
    for (Stream s : {Stream::kOut, Stream::kErr}) {
      if (process.fd(s) < 0) continue;
      fds.push_back({process.fd(s), POLLIN, 0});
      streams.push_back(s);
    }
    if (::poll(fds.data(), fds.size(), 30000) <= 0) break;  // the destructor kills a hung one
    for (size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents) process.ReadAvailable(streams[i], sink);
  }
  process.Reap();
  ran.status = WIFEXITED(process.wait_status()) ? WEXITSTATUS(process.wait_status()) : -1;
  return ran;
}

TEST(RemoteRankCommand, RunsTheProgramInItsDirectoryWithExactlyTheGivenWordsAndVariables) {
  const std::string tricky = "it's \"quoted\" $HOME `date` \\ ; | & * \n second line";
  const Ran ran = RunShell(RemoteRankCommand(
      "/tmp", "h1", {"TUTTI_RANK=3", "ODD=" + tricky},
      {"sh", "-c", "pwd; echo \"$TUTTI_RANK\"; printf '%s|' \"$ODD\" \"$1\"; exit 3", "zero",
       tricky}));
  EXPECT_EQ(ran.status, 3) << ran.err;
  EXPECT_EQ(ran.out, "/tmp\n3\n" + tricky + "|" + tricky + "|\n");
  EXPECT_EQ(ran.err, "");
}

TEST(RemoteRankCommand, SaysWhenTheDirectoryOrProgramIsMissing) {
  Ran ran = RunShell(RemoteRankCommand("/nonexistent/dir", "h1", {}, {"true"}));
  EXPECT_EQ(ran.status, 127);
  EXPECT_EQ(ran.err, "tuttirun: cannot change to directory '/nonexistent/dir' on host 'h1'\n");
  ran = RunShell(RemoteRankCommand("/tmp", "h1", {}, {"/nonexistent/program"}));
  EXPECT_EQ(ran.status, 127);
  EXPECT_NE(ran.err.find("/nonexistent/program"), std::string::npos) << ran.err;
}

TEST(RemoteRankCommand, ReportsAProgramKilledBySignalNAs128PlusN) {
  const Ran ran = RunShell(RemoteRankCommand("/tmp", "h1", {}, {"sh", "-c", "kill -9 $$"}));
  EXPECT_EQ(ran.status, 137);
  EXPECT_EQ(ran.err, "");  // the shell's "Killed" notice is not the rank's output
}

TEST(WrapperSignalName, NamesTheSignalsTuttirunSends) {
  EXPECT_EQ(WrapperSignalName(SIGINT), "INT");
  EXPECT_EQ(WrapperSignalName(SIGTERM), "TERM");
  EXPECT_EQ(WrapperSignalName(SIGKILL), "KILL");
  EXPECT_EQ(WrapperSignalName(SIGUSR1), "");
}

TEST(ForwardedByDefault, TuttiHorovodNcclOmpPythonAndThePaths) {
  for (const char* name : {"PATH", "LD_LIBRARY_PATH", "TUTTI_LIBRARY", "HOROVOD_FUSION_THRESHOLD",
                           "NCCL_DEBUG", "OMP_NUM_THREADS", "PYTHONPATH", "PYTHONUNBUFFERED"})
    EXPECT_TRUE(ForwardedByDefault(name)) << name;
  for (const char* name : {"HOME", "USER", "SSH_AUTH_SOCK", "DISPLAY", "CUDA_VISIBLE_DEVICES",
                           "LD_PRELOAD", "PATHX", "MY_TUTTI_VAR"})
    EXPECT_FALSE(ForwardedByDefault(name)) << name;
}

TEST(IsVariableName, LettersDigitsAndUnderscoreNotLeadingDigit) {
  EXPECT_TRUE(IsVariableName("A_1"));
  EXPECT_TRUE(IsVariableName("_x"));
  EXPECT_FALSE(IsVariableName(""));
  EXPECT_FALSE(IsVariableName("1A"));
  EXPECT_FALSE(IsVariableName("A-B"));
}

}  // namespace
}  // namespace tutti::launcher
