#include "client/control/coordinator_link.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "proto/status_codec.h"
#include "proto/versions.h"

namespace tutti::client {
namespace {

// How long finalize may spend flushing the Bye to a coordinator that no longer reads.
constexpr int kLingerMs = 500;

// How long one blocked send waits before the I/O thread checks whether the link died.
constexpr int kSendWaitMs = 1000;

// A routing id of the link's own, kept across reconnections: tuttid knows a rank that lost its
// TCP connection (it was frozen, the network broke) when it comes back, and tells an evicted one
// so, however long it was away (ZeroMQ would give a reconnection a fresh id). Random, so that no
// two links share one; ZeroMQ reserves ids starting with a zero byte.
std::string NewRoutingId() {
  std::random_device device;
  std::string id(16, '\0');
  for (size_t i = 0; i < id.size(); i += 4) {
    const uint32_t word = device();
    std::memcpy(&id[i], &word, 4);
  }
  id[0] = 't';
  return id;
}

std::vector<std::string> SplitEndpoints(const std::string& list) {
  std::vector<std::string> endpoints;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string one = list.substr(start, comma - start);
    const size_t first = one.find_first_not_of(' '), last = one.find_last_not_of(' ');
    if (first != std::string::npos) endpoints.push_back(one.substr(first, last - first + 1));
    start = comma + 1;
  }
  if (endpoints.empty()) endpoints.push_back(list);
  return endpoints;
}

}  // namespace

CoordinatorLink::CoordinatorLink(std::string endpoint, LinkListener* listener, Counters* counters,
                                 std::chrono::microseconds cycle_time,
                                 const CurveClientKeys& curve)
    : endpoints_(SplitEndpoints(endpoint)),
      ha_(endpoints_.size() > 1),
      endpoint_(endpoints_[0]),
      listener_(listener),
      counters_(counters),
      cycle_time_(cycle_time),
      socket_(context_, zmq::socket_type::dealer),
      monitor_(context_, zmq::socket_type::pair),
      curve_(curve.enabled()) {
  if (curve_) {
    socket_.set(zmq::sockopt::curve_serverkey, curve.server_public);
    socket_.set(zmq::sockopt::curve_publickey, curve.public_key);
    socket_.set(zmq::sockopt::curve_secretkey, curve.secret_key);
  }
  // Before connect, so that no handshake goes unobserved.
  const std::string monitor_endpoint =
      "inproc://tutti-link-monitor-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  // An HA group's member also watches its connections come and go: a closed one starts the
  // failover at once, and an attempt that never connects moves on to the next endpoint.
  const int ha_events = ha_ ? ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED : 0;
  if (zmq_socket_monitor(socket_.handle(), monitor_endpoint.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ha_events) != 0)
    throw zmq::error_t();
  monitor_.connect(monitor_endpoint);
  socket_.set(zmq::sockopt::routing_id, NewRoutingId());
  // An HA group's link moves between members: nothing may queue on a member that is down.
  if (ha_) socket_.set(zmq::sockopt::immediate, 1);
  socket_.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
  socket_.set(zmq::sockopt::linger, kLingerMs);
  socket_.set(zmq::sockopt::sndtimeo, kSendWaitMs);
  // ZMTP heartbeats let ZeroMQ drop a connection whose peer vanished; the lease in KeepAlive()
  // is what declares the coordinator lost.
  socket_.set(zmq::sockopt::heartbeat_ivl, 1000);
  socket_.set(zmq::sockopt::heartbeat_timeout, 5000);
  // Asynchronous: never fails for a well-formed endpoint. An HA group's link connects when it
  // registers, to one member after another until one answers (link_failover.cc).
  if (!ha_) socket_.connect(endpoint_);
  wakeup_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { Run(); });
}

void CoordinatorLink::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    if (registered_ && dead_.ok() && !attaching_) {
      wire::Frame bye;
      bye.mutable_bye();
      outbox_.push_back(Stamp(bye));
    }
  }
  Wake();
  thread_.join();
}

CoordinatorLink::~CoordinatorLink() {
  Stop();
  zmq_socket_monitor(socket_.handle(), nullptr, 0);
  monitor_.close();
  socket_.close();
  close(wakeup_);
}

std::string CoordinatorLink::Stamp(wire::Frame& frame) const {
  frame.set_membership_epoch(membership_epoch_);
  return wire::Encode(frame, epoch_);
}

