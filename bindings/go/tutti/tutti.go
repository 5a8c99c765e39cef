// Package tutti is the Go binding of tutti: collective communication on process sets over
// libtutti.so (docs/bindings.md).
//
//	rt, err := tutti.Init()                 // rank, size, coordinator from tuttirun
//	defer rt.Close()
//	evens, err := rt.AddProcessSet(ctx, []int{0, 2})
//	grad := make([]float32, 1024)
//	err = rt.Allreduce(ctx, "grad", evens, grad, tutti.WithOp(tutti.Average))
//
// Every collective blocks the calling goroutine until it completed, failed, or ctx ended;
// run several at once from several goroutines. Tensors are slices of float32, float64, int8,
// uint8, int16, int32, int64 or bool, copied into C memory for the request (see tensor.go).
// Errors are *Error values matching their Status with errors.Is.
//
// Building: the header and library come from the checkout (capi/include, build/) by default;
// CGO_CFLAGS=-I<include dir> and CGO_LDFLAGS="-L<lib dir> -Wl,-rpath,<lib dir>" point elsewhere
// (they come before the defaults below).
package tutti

// #cgo CFLAGS: -I${SRCDIR}/../../../capi/include
// #cgo LDFLAGS: -L${SRCDIR}/../../../build -Wl,-rpath,${SRCDIR}/../../../build -ltutti
// #include <stdlib.h>
// #include <tutti/tutti.h>
// static tutti_init_options_t init_options_init(void) {
//   tutti_init_options_t o = TUTTI_INIT_OPTIONS_INIT;
//   return o;
// }
// static int32_t header_version(void) { return TUTTI_VERSION; }
import "C"

import (
	"context"
	"sync"
	"time"
	"unsafe"
)

// HeaderVersion is TUTTI_VERSION of the header this package was compiled against.
var HeaderVersion = int(C.header_version())

// LibraryVersion is the version of the libtutti.so loaded (tutti_get_version).
func LibraryVersion() (int, error) {
	var v C.int32_t
	err := call(func() C.tutti_status_t { return C.tutti_get_version(&v) })
	return int(v), err
}

// Runtime is one rank's membership of a job, from Init to Close. Its methods may be called
// from any goroutine (the C ABI allows any thread).
type Runtime struct {
	// Close takes it exclusively; submissions share it, so that none runs on a finalized
	// runtime. Waits do not hold it: a request outlives its runtime (it then fails).
	mu  sync.RWMutex
	raw C.tutti_runtime_t
}

type initConfig struct {
	strings   map[string]string
	rank      *int
	size      *int
	timeout   time.Duration
	staticSet [][]int
}

// InitOption sets one field of tutti_init_options_t; anything not set comes from the
// environment (TUTTI_COORDINATOR, TUTTI_JOB, TUTTI_TOKEN, TUTTI_RANK, TUTTI_SIZE, ...).
type InitOption func(*initConfig)

// WithCoordinator names tuttid's endpoint, e.g. "tcp://10.0.0.1:5555".
func WithCoordinator(endpoint string) InitOption {
	return func(c *initConfig) { c.strings["coordinator"] = endpoint }
}

// WithJob sets the job id; WithToken the job's token.
func WithJob(job string) InitOption     { return func(c *initConfig) { c.strings["job"] = job } }
func WithToken(token string) InitOption { return func(c *initConfig) { c.strings["token"] = token } }

// WithTransport picks the data plane: "auto", "tcp" or "shm" (the same on every rank).
func WithTransport(t string) InitOption { return func(c *initConfig) { c.strings["transport"] = t } }

// WithRank and WithSize place this rank in the world.
func WithRank(rank int) InitOption { return func(c *initConfig) { c.rank = &rank } }
func WithSize(size int) InitOption { return func(c *initConfig) { c.size = &size } }

// WithTimeout bounds the rendezvous, set changes and each data-plane step (default 60 s).
func WithTimeout(d time.Duration) InitOption { return func(c *initConfig) { c.timeout = d } }

// WithStaticSet registers a process set at init on every rank (the i-th gets id i + 1).
func WithStaticSet(ranks []int) InitOption {
	return func(c *initConfig) { c.staticSet = append(c.staticSet, ranks) }
}

