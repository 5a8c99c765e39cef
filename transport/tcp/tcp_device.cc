#include "transport/tcp/tcp_device.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/tcp/tcp_context.h"

namespace tutti::transport {
namespace {

// How long an accepted connection may take to send its hello before it is dropped.
constexpr auto kHelloTimeout = std::chrono::seconds(10);

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

Status CreateTcpDevice(const std::string& address, std::unique_ptr<Device>* device) {
  return TcpDevice::Create(address, device);
}

Status TcpDevice::Create(const std::string& address, std::unique_ptr<Device>* device) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1)
    return Status(Code::kInvalidArgument, "data-plane address '" + address + "' is not an IPv4 address");
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) return Status(Code::kInternal, Errno("socket"));
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return Status(Code::kInvalidArgument, Errno("cannot bind the data plane to " + address));
  if (listen(listener.get(), SOMAXCONN) != 0) return Status(Code::kInternal, Errno("listen"));
  socklen_t len = sizeof(addr);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  SetNonBlocking(listener.get());
  UniqueFd cancel(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!cancel) return Status(Code::kInternal, Errno("eventfd"));
  std::string endpoint = address + ":" + std::to_string(ntohs(addr.sin_port));
  device->reset(new TcpDevice(std::move(listener), std::move(cancel), std::move(endpoint)));
  return Status::Ok();
}

TcpDevice::TcpDevice(UniqueFd listener, UniqueFd cancel, std::string endpoint)
    : listener_(std::move(listener)), cancel_(std::move(cancel)), endpoint_(std::move(endpoint)) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpDevice::~TcpDevice() {
  Shutdown();
  acceptor_.join();
}

void TcpDevice::Shutdown() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(cancel_.get(), &one, sizeof(one));
  parked_cv_.notify_all();
}

void TcpDevice::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {cancel_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) return;
    if (!(fds[0].revents & POLLIN)) continue;
    UniqueFd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) continue;
    Hello hello{};
    if (!ReadFully(fd.get(), &hello, sizeof(hello), Clock::now() + kHelloTimeout, cancel_.get(),
                   "an incoming connection")
             .ok() ||
        hello.magic != kHelloMagic)
      continue;  // not one of ours, or too slow: drop it
    SetNoDelay(fd.get());
    std::lock_guard<std::mutex> lock(mu_);
    parked_[{hello.set_id, hello.from_rank}] = Parked{std::move(fd), hello.key};
    parked_cv_.notify_all();
  }
}

namespace {
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}
}  // namespace

Status TcpDevice::Connect(int32_t set_id, int32_t self, int32_t peer, const std::string& endpoint,
                          Deadline deadline, int abort_fd, UniqueFd* out) {
  const std::string who = "rank " + std::to_string(peer) + " at " + endpoint;
  // Every failure to reach the peer reads "peer lost: rank K: ...", like those of SendRecv.
  const std::string lost = "peer lost: rank " + std::to_string(peer) + ": cannot connect to " + endpoint;
  std::string host;
  uint16_t port = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (!ParseHostPort(endpoint, &host, &port) || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return Status(Code::kInternal, "bad data-plane endpoint of " + who);
  addr.sin_port = htons(port);
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return Status(Code::kInternal, Errno("socket"));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return Status(Code::kPeerLost, Errno(lost));
    pollfd fds[3] = {{fd.get(), POLLOUT, 0}, {cancel_.get(), POLLIN, 0}, {abort_fd, POLLIN, 0}};
    int ready = poll(fds, 3, PollTimeoutMs(deadline));
    if (ready == 0) return Status(Code::kTimeout, "connecting to " + who + " timed out");
    if (fds[1].revents & POLLIN) return Status(Code::kShutDown, "the runtime was finalized");
    if (fds[2].revents & POLLIN) return Status(Code::kAborted, "aborted");
    int error = 0;
    socklen_t len = sizeof(error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0)
      return Status(Code::kPeerLost, lost + ": " + std::strerror(error));
  }
  SetNoDelay(fd.get());
  Hello hello{kHelloMagic, set_id, self, 0, key_.load()};
  Status status = WriteFully(fd.get(), &hello, sizeof(hello), deadline, cancel_.get(), who);
  if (!status.ok()) return Status(status.code(), lost + ": " + status.message());
  *out = std::move(fd);
  return Status::Ok();
}

