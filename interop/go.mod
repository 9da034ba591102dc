module github.com/braidmux/braid/interop

go 1.26.0

replace github.com/braidmux/braid => ../

require (
	github.com/braidmux/braid v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/libp2p/go-buffer-pool v0.1.0 // indirect
	github.com/multiformats/go-varint v0.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
