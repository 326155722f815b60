//go:build !linux

package redistest

import (
	"context"
	"errors"
	"net"
)

// dialIn fails: network namespaces are Linux-only (NewNet skips or fails first).
func dialIn(context.Context, string, string, string) (net.Conn, error) {
	return nil, errors.New("redistest: network namespaces are Linux-only")
}
