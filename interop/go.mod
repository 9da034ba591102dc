module github.com/braidmux/braid/interop

go 1.26.0

replace github.com/braidmux/braid => ../

require (
	github.com/braidmux/braid v0.0.0-00010101000000-000000000000
	github.com/hashicorp/yamux v0.1.2
	github.com/libp2p/go-libp2p-testing v0.12.0
	github.com/libp2p/go-mplex v0.7.0
	github.com/libp2p/go-yamux/v5 v5.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
)

require (
	github.com/ipfs/go-log/v2 v2.5.1 // indirect
	github.com/libp2p/go-buffer-pool v0.1.0 // indirect
	github.com/mattn/go-isatty v0.0.16 // indirect
	github.com/multiformats/go-varint v0.1.0 // indirect
	go.uber.org/atomic v1.10.0 // indirect
	go.uber.org/multierr v1.8.0 // indirect
	go.uber.org/zap v1.22.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
