// Package model turns Kubernetes Service and EndpointSlice objects into the
// proxy's view of the world: the service ports and the endpoints behind them
// that the rule generator consumes (nftgen/svcmodel), with the problems of
// objects that could not be used. It keeps them in compact forms (Slice,
// Service) that the informers cache as they are (Trimmer.Transform), so
// the Store and the informers share one copy.
//
// The package is pure: it does no I/O and imports neither the rule generator
// nor netlink, so everything in it is testable without root.
package model
