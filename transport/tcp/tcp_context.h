// TCP connections of one process set, made on first use. Used by one lane thread only.
#pragma once

#include <map>
#include <mutex>

#include "transport/tcp/tcp_device.h"

namespace tutti::transport {

class TcpContext : public Context {
 public:
  // `device` must outlive the context.
  TcpContext(TcpDevice* device, int32_t set_id, int32_t self, std::vector<std::string> endpoints);
  ~TcpContext() override;

  Status SendRecv(int32_t to, const void* send, size_t send_len, int32_t from, void* recv,
                  size_t recv_len, Deadline deadline,
                  const std::function<void(size_t)>& on_received = nullptr) override;
  void Abort(const Status& status) override;

 private:
  // The abort status once Abort() was called (then the abort eventfd is readable), else ok.
  Status Aborted();

  Status Connection(int32_t peer, Deadline deadline, int* fd);

  TcpDevice* device_;
  int32_t set_id_;
  int32_t self_;
  std::vector<std::string> endpoints_;
  std::map<int32_t, UniqueFd> connections_;
  // A failed connection leaves its stream in an unknown state: every later call fails the same way.
  Status broken_;

  UniqueFd abort_fd_;  // eventfd, readable once aborted
  std::mutex abort_mu_;
  Status abort_status_;
};

}  // namespace tutti::transport
