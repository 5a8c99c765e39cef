package tutti

// #include <stdlib.h>
// #include <tutti/tutti.h>
// static tutti_allreduce_options_t allreduce_options_init(void) {
//   tutti_allreduce_options_t o = TUTTI_ALLREDUCE_OPTIONS_INIT;
//   return o;
// }
import "C"

import (
	"context"
	"fmt"
	"unsafe"
)

// Tensor gives a slice a shape (row-major; the product of Shape must be its length). A plain
// slice is a 1-D tensor. Wherever a collective takes `data any`, a Tensor may be passed.
type Tensor struct {
	Data  any
	Shape []int64
}

func unwrap(data any) (any, []int64) {
	if t, ok := data.(Tensor); ok {
		return t.Data, t.Shape
	}
	return data, nil
}

// ReduceOp is a reduction (TUTTI_OP_*).
type ReduceOp int32

const (
	Sum     ReduceOp = C.TUTTI_OP_SUM
	Average ReduceOp = C.TUTTI_OP_AVERAGE
	Min     ReduceOp = C.TUTTI_OP_MIN
	Max     ReduceOp = C.TUTTI_OP_MAX
	Product ReduceOp = C.TUTTI_OP_PRODUCT
)

// AllreduceOption changes one field of TUTTI_ALLREDUCE_OPTIONS_INIT (sum, no scaling,
// priority 0).
type AllreduceOption func(*C.tutti_allreduce_options_t)

func WithOp(op ReduceOp) AllreduceOption {
	return func(o *C.tutti_allreduce_options_t) { o.reduce_op = C.int32_t(op) }
}

// WithPrescale scales the input before the reduction; WithPostscale the result.
func WithPrescale(f float64) AllreduceOption {
	return func(o *C.tutti_allreduce_options_t) { o.prescale_factor = C.double(f) }
}

func WithPostscale(f float64) AllreduceOption {
	return func(o *C.tutti_allreduce_options_t) { o.postscale_factor = C.double(f) }
}

// WithPriority: among tensors of a set released together, higher priorities run first.
func WithPriority(p int) AllreduceOption {
	return func(o *C.tutti_allreduce_options_t) { o.priority = C.int32_t(p) }
}

// pending is a submitted request and the C memory it uses.
type pending struct {
	raw    C.tutti_request_t
	name   string
	stages []*staged
	// Set when an abandoned request is freed still pending: its staging memory is leaked.
	inProgressAtFree bool
}

func (p *pending) wait(ms int64) error {
	return call(func() C.tutti_status_t { return C.tutti_request_wait(p.raw, C.int64_t(ms)) })
}

func (p *pending) inProgress() bool {
	return Status(C.tutti_request_test(p.raw)) == statusInProgress
}

// release frees the handle and, once the library is done with it, the staging memory.
func (p *pending) release() {
	C.tutti_request_free(p.raw)
	if !p.inProgressAtFree {
		for _, s := range p.stages {
			s.free()
		}
	}
}

// abandoned finishes a request nobody waits for any more: up to the runtime's timeout more,
// then the handle is freed; staging memory the library may still write is never freed.
func (p *pending) abandoned() {
	if p.inProgress() {
		_ = p.wait(-1)
	}
	p.inProgressAtFree = p.inProgress()
	p.release()
}

// submit starts a request on `set` under `name` ("" for an automatic name: submit in the same
// order on every member). The staging memory is freed if the library refuses it.
func (r *Runtime) submit(name string, set *ProcessSet, stages []*staged,
	start func(C.tutti_runtime_t, C.int32_t, *C.char, *C.tutti_request_t) C.tutti_status_t) (*pending, error) {
	p := &pending{name: name, stages: stages}
	id, err := r.own(set)
	if err == nil {
		var cname *C.char
		if name != "" {
			cname = C.CString(name)
			defer C.free(unsafe.Pointer(cname))
		}
		// A variable of its own: cgo refuses a pointer into p, which holds Go pointers.
		var handle C.tutti_request_t
		err = r.with(func(raw C.tutti_runtime_t) error {
			return call(func() C.tutti_status_t { return start(raw, id, cname, &handle) })
		})
		p.raw = handle
	}
	if err != nil {
		for _, s := range stages {
			s.free()
		}
		return nil, err
	}
	return p, nil
}

// await blocks until the request completed, failed, or ctx ended. The C wait is bounded by
// ctx's deadline (no deadline: the runtime's timeout); cancellation without a deadline is
// noticed at once, since the wait runs in its own goroutine. On success `done` copies the
// results out before the request is freed. A request left pending is handed to abandoned().
func await(ctx context.Context, p *pending, done func() error) error {
	ms := timeoutMs(ctx, -1)
	settle := func(err error) error {
		if err != nil {
			if p.inProgress() { // the wait expired: the request goes on without us
				go p.abandoned()
				if _, ok := ctx.Deadline(); ok || ctx.Err() != nil {
					// The C wait ran to ctx's deadline, which may be a moment before ctx
					// itself reports it.
					return ended(ctx, p)
				}
				return err
			}
			p.release()
			return err
		}
		err = done()
		p.release()
		return err
	}
	if ctx.Done() == nil { // context.Background(): nothing can end the wait early
		return settle(p.wait(ms))
	}
	result := make(chan error, 1)
	go func() { result <- p.wait(ms) }()
	select {
	case err := <-result:
		return settle(err)
	case <-ctx.Done():
		go func() {
			<-result
			p.abandoned()
		}()
		return ended(ctx, p)
	}
}

