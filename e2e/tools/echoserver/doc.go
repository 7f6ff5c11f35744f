// Command echoserver is the e2e tests' pod workload. For every line it gets
// over TCP, and for every UDP datagram, it answers
//
//	NAME SOURCE-IP:PORT PAYLOAD
//
// so a test can tell which endpoint answered and which source address the
// server saw.
package main
