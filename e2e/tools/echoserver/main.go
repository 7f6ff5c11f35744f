package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"strings"
)

func main() {
	name := flag.String("name", "echo", "name to answer with")
	tcp := flag.String("tcp", "", "comma-separated TCP ports to serve")
	udp := flag.String("udp", "", "comma-separated UDP ports to serve")
	portInName := flag.Bool("port-in-name", false, "answer TCP with NAME:PORT, the port the connection arrived on")
	flag.Parse()
	for _, p := range split(*tcp) {
		l, err := net.Listen("tcp", ":"+p)
		if err != nil {
			log.Fatal(err)
		}
		n := *name
		if *portInName {
			n += ":" + p
		}
		go serveTCP(l, n)
	}
	for _, p := range split(*udp) {
		c, err := net.ListenPacket("udp", ":"+p)
		if err != nil {
			log.Fatal(err)
		}
		go serveUDP(c, *name)
	}
	fmt.Println("ready")
	select {}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func serveTCP(l net.Listener, name string) {
	for {
		c, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			for sc.Scan() {
				if _, err := fmt.Fprintf(c, "%s %s %s\n", name, c.RemoteAddr(), sc.Text()); err != nil {
					return
				}
			}
		}()
	}
}

func serveUDP(c net.PacketConn, name string) {
	buf := make([]byte, 2048)
	for {
		n, addr, err := c.ReadFrom(buf)
		if err != nil {
			log.Fatal(err)
		}
		reply := fmt.Sprintf("%s %s %s\n", name, addr, strings.TrimSpace(string(buf[:n])))
		_, _ = c.WriteTo([]byte(reply), addr)
	}
}
