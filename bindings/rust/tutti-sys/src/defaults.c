/* The header's initializers, exported as constants for the Rust bindings. bindgen cannot
 * translate the `_INIT` brace initializers nor the function-like TUTTI_VERSION macro, and
 * copying their values into Rust would let the two drift apart when fields are appended
 * (docs/abi-policy.md, rule 5): compiled from tutti.h itself, these cannot. */
#include <tutti/tutti.h>

const int32_t tutti_sys_header_version = TUTTI_VERSION;
const tutti_tensor_t tutti_sys_tensor_init = TUTTI_TENSOR_INIT;
const tutti_init_options_t tutti_sys_init_options_init = TUTTI_INIT_OPTIONS_INIT;
const tutti_allreduce_options_t tutti_sys_allreduce_options_init = TUTTI_ALLREDUCE_OPTIONS_INIT;
const tutti_counters_t tutti_sys_counters_init = TUTTI_COUNTERS_INIT;
const tutti_peer_stats_t tutti_sys_peer_stats_init = TUTTI_PEER_STATS_INIT;
const tutti_set_counters_t tutti_sys_set_counters_init = TUTTI_SET_COUNTERS_INIT;