// Init joins the job; it returns once every rank registered.
func Init(options ...InitOption) (*Runtime, error) {
	cfg := initConfig{strings: map[string]string{}}
	for _, o := range options {
		o(&cfg)
	}
	o := C.init_options_init()
	var free []unsafe.Pointer
	defer func() {
		for _, p := range free {
			C.free(p)
		}
	}()
	text := func(key string) *C.char {
		v, ok := cfg.strings[key]
		if !ok {
			return nil
		}
		s := C.CString(v)
		free = append(free, unsafe.Pointer(s))
		return s
	}
	o.coordinator, o.job, o.token, o.transport = text("coordinator"), text("job"), text("token"), text("transport")
	if cfg.rank != nil {
		o.rank = C.int32_t(*cfg.rank)
	}
	if cfg.size != nil {
		o.size = C.int32_t(*cfg.size)
	}
	if cfg.timeout > 0 {
		o.timeout_ms = C.int64_t(cfg.timeout.Milliseconds())
	}
	if n := len(cfg.staticSet); n > 0 {
		var ranks []int32
		sizes := make([]int32, n)
		for i, set := range cfg.staticSet {
			sizes[i] = int32(len(set))
			for _, r := range set {
				ranks = append(ranks, int32(r))
			}
		}
		// In C memory: the options struct is passed by pointer and may hold no Go pointers.
		o.num_static_sets = C.int32_t(n)
		o.static_set_sizes = (*C.int32_t)(cInts(sizes, &free))
		o.static_set_ranks = (*C.int32_t)(cInts(ranks, &free))
	}
	var raw C.tutti_runtime_t
	if err := call(func() C.tutti_status_t { return C.tutti_init(&o, &raw) }); err != nil {
		return nil, err
	}
	return &Runtime{raw: raw}, nil
}

func cInts(values []int32, free *[]unsafe.Pointer) unsafe.Pointer {
	p := C.malloc(C.size_t(4*len(values) + 4))
	copy(unsafe.Slice((*int32)(p), len(values)), values)
	*free = append(*free, p)
	return p
}

// Close leaves the job (tutti_finalize). Collectives still waiting fail with ErrShutDown. A
// second Close returns nil.
func (r *Runtime) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.raw == nil {
		return nil
	}
	raw := r.raw
	r.raw = nil
	return call(func() C.tutti_status_t { return C.tutti_finalize(raw) })
}

// Abort aborts this rank: its pending requests fail with ErrAborted at once, and so do the
// other members' requests on its sets. Close must still be called.
func (r *Runtime) Abort() error {
	return r.with(func(raw C.tutti_runtime_t) error {
		return call(func() C.tutti_status_t { return C.tutti_abort(raw) })
	})
}

// with runs f on the live runtime (ErrShutDown after Close).
func (r *Runtime) with(f func(C.tutti_runtime_t) error) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.raw == nil {
		return &Error{Status: ErrShutDown, Message: "the runtime was closed"}
	}
	return f(r.raw)
}

func (r *Runtime) getInt(f func(C.tutti_runtime_t, *C.int32_t) C.tutti_status_t) (int, error) {
	var v C.int32_t
	err := r.with(func(raw C.tutti_runtime_t) error {
		return call(func() C.tutti_status_t { return f(raw, &v) })
	})
	return int(v), err
}

// Rank is this rank's global rank; Size the world's size.
func (r *Runtime) Rank() (int, error) {
	return r.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t { return C.tutti_rank(raw, v) })
}

func (r *Runtime) Size() (int, error) {
	return r.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t { return C.tutti_size(raw, v) })
}

// LocalRank and LocalSize: this rank among the ranks of its host.
func (r *Runtime) LocalRank() (int, error) {
	return r.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t { return C.tutti_local_rank(raw, v) })
}

func (r *Runtime) LocalSize() (int, error) {
	return r.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t { return C.tutti_local_size(raw, v) })
}

// timeoutMs is what a context allows a blocking C call: the time to its deadline, else
// `fallback` (the runtime's own timeout for -1 or 0, as each call defines it).
func timeoutMs(ctx context.Context, fallback int64) int64 {
	if deadline, ok := ctx.Deadline(); ok {
		ms := time.Until(deadline).Milliseconds()
		if ms < 1 {
			return 1 // 0 would mean "the runtime's timeout" to some calls
		}
		return ms
	}
	return fallback
}
