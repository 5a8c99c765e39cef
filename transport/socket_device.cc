#include "transport/socket_device.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "transport/backend.h"
#include "transport/socket_context.h"

namespace tutti::transport {
namespace {

// How long an accepted connection may take to send its hello before it is dropped.
constexpr auto kHelloTimeout = std::chrono::seconds(10);

// Unverified claims kept per (set, rank) before the job's secret is known, and in all: the first
// ones stay and later ones are refused, so a flood of forged hellos can neither push out a
// genuine connection that came first nor run this process out of descriptors.
constexpr size_t kMaxClaims = 4;
constexpr size_t kMaxUnverifiedClaims = 256;
// (set, rank) keys whose failed handshakes are counted (for an Accept's error message).
constexpr size_t kMaxRejectedKeys = 1024;

void SetNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// An abstract Unix socket address (no file: gone with its last descriptor).
socklen_t UnixAddress(const std::string& name, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  const size_t len = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), len);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
}

}  // namespace

std::string UnixName(const std::string& endpoint) { return "tutti." + endpoint; }

Hello SocketDevice::SignedHello(int32_t set_id, int32_t self, int32_t peer,
                                const Challenge& challenge, uint32_t magic) {
  std::lock_guard<std::mutex> lock(mu_);
  return NewHello(secret_, challenge, magic, set_id, self, peer, security_.load());
}

SessionKeys SocketDevice::KeysOf(const Session& session) {
  std::lock_guard<std::mutex> lock(mu_);
  return DeriveSessionKeys(secret_, session.challenge.nonce, session.hello.nonce,
                           session.hello.set_id, session.hello.from_rank, session.hello.to_rank,
                           static_cast<DataSecurity>(session.hello.security), session.aead);
}

Status SocketDevice::AwaitProof(int fd, const Challenge& challenge, const Hello& hello,
                                Deadline deadline, int abort_fd, const std::string& who,
                                Session* session) {
  Proof proof{};
  // The acceptor thread proves itself as soon as it knows the job's secret: a peer that has not
  // had its Welcome yet answers a little later, within the deadline.
  Status status = ReadFully(fd, &proof, sizeof(proof), deadline, cancel_.get(), abort_fd, who);
  if (status.code() == Code::kShutDown || status.code() == Code::kAborted) return status;
  if (!status.ok())
    return Status(status.code(), "peer lost: rank " + std::to_string(hello.to_rank) +
                                     ": no answer to the data-plane handshake: " + status.message());
  bool genuine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    genuine = VerifyProof(secret_, challenge, hello, proof);
  }
  if (!genuine)
    return Status(Code::kAuthFailed,
                  "authentication failed: " + who + " did not prove it belongs to this job "
                  "(its data-plane handshake answer does not verify under the job's secret)");
  if (session != nullptr) *session = Session{challenge, hello, static_cast<RecordAead>(proof.aead)};
  return Status::Ok();
}

void SocketDevice::SignParams(const Challenge& challenge, int32_t from, int32_t to,
                              const void* params, size_t len, uint8_t mac[kParamsMacBytes]) {
  std::lock_guard<std::mutex> lock(mu_);
  transport::SignParams(secret_, challenge, from, to, params, len, mac);
}

bool SocketDevice::VerifyParams(const Challenge& challenge, int32_t from, int32_t to,
                                const void* params, size_t len,
                                const uint8_t mac[kParamsMacBytes]) {
  std::lock_guard<std::mutex> lock(mu_);
  return transport::VerifyParams(secret_, challenge, from, to, params, len, mac);
}

Status CreateDevice(const std::string& address, std::unique_ptr<Device>* device,
                    std::unique_ptr<MessageCarrier> carrier) {
  return SocketDevice::Create(address, std::move(carrier), device);
}

