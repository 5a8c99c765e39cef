// Frame decoding and validation, driven directly with bytes (no sockets).
#include <gtest/gtest.h>

#include "server/core/message_codec.h"

namespace tutti::server {
namespace {

Status Decode(wire::Frame frame, bool stamp = true) {
  std::string bytes = stamp ? wire::Encode(frame) : frame.SerializeAsString();
  wire::Frame out;
  return DecodeClientFrame(bytes.data(), bytes.size(), &out);
}

wire::Frame ValidRegister() {
  wire::Frame frame;
  auto* r = frame.mutable_register_();
  r->set_job("job");
  r->set_rank(1);
  r->set_size(4);
  return frame;
}

wire::Frame AnnounceOf(const wire::TensorSpec& spec) {
  wire::Frame frame;
  *frame.mutable_announce()->add_sets()->add_tensors() = spec;
  return frame;
}

wire::TensorSpec ValidSpec() {
  wire::TensorSpec spec;
  spec.set_name("grad");
  spec.set_kind(wire::COLLECTIVE_ALLREDUCE);
  spec.set_dtype(3);
  spec.set_reduce_op(1);
  spec.add_shape(4);
  return spec;
}

void ExpectError(const Status& status, Code code, const std::string& message) {
  EXPECT_EQ(status.code(), code) << status.message();
  EXPECT_EQ(status.message(), message);
}

TEST(MessageCodec, AcceptsValidFrames) {
  EXPECT_TRUE(Decode(ValidRegister()).ok());
  EXPECT_TRUE(Decode(AnnounceOf(ValidSpec())).ok());
  wire::Frame bye;
  bye.mutable_bye();
  EXPECT_TRUE(Decode(bye).ok());
}

TEST(MessageCodec, RefusesGarbageAndForeignFrames) {
  const char garbage[] = "\xff\xff\xff\xff\xff\xff\xff";
  wire::Frame out;
  ExpectError(DecodeClientFrame(garbage, sizeof(garbage), &out), Code::kInvalidArgument,
              "malformed frame: not a tutti protobuf message");
  ExpectError(Decode(ValidRegister(), /*stamp=*/false), Code::kInvalidArgument,
              "bad magic 0x00000000: not a tutti client");
  wire::Frame empty;
  ExpectError(Decode(empty), Code::kInvalidArgument, "frame has no body");
  wire::Frame welcome;
  welcome.mutable_welcome();
  ExpectError(Decode(welcome), Code::kInvalidArgument, "frame body 11 is not sent by ranks");
  std::string huge(static_cast<size_t>(wire::kMaxFrameBytes) + 1, 'x');
  ExpectError(DecodeClientFrame(huge.data(), huge.size(), &out), Code::kInvalidArgument,
              "frame of 16777217 bytes exceeds the limit of 16777216");
}

TEST(MessageCodec, RefusesOtherProtocolVersions) {
  wire::Frame frame = ValidRegister();
  frame.set_magic(wire::kMagic);
  frame.set_version(wire::kProtocolVersion + 1);
  ExpectError(Decode(frame, /*stamp=*/false), Code::kVersionMismatch,
              "version mismatch: client 8, coordinator 7 (tuttid serves ranks of protocols 5 to 7)");
  // The previous protocols are served (tests/compat: 6 differs from 7 only between ranks, 5 only
  // in HA groups), the one before them is not.
  for (uint32_t version : {wire::kProtocolVersion - 1, wire::kProtocolVersion - 2}) {
    frame.set_version(version);
    EXPECT_TRUE(Decode(frame, /*stamp=*/false).ok()) << version;
  }
  frame.set_version(wire::kProtocolVersion - 3);
  ExpectError(Decode(frame, /*stamp=*/false), Code::kVersionMismatch,
              "version mismatch: client 4, coordinator 7 (tuttid serves ranks of protocols 5 to 7)");
}

TEST(MessageCodec, ChecksRegistrationRanges) {
  wire::Frame frame = ValidRegister();
  frame.mutable_register_()->set_rank(4);
  ExpectError(Decode(frame), Code::kInvalidArgument, "register: rank 4 outside [0, 4)");
  frame = ValidRegister();
  frame.mutable_register_()->set_size(0);
  ExpectError(Decode(frame), Code::kInvalidArgument, "register: world size 0 outside [1, 1048576]");
  frame = ValidRegister();
  frame.mutable_register_()->set_job("");
  ExpectError(Decode(frame), Code::kInvalidArgument, "register: job id must have 1 to 256 bytes");
  frame = ValidRegister();
  auto* set = frame.mutable_register_()->add_static_sets();
  for (int i = 0; i <= kMaxWorldSize; ++i) set->add_ranks(i);
  ExpectError(Decode(frame), Code::kInvalidArgument,
              "register: a static process set lists 1048577 ranks, at most 1048576");
  // The maximum size is bounded whether or not the registration is elastic (the fuzzer's find).
  frame = ValidRegister();
  frame.mutable_register_()->set_max_size(-5);
  ExpectError(Decode(frame), Code::kInvalidArgument,
              "register: elastic maximum size -5 outside [0, 1048576]");
  // A Resume repeats the registration and passes the same checks, and names a slot in it.
  wire::Frame resume;
  *resume.mutable_resume()->mutable_register_() = ValidRegister().register_();
  resume.mutable_resume()->set_slot(4);
  ExpectError(Decode(resume), Code::kInvalidArgument, "resume: slot 4 outside [0, 4)");
  resume.mutable_resume()->set_slot(3);
  resume.mutable_resume()->mutable_register_()->set_max_size(-5);
  ExpectError(Decode(resume), Code::kInvalidArgument,
              "register: elastic maximum size -5 outside [0, 1048576]");
}

TEST(MessageCodec, ChecksTensorSpecs) {
  auto spec = ValidSpec();
  spec.set_dtype(42);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': unknown dtype 42");
  spec = ValidSpec();
  spec.set_reduce_op(9);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': unknown reduce op 9");
  spec = ValidSpec();
  spec.set_kind(static_cast<wire::CollectiveKind>(77));
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument,
              "tensor 'grad': unknown collective kind 77");
  spec = ValidSpec();
  spec.add_shape(-3);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': negative dimension -3");
  spec = ValidSpec();
  for (int i = 0; i < 4; ++i) spec.add_shape(int64_t{1} << 20);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': shape too large");
  spec = ValidSpec();
  for (int i = 0; i < 16; ++i) spec.add_shape(1);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': 17 dimensions, at most 16");
  spec = ValidSpec();
  spec.set_name("");
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor name must have 1 to 1024 bytes");
  // A zero dimension does not hide the others: an allgather's rows are sized without the first
  // (tests/fuzz/regressions/client_frame/allgather-row-size-overflows-behind-a-zero-dimension).
  spec = ValidSpec();
  spec.set_kind(wire::COLLECTIVE_ALLGATHER);
  spec.clear_shape();
  spec.add_shape(0);
  spec.add_shape(int64_t{1} << 61);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': shape too large");
  spec.set_shape(1, int64_t{1} << 20);
  EXPECT_TRUE(Decode(AnnounceOf(spec)).ok());
}

TEST(MessageCodec, ChecksDevices) {
  auto spec = ValidSpec();
  spec.set_device_type(1);
  spec.set_device_index(3);
  spec.set_device_uuid(std::string(16, '\x7f'));
  EXPECT_TRUE(Decode(AnnounceOf(spec)).ok());
  spec.set_device_uuid("");  // a runtime that cannot tell
  EXPECT_TRUE(Decode(AnnounceOf(spec)).ok());
  spec.set_device_uuid(std::string(17, 'u'));
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument,
              "tensor 'grad': a GPU uuid of 17 bytes, not 16");
  spec = ValidSpec();
  spec.set_device_type(2);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument, "tensor 'grad': unknown device type 2");
  spec = ValidSpec();
  spec.set_device_type(1);
  spec.set_device_index(-1);
  ExpectError(Decode(AnnounceOf(spec)), Code::kInvalidArgument,
              "tensor 'grad': negative device index -1");
}

