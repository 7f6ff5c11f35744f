// Package objfile reads Services, EndpointSlices and Nodes from a file, in
// any of the forms an operator has at hand: the List that
// `kubectl get svc,endpointslices -A -o yaml` prints, multi-document YAML,
// or JSON (one object, a List, an array, or a stream of objects).
package objfile
