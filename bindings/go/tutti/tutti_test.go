package tutti_test

// The binding against a real tuttid and the real library: ranks are goroutines of the test
// process (the C ABI allows several runtimes in one process, each its own rank).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tutti/bindings/go/tutti"
)

// startTuttid starts the build's tuttid on a port the OS picks ($TUTTI_BUILD_DIR, else the
// checkout's build/) and kills and reaps it when the test ends.
func startTuttid(t *testing.T) string {
	t.Helper()
	build := os.Getenv("TUTTI_BUILD_DIR")
	if build == "" {
		build = filepath.Join("..", "..", "..", "build")
	}
	cmd := exec.Command(filepath.Join(build, "tuttid"), "--bind", "tcp://127.0.0.1:*")
	// Killed with the test binary even when it dies without running Cleanup (a panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("cannot start tuttid: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	endpoint := strings.TrimPrefix(strings.TrimSpace(line), "tuttid listening on ")
	if err != nil || endpoint == strings.TrimSpace(line) {
		t.Fatalf("tuttid printed %q (%v)", line, err)
	}
	return endpoint
}

// job runs `body` as each of `size` ranks of a fresh job, in goroutines, and waits for all.
func job(t *testing.T, endpoint, name string, size int, body func(t *testing.T, rt *tutti.Runtime, rank int)) {
	t.Helper()
	var wg sync.WaitGroup
	for rank := 0; rank < size; rank++ {
		wg.Add(1)
		go func(rank int) {
			defer wg.Done()
			rt, err := tutti.Init(tutti.WithCoordinator(endpoint), tutti.WithJob(fmt.Sprintf("%s-%d", name, os.Getpid())),
				tutti.WithToken("go-tests"), tutti.WithRank(rank), tutti.WithSize(size), tutti.WithTimeout(60*time.Second))
			if err != nil {
				t.Errorf("rank %d: init: %v", rank, err)
				return
			}
			defer func() {
				if err := rt.Close(); err != nil {
					t.Errorf("rank %d: close: %v", rank, err)
				}
			}()
			body(t, rt, rank)
		}(rank)
	}
	wg.Wait()
}

// must ends the calling rank's goroutine on an error, running its defers (Close), as t.Fatal
// would on the test's own goroutine.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
		runtime.Goexit()
	}
}

func TestCollectivesOnTwoSets(t *testing.T) {
	endpoint := startTuttid(t)
	ctx := context.Background()
	job(t, endpoint, "collectives", 4, func(t *testing.T, rt *tutti.Runtime, rank int) {
		evens, err := rt.AddProcessSet(ctx, []int{0, 2})
		must(t, err)
		odds, err := rt.AddProcessSet(ctx, []int{1, 3})
		must(t, err)
		mine, first := evens, 0
		if rank%2 == 1 {
			mine, first = odds, 1
		}
		ranks, err := mine.Ranks()
		must(t, err)
		if !reflect.DeepEqual(ranks, []int{first, first + 2}) {
			t.Errorf("rank %d: set ranks %v", rank, ranks)
		}
		values := []float64{float64(rank), float64(10 * rank)}
		must(t, rt.Allreduce(ctx, "values", mine, values))
		if want := []float64{float64(2*first + 2), float64(20*first + 20)}; !reflect.DeepEqual(values, want) {
			t.Errorf("rank %d: allreduce %v, want %v", rank, values, want)
		}
		scaled := []int32{int32(rank + 1), int32(rank + 1)}
		must(t, rt.Allreduce(ctx, "scaled", rt.World(), scaled, tutti.WithOp(tutti.Average), tutti.WithPostscale(10)))
		if want := []int32{20, 20}; !reflect.DeepEqual(scaled, want) { // (1+2+3+4)/4 truncates to 2
			t.Errorf("rank %d: average %v, want %v", rank, scaled, want)
		}
		weights := make([]int64, 3)
		if rank == first {
			weights = []int64{7, 8, 9}
		}
		must(t, rt.Broadcast(ctx, "weights", mine, weights, first))
		if !reflect.DeepEqual(weights, []int64{7, 8, 9}) {
			t.Errorf("rank %d: broadcast %v", rank, weights)
		}
		rows := make([]int16, 2*(rank+1))
		for i := range rows {
			rows[i] = int16(rank)
		}
		got, shape, err := rt.Allgather(ctx, "rows", rt.World(), tutti.Tensor{Data: rows, Shape: []int64{int64(rank + 1), 2}})
		must(t, err)
		var want []int16
		for r := 0; r < 4; r++ {
			for i := 0; i < 2*(r+1); i++ {
				want = append(want, int16(r))
			}
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(shape, []int64{10, 2}) {
			t.Errorf("rank %d: allgather %v %v", rank, got, shape)
		}
		flags := []bool{rank == 3}
		must(t, rt.Allreduce(ctx, "any", rt.World(), flags, tutti.WithOp(tutti.Max)))
		if !flags[0] {
			t.Errorf("rank %d: bool max is false", rank)
		}
		partner := rank ^ 1
		message := make([]float32, 4)
		if rank%2 == 0 {
			must(t, rt.Send(ctx, rt.World(), []float32{1, 2, 3, float32(rank)}, partner, 7))
			must(t, rt.Recv(ctx, rt.World(), message, partner, 8))
			if want := []float32{-1, -2, -3, -float32(rank)}; !reflect.DeepEqual(message, want) {
				t.Errorf("rank %d: reply %v", rank, message)
			}
		} else {
			must(t, rt.Recv(ctx, rt.World(), message, partner, 7))
			for i := range message {
				message[i] = -message[i]
			}
			must(t, rt.Send(ctx, rt.World(), message, partner, 8))
		}
		must(t, rt.Barrier(ctx, rt.World()))
	})
}

func TestNonMemberGetsTheLibrarysStatusAndMessage(t *testing.T) {
	endpoint := startTuttid(t)
	ctx := context.Background()
	job(t, endpoint, "not-a-member", 3, func(t *testing.T, rt *tutti.Runtime, rank int) {
		pair, err := rt.AddProcessSet(ctx, []int{0, 1})
		must(t, err)
		data := []float32{1, 1}
		if rank < 2 {
			must(t, pair.Autotune())
		} else if err := pair.Autotune(); err == nil || err.Error() != "TUTTI_ERR_NOT_A_MEMBER: rank 2 is not a member of process set 1" {
			t.Errorf("Autotune on a non-member: %v", err)
		}
		err = rt.Allreduce(ctx, "x", pair, data)
		if rank < 2 {
			must(t, err)
			return
		}
		var te *tutti.Error
		if !errors.As(err, &te) || te.Status != tutti.ErrNotAMember || te.Message != "rank 2 is not a member of process set 1" {
			t.Errorf("got %#v", err)
			return
		}
		if !errors.Is(err, tutti.ErrNotAMember) || errors.Is(err, tutti.ErrTimeout) {
			t.Errorf("errors.Is does not follow the status: %v", err)
		}
		if err.Error() != "TUTTI_ERR_NOT_A_MEMBER: rank 2 is not a member of process set 1" {
			t.Errorf("Error() = %q", err.Error())
		}
		_, _, err = rt.Allgather(ctx, "y", pair, []string{"no"})
		if err == nil || err.Error() != "TUTTI_ERR_INVALID_ARGUMENT: unsupported tensor type []string: use a slice of "+
			"float32, float64, int8, uint8, int16, int32, int64 or bool" {
			t.Errorf("unsupported type: %v", err)
		}
	})
}

func TestContextDeadlineAndCancellationEndTheWait(t *testing.T) {
	endpoint := startTuttid(t)
	lateSubmitted := make(chan struct{})
	cancelled := make(chan struct{})
	var once1, once2 sync.Once
	// Rank 1 waits on these; rank 0 closes them even when it fails, so that nothing hangs.
	release := func() {
		once1.Do(func() { close(lateSubmitted) })
		once2.Do(func() { close(cancelled) })
	}
	job(t, endpoint, "context", 2, func(t *testing.T, rt *tutti.Runtime, rank int) {
		if rank == 0 {
			defer release()
			// Rank 1 has not submitted 'late': the deadline ends the wait, as ErrTimeout that
			// also unwraps to context.DeadlineExceeded.
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := rt.Allreduce(ctx, "late", rt.World(), []float32{1})
			if !errors.Is(err, tutti.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("got %v", err)
			}
			want := "TUTTI_ERR_TIMEOUT: wait for 'late' ended by its context (context deadline exceeded); " +
				"the request stays pending and its result will be dropped"
			if err.Error() != want {
				t.Errorf("message %q", err.Error())
			}
			once1.Do(func() { close(lateSubmitted) })
			// A cancelled context (no deadline) ends a wait at once too.
			ctx2, cancel2 := context.WithCancel(context.Background())
			go func() { <-cancelled; cancel2() }()
			err = rt.Recv(ctx2, rt.World(), []int32{0}, 1, 3)
			if !errors.Is(err, context.Canceled) || !errors.Is(err, tutti.ErrTimeout) {
				t.Errorf("got %v", err)
			}
		} else {
			<-lateSubmitted
			// Rank 0's abandoned request still takes part: this allreduce completes.
			data := []float32{2}
			must(t, rt.Allreduce(context.Background(), "late", rt.World(), data))
			if data[0] != 3 {
				t.Errorf("late sum %v", data[0])
			}
			once2.Do(func() { close(cancelled) })
			// The abandoned recv is still matched by this send (tags in order), so the job goes on.
			must(t, rt.Send(context.Background(), rt.World(), []int32{5}, 0, 3))
		}
		// The runtime is still usable after an abandoned wait.
		after := []int32{int32(rank)}
		must(t, rt.Allreduce(context.Background(), "after", rt.World(), after))
		if after[0] != 1 {
			t.Errorf("after %v", after)
		}
	})
}

func TestMisuseIsRefusedBeforeTheLibrary(t *testing.T) {
	endpoint := startTuttid(t)
	ctx := context.Background()
	open := func(job string) *tutti.Runtime {
		rt, err := tutti.Init(tutti.WithCoordinator(endpoint), tutti.WithJob(fmt.Sprintf("%s-%d", job, os.Getpid())),
			tutti.WithRank(0), tutti.WithSize(1))
		must(t, err)
		return rt
	}
	first, second := open("first"), open("second")
	err := second.Allreduce(ctx, "x", first.World(), []float32{1})
	if err == nil || err.Error() != "TUTTI_ERR_INVALID_ARGUMENT: process set 0 belongs to another runtime" {
		t.Errorf("foreign set: %v", err)
	}
	err = first.Allreduce(ctx, "x", first.World(), tutti.Tensor{Data: []float32{1, 2, 3}, Shape: []int64{2, 2}})
	if err == nil || err.Error() != "TUTTI_ERR_INVALID_ARGUMENT: shape [2 2] does not hold the slice's 3 elements" {
		t.Errorf("shape: %v", err)
	}
	must(t, second.Close())
	must(t, first.Close())
	err = first.Allreduce(ctx, "x", first.World(), []float32{1})
	if !errors.Is(err, tutti.ErrShutDown) || err.Error() != "TUTTI_ERR_SHUT_DOWN: the runtime was closed" {
		t.Errorf("after close: %v", err)
	}
	must(t, first.Close()) // a second Close is a no-op
}

func TestStatusesAndVersions(t *testing.T) {
	for s := tutti.Status(-1); s >= -20; s-- {
		if strings.HasPrefix(s.String(), "TUTTI_ERR_UNKNOWN(") || s.Explanation() == "" {
			t.Errorf("status %d: %q %q", s, s.String(), s.Explanation())
		}
	}
	if got := tutti.ErrNotAMember.Error(); got != "TUTTI_ERR_NOT_A_MEMBER: not a member: only the set's ranks may run collectives on it" {
		t.Errorf("%q", got)
	}
	if tutti.Status(-99).String() != "TUTTI_ERR_UNKNOWN(-99)" {
		t.Error(tutti.Status(-99).String())
	}
	version, err := tutti.LibraryVersion()
	must(t, err)
	if version != tutti.HeaderVersion {
		t.Errorf("library %d, header %d", version, tutti.HeaderVersion)
	}
}
