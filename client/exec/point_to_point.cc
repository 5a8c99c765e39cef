#include "client/exec/point_to_point.h"

#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "client/exec/point_to_point_nccl.h"
#include "client/exec/point_to_point_staging.h"

namespace tutti::client {
namespace {

constexpr uint32_t kMessageMagic = 0x50325054;  // "TP2P"
// A device tensor's offer: its DeviceOffer follows, then its bytes only if the answer is staged.
constexpr uint32_t kOfferMagic = 0x44325054;  // "TP2D"

struct MessageHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t bytes;
};

// Point-to-point channels live beside the sets' contexts on the device: negative ids.
int32_t ChannelId(int32_t set_id) { return -1 - set_id; }
// The receivers' answers to offers, each on a stream of its own back to the sender, so that an
// answer never waits behind the receiver's own messages: a range of their own (set ids below 2^30).
int32_t AnswerChannelId(int32_t set_id) { return -(int32_t{1} << 30) - 1 - set_id; }

// Reads block until a message comes or the stream is aborted: there is no deadline to keep.
transport::Deadline Forever() { return transport::Clock::now() + std::chrono::hours(24 * 365); }

// How often a receiver still waiting for its sender's connection looks at its abort flag.
constexpr auto kAcceptSlice = std::chrono::milliseconds(200);

}  // namespace

