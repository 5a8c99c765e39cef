// The Go binding of tutti over cgo (docs/bindings.md). Standard library only: no requirements,
// so nothing is ever downloaded (build with GOPROXY=off GOFLAGS=-mod=mod).
module tutti/bindings/go

go 1.19
