# Multi-stage build of a static nftproxy. The image has no shell and no
# iptables or nft binaries: nftproxy talks netlink directly. The binary is
# installed as /usr/local/bin/kube-proxy too, the path kubeadm's kube-proxy
# DaemonSet runs, so that swapping the image is enough.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/nftproxy ./cmd/nftproxy

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/nftproxy /usr/local/bin/nftproxy
COPY --from=build /out/nftproxy /usr/local/bin/kube-proxy
ENTRYPOINT ["/usr/local/bin/nftproxy"]
