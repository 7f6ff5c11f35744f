// Package testns creates throwaway network namespaces for tests and runs code
// or commands inside them. Nothing here touches the root namespace: every
// namespace, link and address lives in namespaces the test created, and all
// of them are removed when the test ends, also when it fails.
package testns