Status SocketDevice::Create(const std::string& address, std::unique_ptr<MessageCarrier> carrier,
                            std::unique_ptr<Device>* device) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1)
    return Status(Code::kInvalidArgument, "data-plane address '" + address + "' is not an IPv4 address");
  UniqueFd tcp(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!tcp) return Status(Code::kInternal, Errno("socket"));
  if (bind(tcp.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return Status(Code::kInvalidArgument, Errno("cannot bind the data plane to " + address));
  if (listen(tcp.get(), SOMAXCONN) != 0) return Status(Code::kInternal, Errno("listen"));
  socklen_t len = sizeof(addr);
  getsockname(tcp.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  SetNonBlocking(tcp.get());
  std::string endpoint = address + ":" + std::to_string(ntohs(addr.sin_port));

  UniqueFd unix_listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!unix_listener) return Status(Code::kInternal, Errno("socket(AF_UNIX)"));
  sockaddr_un unix_addr;
  const socklen_t unix_len = UnixAddress(UnixName(endpoint), &unix_addr);
  if (bind(unix_listener.get(), reinterpret_cast<sockaddr*>(&unix_addr), unix_len) != 0)
    return Status(Code::kInternal, Errno("cannot bind the shared-memory handshake socket @" +
                                         UnixName(endpoint)));
  if (listen(unix_listener.get(), SOMAXCONN) != 0) return Status(Code::kInternal, Errno("listen"));

  UniqueFd cancel(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!cancel) return Status(Code::kInternal, Errno("eventfd"));
  device->reset(new SocketDevice(std::move(tcp), std::move(unix_listener), std::move(cancel),
                                 std::move(endpoint), std::move(carrier)));
  return Status::Ok();
}

SocketDevice::SocketDevice(UniqueFd tcp_listener, UniqueFd unix_listener, UniqueFd cancel,
                           std::string endpoint, std::unique_ptr<MessageCarrier> carrier)
    : tcp_listener_(std::move(tcp_listener)),
      unix_listener_(std::move(unix_listener)),
      cancel_(std::move(cancel)),
      endpoint_(std::move(endpoint)),
      carrier_(std::move(carrier)) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

SocketDevice::~SocketDevice() {
  Shutdown();
  acceptor_.join();
}

void SocketDevice::Shutdown() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(cancel_.get(), &one, sizeof(one));
  WakeAccepts();
}

void SocketDevice::AcceptLoop() {
  while (true) {
    pollfd fds[3] = {{tcp_listener_.get(), POLLIN, 0},
                     {unix_listener_.get(), POLLIN, 0},
                     {cancel_.get(), POLLIN, 0}};
    if (poll(fds, 3, -1) < 0 && errno != EINTR) return;
    if (fds[2].revents & POLLIN) return;
    // With a carrier every pair is MPI's (TUTTI_TRANSPORT=mpi): TCP connections are its handshakes.
    if (fds[0].revents & POLLIN) Park(tcp_listener_.get(), carrier_ ? Link::kMpi : Link::kTcp);
    if (fds[1].revents & POLLIN) Park(unix_listener_.get(), Link::kShm);
  }
}

void SocketDevice::SetJobSecret(const std::string& secret, int32_t self, DataSecurity security) {
  std::lock_guard<std::mutex> lock(mu_);
  secret_ = secret;
  self_ = self;
  security_ = security;
  // Claims parked before the secret was known wait for our proof: genuine ones get it now, so
  // their connectors go on without waiting for our lanes; forged ones are dropped.
  for (auto it = parked_.begin(); it != parked_.end();) {
    auto& claims = it->second;
    for (auto claim = claims.begin(); claim != claims.end();) {
      if (Genuine(*claim) && Prove(&*claim)) {
        ++claim;
      } else {
        NoteRejected(it->first);
        claim = claims.erase(claim);
      }
    }
    it = claims.empty() ? parked_.erase(it) : std::next(it);
  }
  parked_cv_.notify_all();
}

bool SocketDevice::Genuine(const Parked& parked) const {
  return parked.hello.to_rank == self_ &&
         parked.hello.security == static_cast<uint32_t>(security_.load()) &&
         VerifyHello(secret_, parked.challenge, parked.hello);
}

bool SocketDevice::Prove(Parked* parked) {
  if (parked->proven) return true;
  const Proof proof = NewProof(secret_, parked->challenge, parked->hello);
  // 40 bytes on a fresh connection never fill its socket buffer: this does not block.
  const ssize_t n = send(parked->connection.fd.get(), &proof, sizeof(proof), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n != static_cast<ssize_t>(sizeof(proof))) return false;
  parked->connection.session.aead = static_cast<RecordAead>(proof.aead);
  return parked->proven = true;
}

