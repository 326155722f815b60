package lua

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestScriptError: the error a redis.call raised inside a script reads the same on
// every server of the matrix (texts as each one sent them), and matches IsWrongType;
// errors that are not wrapped stay as they are.
func TestScriptError(t *testing.T) {
	const wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
	for _, tc := range []struct{ server, got, want string }{
		{"Redis 6.2.16", "ERR Error running script (call to f_85be27a5941088743a2e08483b5bb919f9a9d9df): @user_script:2: " + wrongType, wrongType},
		{"Redis 7.0.15, 7.4.1, Valkey 7.2.7, 8.0.1", wrongType + " script: 85be27a5941088743a2e08483b5bb919f9a9d9df, on @user_script:2.", wrongType},
		{"every server, redis.error_reply", "WRONGTYPE the value is not an integer count", "WRONGTYPE the value is not an integer count"},
		{"Redis 7, Valkey 8", "ERR Unknown command called from script script: 4f5958446b28593dea988ad0a5603cbd6962dd95, on @user_script:1.", "ERR Unknown command called from script"},
		{"Redis 7, NOSCRIPT", "NOSCRIPT No matching script. Please use EVAL.", "NOSCRIPT No matching script. Please use EVAL."},
	} {
		err := ScriptError(replyError(tc.got))
		if err.Error() != tc.want {
			t.Errorf("%s: ScriptError(%q) = %q, want %q", tc.server, tc.got, err, tc.want)
		}
		var re redis.Error
		if !errors.As(err, &re) {
			t.Errorf("%s: %q is no longer a server's error reply", tc.server, err)
		}
		if want := tc.want[:9] == "WRONGTYPE"; IsWrongType(err) != want {
			t.Errorf("%s: IsWrongType(%q) = %v", tc.server, err, !want)
		}
	}
	if err := ScriptError(redis.Nil); err != redis.Nil {
		t.Errorf("redis.Nil became %v", err)
	}
	plain := errors.New("dial tcp: connection refused")
	if err := ScriptError(plain); err != plain {
		t.Errorf("a network error became %v", err)
	}
	if ScriptError(nil) != nil {
		t.Error("nil became an error")
	}
}

// TestIsNoScript: NOSCRIPT as Redis and Valkey 8 word it.
func TestIsNoScript(t *testing.T) {
	for _, msg := range []string{"NOSCRIPT No matching script. Please use EVAL.", "NOSCRIPT No matching script."} {
		if !IsNoScript(replyError(msg)) {
			t.Errorf("IsNoScript(%q) = false", msg)
		}
	}
}
