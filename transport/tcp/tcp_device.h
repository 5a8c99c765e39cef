// TCP backend: one listening socket per runtime and an acceptor thread that reads each incoming
// connection's hello and parks it until the lane of the named set asks for it.
//
// Who connects: for each pair of ranks in a set, the lower global rank connects and the higher
// accepts. connect(2) completes against the listener's backlog without the peer's cooperation,
// so two lanes setting up in any order never wait on each other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "transport/fd_io.h"
#include "transport/transport.h"

namespace tutti::transport {

class TcpDevice : public Device {
 public:
  static Status Create(const std::string& address, std::unique_ptr<Device>* device);
  ~TcpDevice() override;

  const std::string& endpoint() const override { return endpoint_; }
  void SetJobKey(uint64_t key) override { key_.store(key); }
  std::unique_ptr<Context> CreateContext(int32_t set_id, int32_t self,
                                         std::vector<std::string> endpoints) override;
  void Shutdown() override;
  Status OpenStream(int32_t channel, int32_t self, int32_t peer, const std::string& endpoint,
                    Deadline deadline, std::unique_ptr<Stream>* stream) override;
  Status AcceptStream(int32_t channel, int32_t peer, Deadline deadline,
                      std::unique_ptr<Stream>* stream) override;

  // Used by TcpContext (from its lane thread). `abort_fd` readable ends the wait early.
  Status Connect(int32_t set_id, int32_t self, int32_t peer, const std::string& endpoint,
                 Deadline deadline, int abort_fd, UniqueFd* out);
  Status Accept(int32_t set_id, int32_t peer, Deadline deadline, int abort_fd, UniqueFd* out);
  // Makes waiting Accept calls look at their abort fd.
  void WakeAccepts() { parked_cv_.notify_all(); }
  void Forget(int32_t set_id);
  int cancel_fd() const { return cancel_.get(); }

 private:
  struct Parked {
    UniqueFd fd;
    uint64_t key;
  };

  TcpDevice(UniqueFd listener, UniqueFd cancel, std::string endpoint);
  void AcceptLoop();

  UniqueFd listener_;
  UniqueFd cancel_;  // eventfd: readable once Shutdown() was called
  std::string endpoint_;
  std::atomic<uint64_t> key_{0};
  std::mutex mu_;
  std::condition_variable parked_cv_;
  std::map<std::pair<int32_t, int32_t>, Parked> parked_;  // (set, from rank) -> connection
  std::thread acceptor_;
};

// The first bytes on every data-plane connection.
struct Hello {
  uint32_t magic;
  int32_t set_id;
  int32_t from_rank;
  uint32_t reserved;
  uint64_t key;
};
constexpr uint32_t kHelloMagic = 0x54544350;  // "TTCP"

}  // namespace tutti::transport
