package rlock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// latchStep is one step of an awaiter in TestLatchJudge: the messages it
// hears, then a read that finds count (or, in doubt, no read), after
// elapsed since the start, and what it decides.
type latchStep struct {
	heard   string // payloads heard before the step, one a byte
	count   int64  // the count the read finds; unused in doubt
	elapsed time.Duration
	want    latchVerdict
	left    time.Duration // the doubt's time left, for latchDoubt
}

// TestLatchJudge: an awaiter's decisions on its reads and the news it heard.
// A key gone after a set message alone is not yet a deletion: the set message
// may be a late one of the round whose opening message is still on its way
// (the false deletions under set/count-down churn). The opening message
// heard within latchGrace makes it an opening; none, a deletion.
func TestLatchJudge(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	cases := map[string][]latchStep{
		"absent at once": {{count: 0, want: latchOpened}},
		"opened": {
			{count: 1, want: latchSet},
			{heard: "0", count: 0, want: latchOpened},
		},
		"late set message, then the opening (the churn's false deletion)": {
			{count: 1, want: latchSet},
			{heard: "1", count: 0, elapsed: time.Millisecond, want: latchDoubt, left: latchGrace},
			{heard: "0", elapsed: 2 * time.Millisecond, want: latchOpened},
		},
		"late set messages of several rounds, then the opening": {
			{count: 1, want: latchSet},
			{heard: "1", count: 0, want: latchDoubt, left: latchGrace},
			{heard: "1", elapsed: time.Millisecond, want: latchDoubt, left: latchGrace - time.Millisecond},
			{heard: "10", elapsed: 2 * time.Millisecond, want: latchOpened},
		},
		"deleted: no opening within the grace": {
			{count: 1, want: latchSet},
			{heard: "1", count: 0, elapsed: 10 * time.Millisecond, want: latchDoubt, left: latchGrace},
			{elapsed: 60 * time.Millisecond, want: latchDoubt, left: 50 * time.Millisecond},
			{heard: "1", elapsed: 80 * time.Millisecond, want: latchDoubt, left: 30 * time.Millisecond},
			{elapsed: 10*time.Millisecond + latchGrace, want: latchDeleted},
		},
		"a delete whose message is lost reads as an opening": {
			{count: 2, want: latchSet},
			{count: 0, want: latchOpened},
		},
		"opened and set again before the read: awaited on the new count": {
			{count: 1, want: latchSet},
			{heard: "01", count: 1, want: latchSet},
			{heard: "1", count: 0, want: latchDoubt, left: latchGrace},
			{elapsed: latchGrace, want: latchDeleted},
		},
		"a set message heard before the read that found the latch set is not news": {
			{heard: "1", count: 1, want: latchSet},
			{count: 0, want: latchOpened},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			var news latchNews
			var j latchJudge
			for i, s := range steps {
				for _, p := range s.heard {
					news.count(string(p))
				}
				at := start.Add(s.elapsed)
				var v latchVerdict
				var left time.Duration
				if j.doubting() {
					v, left = j.settle(news.snapshot(), at)
				} else {
					v, left = j.judge(s.count, news.snapshot(), at)
				}
				require.Equal(t, s.want, v, "step %d", i)
				require.Equal(t, s.left, left, "step %d", i)
			}
		})
	}
}