Status TcpDevice::Accept(int32_t set_id, int32_t peer, Deadline deadline, int abort_fd,
                         UniqueFd* out) {
  std::unique_lock<std::mutex> lock(mu_);
  auto key = std::make_pair(set_id, peer);
  while (!parked_.count(key)) {
    if (Readable(cancel_.get())) return Status(Code::kShutDown, "the runtime was finalized");
    if (Readable(abort_fd)) return Status(Code::kAborted, "aborted");
    if (parked_cv_.wait_until(lock, deadline) == std::cv_status::timeout && !parked_.count(key))
      return Status(Code::kTimeout, "rank " + std::to_string(peer) +
                                        " did not connect for process set " +
                                        std::to_string(set_id) + " before the deadline");
  }
  Parked parked = std::move(parked_[key]);
  parked_.erase(key);
  if (parked.key != key_.load())
    return Status(Code::kAuthFailed, "a connection claiming to be rank " + std::to_string(peer) +
                                         " presented the wrong job key");
  *out = std::move(parked.fd);
  return Status::Ok();
}

void TcpDevice::Forget(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = parked_.begin(); it != parked_.end();)
    it = it->first.first == set_id ? parked_.erase(it) : std::next(it);
}

namespace {

// A connected socket used in one direction, with its own abort eventfd.
class TcpStream : public Stream {
 public:
  TcpStream(UniqueFd fd, UniqueFd abort, std::string peer)
      : fd_(std::move(fd)), abort_(std::move(abort)), peer_(std::move(peer)) {}
  Status Write(const void* data, size_t len, Deadline deadline) override {
    return Checked(WriteFully(fd_.get(), data, len, deadline, abort_.get(), peer_));
  }
  Status Read(void* data, size_t len, Deadline deadline) override {
    return Checked(ReadFully(fd_.get(), data, len, deadline, abort_.get(), peer_));
  }
  void Abort(const Status& status) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!aborted_.ok()) return;
      aborted_ = status;
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(abort_.get(), &one, sizeof(one));
  }

 private:
  // fd_io reports a readable cancel fd as kShutDown: say why it was aborted instead.
  Status Checked(Status status) {
    if (status.ok() || status.code() == Code::kTimeout) return status;
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_.ok()) return aborted_;
    if (status.code() == Code::kPeerLost) return Status(status.code(), "peer lost: " + status.message());
    return status;
  }

  UniqueFd fd_, abort_;
  std::string peer_;
  std::mutex mu_;
  Status aborted_;
};

}  // namespace

Status TcpDevice::OpenStream(int32_t channel, int32_t self, int32_t peer,
                             const std::string& endpoint, Deadline deadline,
                             std::unique_ptr<Stream>* stream) {
  UniqueFd abort(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), fd;
  TUTTI_RETURN_IF_ERROR(Connect(channel, self, peer, endpoint, deadline, abort.get(), &fd));
  *stream = std::make_unique<TcpStream>(std::move(fd), std::move(abort), "rank " + std::to_string(peer));
  return Status::Ok();
}

Status TcpDevice::AcceptStream(int32_t channel, int32_t peer, Deadline deadline,
                               std::unique_ptr<Stream>* stream) {
  UniqueFd abort(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), fd;
  TUTTI_RETURN_IF_ERROR(Accept(channel, peer, deadline, abort.get(), &fd));
  *stream = std::make_unique<TcpStream>(std::move(fd), std::move(abort), "rank " + std::to_string(peer));
  return Status::Ok();
}

std::unique_ptr<Context> TcpDevice::CreateContext(int32_t set_id, int32_t self,
                                                  std::vector<std::string> endpoints) {
  return std::make_unique<TcpContext>(this, set_id, self, std::move(endpoints));
}

}  // namespace tutti::transport
