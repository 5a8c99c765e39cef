#include "client/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

namespace tutti::client {

std::string HostIdentity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  struct stat ns {};
  stat("/proc/self/ns/net", &ns);
  return std::string(name) + "/" + boot_id + "/netns:" + std::to_string(ns.st_ino);
}

}  // namespace tutti::client
