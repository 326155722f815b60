package chaos

import (
	"testing"

	"github.com/holdfast-go/holdfast/integration/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
