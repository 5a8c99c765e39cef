// Scenarios of the transport tests (tests/multiproc/transport_test.cc): allreduces over every
// path and dtype, hashed so that transports can be compared bit for bit, and a loop to kill.
#include <cmath>
#include <cstring>
#include <string>

#include "worker/scenario_registry.h"
#include "worker/worker_common.h"

namespace worker {
namespace {

// A value that makes float sums depend on their order: mixed signs and magnitudes.
double Noisy(int32_t rank, int64_t i) {
  uint64_t x = (static_cast<uint64_t>(rank) + 1) * 0x9e3779b97f4a7c15ull ^
               static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  const double unit = static_cast<double>(x >> 11) / 9007199254740992.0 * 2 - 1;  // [-1, 1)
  return unit * std::pow(10.0, static_cast<double>(i % 7) - 3);
}

const DTypeInfo& Find(int32_t dtype) {
  for (const auto& d : AllDTypes())
    if (d.dtype == dtype) return d;
  Die("unknown dtype", TUTTI_ERR_INTERNAL);
}

// Allreduces over sizes that take every path (direct exchange, one ring slice, several slices,
// odd element counts) in float16, bfloat16, float32, float64, int32, int16 and bool (its "or"
// and its "and", on bytes not all 0 or 1). Floating results are checked against a float64
// reference within the dtype's precision; the others exactly. Prints "hash <case> <fnv1a of the
// result bytes>" per case so that the harness can compare transports bit for bit, then
// "link <peer> <transport> <connected> <bytes sent> <bytes received>" for every other rank, then
// "self <status> <message>" and "unknown <status> <message>" for two bad stats calls, then
// "transport ok".
int TransportCases() {
  struct Case {
    int32_t dtype, op;
    const char* label;  // after the dtype in the case's name
  };
  const Case cases[] = {{TUTTI_DTYPE_FLOAT16, TUTTI_OP_SUM, ""}, {TUTTI_DTYPE_BFLOAT16, TUTTI_OP_SUM, ""},
                        {TUTTI_DTYPE_FLOAT32, TUTTI_OP_SUM, ""}, {TUTTI_DTYPE_FLOAT64, TUTTI_OP_SUM, ""},
                        {TUTTI_DTYPE_INT32, TUTTI_OP_SUM, ""},   {TUTTI_DTYPE_INT16, TUTTI_OP_SUM, ""},
                        {TUTTI_DTYPE_BOOL, TUTTI_OP_SUM, ".or"}, {TUTTI_DTYPE_BOOL, TUTTI_OP_MIN, ".and"}};
  const int64_t counts[] = {1, 1001, 4097, 300001, (1 << 20) + 3};
  int failures = 0;
  for (const Case& c : cases) {
    const int32_t dtype = c.dtype;
    const DTypeInfo& d = Find(dtype);
    const bool logic = dtype == TUTTI_DTYPE_BOOL;
    const bool integer = dtype == TUTTI_DTYPE_INT32 || dtype == TUTTI_DTYPE_INT16;  // no wrap
    const double tolerance = integer || logic               ? 0
                             : dtype == TUTTI_DTYPE_FLOAT64 ? 1e-9
                             : dtype == TUTTI_DTYPE_FLOAT32 ? 1e-4
                                                            : 3e-2;
    for (int64_t count : counts) {
      const std::string name = std::string("transport.") + d.name + c.label + "." + std::to_string(count);
      Tensor t(dtype, count, d.size);
      auto value = [&](int32_t r, int64_t i) {
        if (logic) return static_cast<double>(BoolContribution(r, i));
        return integer ? static_cast<double>((r + 1) * (i % 1000) - 7) : Noisy(r, i);
      };
      for (int64_t i = 0; i < count; ++i) d.store(t.bytes.data(), i, value(my_rank, i));
      if (Allreduce(name.c_str(), TUTTI_WORLD, t, c.op) != TUTTI_OK) return 1;
      for (int64_t i = 0; i < count; ++i) {
        double want = 0, magnitude = 0;
        if (logic) want = Expected(i, c.op, dtype);
        for (int32_t r = 0; r < world_size && !logic; ++r) {
          const double v = value(r, i);
          want += v;
          magnitude += std::fabs(v);
        }
        const double got = d.load(t.bytes.data(), i);
        if (std::fabs(got - want) > tolerance * magnitude && failures++ < 5)
          Say("fail %s[%lld]: got %.9g want %.9g", name.c_str(), static_cast<long long>(i), got,
              want);
      }
      Say("hash %s %016llx", name.c_str(),
          static_cast<unsigned long long>(Fnv1a(t.bytes.data(), t.bytes.size())));
    }
  }
  for (int32_t peer = 0; peer < world_size; ++peer) {
    if (peer == my_rank) continue;
    tutti_peer_stats_t stats = TUTTI_PEER_STATS_INIT;
    Check("peer stats", tutti_get_peer_stats(rt, TUTTI_WORLD, peer, &stats));
    Say("link %d %s %d %llu %llu", peer, tutti_transport_name(stats.transport), stats.connected,
        static_cast<unsigned long long>(stats.bytes_sent),
        static_cast<unsigned long long>(stats.bytes_received));
  }
  tutti_peer_stats_t stats = TUTTI_PEER_STATS_INIT;
  tutti_status_t status = tutti_get_peer_stats(rt, TUTTI_WORLD, my_rank, &stats);
  Say("self %d %s", status, tutti_last_error());
  status = tutti_get_peer_stats(rt, 999, 0, &stats);
  Say("unknown %d %s", status, tutti_last_error());
  Say("transport ok");
  return failures == 0 ? 0 : 1;
}

// Prints "joined" once init returned, then allreduces 64 MiB over and over, printing "looping"
// after the first; the harness kills it.
int ShmLoop() {
  Say("joined");
  Tensor t(TUTTI_DTYPE_FLOAT32, 16 << 20, 4);
  for (int i = 0;; ++i) {
    if (Allreduce("shm.loop", TUTTI_WORLD, t) != TUTTI_OK) return 1;
    if (i == 0) Say("looping");
  }
}

const ScenarioRegistrar registered = {
    {"transport", TransportCases},
    {"shm_loop", ShmLoop},
};

}  // namespace
}  // namespace worker
