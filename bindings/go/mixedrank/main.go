// The Go rank of the mixed-language job (tests/bindings/mixed_job.py): rank 3 of 5, in the set
// {0, 1, 2, 3} with a Python, a C and a Rust rank; the same steps as tests/bindings/mixed_rank.c.
package main

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"time"

	"tutti/bindings/go/tutti"
)

const language = 4 // python 1, c 2, rust 3, go 4

func main() {
	ok, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mixed (go): %v\n", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run() (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := tutti.Init() // everything from TUTTI_*
	if err != nil {
		return false, err
	}
	defer rt.Close()
	rank, err := rt.Rank()
	if err != nil {
		return false, err
	}
	size, err := rt.Size()
	if err != nil {
		return false, err
	}
	set, err := rt.AddProcessSet(ctx, []int{0, 1, 2, 3})
	if err != nil {
		return false, err
	}
	ok := true
	r := float32(rank + 1)
	values := []float32{r, 0.5 * r, language}
	if err := rt.Allreduce(ctx, "mixed.values", set, values); err != nil {
		return false, err
	}
	if !reflect.DeepEqual(values, []float32{10, 5, 10}) {
		fmt.Fprintf(os.Stderr, "rank %d (go): set allreduce %v\n", rank, values)
		ok = false
	}
	languages, shape, err := rt.Allgather(ctx, "mixed.languages", set, []int32{language})
	if err != nil {
		return false, err
	}
	if !reflect.DeepEqual(languages, []int32{1, 2, 3, 4}) || !reflect.DeepEqual(shape, []int64{4}) {
		fmt.Fprintf(os.Stderr, "rank %d (go): set allgather %v %v\n", rank, languages, shape)
		ok = false
	}
	world := []int64{1}
	if err := rt.Allreduce(ctx, "mixed.world", rt.World(), world); err != nil {
		return false, err
	}
	if world[0] != int64(size) {
		fmt.Fprintf(os.Stderr, "rank %d (go): world allreduce %v\n", rank, world)
		ok = false
	}
	if err := rt.Close(); err != nil {
		return false, err
	}
	verdict := "ok"
	if !ok {
		verdict = "WRONG"
	}
	fmt.Printf("rank %d (go): mixed %s\n", rank, verdict)
	return ok, nil
}
