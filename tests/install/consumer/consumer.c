/* A program outside the tutti tree, built against an installed tutti (tests/install/): with
 * CMake's find_package(tutti) or with `pkg-config --cflags --libs tutti`. Run as rank TUTTI_RANK
 * of TUTTI_SIZE, it allreduces {rank + 1, rank + 2, rank + 3, rank + 4} over the world and
 * prints one line: the sums, the library's version and the libtutti it loaded. */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tutti/tutti.h>

#define CHECK(call)                                                                    \
  do {                                                                                 \
    tutti_status_t status_ = (call);                                                   \
    if (status_ != TUTTI_OK) {                                                         \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, tutti_status_string(status_),     \
              tutti_last_error());                                                     \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

/* The path the dynamic loader loaded libtutti from. */
static int find_libtutti(struct dl_phdr_info* info, size_t size, void* out) {
  (void)size;
  if (info->dlpi_name && strstr(info->dlpi_name, "/libtutti.so")) {
    *(const char**)out = info->dlpi_name;
    return 1;
  }
  return 0;
}

int main(void) {
  int32_t version = 0;
  CHECK(tutti_get_version(&version));
  if (version != TUTTI_VERSION) {
    fprintf(stderr, "header version %d, library version %d\n", (int)TUTTI_VERSION, (int)version);
    return 1;
  }
  const char* library = "(not found)";
  dl_iterate_phdr(find_libtutti, &library);

  tutti_runtime_t rt;
  CHECK(tutti_init(NULL, &rt)); /* coordinator, job, rank and size from TUTTI_* */
  int32_t rank, size;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));

  float data[4];
  for (int i = 0; i < 4; ++i) data[i] = (float)(rank + 1 + i);
  int64_t shape[1] = {4};
  tutti_tensor_t t = TUTTI_TENSOR_INIT;
  t.data = data;
  t.dtype = TUTTI_DTYPE_FLOAT32;
  t.ndim = 1;
  t.shape = shape;
  tutti_allreduce_options_t sum = TUTTI_ALLREDUCE_OPTIONS_INIT;
  tutti_request_t request;
  CHECK(tutti_allreduce(rt, "consumer", TUTTI_WORLD, &t, &t, &sum, &request));
  CHECK(tutti_request_wait(request, 60000));
  CHECK(tutti_request_free(request));

  printf("rank %d of %d: sum %g %g %g %g; version %d.%d.%d; library %s\n", (int)rank, (int)size,
         data[0], data[1], data[2], data[3], TUTTI_VERSION_MAJOR, TUTTI_VERSION_MINOR,
         TUTTI_VERSION_PATCH, library);
  CHECK(tutti_finalize(rt));
  return 0;
}
