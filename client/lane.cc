#include "client/lane.h"

#include "client/reduce.h"
#include "client/ring_allreduce.h"

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

void Lane::Push(std::shared_ptr<Request> request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(request));
  }
  work_cv_.notify_one();
}

void Lane::Run() {
  while (true) {
    std::shared_ptr<Request> request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every released collective ran
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    Status status = Execute(*request);
    if (status.code() == Code::kPeerLost) {
      std::lock_guard<std::mutex> lock(mu_);
      if (broken_.ok()) broken_ = Status(status.code(), peer_lost_cause_);
    }
    request->Complete(std::move(status));
  }
}

Status Lane::Execute(const Request& request) {
  const Request::Operation& op = request.operation();
  const auto dtype = static_cast<DType>(op.spec.dtype());
  const auto reduce_op = static_cast<ReduceOp>(op.spec.reduce_op());
  ScaleCopy(op.output, op.input, op.count, dtype, op.spec.prescale());
  Status status = RingAllreduce(*context_, members_, self_, op.output, op.count, dtype, reduce_op,
                                step_timeout_, &scratch_);
  if (status.code() == Code::kPeerLost) peer_lost_cause_ = status.message();
  if (!status.ok())
    return Status(status.code(), status.message() + " (allreduce '" + request.name() +
                                     "' on process set " + std::to_string(set_id_) + ")");
  double postscale = op.spec.postscale();
  if (reduce_op == ReduceOp::kAverage) {
    if (IsFloating(dtype))
      postscale /= static_cast<double>(members_.size());
    else
      DivideInPlace(op.output, op.count, dtype, static_cast<int64_t>(members_.size()));
  }
  ScaleInPlace(op.output, op.count, dtype, postscale);
  return Status::Ok();
}

}  // namespace tutti::client
