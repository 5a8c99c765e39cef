#include "client/coordinator_link.h"

#include <sys/eventfd.h>
#include <unistd.h>

namespace tutti::client {
namespace {

// How long finalize may spend flushing the Bye to a coordinator that no longer reads.
constexpr int kLingerMs = 500;

Status FromWire(const wire::Error& error) {
  return Status(static_cast<Code>(error.code()), error.message());
}

}  // namespace

CoordinatorLink::CoordinatorLink(std::string endpoint, Callbacks callbacks)
    : endpoint_(std::move(endpoint)),
      callbacks_(std::move(callbacks)),
      socket_(context_, zmq::socket_type::dealer) {
  socket_.set(zmq::sockopt::maxmsgsize, wire::kMaxFrameBytes);
  socket_.set(zmq::sockopt::linger, kLingerMs);
  socket_.connect(endpoint_);  // asynchronous: never fails for a well-formed endpoint
  wakeup_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { Run(); });
}

CoordinatorLink::~CoordinatorLink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (registered_) {
      wire::Frame bye;
      bye.mutable_bye();
      outbox_.push_back(wire::Encode(bye));
    }
  }
  Wake();
  thread_.join();
  socket_.close();
  close(wakeup_);
}

void CoordinatorLink::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wakeup_, &one, sizeof(one));
}

Status CoordinatorLink::Register(const wire::Register& request, transport::Deadline deadline,
                                 wire::Welcome* welcome) {
  std::future<wire::Frame> reply;
  {
    wire::Frame frame;
    *frame.mutable_register_() = request;
    std::lock_guard<std::mutex> lock(mu_);
    registration_.emplace();
    reply = registration_->get_future();
    outbox_.push_back(wire::Encode(frame));
  }
  Wake();
  if (reply.wait_until(deadline) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(mu_);
    registration_.reset();
    return Status(Code::kCoordinatorLost,
                  "coordinator lost: no answer to the registration from " + endpoint_ +
                      " before the deadline (is tuttid running there?)");
  }
  wire::Frame frame = reply.get();
  if (frame.has_refusal()) return FromWire(frame.refusal().error());
  *welcome = frame.welcome();
  std::lock_guard<std::mutex> lock(mu_);
  registered_ = true;
  return Status::Ok();
}

Status CoordinatorLink::Call(wire::Frame request, uint64_t request_id, transport::Deadline deadline,
                             wire::SetReply* reply) {
  std::future<wire::SetReply> answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Status(Code::kShutDown, "the runtime is shutting down");
    answer = calls_[request_id].get_future();
    outbox_.push_back(wire::Encode(request));
  }
  Wake();
  if (answer.wait_until(deadline) != std::future_status::ready) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(request_id);
    return Status(Code::kCoordinatorLost,
                  "coordinator lost: no answer from " + endpoint_ + " before the deadline");
  }
  *reply = answer.get();
  if (reply->has_error() && reply->error().code() != 0) return FromWire(reply->error());
  return Status::Ok();
}

void CoordinatorLink::Announce(int32_t set_id, wire::TensorSpec spec) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    announced_[set_id].push_back(std::move(spec));
  }
  Wake();
}

void CoordinatorLink::Flush() {
  std::vector<std::string> frames;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Announcements go first: a thread that submitted and then asked for a set change expects the
    // coordinator to see them in that order.
    if (!announced_.empty()) {
      wire::Frame frame;
      for (auto& [set_id, specs] : announced_) {
        auto* set = frame.mutable_announce()->add_sets();
        set->set_set_id(set_id);
        for (auto& spec : specs) *set->add_tensors() = std::move(spec);
      }
      announced_.clear();
      frames.push_back(wire::Encode(frame));
    }
    for (std::string& bytes : outbox_) frames.push_back(std::move(bytes));
    outbox_.clear();
  }
  for (const std::string& bytes : frames) socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
}

void CoordinatorLink::Dispatch(wire::Frame& frame) {
  switch (frame.body_case()) {
    case wire::Frame::kWelcome:
    case wire::Frame::kRefusal: {
      if (frame.has_refusal() && !frame.refusal().tensor_name().empty()) {
        callbacks_.on_tensor_refused(frame.refusal());
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (registration_) {
        registration_->set_value(std::move(frame));
        registration_.reset();
      }
      return;
    }
    case wire::Frame::kSetReply: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = calls_.find(frame.set_reply().request_id());
      if (it == calls_.end()) return;  // its caller gave up waiting
      it->second.set_value(frame.set_reply());
      calls_.erase(it);
      return;
    }
    case wire::Frame::kExecute:
      callbacks_.on_execute(*frame.mutable_execute());
      return;
    default:
      return;  // nothing else is sent to ranks
  }
}

void CoordinatorLink::Run() {
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, wakeup_, ZMQ_POLLIN, 0}};
  while (true) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
      continue;  // the application's signal landed on this thread
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = read(wakeup_, &count, sizeof(count));
      Flush();
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    zmq::message_t message;
    while (socket_.recv(message, zmq::recv_flags::dontwait)) {
      wire::Frame frame;
      if (!frame.ParseFromArray(message.data(), static_cast<int>(message.size())) ||
          frame.magic() != wire::kMagic)
        continue;  // not from a tutti coordinator; nothing sensible to do with it
      Dispatch(frame);
    }
  }
}

}  // namespace tutti::client
