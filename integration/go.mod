module github.com/holdfast-go/holdfast/integration

go 1.26.0

replace github.com/holdfast-go/holdfast => ../

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/creack/pty v1.1.24
	github.com/google/uuid v1.6.0
	github.com/holdfast-go/holdfast v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/holdfast-go/holdfast/integration/redistest v0.0.0-00010101000000-000000000000
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/holdfast-go/holdfast/integration/redistest => ./redistest
