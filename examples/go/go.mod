// The Go example; it uses the binding from this checkout (replace), so nothing is downloaded.
module tutti/examples/go

go 1.19

require tutti/bindings/go v0.0.0

replace tutti/bindings/go => ../../bindings/go
