/* tutti.h must stay plain C and its initializers valid: compiled with -Wall -Wextra -Wpedantic
 * -Werror as C99 into the build, and as C99 and C11 by gcc and clang in ctest (Header.*). Every
 * _INIT macro is used: a field appended without its initializer fails -Wmissing-field-initializers. */
#include <tutti/tutti.h>

int tutti_header_check(void);
int tutti_header_check(void) {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  tutti_tensor_t tensor = TUTTI_TENSOR_INIT;
  tutti_allreduce_options_t allreduce = TUTTI_ALLREDUCE_OPTIONS_INIT;
  tutti_counters_t counters = TUTTI_COUNTERS_INIT;
  tutti_coordinator_counters_t coordinator = TUTTI_COORDINATOR_COUNTERS_INIT;
  tutti_coordinator_set_counters_t coordinator_set = TUTTI_COORDINATOR_SET_COUNTERS_INIT;
  tutti_peer_stats_t peer = TUTTI_PEER_STATS_INIT;
  tutti_set_counters_t set = TUTTI_SET_COUNTERS_INIT;
  tutti_runtime_t runtime = NULL;
  tutti_request_t request = NULL;
  /* Declarations usable as function pointers, with the types bindings generate from them. */
  tutti_status_t (*init)(const tutti_init_options_t*, tutti_runtime_t*) = &tutti_init;
  (void)runtime;
  (void)request;
  (void)init;
  return (int)(options.struct_size + tensor.struct_size + allreduce.struct_size +
               counters.struct_size + coordinator.struct_size + coordinator_set.struct_size +
               peer.struct_size + set.struct_size) +
         TUTTI_VERSION;
}
