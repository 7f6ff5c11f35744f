// Package testobj builds the small Services and EndpointSlices that the
// engine's and the pipeline's tests program.
package testobj
