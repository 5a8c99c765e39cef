/* Synthetic data-parallel training step: the gradient allreduces of one backward pass of a real
 * model, without the model.
 *   tuttirun -np N build/bench/training_step [OPTIONS] MODEL.tsv
 *   tuttirun -np N build/bench/training_step [OPTIONS] --synthetic COUNTxBYTES
 * MODEL.tsv lists one gradient per line, `name<TAB>dims,separated,by,commas`, in the model's
 * parameter order (bench/models/generate_sizes.py writes resnet50.tsv and bert_base.tsv). Each
 * step submits every gradient as its own named async float32 average allreduce on the world, in
 * reverse file order (the order backprop produces them), then waits for and frees them all.
 * Options: --warmup N (default 2), --steps N measured steps (default 5), --model NAME (default:
 * the file's base name).
 * Every rank checks the first and the last step's results. Rank 0 prints per-step times (the
 * slowest rank's), the per-step averages of its control-plane counters (tutti_get_counters, read
 * before and after the measured steps) and one line `RESULT key=value ...` for scripts
 * (bench/training_step.sh). Uses tutti.h only. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

typedef struct gradient {
  char* name;
  int32_t ndim;
  int64_t shape[TUTTI_MAX_DIMS];
  int64_t count; /* elements */
  float* data;
} gradient_t;

typedef struct model {
  char name[256];
  int32_t ntensors;
  gradient_t* tensors;
  int64_t total_bytes;
} model_t;

static void usage(const char* argv0) {
  fprintf(stderr,
          "usage: %s [--warmup N] [--steps N] [--model NAME] (MODEL.tsv | --synthetic COUNTxBYTES)\n",
          argv0);
  exit(2);
}

static double now_ms(void) { return bench_now_us() / 1e3; }

static char* copy_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* out = malloc(n);
  if (!out) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return memcpy(out, s, n);
}

static void add_tensor(model_t* m, int32_t* capacity, const char* name, int32_t ndim,
                       const int64_t* shape) {
  if (m->ntensors == *capacity) {
    *capacity = *capacity ? *capacity * 2 : 64;
    m->tensors = realloc(m->tensors, sizeof(gradient_t) * (size_t)*capacity);
    if (!m->tensors) {
      fprintf(stderr, "out of memory\n");
      exit(1);
    }
  }
  gradient_t* g = &m->tensors[m->ntensors++];
  g->name = copy_string(name);
  g->ndim = ndim;
  g->count = 1;
  for (int32_t d = 0; d < ndim; ++d) {
    g->shape[d] = shape[d];
    g->count *= shape[d];
  }
  g->data = NULL;
  m->total_bytes += g->count * (int64_t)sizeof(float);
}

/* Reads `name<TAB>d0,d1,...` lines; blank lines and lines starting with '#' are skipped. */
static void read_model(const char* path, model_t* m) {
  FILE* f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(2);
  }
  char line[4096];
  int32_t capacity = 0, lineno = 0;
  while (fgets(line, sizeof(line), f)) {
    ++lineno;
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    if (len == 0 || line[0] == '#') continue;
    char* tab = strchr(line, '\t');
    if (!tab || tab == line) {
      fprintf(stderr, "%s:%d: expected name<TAB>dims\n", path, (int)lineno);
      exit(2);
    }
    *tab = '\0';
    int64_t shape[TUTTI_MAX_DIMS];
    int32_t ndim = 0;
    char* p = tab + 1;
    for (;;) {
      char* end;
      long long d = strtoll(p, &end, 10);
      if (end == p || d < 0 || ndim == TUTTI_MAX_DIMS || (*end != ',' && *end != '\0')) {
        fprintf(stderr, "%s:%d: bad dims '%s'\n", path, (int)lineno, tab + 1);
        exit(2);
      }
      shape[ndim++] = (int64_t)d;
      if (*end == '\0') break;
      p = end + 1;
    }
    add_tensor(m, &capacity, line, ndim, shape);
  }
  fclose(f);
  if (m->ntensors == 0) {
    fprintf(stderr, "%s: no tensors\n", path);
    exit(2);
  }
  if (m->name[0] == '\0') { /* the base name without its extension */
    const char* base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(m->name, sizeof(m->name), "%s", base);
    char* dot = strrchr(m->name, '.');
    if (dot && dot != m->name) *dot = '\0';
  }
}

