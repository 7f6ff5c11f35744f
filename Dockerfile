# Multi-stage build of a static nftproxy for any platform the builder
# targets (docker buildx --platform linux/amd64,linux/arm64 ...). The image
# has no shell and no iptables or nft binaries: nftproxy talks netlink
# directly. /usr/local/bin/kube-proxy is a link to the binary, the path
# kubeadm's kube-proxy DaemonSet runs, so that swapping the image is
# enough. Without a builder: `make image` writes the same image as an OCI
# archive.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux TARGETARCH VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN mkdir /out && CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags="-s -w -X main.version=$VERSION" -o /out/nftproxy ./cmd/nftproxy && \
    ln -s nftproxy /out/kube-proxy && ln -s nftproxy /out/iptables-save && ln -s nftproxy /out/ip6tables-save

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/ /usr/local/bin/
ENTRYPOINT ["/usr/local/bin/nftproxy"]
