//go:build !race

package model

// raceBuild: see race_test.go.
const raceBuild = false
