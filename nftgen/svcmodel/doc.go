// Package svcmodel holds what the rule generator consumes: service ports,
// the endpoints behind them, the node, and the choice of endpoints
// (Categorize) kube-proxy makes. proxier/model builds these values from
// Service and EndpointSlice objects; nftgen turns them into rules.
//
// The package is pure and a leaf: it imports nothing of nftproxy.
package svcmodel
