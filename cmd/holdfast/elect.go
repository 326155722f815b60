package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/rlock"
	"github.com/redis/go-redis/v9"
)

// electHelp is the help of "holdfast elect".
var electHelp = help{
	about: "Campaigns in the election NAME, runs COMMAND while this process leads (its leadership renewed\n" +
		"while it runs), resigns when it exits (the next candidate takes over at once) and exits with\n" +
		"the command's status. When the leadership is lost, the command is stopped (SIGTERM, then\n" +
		"SIGKILL after --kill-grace) and holdfast exits 75. Without COMMAND, leads until interrupted.",
	synopsis: "usage: holdfast elect [flags] NAME [-- COMMAND [ARGS...]]\n\nFlags go before NAME.",
	notes: durationNote + "\n" +
		"The command gets $HOLDFAST_LOCK (NAME), $HOLDFAST_OWNER (the leader's field in the lock's hash)\n" +
		"and $HOLDFAST_TOKEN (the term's fencing token). See docs/cli.md and docs/election.md.",
}

// electCommand is "holdfast elect": "holdfast lock" on an election, whose
// hold is a leadership (see docs/cli.md).
func electCommand(ctx context.Context, args []string, io stdio) int {
	return sessionCommand(ctx, args, io, "elect", electHelp, parseElect)
}

// parseElect parses the arguments of "holdfast elect". The FlagSet is
// returned for the usage message.
func parseElect(args []string) (*lockConfig, *flag.FlagSet, error) {
	cfg := &lockConfig{elect: true}
	fs := newFlagSet("elect")
	cfg.conn.register(fs, defaultRedisURL)
	fs.StringVar(&cfg.value, "value", "", "the `VALUE` this process proclaims while it leads (default: HOST:PID)")
	durationVar(fs, &cfg.wait, "w", 0, "campaign for at most `DURATION` (e.g. 5, 0.5, 30s, 5m); then exit with -E's code")
	fs.IntVar(&cfg.busyCode, "E", exitBusy, "exit `CODE` when -w runs out before this process leads")
	durationVar(fs, &cfg.watchdog, "watchdog-timeout", rlock.DefaultWatchdogTimeout,
		"the leadership's lease, renewed every third of it: if holdfast dies, another candidate leads after at most this `DURATION`")
	durationVar(fs, &cfg.killGrace, "kill-grace", 5*time.Second, "when the leadership is lost, the `DURATION` the command has between SIGTERM and SIGKILL")
	fs.BoolVar(&cfg.quiet, "q", false, "quiet: no progress line while campaigning, no message when leading without a command")
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	if err := cfg.finish(fs.Args(), nil, false, false); err != nil {
		return nil, fs, err
	}
	if !isSet(fs, "value") {
		cfg.value = defaultValue()
	}
	if isSet(fs, "w") && cfg.wait == 0 {
		return nil, fs, fmt.Errorf("-w 0: a campaign waits; give a duration above 0, or none")
	}
	return cfg, fs, nil
}

// defaultValue is --value's default: HOST:PID.
func defaultValue() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// leadershipHeld is a leadership as a held.
type leadershipHeld struct{ *rlock.Leadership }

// release resigns.
func (l leadershipHeld) release(ctx context.Context) error { return l.Resign(ctx) }

// campaign campaigns in the election (at most -w) and records the leadership.
func (s *lockSession) campaign(ctx context.Context) error {
	if s.cfg.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.wait)
		defer cancel()
	}
	l, err := s.c.NewElection(s.cfg.name).Campaign(ctx, s.cfg.value)
	if err == nil {
		s.held = leadershipHeld{l}
	}
	return err
}

// describeLeader says who leads the election name, for a message. It never
// fails: what it cannot read, it says so.
func describeLeader(ctx context.Context, c *rlock.Client, rdb redis.UniversalClient, name string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	info, err := c.NewElection(name).Leader(ctx)
	switch {
	case errors.Is(err, rlock.ErrNoLeader):
		return "no leader just now"
	case err != nil:
		return "leader unknown (" + err.Error() + ")"
	}
	s := "led by " + describeFields(ctx, rdb, []string{info.Holder})
	if info.Value != "" {
		s = fmt.Sprintf("led by %q: %s", info.Value, describeFields(ctx, rdb, []string{info.Holder}))
	}
	s += fmt.Sprintf("; term %d", info.Token)
	if info.TTL > 0 {
		s += fmt.Sprintf(", lease %v left", info.TTL.Round(100*time.Millisecond))
	}
	return s
}
