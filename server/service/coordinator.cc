#include "server/service/coordinator.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <random>
#include <thread>
#include <csignal>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <nlohmann/json.hpp>

#include "server/core/coordinator_core.h"
#include "server/core/frames.h"
#include "server/core/service_metrics.h"
#include "server/security/zap_handler.h"
#include "server/service/ha_member.h"
#include "server/service/status_board.h"

namespace tutti::server {
namespace {

// Frames read before what they completed is released.
constexpr int kMaxBatch = 256;

// How often tuttid hands its buffered timeline to the kernel.
constexpr auto kTimelineFlush = std::chrono::seconds(1);


// Frames tuttid queues for one client that does not read before it drops them. A rank reads as
// fast as tuttid writes; this bounds what a stuck or hostile one costs (about 100 bytes each).
constexpr int kSendQueueFrames = 100000;

// After a connection closed: when to look again for the rank it belonged to.
constexpr std::chrono::milliseconds kConnectionRechecks[] = {
    std::chrono::milliseconds(2), std::chrono::milliseconds(10), std::chrono::milliseconds(50)};

// Unanswered TCP keepalive probes (one a heartbeat interval, after a lease of silence) before the
// kernel drops a connection.
constexpr int kKeepaliveProbes = 3;

// Connections waiting to be accepted; the kernel caps it (net.core.somaxconn, 4096 by default).
constexpr int kAcceptBacklog = 65536;

// How long the goodbye frames may take to leave once tuttid stops.
constexpr auto kGoodbyeLinger = std::chrono::milliseconds(1000);

uint64_t RandomEpoch() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

// tuttid's own process in merged timelines, apart from the ranks (process = rank).
constexpr int64_t kTimelinePid = 1 << 20;

std::unique_ptr<Timeline> OpenTimeline(const std::string& path) {
  if (path.empty()) return nullptr;
  auto timeline = std::make_unique<Timeline>(kTimelinePid, "tuttid");
  Status status = timeline->Start(path);
  if (!status.ok()) throw std::runtime_error(status.message());
  return timeline;
}

// Every trial of every autotuned set, as docs/autotune.md shows them.
void LogAutotuneTrial(const std::string& job, int32_t set, const Autotuner::Trial& trial,
                      bool converged) {
  spdlog::info("job '{}' set {}: autotune trial fusion_threshold={} small_allreduce_bytes={} "
               "pipeline_bytes={}: {:.1f} MB/s ({}{}){}",
               job, set, trial.values.fusion_threshold, trial.values.small_allreduce_bytes,
               trial.values.pipeline_bytes, trial.bytes_per_second / 1e6,
               trial.own_time ? "execution time" : "wall clock",
               trial.confirmation ? ", confirmation" : "", converged ? "; converged" : "");
}

}  // namespace

struct Coordinator::Impl {
  explicit Impl(const CoordinatorOptions& options)
      : options(options),
        timeline(OpenTimeline(options.timeline)),
        core(options.rendezvous_timeout_ms, options.epoch != 0 ? options.epoch : RandomEpoch(),
             Job::Policy{options.heartbeat_interval_ms, options.lease_ms, options.stall_warning_ms,
                         options.stall_shutdown_ms, timeline.get(),
                         static_cast<size_t>(options.max_pending_tensors), nullptr, nullptr,
                         options.probe_timeout_ms, nullptr, nullptr,  // HA: EnableHa below
                         options.autotune_trial_tensors, options.autotune_trial_ms,
                         options.autotune_warmup_tensors, LogAutotuneTrial},
             static_cast<size_t>(options.max_jobs)),
        socket(context, zmq::socket_type::router),
        monitor(context, zmq::socket_type::pair) {
    core.set_metrics(options.metrics);
    if (options.ha) {
      std::shared_ptr<HaMember> ha = options.ha;
      core.EnableHa([ha] { return ha->MayRelease(); });
    }
    core.set_address_limits(options.max_registrations_per_second, options.registration_burst,
                            static_cast<size_t>(options.max_rendezvous_jobs_per_address),
                            static_cast<size_t>(options.max_rendezvous_ranks_per_address));
    if (options.curve) {
      // The ZAP endpoint must exist before the first client handshakes.
      zap = std::make_unique<ZapHandler>(context, *options.curve);
      socket.set(zmq::sockopt::curve_server, 1);
      socket.set(zmq::sockopt::curve_secretkey, options.curve->secret_key);
      core.set_client_keys(options.curve.get());
    }
    socket.set(zmq::sockopt::router_mandatory, 1);
    // A rank's link keeps one routing id for its life (client/control/coordinator_link.cc): its
    // reconnection takes the old one over, so that tuttid still knows it, or tells it that it was
    // evicted, however long it was away.
    socket.set(zmq::sockopt::router_handover, 1);
    // Closed connections, so that a rank that died is found at once (Job::CheckConnections).
    const std::string monitor_endpoint =
        "inproc://tuttid-monitor-" + std::to_string(reinterpret_cast<uintptr_t>(this));
    if (zmq_socket_monitor(socket.handle(), monitor_endpoint.c_str(), ZMQ_EVENT_DISCONNECTED) != 0)
      throw std::runtime_error("cannot monitor the coordinator socket");
    monitor.connect(monitor_endpoint);
    // TCP keepalives tear down connections whose peer vanished (its host crashed: no FIN ever
    // comes); the application lease (Job::Tick) is what declares a rank lost. Not ZMTP
    // heartbeats: libzmq (4.3) cancels a connection's heartbeat timer by a linear search of all
    // its timers, after every ping, so with thousands of ranks tuttid's I/O thread spent most of
    // its time there (docs/scale.md). The kernel keeps these timers per socket, at no cost per
    // frame. The ranks still ping tuttid over ZMTP (client/control/coordinator_link.cc), and
    // answering a ping arms no timer.
    const auto seconds = [](int64_t ms) { return static_cast<int>(std::max<int64_t>(1, (ms + 999) / 1000)); };
    socket.set(zmq::sockopt::tcp_keepalive, 1);
    socket.set(zmq::sockopt::tcp_keepalive_idle, seconds(options.lease_ms));
    socket.set(zmq::sockopt::tcp_keepalive_intvl, seconds(options.heartbeat_interval_ms));
    socket.set(zmq::sockopt::tcp_keepalive_cnt, kKeepaliveProbes);
    // Thousands of ranks connect at once when a large job starts: a short accept queue (ZeroMQ's
    // default is 100) drops their handshakes, which TCP retries only a second later.
    socket.set(zmq::sockopt::backlog, kAcceptBacklog);
    socket.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
    socket.set(zmq::sockopt::sndhwm, kSendQueueFrames);
    socket.set(zmq::sockopt::linger, 0);
    try {
      socket.bind(options.bind);
    } catch (const zmq::error_t& e) {
      throw std::runtime_error("cannot bind " + options.bind + ": " + e.what());
    }
    endpoint = socket.get(zmq::sockopt::last_endpoint);
    wakeup = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wakeup < 0) throw std::runtime_error("eventfd failed");
  }
  ~Impl() {
    zmq_socket_monitor(socket.handle(), nullptr, 0);
    close(wakeup);
  }

