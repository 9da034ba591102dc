//go:build !linux

package cpuskew

func allowedCPUs() ([]int, func() error, error) { return nil, nil, ErrUnsupported }

func pin(int) error { return ErrUnsupported }
