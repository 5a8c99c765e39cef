// How tuttirun starts a rank on another host (docs/launcher.md, "Across hosts"): the `ssh`
// command line, the remote shell command it carries (every word single-quoted), and which of
// tuttirun's environment variables travel with it. Pure functions over values; main thread only.
//
// A remote rank is a local `ssh` child, so RankProcess reads its output and reaps it like a local
// rank, and ssh's exit status is the remote program's. What ssh cannot do without a terminal is
// stop the remote program when it is itself killed: a small `sh` wrapper on the remote host runs
// the program in the background and watches its stdin, which is a pipe from tuttirun. A line
// naming a signal (INT, TERM, KILL) is sent to the program; end of file (tuttirun closed the pipe,
// or tuttirun, ssh or the connection died) sends TERM and, 5 s later, KILL.
#pragma once

#include <string>
#include <vector>

namespace tutti::launcher {

struct SshSettings {
  int port = 0;                      // -p; 0: ssh's default
  std::string identity_file;         // -i; empty: ssh's default keys
  std::vector<std::string> options;  // --ssh-option, each passed as `-o OPTION`, before ours
};

// `word` as one word of a POSIX shell command line: in single quotes, each ' written as '\''.
std::string ShellQuote(const std::string& word);

// ssh's argv for running the shell command `command` on `host`: BatchMode (never prompt),
// accept-new host keys, keepalives that end ssh within 30 s of a dead connection, LogLevel=ERROR;
// the user's options come first, and ssh keeps the first value it is given for an option.
std::vector<std::string> SshArgv(const SshSettings& settings, const std::string& host,
                                 const std::string& command);

// The remote shell command of one rank: in `cwd` on `host` (named in the error when `cwd` does
// not exist there, status 127), with exactly `env` ("KEY=VALUE") added to the remote login
// environment, run `argv` under the wrapper above. A program that cannot be executed exits 127.
std::string RemoteRankCommand(const std::string& cwd, const std::string& host,
                              const std::vector<std::string>& env,
                              const std::vector<std::string>& argv);

// The signal names the wrapper understands, for writing to its stdin; empty for other signals.
std::string WrapperSignalName(int sig);

// Whether a variable of tuttirun's environment travels to remote ranks by default: PATH,
// LD_LIBRARY_PATH, and every TUTTI_*, HOROVOD_*, NCCL_*, OMP_* and PYTHON* variable.
bool ForwardedByDefault(const std::string& name);

// A valid environment variable name (letters, digits, '_', not starting with a digit).
bool IsVariableName(const std::string& name);

}  // namespace tutti::launcher
