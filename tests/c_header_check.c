/* Compiled as C99 with -pedantic -Werror: tutti.h must stay plain C, and its initializers valid. */
#include <tutti/tutti.h>

int tutti_header_check(void);
int tutti_header_check(void) {
  tutti_init_options_t options = TUTTI_INIT_OPTIONS_INIT;
  tutti_tensor_t tensor = TUTTI_TENSOR_INIT;
  tutti_allreduce_options_t allreduce = TUTTI_ALLREDUCE_OPTIONS_INIT;
  tutti_counters_t counters = TUTTI_COUNTERS_INIT;
  tutti_coordinator_counters_t coordinator = TUTTI_COORDINATOR_COUNTERS_INIT;
  tutti_runtime_t runtime = NULL;
  tutti_request_t request = NULL;
  (void)runtime;
  (void)request;
  return (int)(options.struct_size + tensor.struct_size + allreduce.struct_size +
               counters.struct_size + coordinator.struct_size) +
         TUTTI_VERSION;
}