void SocketDevice::Park(int listener, Link link) {
  UniqueFd fd(accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) return;
  const Deadline deadline = Clock::now() + kHelloTimeout;
  Parked parked{Accepted{{}, link, {}}, NewChallenge(), Hello{}};
  Status status = WriteFully(fd.get(), &parked.challenge, sizeof(parked.challenge), deadline,
                             cancel_.get(), "an incoming connection");
  if (status.ok())
    status = link == Link::kShm
                 ? ReadWithFds(fd.get(), &parked.hello, sizeof(parked.hello), deadline,
                               cancel_.get(), &parked.connection.passed)
                 : ReadFully(fd.get(), &parked.hello, sizeof(parked.hello), deadline,
                             cancel_.get(), "an incoming connection");
  // Not one of ours, or too slow: drop it.
  if (!status.ok() || !KnownHelloMagic(parked.hello.magic)) return;
  // An ibverbs bootstrap names itself; it comes only through the TCP listener.
  if (parked.hello.magic == kIbverbsHelloMagic) {
    if (link != Link::kTcp) return;
    link = Link::kIbverbs;
  }
  parked.connection.link = link;
  if (link != Link::kShm) SetNoDelay(fd.get());
  parked.connection.fd = std::move(fd);
  std::lock_guard<std::mutex> lock(mu_);
  auto& claims = parked_[{parked.hello.set_id, parked.hello.from_rank}];
  if (!secret_.empty()) {
    if (!Genuine(parked) || !Prove(&parked)) {
      NoteRejected({parked.hello.set_id, parked.hello.from_rank});
      if (claims.empty()) parked_.erase({parked.hello.set_id, parked.hello.from_rank});
      parked_cv_.notify_all();
      return;
    }
  } else {
    size_t unverified = 0;
    for (const auto& [key, parked_claims] : parked_) unverified += parked_claims.size();
    if (claims.size() >= kMaxClaims || unverified >= kMaxUnverifiedClaims) {
      if (claims.empty()) parked_.erase({parked.hello.set_id, parked.hello.from_rank});
      return;  // refused: its connection closes
    }
  }
  claims.push_back(std::move(parked));
  parked_cv_.notify_all();
}

namespace {
bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}
}  // namespace

Status SocketDevice::ConnectTcp(int32_t set_id, int32_t self, int32_t peer, const std::string& endpoint,
                          Deadline deadline, int abort_fd, UniqueFd* out, uint32_t magic,
                          Session* session) {
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
  Challenge challenge{};
  // A peer frozen or finalizing never answers: the lane's abort (a Fault) must still end this.
  Status status = ReadFully(fd.get(), &challenge, sizeof(challenge), deadline, cancel_.get(),
                            abort_fd, who);
  if (status.ok() && challenge.magic != kChallengeMagic)
    status = Status(Code::kPeerLost, "not a tutti data-plane listener");
  if (status.code() == Code::kShutDown || status.code() == Code::kAborted) return status;
  if (!status.ok()) return Status(status.code(), lost + ": " + status.message());
  Hello hello = SignedHello(set_id, self, peer, challenge, magic);
  status = WriteFully(fd.get(), &hello, sizeof(hello), deadline, cancel_.get(), who);
  if (!status.ok()) return Status(status.code(), lost + ": " + status.message());
  TUTTI_RETURN_IF_ERROR(AwaitProof(fd.get(), challenge, hello, deadline, abort_fd, who, session));
  *out = std::move(fd);
  return Status::Ok();
}

Status SocketDevice::ConnectUnix(int32_t set_id, int32_t self, int32_t peer,
                                 const std::string& endpoint, const std::vector<int>& fds,
                                 Deadline deadline, int abort_fd, UniqueFd* out) {
  const std::string name = UnixName(endpoint);
  const std::string lost = "peer lost: rank " + std::to_string(peer) + ": cannot connect to @" + name;
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return Status(Code::kInternal, Errno("socket(AF_UNIX)"));
  // Blocking connect and send, bounded by the deadline: both complete against the listener's
  // backlog (no peer thread needed) unless the backlog is full.
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  timeval timeout{};
  timeout.tv_sec = std::max<int64_t>(0, left.count()) / 1000000;
  timeout.tv_usec = std::max<int64_t>(1, left.count() % 1000000);
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_un addr;
  const socklen_t len = UnixAddress(name, &addr);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno == EAGAIN || errno == EINPROGRESS)
      return Status(Code::kTimeout, "connecting to rank " + std::to_string(peer) + " at @" + name + " timed out");
    return Status(Code::kPeerLost, Errno(lost));
  }
  // The acceptor thread answers at once, whatever the peer's lanes are doing; a peer frozen or
  // finalizing never does, and the lane's abort (a Fault) or finalize must still end the wait.
  SetNonBlocking(fd.get());
  Challenge challenge{};
  Status status = ReadFully(fd.get(), &challenge, sizeof(challenge), deadline, cancel_.get(),
                            abort_fd, "rank " + std::to_string(peer) + " at @" + name);
  if (status.ok() && challenge.magic != kChallengeMagic)
    status = Status(Code::kPeerLost, "not a tutti data-plane listener");
  // Finalize and abort are ours, not the peer's: they keep their own words.
  if (status.code() == Code::kShutDown || status.code() == Code::kAborted) return status;
  if (!status.ok()) return Status(status.code(), lost + ": " + status.message());
  Hello hello = SignedHello(set_id, self, peer, challenge);
  // WriteWithFds wants a blocking socket (SO_SNDTIMEO bounds it); 48 bytes never fill it anyway.
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  status = WriteWithFds(fd.get(), &hello, sizeof(hello), fds);
  if (!status.ok()) return Status(status.code(), lost + ": " + status.message());
  SetNonBlocking(fd.get());
  TUTTI_RETURN_IF_ERROR(AwaitProof(fd.get(), challenge, hello, deadline, abort_fd,
                                   "rank " + std::to_string(peer) + " at @" + name, nullptr));
  *out = std::move(fd);
  return Status::Ok();
}

