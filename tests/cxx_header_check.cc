// tutti.h from C++: compiled with -Wall -Wextra -Wpedantic -Werror as C++11 and C++17 by g++
// and clang++ in ctest (Header.*). The header is C; this checks that its extern "C" block, its
// brace initializers (no narrowing, every field given) and its enum hold in C++ too: the C
// check's every _INIT macro, compiled as C++, and what only C++ can assert.
#include "c_header_check.c"

#include <type_traits>

static_assert(std::is_standard_layout<tutti_tensor_t>::value, "tutti_tensor_t is a C struct");
static_assert(std::is_trivially_copyable<tutti_init_options_t>::value, "options are C structs");
static_assert(TUTTI_VERSION == TUTTI_MAKE_VERSION(TUTTI_VERSION_MAJOR, TUTTI_VERSION_MINOR,
                                                  TUTTI_VERSION_PATCH),
              "TUTTI_VERSION is a constant expression");