// ended is the error of a wait its context ended: ErrTimeout, unwrapping to ctx.Err().
func ended(ctx context.Context, p *pending) error {
	cause := ctx.Err()
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	name := p.name
	if name == "" {
		name = "(unnamed)"
	}
	return &Error{Status: ErrTimeout, cause: cause, Message: fmt.Sprintf(
		"wait for '%s' ended by its context (%v); the request stays pending and its result will be dropped",
		name, cause)}
}

// Allreduce reduces `data` in place across the set's members (sum unless WithOp says other).
func (r *Runtime) Allreduce(ctx context.Context, name string, set *ProcessSet, data any, options ...AllreduceOption) error {
	slice, shape := unwrap(data)
	s, err := stage(slice, shape, true)
	if err != nil {
		return err
	}
	o := C.allreduce_options_init()
	for _, option := range options {
		option(&o)
	}
	p, err := r.submit(name, set, []*staged{s}, func(rt C.tutti_runtime_t, id C.int32_t, n *C.char, req *C.tutti_request_t) C.tutti_status_t {
		return C.tutti_allreduce(rt, n, id, &s.tensor, &s.tensor, &o, req)
	})
	if err != nil {
		return err
	}
	return await(ctx, p, func() error { s.copyOut(slice); return nil })
}

// Broadcast sends `data` from `root` (a global rank in the set) to every member, in place.
func (r *Runtime) Broadcast(ctx context.Context, name string, set *ProcessSet, data any, root int) error {
	slice, shape := unwrap(data)
	s, err := stage(slice, shape, true)
	if err != nil {
		return err
	}
	p, err := r.submit(name, set, []*staged{s}, func(rt C.tutti_runtime_t, id C.int32_t, n *C.char, req *C.tutti_request_t) C.tutti_status_t {
		return C.tutti_broadcast(rt, n, id, &s.tensor, C.int32_t(root), req)
	})
	if err != nil {
		return err
	}
	return await(ctx, p, func() error { s.copyOut(slice); return nil })
}

// Allgather gathers every member's `data` along its first dimension, in set order (members may
// give different numbers of rows). It returns a new slice of the same type and its shape.
func (r *Runtime) Allgather(ctx context.Context, name string, set *ProcessSet, data any) (any, []int64, error) {
	slice, shape := unwrap(data)
	s, err := stage(slice, shape, true)
	if err != nil {
		return nil, nil, err
	}
	p, err := r.submit(name, set, []*staged{s}, func(rt C.tutti_runtime_t, id C.int32_t, n *C.char, req *C.tutti_request_t) C.tutti_status_t {
		return C.tutti_allgather(rt, n, id, &s.tensor, req)
	})
	if err != nil {
		return nil, nil, err
	}
	var out any
	var outShape []int64
	err = await(ctx, p, func() (err error) {
		out, outShape, err = result(p.raw, slice)
		return err
	})
	return out, outShape, err
}

// Send sends `data` to `destination` (a global rank in the set); messages between two ranks
// of a set are matched by tag, in order. It returns once the data left this process.
func (r *Runtime) Send(ctx context.Context, set *ProcessSet, data any, destination, tag int) error {
	slice, shape := unwrap(data)
	s, err := stage(slice, shape, true)
	if err != nil {
		return err
	}
	p, err := r.submit("", set, []*staged{s}, func(rt C.tutti_runtime_t, id C.int32_t, _ *C.char, req *C.tutti_request_t) C.tutti_status_t {
		return C.tutti_send(rt, id, &s.tensor, C.int32_t(destination), C.int32_t(tag), req)
	})
	if err != nil {
		return err
	}
	p.name = fmt.Sprintf("send to rank %d, tag %d", destination, tag)
	return await(ctx, p, func() error { return nil })
}

// Recv receives into `data` (exactly the size sent) from `source`.
func (r *Runtime) Recv(ctx context.Context, set *ProcessSet, data any, source, tag int) error {
	slice, shape := unwrap(data)
	s, err := stage(slice, shape, false)
	if err != nil {
		return err
	}
	p, err := r.submit("", set, []*staged{s}, func(rt C.tutti_runtime_t, id C.int32_t, _ *C.char, req *C.tutti_request_t) C.tutti_status_t {
		return C.tutti_recv(rt, id, &s.tensor, C.int32_t(source), C.int32_t(tag), req)
	})
	if err != nil {
		return err
	}
	p.name = fmt.Sprintf("recv from rank %d, tag %d", source, tag)
	return await(ctx, p, func() error { s.copyOut(slice); return nil })
}

// Barrier returns once every member of the set entered it.
func (r *Runtime) Barrier(ctx context.Context, set *ProcessSet) error {
	p, err := r.submit("", set, nil, func(rt C.tutti_runtime_t, id C.int32_t, _ *C.char, req *C.tutti_request_t) C.tutti_status_t {
		return C.tutti_barrier(rt, id, req)
	})
	if err != nil {
		return err
	}
	p.name = "barrier"
	return await(ctx, p, func() error { return nil })
}