void CoordinatorLink::EnterEpoch(uint64_t membership_epoch, const std::vector<int32_t>& changed_sets) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    membership_epoch_ = membership_epoch;
    for (int32_t id : changed_sets) {
      announced_.DropSet(id);
      fast_.Leave(id);  // the set's next incarnation starts with tuttid
      // tuttid drops what was sent in the earlier epoch: an ask not yet taken up goes again.
      auto unconfirmed = autotune_unconfirmed_.find(id);
      if (unconfirmed != autotune_unconfirmed_.end()) {
        unconfirmed->second = false;
        if (announced_.empty()) first_queued_ = transport::Clock::now();
        announced_.AskAutotune(id);
      }
    }
  }
  fast_cv_.notify_all();
  Wake();
}

void CoordinatorLink::SendPeerReport(int32_t set_id, int32_t rank, uint64_t incarnation_epoch,
                                     bool integrity_failure) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_ || !dead_.ok()) return;
    wire::Frame frame;
    frame.mutable_peer_report()->set_rank(rank);
    frame.mutable_peer_report()->set_set_id(set_id);
    frame.mutable_peer_report()->set_incarnation_epoch(incarnation_epoch);
    frame.mutable_peer_report()->set_integrity_failure(integrity_failure);
    outbox_.push_back(Stamp(frame));
  }
  Wake();
}

void CoordinatorLink::SendAtBoundary() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_ || !dead_.ok()) return;
    wire::Frame frame;
    frame.mutable_at_boundary();
    outbox_.push_back(Stamp(frame));
  }
  Wake();
}

void CoordinatorLink::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeup_, &one, sizeof(one));
}

Status CoordinatorLink::Register(const wire::Register& request, wire::Welcome* welcome) {
  const transport::Deadline deadline =
      transport::Clock::now() + std::chrono::milliseconds(request.rendezvous_timeout_ms()) +
      kCoordinatorGrace;
  std::future<Answer> reply;
  {
    wire::Frame frame;
    *frame.mutable_register_() = request;
    std::lock_guard<std::mutex> lock(mu_);
    if (!dead_.ok()) return dead_;  // e.g. the handshake already failed
    registration_.emplace();
    reply = registration_->get_future();
    if (ha_) {
      // Sent to each member in turn until the leader has it (link_failover.cc).
      register_request_ = request;
      hello_ = wire::Encode(frame);
      attaching_ = true;
    } else {
      outbox_.push_back(wire::Encode(frame));
    }
  }
  Wake();
  if (reply.wait_until(deadline) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(mu_);
    registration_.reset();
    attaching_ = false;
    std::string where = endpoint_;
    if (ha_) {
      where.clear();
      for (const std::string& e : endpoints_) where += (where.empty() ? "" : ", ") + e;
    }
    return Status(Code::kCoordinatorLost,
                  "coordinator lost: no answer to the registration from " + where +
                      " before the deadline (is tuttid running there?)");
  }
  Answer answer = reply.get();
  TUTTI_RETURN_IF_ERROR(answer.local);
  if (answer.frame.has_refusal()) return wire::ToStatus(answer.frame.refusal().error());
  *welcome = answer.frame.welcome();
  {
    std::lock_guard<std::mutex> lock(mu_);
    registered_ = true;
    slot_ = welcome->members().empty() ? request.rank() : welcome->slot();
    job_secret_ = welcome->job_secret();
    epoch_ = welcome->coordinator_epoch();
    membership_epoch_ = welcome->membership_epoch();
    heartbeat_interval_ = std::chrono::milliseconds(std::max<int64_t>(welcome->heartbeat_interval_ms(), 1));
    lease_ = std::chrono::milliseconds(std::max<int64_t>(welcome->lease_ms(), 1));
  }
  Wake();  // the I/O thread starts heartbeating
  return Status::Ok();
}

bool CoordinatorLink::Announce(int32_t set_id, wire::TensorSpec spec) {
  bool first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fast_.on(set_id)) {
      const auto slot = announced_.Lookup(set_id, spec);
      fast_.Add(set_id, std::move(spec), slot, transport::Clock::now());
      return false;
    }
    first = announced_.empty();
    if (first) first_queued_ = transport::Clock::now();
    announced_.Add(set_id, std::move(spec));
  }
  // With a batching window only the first announcement wakes the I/O thread, which then sleeps
  // until the window closes; without one, every announcement does.
  if (first || cycle_time_.count() == 0) Wake();
  return true;
}

void CoordinatorLink::ForgetTensor(int32_t set_id, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  announced_.Forget(set_id, name);
}

void CoordinatorLink::ForgetSet(int32_t set_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    announced_.DropSet(set_id);
    progress_.erase(set_id);
    fast_.Leave(set_id);
    autotune_asked_.erase(set_id);
    autotune_unconfirmed_.erase(set_id);
  }
  fast_cv_.notify_all();
}

void CoordinatorLink::SendAbort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_ || !dead_.ok()) return;
    wire::Frame frame;
    frame.mutable_abort();
    outbox_.push_back(Stamp(frame));
  }
  Wake();
}

