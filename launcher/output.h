// tuttirun's own output: its messages on stderr, and the ranks' lines it forwards. Main thread
// only (tuttirun forwards from one thread, so lines never interleave).
#pragma once

#include <string>
#include <string_view>

namespace tutti::launcher {

// Writes all of `s` to `fd`, waiting on a non-blocking descriptor; stops writing to stdout or
// stderr once nobody reads them (EPIPE), which OutputClosed() then reports.
void WriteAll(int fd, std::string_view s);
bool OutputClosed(int fd);
// "tuttirun: <message>" on stderr.
void Say(const std::string& message);
// Whether forwarded rank lines get their "[rank] " prefix (--no-prefix clears it).
void SetLinePrefixes(bool on);
bool LinePrefixes();

}  // namespace tutti::launcher
