package rlock

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReleasedErrorText: the error of a handle its Release ended matches
// ErrReleased and reads as the wrapped error it replaces, made when read.
func TestReleasedErrorText(t *testing.T) {
	p := &Permits{s: &ExpirableSemaphore{o: syncObject{name: "sem"}}, raw: []string{"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\xff"}}
	err := error(releasedError{p})
	require.ErrorIs(t, err, ErrReleased)
	want := fmt.Errorf("%w: semaphore %s: permits %v", ErrReleased, quote("sem"), p.IDs())
	require.Equal(t, want.Error(), err.Error())
	require.False(t, errors.Is(err, ErrPermitLost))
}