static void synthetic_model(const char* spec, model_t* m) {
  long count = 0, bytes = 0;
  char x = 0, extra = 0;
  if (sscanf(spec, "%ld%c%ld%c", &count, &x, &bytes, &extra) != 3 || (x != 'x' && x != 'X') ||
      count < 1 || bytes < 4) {
    fprintf(stderr, "--synthetic wants COUNTxBYTES with COUNT >= 1 and BYTES >= 4, e.g. 200x4096\n");
    exit(2);
  }
  int32_t capacity = 0;
  int64_t elements = bytes / 4;
  for (long i = 0; i < count; ++i) {
    char name[64];
    snprintf(name, sizeof(name), "synthetic.%ld", i);
    add_tensor(m, &capacity, name, 1, &elements);
  }
  if (m->name[0] == '\0') snprintf(m->name, sizeof(m->name), "synthetic-%ldx%ld", count, bytes);
}

static float expected_value(int32_t size, int32_t i) {
  /* average over ranks r of (r + 1) * (i % 7 + 1) */
  return (float)(i % 7 + 1) * (float)(size + 1) / 2.0f;
}

/* Returns the number of wrong elements, printing the first few. */
static int64_t verify(const model_t* m, int32_t rank, int32_t size, int step) {
  int64_t wrong = 0;
  for (int32_t i = 0; i < m->ntensors; ++i) {
    const gradient_t* g = &m->tensors[i];
    float want = expected_value(size, i);
    for (int64_t j = 0; j < g->count; ++j) {
      float diff = g->data[j] - want;
      if (diff < 0) diff = -diff;
      if (!(diff <= 1e-5f * want)) {
        if (wrong < 5)
          fprintf(stderr, "rank %d step %d: %s[%lld] = %g, expected %g\n", (int)rank, step, g->name,
                  (long long)j, (double)g->data[j], (double)want);
        ++wrong;
      }
    }
  }
  return wrong;
}

/* One training step's communication; returns its duration in ms. */
static double run_step(tutti_runtime_t rt, model_t* m, tutti_request_t* requests) {
  tutti_allreduce_options_t opts = TUTTI_ALLREDUCE_OPTIONS_INIT;
  opts.reduce_op = TUTTI_OP_AVERAGE;
  double start = now_ms();
  for (int32_t k = 0; k < m->ntensors; ++k) { /* backprop: last parameter first */
    gradient_t* g = &m->tensors[m->ntensors - 1 - k];
    tutti_tensor_t t = TUTTI_TENSOR_INIT;
    t.data = g->data;
    t.dtype = TUTTI_DTYPE_FLOAT32;
    t.ndim = g->ndim;
    t.shape = g->shape;
    tutti_status_t s = tutti_allreduce(rt, g->name, TUTTI_WORLD, &t, &t, &opts, &requests[k]);
    if (s != TUTTI_OK) {
      fprintf(stderr, "tutti_allreduce(%s): %s (%s)\n", g->name, tutti_status_string(s),
              tutti_last_error());
      exit(1);
    }
  }
  for (int32_t k = 0; k < m->ntensors; ++k) {
    tutti_status_t s = tutti_request_wait(requests[k], -1);
    if (s != TUTTI_OK) {
      fprintf(stderr, "tutti_request_wait(%s): %s (%s)\n", m->tensors[m->ntensors - 1 - k].name,
              tutti_status_string(s), tutti_last_error());
      exit(1);
    }
    CHECK(tutti_request_free(requests[k]));
  }
  return now_ms() - start;
}

static const char* env_or_default(const char* name) {
  const char* v = getenv(name);
  return v && v[0] ? v : "default";
}

