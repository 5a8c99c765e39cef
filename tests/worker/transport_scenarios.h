// Scenarios of tests/multiproc/transport_test.cc; see each definition for its output lines.
#pragma once

namespace worker {

int TransportCases();
int ShmLoop();

}  // namespace worker
