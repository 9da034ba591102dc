module github.com/braidmux/braid/interop

go 1.26.0

replace github.com/braidmux/braid => ../
