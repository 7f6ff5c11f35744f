// Command dialloop opens a new TCP connection to each target URL every
// interval, sends one HTTP GET on it and counts the answers. Once a second it
// prints one JSON line with the counts so far (per target: ok, failed, the
// answering backends and the last errors), which the cluster harness reads
// with `kubectl logs --tail=1`. It runs in a pod of the test cluster.
//
//	dialloop -every 10ms http://10.96.0.10/hostname http://192.168.77.11:30080/hostname
package main
