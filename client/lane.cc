#include "client/lane.h"

#include "client/collectives.h"

namespace tutti::client {

Lane::Lane(int32_t set_id, std::vector<int32_t> members, int32_t self,
           std::unique_ptr<transport::Context> context, std::chrono::milliseconds step_timeout)
    : set_id_(set_id),
      members_(std::move(members)),
      self_(self),
      context_(std::move(context)),
      step_timeout_(step_timeout) {
  thread_ = std::thread([this] { Run(); });
}

Lane::~Lane() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void Lane::Push(std::shared_ptr<Request> request, std::vector<int64_t> member_rows) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Work{std::move(request), std::move(member_rows)});
  }
  work_cv_.notify_one();
}

void Lane::Run() {
  while (true) {
    Work work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every released collective ran
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    Status status = Execute(work);
    if (status.code() == Code::kPeerLost) {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.ok()) broken_ = Status(status.code(), peer_lost_cause_);
    }
    work.request->Complete(std::move(status));
  }
}

Status Lane::Execute(Work& work) {
  const RingArgs ring{context_.get(), &members_, self_, step_timeout_, &scratch_};
  Status status = RunCollective(ring, *work.request, work.member_rows);
  if (status.ok()) return status;
  if (status.code() == Code::kPeerLost) peer_lost_cause_ = status.message();
  const auto& spec = work.request->operation().spec;
  return Status(status.code(), status.message() + " (" + wire::KindName(spec.kind()) + " '" +
                                   spec.name() + "' on process set " + std::to_string(set_id_) + ")");
}

}  // namespace tutti::client
