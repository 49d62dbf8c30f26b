package guest

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The guest's network is the same in every sandbox: the host gives each
// sandbox its own network namespace, so clones of one snapshot keep this
// address and still never meet (see internal/network).
const (
	netIface   = "eth0"
	netAddr    = "172.16.0.2"
	netMask    = "255.255.255.252"
	netGateway = "172.16.0.1" // also the DNS server, forwarded by the host
)

// setupNetwork configures eth0 with the fixed sandbox address, a default
// route through the gateway, and /etc/resolv.conf. A VM without a NIC (old
// templates) simply has no network.
func setupNetwork() error {
	if _, err := net.InterfaceByName(netIface); err != nil {
		return nil
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, s := range []struct {
		req  uint
		addr string
	}{{unix.SIOCSIFADDR, netAddr}, {unix.SIOCSIFNETMASK, netMask}} {
		ifr, err := unix.NewIfreq(netIface)
		if err != nil {
			return err
		}
		if err := ifr.SetInet4Addr(net.ParseIP(s.addr).To4()); err != nil {
			return err
		}
		if err := unix.IoctlIfreq(fd, s.req, ifr); err != nil {
			return fmt.Errorf("set %s address: %w", netIface, err)
		}
	}
	if err := linkUp(netIface); err != nil {
		return fmt.Errorf("bring %s up: %w", netIface, err)
	}
	if err := addDefaultRoute(netIface, net.ParseIP(netGateway).To4()); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	_ = os.Remove("/etc/resolv.conf") // may be a dangling symlink
	if err := os.WriteFile("/etc/resolv.conf", []byte("nameserver "+netGateway+"\n"), 0o644); err != nil {
		return fmt.Errorf("write resolv.conf: %w", err)
	}
	return nil
}

// addDefaultRoute adds "default via gw dev ifname" with one rtnetlink
// request.
func addDefaultRoute(ifname string, gw net.IP) error {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	attr := func(typ uint16, data []byte) []byte {
		l := unix.SizeofRtAttr + len(data)
		b := make([]byte, (l+3)&^3)
		*(*unix.RtAttr)(unsafe.Pointer(&b[0])) = unix.RtAttr{Len: uint16(l), Type: typ}
		copy(b[unix.SizeofRtAttr:], data)
		return b
	}
	oif := make([]byte, 4)
	*(*uint32)(unsafe.Pointer(&oif[0])) = uint32(ifi.Index)
	rt := unix.RtMsg{Family: unix.AF_INET, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST}
	body := make([]byte, unix.SizeofRtMsg)
	*(*unix.RtMsg)(unsafe.Pointer(&body[0])) = rt
	body = append(body, attr(unix.RTA_GATEWAY, gw.To4())...)
	body = append(body, attr(unix.RTA_OIF, oif)...)
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	*(*unix.NlMsghdr)(unsafe.Pointer(&msg[0])) = unix.NlMsghdr{
		Len: uint32(unix.SizeofNlMsghdr + len(body)), Type: unix.RTM_NEWROUTE,
		Flags: unix.NLM_F_REQUEST | unix.NLM_F_ACK | unix.NLM_F_CREATE | unix.NLM_F_REPLACE, Seq: 1}
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := *(*int32)(unsafe.Pointer(&m.Data[0])); code != 0 {
				return unix.Errno(-code)
			}
		}
	}
	return nil
}
