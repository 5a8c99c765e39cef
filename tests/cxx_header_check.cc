// tutti.h from C++: compiled with -Wall -Wextra -Wpedantic -Werror as C++11 and C++17 by g++
// and clang++ in ctest (Header.*). The header is C; this checks that its extern "C" block, its
// brace initializers (no narrowing, every field given) and its enum hold in C++ too.
#include <tutti/tutti.h>

#include <type_traits>

static_assert(std::is_standard_layout<tutti_tensor_t>::value, "tutti_tensor_t is a C struct");
static_assert(std::is_trivially_copyable<tutti_init_options_t>::value, "options are C structs");
static_assert(TUTTI_VERSION == TUTTI_MAKE_VERSION(TUTTI_VERSION_MAJOR, TUTTI_VERSION_MINOR,
                                                  TUTTI_VERSION_PATCH),
              "TUTTI_VERSION is a constant expression");

int tutti_cxx_header_check();
int tutti_cxx_header_check() {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  tutti_tensor_t tensor = TUTTI_TENSOR_INIT;
  tutti_allreduce_options_t allreduce = TUTTI_ALLREDUCE_OPTIONS_INIT;
  tutti_counters_t counters = TUTTI_COUNTERS_INIT;
  tutti_coordinator_counters_t coordinator = TUTTI_COORDINATOR_COUNTERS_INIT;
  tutti_coordinator_set_counters_t coordinator_set = TUTTI_COORDINATOR_SET_COUNTERS_INIT;
  tutti_peer_stats_t peer = TUTTI_PEER_STATS_INIT;
  tutti_set_counters_t set = TUTTI_SET_COUNTERS_INIT;
  tutti_status_t (*init)(const tutti_init_options_t*, tutti_runtime_t*) = &tutti_init;
  tutti_runtime_t runtime = nullptr;
  (void)init;
  (void)runtime;
  return static_cast<int>(options.struct_size + tensor.struct_size + allreduce.struct_size +
                          counters.struct_size + coordinator.struct_size +
                          coordinator_set.struct_size + peer.struct_size + set.struct_size);
}
