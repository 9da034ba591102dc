module github.com/braidmux/braid

go 1.26.0

require (
	github.com/libp2p/go-buffer-pool v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
