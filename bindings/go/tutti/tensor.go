package tutti

// #include <stdlib.h>
// #include <string.h>
// #include <tutti/tutti.h>
// static tutti_tensor_t tensor_init(void) { tutti_tensor_t t = TUTTI_TENSOR_INIT; return t; }
import "C"

import (
	"unsafe"
)

// Tensors are staged in C memory. The library keeps the data pointer of a request until it
// completes, but cgo forbids C to keep a Go pointer after the call that passed it, and a
// request outlives its submitting call (the wait is another call, and a context may abandon
// it). So the data is copied into malloc'ed memory at submission and back out once the
// request completed; a request abandoned by its context keeps its staging memory until it
// completes, and never touches the caller's slice again.
type staged struct {
	data   unsafe.Pointer // C memory, elements * size bytes
	bytes  int
	shape  *C.int64_t // C memory, ndim values
	tensor C.tutti_tensor_t
}

// dtypeOf maps a supported slice to its tutti dtype, element size and length.
func dtypeOf(data any) (dtype C.int32_t, size int, length int, err error) {
	switch v := data.(type) {
	case []float32:
		return C.TUTTI_DTYPE_FLOAT32, 4, len(v), nil
	case []float64:
		return C.TUTTI_DTYPE_FLOAT64, 8, len(v), nil
	case []int8:
		return C.TUTTI_DTYPE_INT8, 1, len(v), nil
	case []uint8:
		return C.TUTTI_DTYPE_UINT8, 1, len(v), nil
	case []int16:
		return C.TUTTI_DTYPE_INT16, 2, len(v), nil
	case []int32:
		return C.TUTTI_DTYPE_INT32, 4, len(v), nil
	case []int64:
		return C.TUTTI_DTYPE_INT64, 8, len(v), nil
	case []bool:
		return C.TUTTI_DTYPE_BOOL, 1, len(v), nil
	}
	return 0, 0, 0, invalid("unsupported tensor type %T: use a slice of float32, float64, int8, "+
		"uint8, int16, int32, int64 or bool", data)
}

// bytesOf views a slice's elements as bytes (for copying only).
func bytesOf(data any) []byte {
	switch v := data.(type) {
	case []float32:
		return raw(v)
	case []float64:
		return raw(v)
	case []int8:
		return raw(v)
	case []uint8:
		return v
	case []int16:
		return raw(v)
	case []int32:
		return raw(v)
	case []int64:
		return raw(v)
	case []bool:
		return raw(v)
	}
	return nil
}

func raw[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(zero)))
}

// stage copies `data` (when copyIn) into C memory described with `shape` (nil: 1-D).
func stage(data any, shape []int64, copyIn bool) (*staged, error) {
	dtype, size, length, err := dtypeOf(data)
	if err != nil {
		return nil, err
	}
	if shape == nil {
		shape = []int64{int64(length)}
	}
	if len(shape) > C.TUTTI_MAX_DIMS {
		return nil, invalid("%d dimensions; tutti takes at most %d", len(shape), C.TUTTI_MAX_DIMS)
	}
	product := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && product > (1<<62)/d) {
			return nil, invalid("shape %v does not hold the slice's %d elements", shape, length)
		}
		product *= d
	}
	if product != int64(length) {
		return nil, invalid("shape %v does not hold the slice's %d elements", shape, length)
	}
	s := &staged{bytes: length * size}
	// One byte at least: malloc(0) may return NULL, which the library reads as "no data".
	s.data = C.malloc(C.size_t(s.bytes + 1))
	s.shape = (*C.int64_t)(C.malloc(C.size_t(8 * len(shape))))
	copy(unsafe.Slice((*int64)(unsafe.Pointer(s.shape)), len(shape)), shape)
	if copyIn && s.bytes > 0 {
		copy(unsafe.Slice((*byte)(s.data), s.bytes), bytesOf(data))
	}
	s.tensor = C.tensor_init()
	s.tensor.data = s.data
	s.tensor.dtype = dtype
	s.tensor.ndim = C.int32_t(len(shape))
	s.tensor.shape = s.shape
	return s, nil
}

// copyOut writes the staged elements back into `data` (the slice staged from).
func (s *staged) copyOut(data any) {
	if s.bytes == 0 {
		return
	}
	src := unsafe.Slice((*byte)(s.data), s.bytes)
	if flags, ok := data.([]bool); ok {
		// A peer may send any non-zero byte for true; a Go bool must be 0 or 1.
		for i, b := range src {
			flags[i] = b != 0
		}
		return
	}
	copy(bytesOf(data), src)
}

func (s *staged) free() {
	C.free(s.data)
	C.free(unsafe.Pointer(s.shape))
}

// result copies a completed request's library-owned output (allgather) into a new slice of
// the same type as `like`, with its shape. The request still owns the memory until freed.
func result(request C.tutti_request_t, like any) (any, []int64, error) {
	out := C.tensor_init()
	if err := call(func() C.tutti_status_t { return C.tutti_request_output(request, &out) }); err != nil {
		return nil, nil, err
	}
	shape := make([]int64, int(out.ndim))
	if out.ndim > 0 {
		copy(shape, unsafe.Slice((*int64)(unsafe.Pointer(out.shape)), int(out.ndim)))
	}
	count := int64(1)
	for _, d := range shape {
		count *= d
	}
	var slice any
	switch like.(type) {
	case []float32:
		slice = make([]float32, count)
	case []float64:
		slice = make([]float64, count)
	case []int8:
		slice = make([]int8, count)
	case []uint8:
		slice = make([]uint8, count)
	case []int16:
		slice = make([]int16, count)
	case []int32:
		slice = make([]int32, count)
	case []int64:
		slice = make([]int64, count)
	case []bool:
		slice = make([]bool, count)
	}
	copied := &staged{data: out.data, bytes: len(bytesOf(slice))}
	copied.copyOut(slice)
	return slice, shape, nil
}