Status SocketDevice::Accept(int32_t set_id, int32_t peer, Deadline deadline, int abort_fd,
                            Accepted* out) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_pair(set_id, peer);
  while (true) {
    // Claims parked before the secret was known are checked now; forged ones are dropped.
    auto it = parked_.find(key);
    if (it != parked_.end()) {
      auto& claims = it->second;
      for (auto claim = claims.begin(); claim != claims.end();) {
        if (Genuine(*claim) && Prove(&*claim)) {
          *out = std::move(claim->connection);
          out->channel = set_id;
          out->peer = peer;
          out->self = claim->hello.to_rank;
          out->session.challenge = claim->challenge;
          out->session.hello = claim->hello;
          out->deadline = deadline;
          out->abort_fd = abort_fd;
          claims.erase(claim);
          if (claims.empty()) parked_.erase(it);
          return Status::Ok();
        }
        NoteRejected(key);
        claim = claims.erase(claim);
      }
      parked_.erase(it);
    }
    if (Readable(cancel_.get())) return Status(Code::kShutDown, "the runtime was finalized");
    if (Readable(abort_fd)) return Status(Code::kAborted, "aborted");
    if (parked_cv_.wait_until(lock, deadline) == std::cv_status::timeout && !parked_.count(key)) {
      auto rejected = rejected_.find(key);
      if (rejected != rejected_.end() && rejected->second > 0)
        return Status(Code::kAuthFailed,
                      "authentication failed: waiting for rank " + std::to_string(peer) +
                          " on process set " + std::to_string(set_id) +
                          ", only connections that failed the data-plane handshake came (not "
                          "from this job, or a replayed hello)");
      return Status(Code::kTimeout, "rank " + std::to_string(peer) +
                                        " did not connect for process set " +
                                        std::to_string(set_id) + " before the deadline");
    }
  }
}

void SocketDevice::NoteRejected(const std::pair<int32_t, int32_t>& key) {
  auto it = rejected_.find(key);
  if (it != rejected_.end()) ++it->second;
  else if (rejected_.size() < kMaxRejectedKeys) rejected_.emplace(key, 1);
}

void SocketDevice::Forget(int32_t set_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = parked_.begin(); it != parked_.end();)
    it = it->first.first == set_id ? parked_.erase(it) : std::next(it);
  for (auto it = rejected_.begin(); it != rejected_.end();)
    it = it->first.first == set_id ? rejected_.erase(it) : std::next(it);
}

Status SocketDevice::OpenStream(int32_t channel, int32_t self, int32_t peer, const PeerRoute& route,
                                Deadline deadline, std::unique_ptr<Stream>* stream) {
  const Backend* backend = FindBackend(route.link);
  if (!backend) return Status(Code::kInternal, "no data-plane backend for this route");
  // Opening is bounded by the deadline; an abort reaches the stream once it exists.
  return backend->OpenStream(this, Dial{channel, self, peer, route.endpoint, deadline, -1},
                             "rank " + std::to_string(peer), stream);
}

Status SocketDevice::AcceptStream(int32_t channel, int32_t peer, Deadline deadline,
                                  std::unique_ptr<Stream>* stream) {
  Accepted accepted;
  TUTTI_RETURN_IF_ERROR(Accept(channel, peer, deadline, -1, &accepted));
  const Backend* backend = FindBackend(accepted.link);  // the opener chose
  if (!backend) return Status(Code::kInternal, "no data-plane backend for an accepted stream");
  return backend->AdoptStream(this, std::move(accepted), "rank " + std::to_string(peer), stream);
}

std::unique_ptr<Context> SocketDevice::CreateContext(int32_t set_id, int32_t self,
                                                     std::vector<PeerRoute> routes) {
  return std::make_unique<SocketContext>(this, set_id, self, std::move(routes));
}

}  // namespace tutti::transport