  // Never blocks: a client that stops reading must not stall every other job. Frames to a peer
  // that left kSendQueueFrames unread (EAGAIN) or that is gone (EHOSTUNREACH) are dropped and
  // counted, in one line a second at most. The first is a rank in trouble: a warning. The second
  // is what every job's end looks like (the ranks that finalize last are told of the first ones
  // after they closed their sockets): info. A peer that is gone is reported to the core, which
  // declares a rank behind it lost at its next Tick.
  void Send(Outbox& out) {
    if (options.test_die_mid_execute > 0) DieMidExecuteIfDue(out);
    for (Outgoing& o : out) {
      try {
        if (!socket.send(zmq::buffer(o.peer), zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
            !socket.send(Message(o), zmq::send_flags::dontwait))
          ++dropped_unread;
      } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH) {
          ++dropped_gone;
          core.Unreachable(o.peer);
        } else {
          ++dropped_unread;
        }
      }
    }
    out.clear();
    if ((dropped_unread > 0 || dropped_gone > 0) &&
        Clock::now() - last_drop_warning >= std::chrono::seconds(1)) {
      if (dropped_unread > 0)
        spdlog::warn("dropped {} frames to ranks that stopped reading", dropped_unread);
      if (dropped_gone > 0)
        spdlog::info("dropped {} frames to ranks that disconnected", dropped_gone);
      dropped_unread = dropped_gone = 0;
      last_drop_warning = Clock::now();
    }
  }

  // The test hook of CoordinatorOptions::test_die_mid_execute.
  void DieMidExecuteIfDue(const Outbox& out) {
    for (size_t i = 0; i < out.size(); ++i) {
      if (!frames::Decode(out[i]).has_execute() || (i > 0 && out[i - 1].frame == out[i].frame))
        continue;
      if (++executes_seen < options.test_die_mid_execute) continue;
      size_t recipients = 0;
      while (i + recipients < out.size() && out[i + recipients].frame == out[i].frame) ++recipients;
      Outbox half(out.begin() + static_cast<std::ptrdiff_t>(i),
                  out.begin() + static_cast<std::ptrdiff_t>(i + recipients / 2));
      options.test_die_mid_execute = 0;  // Send below must not come back here
      spdlog::warn("test hook: sending Execute {} to {} of its {} recipients, then dying",
                   executes_seen, half.size(), recipients);
      Send(half);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // ZeroMQ's I/O thread sends
      raise(SIGKILL);
    }
  }
  int64_t executes_seen = 0;

  // The ZeroMQ message of `o`: the shared frame, then the recipient's own part if any. Copied: an
  // Execute is a few KiB, and handing ZeroMQ's I/O thread our buffer instead would make it free
  // our memory through synchronization ThreadSanitizer cannot see (libzmq is not instrumented).
  static zmq::message_t Message(const Outgoing& o) {
    zmq::message_t message(o.frame->size() + o.own.size());
    std::memcpy(message.data(), o.frame->data(), o.frame->size());
    if (!o.own.empty())
      std::memcpy(static_cast<char*>(message.data()) + o.frame->size(), o.own.data(), o.own.size());
    return message;
  }

  // An HA group's member: takes the HA thread's role changes and hands it the job records to
  // write. Called every turn of the loop; never waits for etcd.
  void FollowHa() {
    if (!options.ha) return;
    if (auto role = options.ha->TakeChange()) {
      if (role->leading) core.LoadRecords(std::move(role->records));
      core.SetRole(role->leading, role->leader, role->term);
    }
    auto changes = core.TakeRecordChanges();
    if (!changes.empty()) options.ha->Write(std::move(changes));
  }

  // Reads what is waiting (at most kMaxBatch frames, so that answers are never held back for
  // long): everything the batch completes is then released, and fused, together.
  void Receive(Outbox& out) {
    std::vector<zmq::message_t> parts;
    for (int handled = 0; handled < kMaxBatch; ++handled) {
      parts.clear();
      // A message's parts arrive together: once the first is here, so are the others.
      if (!zmq::recv_multipart(socket, std::back_inserter(parts), zmq::recv_flags::dontwait))
        return;
      if (parts.size() != 2) {
        spdlog::warn("refused a message of {} frames", parts.size() - 1);
        out.push_back({parts[0].to_string(),
                       frames::Refusal(Status(Code::kInvalidArgument,
                                              "a message must be exactly one frame, got " +
                                                  std::to_string(parts.size() - 1)))});
        Send(out);
        continue;
      }
      CoordinatorCore::Source source{parts[0].to_string(), "", ""};
      // A registered connection is known by its routing id; only newcomers need their address
      // (flood limits) and CURVE key (which ranks they may register as).
      if (!core.knows(source.peer)) {
        if (const char* address = zmq_msg_gets(parts[1].handle(), "Peer-Address")) source.address = address;
        if (zap)
          if (const char* key = zmq_msg_gets(parts[1].handle(), "User-Id")) source.key = key;
      }
      core.HandleFrame(source, parts[1].data(), parts[1].size(), Clock::now(), &out);
      Send(out);
    }
  }

  CoordinatorOptions options;  // test_die_mid_execute counts down
  zmq::context_t context{1};
  std::unique_ptr<ZapHandler> zap;  // with CURVE only; before the socket that relies on it
  std::unique_ptr<Timeline> timeline;  // before core, whose jobs record into it
  CoordinatorCore core;
  zmq::socket_t socket;
  zmq::socket_t monitor;  // socket's closed connections
  std::string endpoint;
  int wakeup = -1;
  uint64_t dropped_unread = 0, dropped_gone = 0;
  Clock::time_point last_drop_warning{};
};

