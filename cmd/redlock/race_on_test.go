//go:build race

package main

// raceEnabled reports whether the tests run with the race detector; the CLI binary is then
// built with it too.
const raceEnabled = true
