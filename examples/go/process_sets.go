// Process sets from Go: the even and the odd ranks each allreduce in a set of their own while
// the whole world allreduces at the same time (two goroutines); then each set broadcasts
// weights from its first member, the world gathers batches of different sizes, and pairs of
// ranks pass an activation and its gradient with send/recv. Every result is checked; any
// difference exits with 1.
// Run it with: build/tuttirun -np 4 examples/go/process_sets (an even number of ranks)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"tutti/bindings/go/tutti"
)

const count = 1024

type checks struct {
	rank   int
	failed int
}

func (c *checks) expect(what string, got, want any) {
	if !reflect.DeepEqual(got, want) {
		fmt.Fprintf(os.Stderr, "rank %d: %s: got %v, expected %v\n", c.rank, what, got, want)
		c.failed++
	}
}

func main() {
	failed, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "process_sets (go): %v\n", err)
		os.Exit(2)
	}
	if failed > 0 {
		os.Exit(1)
	}
}

func run() (int, error) {
	// Every step of this job is bounded: a lost peer fails it instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := tutti.Init() // coordinator, job, rank and size come from tuttirun
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	rank, err := rt.Rank()
	if err != nil {
		return 0, err
	}
	size, err := rt.Size()
	if err != nil {
		return 0, err
	}
	if size%2 != 0 {
		return 0, fmt.Errorf("run on an even number of ranks, not %d", size)
	}
	c := &checks{rank: rank}

	// Every rank adds both sets (members wait for each other, non-members return at once).
	var evens, odds []int
	for r := 0; r < size; r++ {
		if r%2 == 0 {
			evens = append(evens, r)
		} else {
			odds = append(odds, r)
		}
	}
	evenSet, err := rt.AddProcessSet(ctx, evens)
	if err != nil {
		return 0, err
	}
	oddSet, err := rt.AddProcessSet(ctx, odds)
	if err != nil {
		return 0, err
	}
	mine, other, first := evenSet, oddSet, 0
	if rank%2 == 1 {
		mine, other, first = oddSet, evenSet, 1
	}
	setSize, err := mine.Size()
	if err != nil {
		return 0, err
	}

	// The set's and the world's allreduces in flight together, one goroutine each: their
	// streams run independently.
	inSet := make([]float32, count)
	inWorld := make([]float64, count)
	for i := range inSet {
		inSet[i], inWorld[i] = float32(rank+i), 1
	}
	worldDone := make(chan error, 1)
	go func() { worldDone <- rt.Allreduce(ctx, "world", rt.World(), inWorld) }()
	if err := rt.Allreduce(ctx, "mine", mine, inSet); err != nil {
		return 0, err
	}
	if err := <-worldDone; err != nil {
		return 0, err
	}
	rankSum := 0
	for r := first; r < size; r += 2 {
		rankSum += r
	}
	wantSet, wantWorld := make([]float32, count), make([]float64, count)
	for i := range wantSet {
		wantSet[i], wantWorld[i] = float32(rankSum+setSize*i), float64(size)
	}
	c.expect("set sums", inSet, wantSet)
	c.expect("world sums", inWorld, wantWorld)

	// A rank outside a set may not run its collectives; the library says why.
	err = rt.Allreduce(ctx, "probe", other, []int32{0})
	var te *tutti.Error
	c.expect("non-member status", errors.Is(err, tutti.ErrNotAMember) && errors.As(err, &te), true)
	if te != nil {
		c.expect("non-member message", te.Message, fmt.Sprintf("rank %d is not a member of process set %d", rank, other.ID()))
	}

	// Broadcast in the set from its first member (a global rank): initial weights.
	weights := make([]float32, 4)
	if rank == first {
		weights = []float32{100, 101, 102, 103}
	}
	if err := rt.Broadcast(ctx, "weights", mine, weights, first); err != nil {
		return 0, err
	}
	c.expect("broadcast", weights, []float32{100, 101, 102, 103})

	// Allgather on the world: rank r gives r + 1 rows of 2 values (batches of different sizes).
	batch := make([]int32, 2*(rank+1))
	for i := range batch {
		batch[i] = int32(rank)
	}
	gathered, shape, err := rt.Allgather(ctx, "batches", rt.World(), tutti.Tensor{Data: batch, Shape: []int64{int64(rank + 1), 2}})
	if err != nil {
		return 0, err
	}
	var want []int32
	for r := 0; r < size; r++ {
		for i := 0; i < 2*(r+1); i++ {
			want = append(want, int32(r))
		}
	}
	c.expect("allgather rows", gathered, want)
	c.expect("allgather shape", shape, []int64{int64(len(want) / 2), 2})

	// Allgather in the set: each member's position, in set order.
	position, err := mine.Rank()
	if err != nil {
		return 0, err
	}
	order, _, err := rt.Allgather(ctx, "positions", mine, []int64{int64(position)})
	if err != nil {
		return 0, err
	}
	wantOrder := make([]int64, setSize)
	for i := range wantOrder {
		wantOrder[i] = int64(i)
	}
	c.expect("set allgather", order, wantOrder)

	// Send/recv between pipeline stages: each even rank passes an activation to the odd rank
	// after it, which answers with a gradient (world set, global ranks, tags 1 and 2).
	activation, gradient := make([]float32, 8), make([]float32, 8)
	expected := make([]float32, 8)
	if rank%2 == 0 {
		for i := range activation {
			activation[i], expected[i] = float32(rank*10+i), -float32(rank*10+i)
		}
		if err := rt.Send(ctx, rt.World(), activation, rank+1, 1); err != nil {
			return 0, err
		}
		if err := rt.Recv(ctx, rt.World(), gradient, rank+1, 2); err != nil {
			return 0, err
		}
		c.expect("gradient", gradient, expected)
	} else {
		if err := rt.Recv(ctx, rt.World(), activation, rank-1, 1); err != nil {
			return 0, err
		}
		for i := range activation {
			gradient[i], expected[i] = -activation[i], float32((rank-1)*10+i)
		}
		if err := rt.Send(ctx, rt.World(), gradient, rank-1, 2); err != nil {
			return 0, err
		}
		c.expect("activation", activation, expected)
	}

	if err := rt.Barrier(ctx, rt.World()); err != nil {
		return 0, err
	}
	kind, verdict := "even", "ok"
	if rank%2 == 1 {
		kind = "odd"
	}
	if c.failed > 0 {
		verdict = "WRONG"
	}
	fmt.Printf("rank %d: go %s set %d sum, world sum = %v, broadcast, allgather of %d rows, send/recv: %s\n",
		rank, kind, mine.ID(), inWorld[0], shape[0], verdict)
	if err := rt.Close(); err != nil {
		return 0, err
	}
	return c.failed, nil
}
