// Scenarios of tests/multiproc/fusion_test.cc; see each definition for its output lines.
#pragma once

namespace worker {

int FusionMix();
int TrainingSteps(int steps, int count);
int CacheInvalidation();
int Priorities();
int Stall();

}  // namespace worker
