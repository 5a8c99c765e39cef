#include "launcher/output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace tutti::launcher {
namespace {

// Set when a write finds that nobody reads our stdout or stderr any more (`tuttirun ... | head`);
// indexed by descriptor, so that we stop paying a failing write for every line.
bool g_output_closed[3] = {false, false, false};
bool g_prefix_lines = true;

}  // namespace


void WriteAll(int fd, std::string_view s) {
  if (fd <= 2 && g_output_closed[fd]) return;
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout may be a non-blocking descriptor we inherited.
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (n < 0 && errno == EPIPE && fd <= 2) g_output_closed[fd] = true;
    if (n <= 0) return;
    s.remove_prefix(static_cast<size_t>(n));
  }
}

void Say(const std::string& message) { WriteAll(STDERR_FILENO, "tuttirun: " + message + "\n"); }

bool OutputClosed(int fd) { return fd <= 2 && g_output_closed[fd]; }
void SetLinePrefixes(bool on) { g_prefix_lines = on; }
bool LinePrefixes() { return g_prefix_lines; }

}  // namespace tutti::launcher
