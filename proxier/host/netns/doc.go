//go:build linux

// Package netns runs code inside another network namespace, on an OS
// thread of its own, so that the rest of the process stays where it is.
package netns
