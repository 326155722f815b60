package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// flagName is how help, messages and docs/cli.md write the flag name: with
// one dash for a one-letter flag, as flock(1) writes them ("-w", "-n", "-E"),
// else with two ("--watch", "--connect-timeout"). Go's flag package accepts
// either form of every flag.
func flagName(name string) string {
	if len([]rune(name)) == 1 {
		return "-" + name
	}
	return "--" + name
}

// printFlags writes the flags of fs on w, sorted by name, as the help shows
// them: each flag with its value's name ("--interval DURATION"), then its usage
// on the next line, with its default when it is not the zero value. It stands
// for flag.PrintDefaults, which writes "-interval".
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		line := "  " + flagName(f.Name)
		if arg != "" {
			line += " " + arg
		}
		if !zeroDefault(f.DefValue) {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

// zeroDefault reports whether a flag's default, as text, is its type's zero
// value, which the help leaves out.
func zeroDefault(def string) bool {
	switch def {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

// flagSyntaxError matches the errors of Go's flag package that name a flag,
// which it writes with one dash ("invalid value \"x\" for flag -interval: …").
var flagSyntaxError = regexp.MustCompile(`^(flag provided but not defined: |flag needs an argument: |invalid (?:boolean )?value ".*" for (?:flag )?)-([^\s:]+)`)

// dashedFlagError returns err, an error of fs.Parse, with its flag written as
// the help writes it (flagName): "--interval", not "-interval".
func dashedFlagError(err error) error {
	m := flagSyntaxError.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	s := err.Error()
	return flagSyntax(s[:m[2*2]-1] + flagName(s[m[2*2]:m[2*2+1]]) + s[m[1]:])
}

// flagSyntax is a flag package error rewritten by dashedFlagError.
type flagSyntax string

// Error returns the message.
func (e flagSyntax) Error() string { return string(e) }
