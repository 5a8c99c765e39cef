#include "client/exec/point_to_point.h"

#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "client/exec/point_to_point_staging.h"

namespace tutti::client {
namespace {

constexpr uint32_t kMessageMagic = 0x50325054;  // "TP2P"

struct MessageHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t bytes;
};

// Point-to-point channels live beside the sets' contexts on the device: negative ids.
int32_t ChannelId(int32_t set_id) { return -1 - set_id; }

// Reads block until a message comes or the stream is aborted: there is no deadline to keep.
transport::Deadline Forever() { return transport::Clock::now() + std::chrono::hours(24 * 365); }

// How often a receiver still waiting for its sender's connection looks at its abort flag.
constexpr auto kAcceptSlice = std::chrono::milliseconds(200);

}  // namespace

class PointToPoint::Channel {
 public:
  Channel(PointToPoint* owner, int32_t set_id, int32_t peer, bool sending)
      : owner_(owner), set_id_(set_id), peer_(peer), sending_(sending), staging_(owner->timeout_) {
    thread_ = std::thread([this] { sending_ ? RunSender() : RunReceiver(); });
  }
  ~Channel() {
    Abort(Status(Code::kShutDown, "the runtime was finalized"));
    thread_.join();
  }

  int32_t peer() const { return peer_; }

  void Post(int32_t tag, std::shared_ptr<Request> request, size_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    // A message that arrived before the stream ended (the sender finalized, say) is still
    // delivered: only recvs nothing arrived for fail.
    auto early = unexpected_.find(tag);
    const bool arrived = !sending_ && early != unexpected_.end() && !early->second.empty();
    if (!failed_.ok() && !arrived) {
      const Status failed = failed_;
      lock.unlock();
      request->Complete(failed);
      return;
    }
    if (sending_) {
      outgoing_.push_back({tag, std::move(request), bytes});
      wake_.notify_all();
      return;
    }
    if (!arrived) {
      posted_[tag].push_back({tag, std::move(request), bytes});
      return;
    }
    std::vector<char> message = std::move(early->second.front());
    early->second.pop_front();
    lock.unlock();
    Deliver({tag, std::move(request), bytes}, message.data(), message.size());
  }

