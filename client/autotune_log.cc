#include "client/autotune_log.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "client/exec/log.h"

namespace tutti::client {

namespace {

// Writes all of `text`; false (errno set) on failure.
bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

const char* AutotuneLog::Header() {
  return "set,trial,fusion_threshold,small_allreduce_bytes,pipeline_bytes,bytes_per_second,"
         "scored_by,round\n";
}

Status AutotuneLog::Open(const std::string& path) {
  if (path.empty()) return Status::Ok();
  transport::UniqueFd file(open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!file)
    return Status(Code::kInvalidArgument, "cannot write the autotuning log (TUTTI_AUTOTUNE_LOG) to '" +
                                              path + "': " + std::strerror(errno));
  file_ = std::move(file);
  path_ = path;
  return Status::Ok();
}

void AutotuneLog::Write(int32_t set_id, const wire::Tuning& tuning) {
  if (!file_ || tuning.ended_size() == 0) return;
  std::string rows;
  for (const wire::TrialResult& t : tuning.ended())
    rows += fmt::format("{},{},{},{},{},{:.0f},{},{}\n", set_id, t.trial(), t.fusion_threshold(),
                        t.small_allreduce_bytes(), t.pipeline_bytes(), t.bytes_per_second(),
                        t.own_time() ? "execution" : "wall_clock",
                        t.confirmation() ? "confirmation" : "pass");
  if (tuning.ended(tuning.ended_size() - 1).converged())
    rows += fmt::format("{},chosen,{},{},{},,,\n", set_id, tuning.fusion_threshold(),
                        tuning.small_allreduce_bytes(), tuning.pipeline_bytes());
  const int fd = file_.get();
  const bool locked = flock(fd, LOCK_EX) == 0;
  bool ok = locked;
  if (ok && lseek(fd, 0, SEEK_END) == 0) ok = WriteAll(fd, Header());
  ok = ok && WriteAll(fd, rows);
  const int error = errno;
  if (locked) flock(fd, LOCK_UN);
  if (!ok && !warned_) {
    warned_ = true;
    Log().warn("TUTTI_AUTOTUNE_LOG: writing to '{}' failed ({}); trials of set {} are not logged",
               path_, std::strerror(error), set_id);
  }
}

}  // namespace tutti::client