void CoordinatorLink::SendCommId(int32_t set_id, int32_t group, const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!registered_ || !dead_.ok()) return;  // the set fails with the link's status
    wire::Frame frame;
    auto* comm_id = frame.mutable_comm_id();
    comm_id->set_set_id(set_id);
    comm_id->set_device_group(group);
    comm_id->set_id(id);
    outbox_.push_back(Stamp(frame));
  }
  Wake();
}

void CoordinatorLink::Flush(bool announcements) {
  std::vector<std::string> frames;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (attaching_) return;  // only the hello goes until the leader answers it (Attempt)
    // Announcements go first: a thread that submitted and then asked for a set change expects the
    // coordinator to see them in that order, so a pending message cuts the window short.
    if (!announced_.empty() && (announcements || !outbox_.empty())) {
      wire::Frame frame;
      const auto drained = announced_.Drain(frame.mutable_announce());
      // Autotuned sets: each announced set's execution time under tuttid's trials.
      for (auto& set : *frame.mutable_announce()->mutable_sets()) counters_->trials.Report(&set);
      frames.push_back(Stamp(frame));
      Counters::Add(counters_->announce_messages, 1);
      Counters::Add(counters_->announce_bytes, frames.back().size());
      Counters::Add(counters_->tensors_announced, drained.full);
      Counters::Add(counters_->tensors_announced_cached, drained.cached);
    }
    for (std::string& bytes : outbox_) frames.push_back(std::move(bytes));
    outbox_.clear();
  }
  for (const std::string& bytes : frames) {
    // A send waits (kSendWaitMs at a time) while tuttid is slow to read, which is the
    // backpressure announcements need; it gives up once the link is dead or stopping, since a
    // DEALER whose connection failed its handshake has no pipe left and would wait forever.
    while (!socket_.send(zmq::buffer(bytes), zmq::send_flags::none)) {
      // An HA group's link with no connection: the failover takes over (what was unsent is
      // announced again once the job resumed).
      if (ha_) OnMonitorEvent();
      std::lock_guard<std::mutex> lock(mu_);
      if (!dead_.ok() || stopping_ || attaching_) return;
    }
  }
}

void CoordinatorLink::Run() {
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wakeup_, ZMQ_POLLIN, 0},
                             {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  while (true) {
    auto wait = KeepAlive();
    if (ha_) {
      const auto attempt = Attempt();
      if (attempt.count() >= 0 && (wait.count() < 0 || attempt < wait)) wait = attempt;
    }
    // Announcements waiting for the batching window to close: wake when it does.
    if (cycle_time_.count() > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!announced_.empty()) {
        const auto left = first_queued_ + cycle_time_ - transport::Clock::now();
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(left, left.zero()));
        if (wait.count() < 0 || ms < wait) wait = ms;
      }
    }
    try {
      zmq::poll(items, 3, wait);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // the application's signal landed on this thread
    }
    if (items[2].revents & ZMQ_POLLIN) OnMonitorEvent();
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wakeup_, &count, sizeof(count));
    }
    bool stopping, window_open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
      window_open = cycle_time_.count() > 0 && !announced_.empty() &&
                    transport::Clock::now() < first_queued_ + cycle_time_;
    }
    Flush(!window_open || stopping);
    if (stopping) {
      // What was queued while the first flush was sending (an Abort, the Bye) goes too.
      Flush(true);
      return;
    }
    DeliverHeld();  // once the runtime is ready, what came before it goes first
    zmq::message_t message;
    while (socket_.recv(message, zmq::recv_flags::dontwait)) {
      last_received_ = transport::Clock::now();
      wire::Frame frame;
      if (!frame.ParseFromArray(message.data(), static_cast<int>(message.size())) ||
          frame.magic() != wire::kMagic)
        continue;  // not from a tutti coordinator; nothing sensible to do with it
      // An older tuttid, or a newer one that does not serve this rank's protocol: the link ends
      // with a message that says which to upgrade, rather than waiting on frames it cannot use.
      if (Status version = wire::CheckCoordinatorVersion(frame); !version.ok()) {
        Die(version);
        continue;
      }
      // An HA group's deposed leader may still speak (it was frozen): its term is lower. A
      // standby's frames, and a lone tuttid's, carry none.
      if (frame.term() != 0 && frame.term() < term_) continue;
      term_ = std::max(term_, frame.term());
      if (frame.has_execute()) {
        Counters::Add(counters_->execute_messages, 1);
        Counters::Add(counters_->execute_bytes, message.size());
      }
      Dispatch(frame);
    }
  }
}

}  // namespace tutti::client
