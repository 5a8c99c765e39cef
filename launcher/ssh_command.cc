#include "launcher/ssh_command.h"

#include <signal.h>

namespace tutti::launcher {
namespace {

// Run by /bin/sh on the remote host as `sh -c WRAPPER tuttirun-rank CWD HOST PROGRAM ARGS...`.
// - The program runs in the background so that the shell can watch its stdin meanwhile; a
//   background command of a non-interactive shell starts with SIGINT and SIGQUIT ignored, which
//   GNU env's --default-signal undoes (where env lacks it, only INT forwarding is lost).
// - The watcher gets the shell's stdin through fd 3 (a background command's own stdin is
//   /dev/null) and writes nothing, so that it never holds the ssh session's output open.
// - `wait` reports a program killed by signal N as 128+N, which becomes ssh's exit status and
//   tuttirun's verdict; the shell's own "Terminated" notices are silenced.
// - The watcher is killed and waited for before the wrapper exits, so that no process of the
//   rank outlives the ssh session that tuttirun reaps.
constexpr char kWrapper[] = R"(cd "$1" 2>/dev/null || {
  echo "tuttirun: cannot change to directory '$1' on host '$2'" >&2
  exit 127
}
shift 2
reset=
if env --default-signal=INT true 2>/dev/null; then reset=--default-signal=INT,QUIT; fi
exec 3<&0
env $reset "$@" </dev/null 3<&- &
rank=$!
{
  while read -r sig; do
    case $sig in INT|TERM|KILL) kill -s "$sig" "$rank" ;; esac
  done
  kill -s TERM "$rank"
  sleep 5
  kill -s KILL "$rank"
} <&3 >/dev/null 2>&1 &
watcher=$!
exec 3<&-
wait "$rank" 2>/dev/null
status=$?
{ kill "$watcher"; wait "$watcher"; } 2>/dev/null
exit "$status")";

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::vector<std::string> SshArgv(const SshSettings& settings, const std::string& host,
                                 const std::string& command) {
  std::vector<std::string> argv{"ssh"};
  for (const std::string& option : settings.options) {
    argv.push_back("-o");
    argv.push_back(option);
  }
  for (const char* option : {"BatchMode=yes", "StrictHostKeyChecking=accept-new", "LogLevel=ERROR",
                             "ServerAliveInterval=10", "ServerAliveCountMax=3"}) {
    argv.push_back("-o");
    argv.push_back(option);
  }
  if (settings.port > 0) {
    argv.push_back("-p");
    argv.push_back(std::to_string(settings.port));
  }
  if (!settings.identity_file.empty()) {
    argv.push_back("-i");
    argv.push_back(settings.identity_file);
  }
  argv.push_back("--");
  argv.push_back(host);
  argv.push_back(command);
  return argv;
}

std::string RemoteRankCommand(const std::string& cwd, const std::string& host,
                              const std::vector<std::string>& env,
                              const std::vector<std::string>& argv) {
  // `exec env`: the login shell is replaced rather than left waiting, and env sets the
  // variables whatever the login shell's syntax for them.
  std::string command = "exec env";
  for (const std::string& kv : env) command += " " + ShellQuote(kv);
  command += " /bin/sh -c " + ShellQuote(kWrapper) + " tuttirun-rank " + ShellQuote(cwd) + " " +
             ShellQuote(host);
  for (const std::string& word : argv) command += " " + ShellQuote(word);
  return command;
}

std::string WrapperSignalName(int sig) {
  switch (sig) {
    case SIGINT: return "INT";
    case SIGTERM: return "TERM";
    case SIGKILL: return "KILL";
    default: return "";
  }
}

bool ForwardedByDefault(const std::string& name) {
  if (name == "PATH" || name == "LD_LIBRARY_PATH") return true;
  for (const char* prefix : {"TUTTI_", "HOROVOD_", "NCCL_", "OMP_", "PYTHON"})
    if (StartsWith(name, prefix)) return true;
  return false;
}

bool IsVariableName(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace tutti::launcher