TEST(MessageCodec, AdmitsCommIdForTheJobToCheck) {
  // Its set, sender and size are checked against the job (Job::CommId), whose refusal names the set.
  wire::Frame frame;
  frame.mutable_comm_id()->set_set_id(-4);
  EXPECT_TRUE(Decode(frame).ok());
}

// Deadlines are now + timeout on the steady clock's nanoseconds: timeouts beyond 2^40 ms (about 34
// years) are refused rather than overflowing it (tests/fuzz/regressions/*timeout*, *stall*).
TEST(MessageCodec, RefusesTimeoutsThatWouldOverflowTheClock) {
  const int64_t too_long = kMaxTimeoutMs + 1;
  wire::Frame frame = ValidRegister();
  frame.mutable_register_()->set_rendezvous_timeout_ms(kMaxTimeoutMs);
  frame.mutable_register_()->set_stall_warning_ms(-1);  // off
  EXPECT_TRUE(Decode(frame).ok());
  frame.mutable_register_()->set_rendezvous_timeout_ms(too_long);
  ExpectError(Decode(frame), Code::kInvalidArgument,
              "register: rendezvous timeout of 1099511627777 ms exceeds the limit of 1099511627776 ms");
  frame = ValidRegister();
  frame.mutable_register_()->set_stall_shutdown_ms(INT64_MAX);
  ExpectError(Decode(frame), Code::kInvalidArgument,
              "register: stall shutdown of 9223372036854775807 ms exceeds the limit of "
              "1099511627776 ms");
  wire::Frame add;
  add.mutable_set_add()->add_ranks(0);
  add.mutable_set_add()->set_timeout_ms(too_long);
  ExpectError(Decode(add), Code::kInvalidArgument,
              "process set add: timeout of 1099511627777 ms exceeds the limit of 1099511627776 ms");
  wire::Frame remove;
  remove.mutable_set_remove()->set_timeout_ms(too_long);
  ExpectError(Decode(remove), Code::kInvalidArgument,
              "process set remove: timeout of 1099511627777 ms exceeds the limit of 1099511627776 ms");
  wire::Frame join;
  join.mutable_join()->set_timeout_ms(too_long);
  ExpectError(Decode(join), Code::kInvalidArgument,
              "join: timeout of 1099511627777 ms exceeds the limit of 1099511627776 ms");
}

}  // namespace
}  // namespace tutti::server
