//go:build race

package model

// raceBuild: under -race the checker runs about ten times slower, so the default run keeps
// only the cheap configurations (see tier).
const raceBuild = true