  void Abort(const Status& status) {
    std::vector<Item> failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.ok()) return;
      failed_ = status;
      for (auto& item : outgoing_) failed.push_back(std::move(item));
      outgoing_.clear();
      for (auto& [tag, items] : posted_)
        for (auto& item : items) failed.push_back(std::move(item));
      posted_.clear();
      if (stream_) stream_->Abort(status);
    }
    wake_.notify_all();
    for (auto& item : failed) item.request->Complete(status);
  }

 private:
  struct Item {
    int32_t tag;
    std::shared_ptr<Request> request;
    size_t bytes;
  };

  std::string Describe(int32_t tag) const {
    return std::string(sending_ ? "send to" : "recv from") + " rank " + std::to_string(peer_) +
           " (tag " + std::to_string(tag) + ") on process set " + std::to_string(set_id_);
  }

  void Deliver(const Item& item, const char* data, size_t bytes) {
    if (bytes != item.bytes) {
      item.request->Complete(Status(Code::kMismatch, Describe(item.tag) + ": expected " +
                                                         std::to_string(item.bytes) +
                                                         " bytes, the sender sent " +
                                                         std::to_string(bytes)));
      return;
    }
    if (PointToPointStaging::OnDevice(*item.request))
      return item.request->Complete(staging_.ToDevice(*item.request, data, bytes, Interrupt()));
    if (bytes > 0) std::memcpy(item.request->operation().output, data, bytes);
    item.request->Complete(Status::Ok());
  }

  // Device waits end early once the channel failed (a lost peer, finalize).
  gpu::Interrupt Interrupt() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      return failed_;
    };
  }

  // Opens (sender) or takes (receiver) the stream; false once aborted or failed.
  bool Connect() {
    const int32_t channel = ChannelId(set_id_);
    std::unique_ptr<transport::Stream> stream;
    Status status;
    if (sending_) {
      status = owner_->device_->OpenStream(channel, owner_->self_, peer_, owner_->RouteTo(peer_),
                                           transport::Clock::now() + owner_->timeout_, &stream);
    } else {
      do {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (!failed_.ok()) return false;
        }
        status = owner_->device_->AcceptStream(channel, peer_, transport::Clock::now() + kAcceptSlice,
                                               &stream);
      } while (status.code() == Code::kTimeout);
    }
    if (!status.ok()) {
      Abort(status);
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return false;
    stream_ = std::move(stream);
    return true;
  }

  void RunSender() {
    bool connected = false;
    while (true) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return !failed_.ok() || !outgoing_.empty(); });
        if (!failed_.ok()) return;
        item = outgoing_.front();
      }
      if (!connected && !(connected = Connect())) return;
      const void* data = item.request->operation().input;
      if (PointToPointStaging::OnDevice(*item.request)) {
        Status staged = staging_.ToHost(*item.request, item.bytes, Interrupt(), &data);
        if (!staged.ok()) {  // nothing was written: the stream stays usable for the next message
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (!outgoing_.empty()) outgoing_.pop_front();
          }
          item.request->Complete(staged);
          continue;
        }
      }
      const MessageHeader header{kMessageMagic, item.tag, item.bytes};
      const auto deadline = transport::Clock::now() + owner_->timeout_;
      Status status = stream_->Write(&header, sizeof(header), deadline);
      if (status.ok() && item.bytes > 0) status = stream_->Write(data, item.bytes, deadline);
      if (!status.ok()) {
        Abort(Status(status.code(), status.message() + " (" + Describe(item.tag) + ")"));
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!outgoing_.empty()) outgoing_.pop_front();
      }
      item.request->Complete(Status::Ok());
    }
  }

  void RunReceiver() {
    if (!Connect()) return;
    while (true) {
      MessageHeader header{};
      Status status = stream_->Read(&header, sizeof(header), Forever());
      if (status.ok() && header.magic != kMessageMagic)
        status = Status(Code::kInternal, "corrupt point-to-point stream from rank " + std::to_string(peer_));
      if (!status.ok()) return Abort(status);
      std::optional<Item> posted;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = posted_.find(header.tag);
        if (it != posted_.end() && !it->second.empty() && it->second.front().bytes == header.bytes) {
          posted = std::move(it->second.front());
          it->second.pop_front();
        }
      }
      if (posted) {  // straight into the caller's buffer, or the device's staging buffer
        const bool on_device = PointToPointStaging::OnDevice(*posted->request);
        void* into = posted->request->operation().output;
        if (on_device) status = staging_.HostBuffer(*posted->request, header.bytes, &into);
        if (status.ok() && header.bytes > 0) status = stream_->Read(into, header.bytes, Forever());
        if (!status.ok()) {
          posted->request->Complete(status);
          return Abort(status);
        }
        posted->request->Complete(on_device ? staging_.ToDevice(*posted->request, into, header.bytes,
                                                                Interrupt())
                                            : Status::Ok());
        continue;
      }
      // Unexpected: held until a receive is posted. The length came off the wire (unchecked in
      // data-security mode off): one this process cannot hold fails the stream, not the process.
      std::vector<char> message;
      try {
        message.resize(header.bytes);
      } catch (const std::exception&) {
        return Abort(Status(Code::kLimitExceeded,
                            "limit exceeded: a point-to-point message of " +
                                std::to_string(header.bytes) + " bytes from rank " +
                                std::to_string(peer_) + " does not fit in this process's memory"));
      }
      if (header.bytes > 0 && !(status = stream_->Read(message.data(), header.bytes, Forever())).ok())
        return Abort(status);
      std::unique_lock<std::mutex> lock(mu_);
      auto it = posted_.find(header.tag);
      if (it == posted_.end() || it->second.empty()) {
        unexpected_[header.tag].push_back(std::move(message));
        continue;
      }
      Item item = std::move(it->second.front());  // posted meanwhile, or of another size
      it->second.pop_front();
      lock.unlock();
      Deliver(item, message.data(), message.size());
    }
  }

  PointToPoint* owner_;
  const int32_t set_id_, peer_;
  const bool sending_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Item> outgoing_;                                     // sender
  std::map<int32_t, std::deque<Item>> posted_;                    // receiver, by tag
  std::map<int32_t, std::deque<std::vector<char>>> unexpected_;  // receiver, by tag
  std::unique_ptr<transport::Stream> stream_;
  Status failed_;
  PointToPointStaging staging_;  // device tensors
  std::thread thread_;
};

PointToPoint::PointToPoint(transport::Device* device, int32_t self,
                           std::vector<transport::PeerRoute> routes,
                           std::chrono::milliseconds timeout)
    : device_(device), self_(self), timeout_(timeout), routes_(std::move(routes)) {}

void PointToPoint::SetRoutes(std::vector<transport::PeerRoute> routes) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_ = std::move(routes);
}

transport::PeerRoute PointToPoint::RouteTo(int32_t peer) {
  std::lock_guard<std::mutex> lock(mu_);
  return routes_.at(peer);
}

PointToPoint::~PointToPoint() {
  std::map<std::tuple<int32_t, int32_t, bool>, std::unique_ptr<Channel>> channels;
  {
    std::lock_guard<std::mutex> lock(mu_);
    channels.swap(channels_);
  }
  channels.clear();  // each aborts and joins its thread
}

PointToPoint::Channel& PointToPoint::ChannelFor(int32_t set_id, int32_t peer, bool sending) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& channel = channels_[{set_id, peer, sending}];
  if (!channel) {
    channel = std::make_unique<Channel>(this, set_id, peer, sending);
    if (!aborted_.ok()) channel->Abort(aborted_);
  }
  return *channel;
}

void PointToPoint::Send(int32_t set_id, int32_t peer, int32_t tag, std::shared_ptr<Request> request,
                        size_t bytes) {
  ChannelFor(set_id, peer, true).Post(tag, std::move(request), bytes);
}

void PointToPoint::Recv(int32_t set_id, int32_t peer, int32_t tag, std::shared_ptr<Request> request,
                        size_t bytes) {
  ChannelFor(set_id, peer, false).Post(tag, std::move(request), bytes);
}

void PointToPoint::AbortPeer(int32_t peer, const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, channel] : channels_)
    if (channel->peer() == peer) channel->Abort(status);
}

void PointToPoint::AbortAll(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_.ok()) aborted_ = status;
  for (auto& [key, channel] : channels_) channel->Abort(status);
}

}  // namespace tutti::client
