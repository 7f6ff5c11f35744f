// Package docs holds nftproxy's pages for operators and contributors; its
// test checks that every link between them, and from the README, leads
// somewhere.
package docs
