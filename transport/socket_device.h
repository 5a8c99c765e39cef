// The device: two listening sockets per runtime and an acceptor thread that reads each incoming
// connection's hello and parks it until the lane of the named set asks for it.
//   - TCP, on the data-plane address: TCP channels and point-to-point streams, and the bootstrap
//     of ibverbs channels, whose hello names them (kIbverbsHelloMagic) and whose queue pairs are
//     set up by signed parameters on the same connection (transport/ibverbs/).
//   - an abstract Unix socket named after the TCP endpoint ("tutti.<ip>:<port>"): the handshake
//     of shared-memory channels, which passes the segment's file descriptors (SCM_RIGHTS) and then
//     stays open only so that each side sees the other die. Abstract names live in the network
//     namespace, as do same-host ranks (host identity includes the namespace).
//
// Who connects: for each pair of ranks in a set, the lower global rank connects and chooses the
// backend; the higher accepts whatever arrives. The acceptor thread answers every connection at
// once with a fresh nonce, and the connecting side sends its hello (for shared memory with the
// segment's fds) and an HMAC over the nonce under the job's secret (transport/handshake.h); the
// acceptor thread answers a verified hello with its own proof (at once, or when the job's secret
// arrives): no lane's cooperation is needed, so lanes setting up in any order never wait on each
// other.
//
// Under TUTTI_TRANSPORT=mpi (MPI mode) the device also owns the runtime's MessageCarrier, and every
// pair is the MPI backend's: a connection through the TCP listener is then the handshake socket of
// an MPI channel (transport/pipe/), whose bytes travel as MPI messages.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "transport/fd_io.h"
#include "transport/handshake.h"
#include "transport/message_pipe.h"
#include "transport/secure/session_keys.h"
#include "transport/transport.h"

namespace tutti::transport {

// A connection as the acceptor parked it: the socket, the link it carries (by the listener it
// came through, or named by its hello's magic), the file descriptors its hello carried, and the
// channel and rank it named. Accept adds what a backend that still talks on the socket needs:
// the handshake (challenge, hello, chosen cipher: ibverbs signs with it, TCP derives its record
// keys from it), the rank it reached, and the caller's deadline and abort fd.
struct Accepted {
  UniqueFd fd;
  Link link = Link::kTcp;
  std::vector<UniqueFd> passed;
  int32_t channel = 0;
  int32_t peer = -1;
  int32_t self = -1;
  Session session;
  Deadline deadline{};
  int abort_fd = -1;
};

class SocketDevice : public Device {
 public:
  // `carrier`: the runtime's MessageCarrier under TUTTI_TRANSPORT=mpi, else null.
  static Status Create(const std::string& address, std::unique_ptr<MessageCarrier> carrier,
                       std::unique_ptr<Device>* device);
  ~SocketDevice() override;

  const std::string& endpoint() const override { return endpoint_; }
  void SetJobSecret(const std::string& secret, int32_t self, DataSecurity security) override;
  // The job's data-plane protection, as SetJobSecret gave it. Any thread.
  DataSecurity security() const { return security_.load(); }
  // The record keys of a connection whose handshake was `session` (transport/secure/).
  SessionKeys KeysOf(const Session& session);
  std::unique_ptr<Context> CreateContext(int32_t set_id, int32_t self,
                                         std::vector<PeerRoute> routes) override;
  void Shutdown() override;
  Status OpenStream(int32_t channel, int32_t self, int32_t peer, const PeerRoute& route,
                    Deadline deadline, std::unique_ptr<Stream>* stream) override;
  Status AcceptStream(int32_t channel, int32_t peer, Deadline deadline,
                      std::unique_ptr<Stream>* stream) override;

