#include "client/exec/point_to_point_nccl.h"

#include "client/exec/device_work.h"
#include "client/exec/gpu_module_loader.h"

namespace tutti::client {
namespace {

constexpr uint32_t kAnswerMagic = 0x41325054;  // "TP2A"
// Longer strings than these come from a corrupt stream (a UUID is 16 bytes, an NCCL id 128).
constexpr uint32_t kMaxField = 4096;

// The pair communicator's ranks: the receiver made its id.
constexpr int32_t kReceiverRank = 0, kSenderRank = 1;

struct OfferFields {
  int32_t device_index;
  uint32_t uuid_bytes, host_bytes;
};

struct AnswerFields {
  uint32_t magic;
  uint32_t nccl;
  int32_t device_index;
  uint32_t comm_id_bytes;
};

Status WriteString(transport::Stream& stream, const std::string& text, transport::Deadline deadline) {
  return text.empty() ? Status::Ok() : stream.Write(text.data(), text.size(), deadline);
}

Status ReadString(transport::Stream& stream, uint32_t bytes, transport::Deadline deadline,
                  std::string* text) {
  if (bytes > kMaxField)
    return Status(Code::kInternal, "corrupt point-to-point stream: a field of " +
                                       std::to_string(bytes) + " bytes");
  text->resize(bytes);
  return bytes ? stream.Read(text->data(), bytes, deadline) : Status::Ok();
}

// The negotiator's rule (server/core/negotiator_device_path.cc), so that a pair takes the path
// a collective of the two would.
bool ShareGpu(const DeviceOffer& a, const DeviceOffer& b) {
  if (a.host != b.host) return false;
  if (!a.uuid.empty() && !b.uuid.empty()) return a.uuid == b.uuid;
  return a.device_index == b.device_index;
}

}  // namespace

Status WriteOffer(transport::Stream& stream, const DeviceOffer& offer, transport::Deadline deadline) {
  const OfferFields fields{offer.device_index, static_cast<uint32_t>(offer.uuid.size()),
                           static_cast<uint32_t>(offer.host.size())};
  TUTTI_RETURN_IF_ERROR(stream.Write(&fields, sizeof(fields), deadline));
  TUTTI_RETURN_IF_ERROR(WriteString(stream, offer.uuid, deadline));
  return WriteString(stream, offer.host, deadline);
}

Status ReadOffer(transport::Stream& stream, DeviceOffer* offer, transport::Deadline deadline) {
  OfferFields fields{};
  TUTTI_RETURN_IF_ERROR(stream.Read(&fields, sizeof(fields), deadline));
  offer->device_index = fields.device_index;
  TUTTI_RETURN_IF_ERROR(ReadString(stream, fields.uuid_bytes, deadline, &offer->uuid));
  return ReadString(stream, fields.host_bytes, deadline, &offer->host);
}

Status WriteAnswer(transport::Stream& stream, const OfferAnswer& answer, transport::Deadline deadline) {
  const AnswerFields fields{kAnswerMagic, answer.nccl ? 1u : 0u, answer.device_index,
                            static_cast<uint32_t>(answer.comm_id.size())};
  TUTTI_RETURN_IF_ERROR(stream.Write(&fields, sizeof(fields), deadline));
  return WriteString(stream, answer.comm_id, deadline);
}

Status ReadAnswer(transport::Stream& stream, OfferAnswer* answer, transport::Deadline deadline) {
  AnswerFields fields{};
  TUTTI_RETURN_IF_ERROR(stream.Read(&fields, sizeof(fields), deadline));
  if (fields.magic != kAnswerMagic)
    return Status(Code::kInternal, "corrupt point-to-point answer stream");
  answer->nccl = fields.nccl != 0;
  answer->device_index = fields.device_index;
  return ReadString(stream, fields.comm_id_bytes, deadline, &answer->comm_id);
}

bool PointToPointNccl::Usable(const Request& request, size_t bytes) {
  if (request.operation().spec.device_type() == 0 || bytes == 0) return false;
  gpu::Module* module;
  return LoadGpuModule(&module).ok() && module->PointToPointOnNccl();
}

DeviceOffer PointToPointNccl::Offer(const Request& request) const {
  const auto& spec = request.operation().spec;
  return DeviceOffer{spec.device_index(), spec.device_uuid(), host_};
}

OfferAnswer PointToPointNccl::Answer(const DeviceOffer& offer, const Request* matched, size_t bytes) {
  OfferAnswer answer;  // staged
  if (!matched || !Usable(*matched, bytes) || ShareGpu(offer, Offer(*matched))) return answer;
  const int32_t index = matched->operation().spec.device_index();
  gpu::ProcessSetOnDevice* device;
  gpu::Module* module;
  if (!OpenDevice(&devices_, index, &device).ok() || !LoadGpuModule(&module).ok()) return answer;
  if (!device->HasComm(offer.device_index) && !module->UniqueId(&answer.comm_id).ok()) return answer;
  answer.nccl = true;
  answer.device_index = index;
  return answer;
}

Status PointToPointNccl::Send(Request& request, size_t bytes, const OfferAnswer& answer,
                              const gpu::Interrupt& interrupted) {
  return Transfer(request, true, bytes, answer.device_index, answer.comm_id, interrupted);
}

Status PointToPointNccl::Recv(Request& request, size_t bytes, const DeviceOffer& offer,
                              const OfferAnswer& answer, const gpu::Interrupt& interrupted) {
  return Transfer(request, false, bytes, offer.device_index, answer.comm_id, interrupted);
}

Status PointToPointNccl::Transfer(Request& request, bool sending, size_t bytes, int32_t peer_device,
                                  const std::string& comm_id, const gpu::Interrupt& interrupted) {
  const auto& op = request.operation();
  gpu::ProcessSetOnDevice* device;
  TUTTI_RETURN_IF_ERROR(OpenDevice(&devices_, op.spec.device_index(), &device));
  const auto deadline = gpu::Clock::now() + timeout_;
  if (!comm_id.empty()) {
    // Both sides' communicators are made and lost together: a second id is a protocol error.
    if (device->HasComm(peer_device))
      return Status(Code::kInternal, "a point-to-point peer made a second NCCL communicator for one "
                                     "pair of devices");
    TUTTI_RETURN_IF_ERROR(device->InitComm(peer_device, comm_id, 2, sending ? kSenderRank : kReceiverRank,
                                           deadline, interrupted));
  }
  // After the producer: a send reads what it queued; a recv must not overwrite what its stream's
  // earlier work still reads.
  if (op.ready) TUTTI_RETURN_IF_ERROR(device->After(*op.ready));
  device->Bound(deadline, interrupted);
  TUTTI_RETURN_IF_ERROR(sending ? device->Send(peer_device, op.input, bytes, kReceiverRank)
                                : device->Recv(peer_device, op.output, bytes, kSenderRank));
  std::shared_ptr<gpu::Event> done;
  TUTTI_RETURN_IF_ERROR(device->Record(&done));
  request.SetDeviceWork(done);
  return device->Wait(*done, deadline, interrupted);
}

}  // namespace tutti::client
