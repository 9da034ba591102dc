module github.com/braidmux/braid

go 1.26.0

require (
	github.com/libp2p/go-buffer-pool v0.1.0
	github.com/libp2p/go-libp2p-testing v0.12.0
	github.com/multiformats/go-varint v0.1.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect
