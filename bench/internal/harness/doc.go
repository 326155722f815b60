// Package harness drives the libraries under test the same way for every
// benchmark command.
//
// Contended runs happen in worker processes: the command re-executes its own
// binary with a Config in WorkerEnv (ServeWorker), each worker warms up and
// loops acquire, hold, release on its goroutines and reports every call with
// CLOCK_MONOTONIC times (Worker.Serve; ServeLocks is the worker of the lock
// commands, in the modes of Config.Mode), and the coordinator starts the
// workers, gives them one start time, reads the server's command statistics
// around the measured window and collects the reports (Execute). An Outcome
// then answers the questions every analysis asks: which calls fell in the
// window, who acquired how often, how long the calls waited, how many were
// waiting at a time, the round trips and commands per acquisition. Matrix
// runs every case with every library, rotating the order.
//
// Uncontended runs time operations in one process, interleaved
// (TimeInterleaved), so that machine drift hits them all alike, and count
// what a batch of them costs (Cost.Count).
package harness
