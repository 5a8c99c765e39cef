package tutti

// #include <tutti/tutti.h>
import "C"

import (
	"context"
	"unsafe"
)

// ProcessSet is a set of global ranks of one Runtime: collectives on it involve its members
// only, and run independently of other sets'.
type ProcessSet struct {
	rt *Runtime
	id int32
}

// World is the set of all ranks (id 0).
func (r *Runtime) World() *ProcessSet { return &ProcessSet{rt: r, id: C.TUTTI_WORLD} }

// ProcessSetByID names a set known by id (a static set, or one added elsewhere in the program).
func (r *Runtime) ProcessSetByID(id int) *ProcessSet { return &ProcessSet{rt: r, id: int32(id)} }

// AddProcessSet adds the set of these global ranks. Members block until every member added it
// (up to ctx's deadline, else the runtime's timeout; the C call cannot be cancelled earlier);
// a non-member returns at once. Adding an existing set returns it again.
func (r *Runtime) AddProcessSet(ctx context.Context, ranks []int) (*ProcessSet, error) {
	values := make([]C.int32_t, len(ranks)+1) // +1: a valid pointer when empty
	for i, rank := range ranks {
		values[i] = C.int32_t(rank)
	}
	var id C.int32_t
	err := r.with(func(raw C.tutti_runtime_t) error {
		return call(func() C.tutti_status_t {
			return C.tutti_process_set_add(raw, &values[0], C.int32_t(len(ranks)), C.int64_t(timeoutMs(ctx, 0)), &id)
		})
	})
	if err != nil {
		return nil, err
	}
	return &ProcessSet{rt: r, id: int32(id)}, nil
}

// ID is the set's id (0: the world).
func (s *ProcessSet) ID() int { return int(s.id) }

// Size is the number of members.
func (s *ProcessSet) Size() (int, error) {
	return s.rt.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t {
		return C.tutti_process_set_size(raw, C.int32_t(s.id), v)
	})
}

// Rank is this rank's position among the members (ErrNotAMember if it is not one).
func (s *ProcessSet) Rank() (int, error) {
	return s.rt.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t {
		return C.tutti_process_set_rank(raw, C.int32_t(s.id), v)
	})
}

// Includes tells whether this rank is a member.
func (s *ProcessSet) Includes() (bool, error) {
	v, err := s.rt.getInt(func(raw C.tutti_runtime_t, v *C.int32_t) C.tutti_status_t {
		return C.tutti_process_set_included(raw, C.int32_t(s.id), v)
	})
	return v != 0, err
}

// Ranks are the members' global ranks, sorted.
func (s *ProcessSet) Ranks() ([]int, error) {
	size, err := s.Size()
	if err != nil {
		return nil, err
	}
	values := make([]C.int32_t, size+1)
	var count C.int32_t
	err = s.rt.with(func(raw C.tutti_runtime_t) error {
		return call(func() C.tutti_status_t {
			return C.tutti_process_set_ranks(raw, C.int32_t(s.id), (*C.int32_t)(unsafe.Pointer(&values[0])), C.int32_t(size), &count)
		})
	})
	if err != nil {
		return nil, err
	}
	ranks := make([]int, 0, int(count))
	for _, v := range values[:min(int(count), size)] {
		ranks = append(ranks, int(v))
	}
	return ranks, nil
}

// Remove removes the set: collective over its members, like AddProcessSet.
func (s *ProcessSet) Remove(ctx context.Context) error {
	return s.rt.with(func(raw C.tutti_runtime_t) error {
		return call(func() C.tutti_status_t {
			return C.tutti_process_set_remove(raw, C.int32_t(s.id), C.int64_t(timeoutMs(ctx, 0)))
		})
	})
}

// Autotune tunes the set's fusion threshold and algorithm cut-offs by the measured speed of its
// own collectives (docs/autotune.md). One member's call is enough; it returns at once.
func (s *ProcessSet) Autotune() error {
	return s.rt.with(func(raw C.tutti_runtime_t) error {
		return call(func() C.tutti_status_t {
			return C.tutti_process_set_autotune(raw, C.int32_t(s.id))
		})
	})
}

// own refuses a set of another runtime, whose id would name an unrelated set here.
func (r *Runtime) own(s *ProcessSet) (C.int32_t, error) {
	if s == nil {
		return 0, invalid("process set is nil; use rt.World() for all ranks")
	}
	if s.rt != r {
		return 0, invalid("process set %d belongs to another runtime", s.id)
	}
	return C.int32_t(s.id), nil
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}
