//go:build race

package main

// raceEnabled: the test binary was built with -race, so the worker binary is built with it too
// (it then shares the build cache and its data races are caught).
const raceEnabled = true