int main(int argc, char** argv) {
  int warmup = 2, steps = 5;
  const char* path = NULL;
  const char* synthetic = NULL;
  model_t model;
  memset(&model, 0, sizeof(model));
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    int has_value = i + 1 < argc;
    if (!strcmp(a, "--warmup") && has_value) {
      warmup = atoi(argv[++i]);
    } else if (!strcmp(a, "--steps") && has_value) {
      steps = atoi(argv[++i]);
    } else if (!strcmp(a, "--synthetic") && has_value) {
      synthetic = argv[++i];
    } else if (!strcmp(a, "--model") && has_value) {
      snprintf(model.name, sizeof(model.name), "%s", argv[++i]);
    } else if (a[0] != '-' && !path) {
      path = a;
    } else {
      usage(argv[0]);
    }
  }
  if ((path == NULL) == (synthetic == NULL) || warmup < 0 || steps < 1) usage(argv[0]);
  if (synthetic)
    synthetic_model(synthetic, &model);
  else
    read_model(path, &model);

  tutti_runtime_t rt;
  CHECK(tutti_init(NULL, &rt));
  int32_t rank, size;
  CHECK(tutti_rank(rt, &rank));
  CHECK(tutti_size(rt, &size));

  for (int32_t i = 0; i < model.ntensors; ++i) {
    gradient_t* g = &model.tensors[i];
    g->data = malloc((size_t)(g->count > 0 ? g->count : 1) * sizeof(float));
    if (!g->data) {
      fprintf(stderr, "rank %d: cannot allocate %s (%lld bytes)\n", (int)rank, g->name,
              (long long)g->count * 4);
      exit(1);
    }
    float value = (float)(rank + 1) * (float)(i % 7 + 1);
    for (int64_t j = 0; j < g->count; ++j) g->data[j] = value;
  }
  tutti_request_t* requests = malloc(sizeof(tutti_request_t) * (size_t)model.ntensors);
  double* times = malloc(sizeof(double) * (size_t)steps);
  if (!requests || !times) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  if (rank == 0)
    printf("model %s: %d tensors, %lld bytes; ranks %d, warmup %d, steps %d\n", model.name,
           (int)model.ntensors, (long long)model.total_bytes, (int)size, warmup, steps);

  /* After the first step every rank holds the average; averaging equal values keeps it, so the
   * last step is checked against the same expectation. */
  tutti_counters_t before = TUTTI_COUNTERS_INIT, after = TUTTI_COUNTERS_INIT;
  int total = warmup + steps;
  for (int step = 1; step <= total; ++step) {
    if (step == warmup + 1) CHECK(tutti_get_counters(rt, &before));
    double ms = run_step(rt, &model, requests);
    if (step > warmup) times[step - warmup - 1] = ms;
    if (step == total) CHECK(tutti_get_counters(rt, &after));
    if (step == 1 || step == total) {
      int64_t wrong = verify(&model, rank, size, step);
      if (wrong) {
        fprintf(stderr, "rank %d: step %d: %lld wrong elements\n", (int)rank, step, (long long)wrong);
        tutti_abort(rt); /* the other ranks fail at once instead of waiting for this one */
        exit(1);
      }
    }
  }

  /* The step ends when its slowest rank is done: take each step's maximum over ranks. */
  bench_max_over_ranks(rt, times, steps);

  if (rank == 0) {
    for (int s = 0; s < steps; ++s) printf("step %d: %.2f ms\n", warmup + s + 1, times[s]);
    qsort(times, (size_t)steps, sizeof(double), bench_compare_doubles);
    double median = steps % 2 ? times[steps / 2] : (times[steps / 2 - 1] + times[steps / 2]) / 2;
#define PER_STEP(field) ((double)(after.field - before.field) / steps)
    printf("per step: %.1f announce messages (%.0f bytes, %.1f tensors in full, %.1f cached), "
           "%.1f execute messages (%.0f bytes), %.1f collectives (%.1f tensors fused)\n",
           PER_STEP(announce_messages), PER_STEP(announce_bytes), PER_STEP(tensors_announced),
           PER_STEP(tensors_announced_cached), PER_STEP(execute_messages), PER_STEP(execute_bytes),
           PER_STEP(collectives), PER_STEP(tensors_fused));
    printf("RESULT model=%s ranks=%d tensors=%d bytes=%lld fusion_threshold=%s cache_capacity=%s "
           "warmup=%d steps=%d step_ms_median=%.3f step_ms_min=%.3f step_ms_max=%.3f "
           "announce_msgs_per_step=%.2f announce_bytes_per_step=%.1f "
           "tensors_announced_per_step=%.2f tensors_cached_per_step=%.2f "
           "execute_msgs_per_step=%.2f execute_bytes_per_step=%.1f collectives_per_step=%.2f "
           "tensors_fused_per_step=%.2f\n",
           model.name, (int)size, (int)model.ntensors, (long long)model.total_bytes,
           env_or_default("TUTTI_FUSION_THRESHOLD"), env_or_default("TUTTI_CACHE_CAPACITY"), warmup,
           steps, median, times[0], times[steps - 1], PER_STEP(announce_messages),
           PER_STEP(announce_bytes), PER_STEP(tensors_announced), PER_STEP(tensors_announced_cached),
           PER_STEP(execute_messages), PER_STEP(execute_bytes), PER_STEP(collectives),
           PER_STEP(tensors_fused));
#undef PER_STEP
    fflush(stdout);
  }

  CHECK(tutti_finalize(rt));
  for (int32_t i = 0; i < model.ntensors; ++i) {
    free(model.tensors[i].data);
    free(model.tensors[i].name);
  }
  free(model.tensors);
  free(requests);
  free(times);
  return 0;
}