class PointToPoint::Channel {
 public:
  Channel(PointToPoint* owner, int32_t set_id, int32_t peer, bool sending)
      : owner_(owner),
        set_id_(set_id),
        peer_(peer),
        sending_(sending),
        staging_(owner->timeout_),
        nccl_(owner->host_, owner->timeout_) {
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
      if (answers_) answers_->Abort(status);
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

  // Opens (`open`) or takes the stream of `channel` with the peer into `*slot`, taking it in slices
  // until `deadline` so that an abort ends the wait; a failure aborts the channel.
  bool Attach(int32_t channel, bool open, transport::Deadline deadline,
              std::unique_ptr<transport::Stream>* slot) {
    std::unique_ptr<transport::Stream> stream;
    Status status;
    if (open) {
      status = owner_->device_->OpenStream(channel, owner_->self_, peer_, owner_->RouteTo(peer_),
                                           deadline, &stream);
    } else {
      do {
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (!failed_.ok()) return false;
        }
        status = owner_->device_->AcceptStream(
            channel, peer_, std::min(deadline, transport::Clock::now() + kAcceptSlice), &stream);
      } while (status.code() == Code::kTimeout && transport::Clock::now() < deadline);
      if (status.code() == Code::kTimeout && channel == AnswerChannelId(set_id_))
        status = Status(Code::kTimeout, "rank " + std::to_string(peer_) + " did not answer a device "
                                        "tensor's offer in time: it posted no recv from this rank "
                                        "on process set " + std::to_string(set_id_));
    }
    if (!status.ok()) {
      Abort(status);
      return false;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return false;
    *slot = std::move(stream);
    return true;
  }

  // Opens (sender) or takes (receiver) the messages' stream; false once aborted or failed.
  bool Connect() {
    return Attach(ChannelId(set_id_), sending_,
                  sending_ ? transport::Clock::now() + owner_->timeout_ : Forever(), &stream_);
  }

  Status Described(const Status& status, int32_t tag) const {
    return Status(status.code(), status.message() + " (" + Describe(tag) + ")");
  }

  // Sender: offers the device tensor of `item` and reads the receiver's answer.
  Status OfferAndHear(const Item& item, OfferAnswer* answer) {
    const auto deadline = transport::Clock::now() + owner_->timeout_;
    const MessageHeader header{kOfferMagic, item.tag, item.bytes};
    TUTTI_RETURN_IF_ERROR(stream_->Write(&header, sizeof(header), deadline));
    TUTTI_RETURN_IF_ERROR(WriteOffer(*stream_, nccl_.Offer(*item.request), deadline));
    if (!answers_ && !Attach(AnswerChannelId(set_id_), false, deadline, &answers_)) {
      std::lock_guard<std::mutex> lock(mu_);
      return failed_;
    }
    return ReadAnswer(*answers_, answer, deadline);
  }

  // Receiver: answers the offer just read, opening the answer stream on first use.
  Status Answer(const OfferAnswer& answer) {
    const auto deadline = transport::Clock::now() + owner_->timeout_;
    if (!answers_ && !Attach(AnswerChannelId(set_id_), true, deadline, &answers_)) {
      std::lock_guard<std::mutex> lock(mu_);
      return failed_;
    }
    return WriteAnswer(*answers_, answer, deadline);
  }

  void PopFront() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!outgoing_.empty()) outgoing_.pop_front();
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
      const bool on_device = PointToPointStaging::OnDevice(*item.request);
      // A device tensor NCCL could carry is offered; the receiver's answer says how it goes.
      const bool offered = on_device && PointToPointNccl::Usable(*item.request, item.bytes);
      if (offered) {
        OfferAnswer answer;
        const Status heard = OfferAndHear(item, &answer);
        if (!heard.ok()) return Abort(Described(heard, item.tag));
        if (answer.nccl) {
          const Status sent = nccl_.Send(*item.request, item.bytes, answer, Interrupt());
          PopFront();
          item.request->Complete(sent);
          // A failed NCCL transfer aborted the pair's communicators: the channel cannot go on.
          if (!sent.ok()) return Abort(sent);
          continue;
        }
      }
      const void* data = item.request->operation().input;
      if (on_device) {
        Status staged = staging_.ToHost(*item.request, item.bytes, Interrupt(), &data);
        if (!staged.ok()) {
          // An answered offer leaves the receiver waiting for the bytes: the channel cannot go on.
          if (offered) return Abort(staged);
          PopFront();  // nothing was written: the stream stays usable for the next message
          item.request->Complete(staged);
          continue;
        }
      }
      const MessageHeader header{kMessageMagic, item.tag, item.bytes};
      const auto deadline = transport::Clock::now() + owner_->timeout_;
      Status status = offered ? Status::Ok() : stream_->Write(&header, sizeof(header), deadline);
      if (status.ok() && item.bytes > 0) status = stream_->Write(data, item.bytes, deadline);
      if (!status.ok()) return Abort(Described(status, item.tag));
      PopFront();
      item.request->Complete(Status::Ok());
    }
  }

  void RunReceiver() {
    if (!Connect()) return;
    while (true) {
      MessageHeader header{};
      Status status = stream_->Read(&header, sizeof(header), Forever());
      const bool offered = status.ok() && header.magic == kOfferMagic;
      if (status.ok() && header.magic != kMessageMagic && !offered)
        status = Status(Code::kInternal, "corrupt point-to-point stream from rank " + std::to_string(peer_));
      DeviceOffer offer;
      if (status.ok() && offered) status = ReadOffer(*stream_, &offer, Forever());
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
      if (offered) {  // answered at once: NCCL if the recv posted for it can take it, else staged
        const OfferAnswer answer = nccl_.Answer(offer, posted ? posted->request.get() : nullptr, header.bytes);
        status = Answer(answer);
        if (!status.ok()) {
          if (posted) posted->request->Complete(status);
          return Abort(status);
        }
        if (answer.nccl) {
          status = nccl_.Recv(*posted->request, header.bytes, offer, answer, Interrupt());
          posted->request->Complete(status);
          if (!status.ok()) return Abort(status);
          continue;
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
  std::unique_ptr<transport::Stream> answers_;  // answers to offers: read by senders, written by receivers
  Status failed_;
  PointToPointStaging staging_;  // device tensors through host memory
  PointToPointNccl nccl_;        // device tensors between GPUs
  std::thread thread_;
};

PointToPoint::PointToPoint(transport::Device* device, int32_t self, std::string host,
                           std::vector<transport::PeerRoute> routes,
                           std::chrono::milliseconds timeout)
    : device_(device), self_(self), host_(std::move(host)), timeout_(timeout), routes_(std::move(routes)) {}

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
