// Command junitcmp writes the side-by-side table of two runs of Kubernetes'
// e2e suite (their JUnit reports): each test that ran in either, its result
// and duration under kube-proxy and under nftproxy, then the tests the
// suite skipped while running, each with its reason. Specs that the focus
// and skip expressions left out are counted, not listed. A run may have
// several reports (comma-separated: the parallel pass and the serial one).
//
//	junitcmp -a kube-proxy/junit_01.xml,kube-proxy-serial/junit_01.xml \
//		-b nftproxy/junit_01.xml,nftproxy-serial/junit_01.xml > results.md
package main
