// Package harness drives the libraries under test the same way for every
// benchmark command.
//
// Contended runs happen in worker processes: the command re-executes its own
// binary with a Config in an environment variable (ServeWorker), each worker
// loops acquire, hold, release on its goroutines and reports every call with
// CLOCK_MONOTONIC times (Worker.Serve), and the coordinator starts the
// workers, gives them one start time, reads the server's command statistics
// around the measured window and collects the reports (Execute). An Outcome
// then answers the questions every analysis asks: which calls fell in the
// window, who acquired how often, how many calls were waiting at a time.
//
// Uncontended runs time operations in one process, interleaved
// (TimeInterleaved), so that machine drift hits them all alike.
package harness