  // Used by SocketContext (from its lane thread). `abort_fd` readable ends the wait early.
  // `magic`: the hello's (kIbverbsHelloMagic for an ibverbs bootstrap); `session`, if given,
  // receives the handshake, for signing what follows on the socket or deriving its keys.
  Status ConnectTcp(int32_t set_id, int32_t self, int32_t peer, const std::string& endpoint,
                    Deadline deadline, int abort_fd, UniqueFd* out,
                    uint32_t magic = kHelloMagic, Session* session = nullptr);
  // Connects to the Unix listener of the device whose TCP endpoint is `endpoint` (same host),
  // passing `fds` with the hello. `abort_fd` readable ends the wait early.
  Status ConnectUnix(int32_t set_id, int32_t self, int32_t peer, const std::string& endpoint,
                     const std::vector<int>& fds, Deadline deadline, int abort_fd, UniqueFd* out);
  Status Accept(int32_t set_id, int32_t peer, Deadline deadline, int abort_fd, Accepted* out);
  // Makes waiting Accept calls look at their abort fd.
  void WakeAccepts() {
    // Under the lock: an Accept between its abort check and its wait must not miss this.
    std::lock_guard<std::mutex> lock(mu_);
    parked_cv_.notify_all();
  }
  void Forget(int32_t set_id);
  int cancel_fd() const { return cancel_.get(); }
  // A backend's parameters sent after the hello, signed and checked under the job's secret
  // (transport/handshake.h: SignParams). Any thread.
  void SignParams(const Challenge& challenge, int32_t from, int32_t to, const void* params,
                  size_t len, uint8_t mac[kParamsMacBytes]);
  bool VerifyParams(const Challenge& challenge, int32_t from, int32_t to, const void* params,
                    size_t len, const uint8_t mac[kParamsMacBytes]);
  // The runtime's MessageCarrier, or null. Thread-safe (MessageCarrier is).
  MessageCarrier* carrier() const { return carrier_.get(); }

 private:
  struct Parked {
    Accepted connection;
    Challenge challenge;  // what this connection was asked to sign
    Hello hello;
    bool proven = false;  // our proof was sent
  };
  // Our answer to `challenge` on a connection to `peer`.
  Hello SignedHello(int32_t set_id, int32_t self, int32_t peer, const Challenge& challenge,
                    uint32_t magic = kHelloMagic);
  // Reads the acceptor's proof after our `hello` and checks it; fills `session`.
  Status AwaitProof(int fd, const Challenge& challenge, const Hello& hello, Deadline deadline,
                    int abort_fd, const std::string& who, Session* session);
  // Whether `parked` proved it belongs to the job, with our data-security setting. Caller holds mu_.
  bool Genuine(const Parked& parked) const;
  // Sends our proof to a genuine `parked` once; false if the socket failed. Caller holds mu_.
  bool Prove(Parked* parked);

  SocketDevice(UniqueFd tcp_listener, UniqueFd unix_listener, UniqueFd cancel, std::string endpoint,
               std::unique_ptr<MessageCarrier> carrier);
  void AcceptLoop();
  void Park(int listener, Link link);

  UniqueFd tcp_listener_, unix_listener_;
  UniqueFd cancel_;  // eventfd: readable once Shutdown() was called
  std::string endpoint_;
  std::unique_ptr<MessageCarrier> carrier_;
  std::mutex mu_;
  std::string secret_;  // the job's, once known; guarded by mu_
  int32_t self_ = -1;   // guarded by mu_
  std::atomic<DataSecurity> security_{DataSecurity::kOff};
  std::condition_variable parked_cv_;
  // (set, from rank) -> connections claiming to be from it. Once the secret is known only genuine
  // ones are parked; before, a forged claim must not displace the real one, so a few are kept
  // (the first ones: later ones are refused) and a bounded number in all.
  std::map<std::pair<int32_t, int32_t>, std::vector<Parked>> parked_;
  // Failed handshakes by claimed (set, rank), for the error of an Accept that times out; a
  // bounded number of keys (they come off the wire).
  std::map<std::pair<int32_t, int32_t>, int> rejected_;
  void NoteRejected(const std::pair<int32_t, int32_t>& key);  // mu_ held
  std::thread acceptor_;
};

// The abstract Unix socket name of the device whose TCP endpoint is `endpoint`.
std::string UnixName(const std::string& endpoint);

}  // namespace tutti::transport
