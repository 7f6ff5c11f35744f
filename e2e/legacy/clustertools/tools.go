//go:build tools

// Package clustertools records, for go.mod, the Kubernetes v1.37.2 programs
// the real-cluster harness (e2e/cluster) builds from this module: the
// control plane and node components, the e2e suite and its agnhost image.
package clustertools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