Coordinator::Coordinator(const CoordinatorOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

Coordinator::~Coordinator() = default;

const std::string& Coordinator::endpoint() const { return impl_->endpoint; }

void Coordinator::Run() {
  Impl& s = *impl_;
  Outbox out;
  auto last_flush = Clock::now();
  // Upper bound on one poll: a missed wakeup never stalls deadlines for long, and the iteration
  // hook (the systemd watchdog) runs often enough.
  // An HA member also looks at its role, and at releases its fence held, this often.
  const auto max_poll =
      s.options.ha ? std::chrono::milliseconds(std::clamp<int64_t>(s.options.max_iteration_gap_ms, 1, 50))
                   : std::chrono::milliseconds(std::max<int64_t>(s.options.max_iteration_gap_ms, 1));
  std::vector<zmq::pollitem_t> items = {{s.socket.handle(), 0, ZMQ_POLLIN, 0},
                                        {nullptr, s.wakeup, ZMQ_POLLIN, 0}};
  const size_t status_item = items.size();
  if (s.options.status) items.push_back({nullptr, s.options.status->wake_fd(), ZMQ_POLLIN, 0});
  const size_t zap_item = items.size();
  if (s.zap) items.push_back({s.zap->socket().handle(), 0, ZMQ_POLLIN, 0});
  const size_t monitor_item = items.size();
  items.push_back({s.monitor.handle(), 0, ZMQ_POLLIN, 0});
  std::vector<Clock::time_point> rechecks;  // when to check the connections again, ascending
  bool served = false;  // exit_when_idle: a job has come
  while (true) {
    if (s.options.on_iteration) s.options.on_iteration();
    auto now = Clock::now();
    auto wait = max_poll;
    if (!rechecks.empty())
      wait = std::clamp(std::chrono::ceil<std::chrono::milliseconds>(rechecks.front() - now),
                        std::chrono::milliseconds(0), wait);
    if (auto deadline = s.core.NextDeadline())
      wait = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now) +
                            std::chrono::milliseconds(1),
                        std::chrono::milliseconds(0), wait);
    try {
      zmq::poll(items.data(), items.size(), wait);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // a signal: its handler called Stop(), seen on the next poll
    }
    if (items[1].revents & ZMQ_POLLIN) break;
    s.FollowHa();
    if (s.zap && (items[zap_item].revents & ZMQ_POLLIN)) s.zap->HandleRequests();
    if (items[monitor_item].revents & ZMQ_POLLIN) {
      // Drain the events (two parts each); one check answers them all. The socket may still
      // hold the closed connection's pipe for a moment (its teardown is a handshake between
      // ZeroMQ's threads), so the check is repeated shortly after.
      std::vector<zmq::message_t> event;
      while (zmq::recv_multipart(s.monitor, std::back_inserter(event), zmq::recv_flags::dontwait))
        event.clear();
      const auto at = Clock::now();
      rechecks.clear();
      for (auto delay : kConnectionRechecks) rechecks.push_back(at + delay);
      s.core.CheckConnections(&out);
      s.Send(out);
    }
    while (!rechecks.empty() && rechecks.front() <= Clock::now()) {
      rechecks.erase(rechecks.begin());
      s.core.CheckConnections(&out);
      s.Send(out);
    }
    s.Receive(out);
    s.core.Flush(&out);
    s.core.Tick(Clock::now(), &out);
    s.Send(out);
    s.FollowHa();
    if (s.options.status && (items[status_item].revents & ZMQ_POLLIN)) {
      s.core.UpdateGauges();
      nlohmann::json described = s.core.Describe(Clock::now());
      if (s.options.ha) described["ha"] = s.options.ha->Describe();
      s.options.status->Publish(described.dump());
    }
    // A service runs for weeks: keep its timeline file readable, at most one write a second.
    if (s.timeline && Clock::now() - last_flush >= kTimelineFlush) {
      s.timeline->Flush();
      last_flush = Clock::now();
    }
    served |= s.core.job_count() > 0;
    if (s.options.exit_when_idle && served && s.core.job_count() == 0) {
      spdlog::info("coordinator stopping: every job it served has ended (--exit-when-idle)");
      break;
    }
  }
  // Tell every rank, so that their requests fail now rather than at the end of their lease. The
  // frames get a bounded time to leave before the socket closes.
  out.clear();
  // An HA leader stops without a word to the ranks: they resume with the next leader, which the
  // resignation (HaMember's destructor) lets win at once. A lone tuttid tells them it is gone.
  if (!s.options.ha) s.core.GoingAway(&out);
  s.Send(out);
  s.socket.set(zmq::sockopt::linger, static_cast<int>(kGoodbyeLinger.count()));
  spdlog::info("coordinator stopping: told the ranks of {} jobs", s.core.job_count());
}

void Coordinator::Stop() {
  uint64_t one = 1;
  // write(2) is async-signal-safe; a full counter already means "stop".
  [[maybe_unused]] ssize_t n = write(impl_->wakeup, &one, sizeof(one));
}

}  // namespace tutti::server
