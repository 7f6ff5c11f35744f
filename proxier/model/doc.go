// Package model turns Kubernetes Service and EndpointSlice objects into the
// proxy's view of the world: the service ports and the endpoints behind them
// that the rule generator consumes (nftgen/svcmodel), with the problems of
// objects that could not be used. It keeps the informers' objects (Store,
// Trimmer).
//
// The package is pure: it does no I/O and imports neither the rule generator
// nor netlink, so everything in it is testable without root.
package model
