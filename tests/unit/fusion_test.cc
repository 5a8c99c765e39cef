// The coordinator's execution plan: priority order, then which released tensors share a collective.
#include "proto/fusion_plan.h"

#include <gtest/gtest.h>

#include "tutti/tutti.h"

namespace tutti::wire {
namespace {

Response Released(const std::string& name, int64_t elements,
                        int32_t dtype = TUTTI_DTYPE_FLOAT32,
                        wire::CollectiveKind kind = COLLECTIVE_ALLREDUCE,
                        int32_t op = TUTTI_OP_SUM) {
  Response r;
  r.mutable_spec()->set_name(name);
  r.mutable_spec()->set_kind(kind);
  r.mutable_spec()->set_dtype(dtype);
  r.mutable_spec()->set_reduce_op(op);
  r.mutable_spec()->set_prescale(1.0);
  r.mutable_spec()->set_postscale(1.0);
  r.mutable_spec()->add_shape(elements);
  return r;
}

// Each planned collective as "head+fused+...".
std::vector<std::string> Names(const std::vector<Response>& plan) {
  std::vector<std::string> out;
  for (const auto& r : plan) {
    std::string text = r.spec().name();
    for (const auto& part : r.fused()) text += "+" + part.name();
    out.push_back(text);
  }
  return out;
}

TEST(Fusion, MixedDtypesFuseByKindLookingPastWhatDoesNotMatch) {
  std::vector<Response> batch = {
      Released("f1", 10), Released("d1", 10, TUTTI_DTYPE_FLOAT64), Released("f2", 10),
      Released("d2", 10, TUTTI_DTYPE_FLOAT64), Released("i1", 10, TUTTI_DTYPE_INT32)};
  EXPECT_EQ(Names(PlanCollectives(batch, 1 << 20)),
            (std::vector<std::string>{"f1+f2", "d1+d2", "i1"}));
}

TEST(Fusion, OpsAndScaleFactorsMustMatch) {
  std::vector<Response> batch = {Released("sum", 4), Released("max", 4, TUTTI_DTYPE_FLOAT32,
                                                                    COLLECTIVE_ALLREDUCE, TUTTI_OP_MAX),
                                       Released("scaled", 4), Released("sum2", 4)};
  batch[2].mutable_spec()->set_postscale(0.5);
  EXPECT_EQ(Names(PlanCollectives(batch, 1 << 20)),
            (std::vector<std::string>{"sum+sum2", "max", "scaled"}));
}

TEST(Fusion, OnlyTensorsOnTheSameDevicePathAndGroupFuse) {
  std::vector<Response> batch = {Released("g0a", 4), Released("g1a", 4), Released("host", 4),
                                       Released("g0b", 4), Released("staged", 4),
                                       Released("g1b", 4), Released("host2", 4)};
  for (int i : {0, 1, 3, 5}) batch[i].set_device_path(DEVICE_PATH_NCCL);
  batch[1].set_device_group(1);
  batch[5].set_device_group(1);
  // Same group number, but staged: another path (and buffer memory) than NCCL's group 0.
  batch[4].set_device_path(DEVICE_PATH_STAGED);
  const auto plan = PlanCollectives(batch, 1 << 20);
  EXPECT_EQ(Names(plan), (std::vector<std::string>{"g0a+g0b", "g1a+g1b", "host+host2", "staged"}));
  // The fused collective keeps its head's path and group.
  EXPECT_EQ(plan[1].device_path(), DEVICE_PATH_NCCL);
  EXPECT_EQ(plan[1].device_group(), 1);
}

TEST(Fusion, DeviceIndicesInTheSpecDoNotSplitAGroup) {
  // Members number their GPUs differently; the spec carries the first member's index only.
  std::vector<Response> batch = {Released("a", 4), Released("b", 4)};
  for (auto& r : batch) r.set_device_path(DEVICE_PATH_NCCL);
  batch[0].mutable_spec()->set_device_type(1);
  batch[0].mutable_spec()->set_device_index(0);
  batch[1].mutable_spec()->set_device_type(1);
  batch[1].mutable_spec()->set_device_index(3);
  EXPECT_EQ(Names(PlanCollectives(batch, 1 << 20)), (std::vector<std::string>{"a+b"}));
}

TEST(Fusion, ThresholdLooksAheadForTensorsThatStillFit) {
  // 400-byte threshold: a (160 B) + b (200 B) fit; c (80 B) no longer does; d (40 B) does.
  std::vector<Response> batch = {Released("a", 40), Released("b", 50), Released("c", 20),
                                       Released("d", 10), Released("big", 100)};
  EXPECT_EQ(Names(PlanCollectives(batch, 400)), (std::vector<std::string>{"a+b+d", "c", "big"}));
}

TEST(Fusion, TensorsAtOrAboveTheThresholdRunAlone) {
  std::vector<Response> batch = {Released("huge", 1000), Released("a", 1), Released("b", 1)};
  EXPECT_EQ(Names(PlanCollectives(batch, 4000)), (std::vector<std::string>{"huge", "a+b"}));
}

TEST(Fusion, ZeroThresholdDisablesFusion) {
  std::vector<Response> batch = {Released("a", 1), Released("b", 1)};
  EXPECT_EQ(Names(PlanCollectives(batch, 0)), (std::vector<std::string>{"a", "b"}));
}

TEST(Fusion, NeverFusedKindsErrorsAndPartialResponses) {
  std::vector<Response> batch = {
      Released("b1", 4, TUTTI_DTYPE_FLOAT32, COLLECTIVE_BROADCAST),
      Released("b2", 4, TUTTI_DTYPE_FLOAT32, COLLECTIVE_BROADCAST),
      Released("t1", 4, TUTTI_DTYPE_FLOAT32, COLLECTIVE_ALLTOALL),
      Released("t2", 4, TUTTI_DTYPE_FLOAT32, COLLECTIVE_ALLTOALL),
      Released("failed", 4), Released("joined", 4), Released("ok1", 4), Released("ok2", 4)};
  batch[4].mutable_error()->set_code(TUTTI_ERR_MISMATCH);
  batch[5].set_partial(true);
  EXPECT_EQ(Names(PlanCollectives(batch, 1 << 20)),
            (std::vector<std::string>{"b1", "b2", "t1", "t2", "failed", "joined", "ok1+ok2"}));
}

TEST(Fusion, AllgatherAndReducescatterFuseWithTheirOwnKind) {
  std::vector<Response> batch = {
      Released("g1", 2, TUTTI_DTYPE_FLOAT32, COLLECTIVE_ALLGATHER),
      Released("s1", 2, TUTTI_DTYPE_FLOAT32, COLLECTIVE_REDUCESCATTER),
      Released("g2", 2, TUTTI_DTYPE_FLOAT32, COLLECTIVE_ALLGATHER),
      Released("s2", 2, TUTTI_DTYPE_FLOAT32, COLLECTIVE_REDUCESCATTER)};
  batch[0].add_member_rows(1);
  batch[0].add_member_rows(3);
  batch[2].add_member_rows(2);
  batch[2].add_member_rows(2);
  const auto plan = PlanCollectives(batch, 1 << 20);
  EXPECT_EQ(Names(plan), (std::vector<std::string>{"g1+g2", "s1+s2"}));
  ASSERT_EQ(plan[0].fused_size(), 1);
  EXPECT_EQ(plan[0].fused(0).member_rows_size(), 2);  // each part keeps its own rows
  EXPECT_EQ(plan[0].fused(0).member_rows(1), 2);
}

TEST(Fusion, AllgatherSizeCountsEveryMembersRows) {
  Response g = Released("g", 3, TUTTI_DTYPE_FLOAT32, COLLECTIVE_ALLGATHER);
  g.mutable_spec()->add_shape(5);  // rows of 5 floats
  g.add_member_rows(1);
  g.add_member_rows(4);
  EXPECT_EQ(FusionBytes(g.spec(), g.member_rows()), 5 * 5 * 4);
}

// Each member's tensor is bounded, but an allgather's rows add up over members: the size
// saturates instead of overflowing, and such a tensor is never fused.
TEST(Fusion, AllgatherSizeTooLargeToCountSaturatesAndRunsAlone) {
  Response g = Released("g", 3, TUTTI_DTYPE_FLOAT64, COLLECTIVE_ALLGATHER);
  g.mutable_spec()->add_shape(int64_t{1} << 20);
  for (int m = 0; m < 64; ++m) g.add_member_rows(int64_t{1} << 36);
  EXPECT_EQ(FusionBytes(g.spec(), g.member_rows()), INT64_MAX);
  Response small = Released("s", 4, TUTTI_DTYPE_FLOAT64, COLLECTIVE_ALLGATHER);
  small.add_member_rows(1);
  const auto planned = PlanCollectives({g, small}, INT64_MAX);
  ASSERT_EQ(planned.size(), 2u);
  EXPECT_EQ(planned[0].fused_size(), 0);
}

TEST(Priorities, HigherFirstTiesKeepReleaseOrder) {
  std::vector<Response> batch;
  const int priorities[] = {3, 0, 7, 1, 7};
  for (int i = 0; i < 5; ++i) {
    batch.push_back(Released("p" + std::to_string(i), 4, i % 2 ? TUTTI_DTYPE_INT32 : TUTTI_DTYPE_FLOAT64));
    batch.back().mutable_spec()->set_priority(priorities[i]);
  }
  EXPECT_EQ(Names(PlanCollectives(batch, 0)),
            (std::vector<std::string>{"p2", "p4", "p0", "p3", "p1"}));
  // With fusion, a fused collective runs at its highest-priority tensor's place.
  EXPECT_EQ(Names(PlanCollectives(batch, 1 << 20)),
            (std::vector<std::string>{"p2+p4+p0", "p3+p1"}));
}

}  // namespace
}  // namespace tutti::wire
