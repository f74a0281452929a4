// Command guestinit is the whole userland of the QEMU guest that
// TestQEMUGuestOnTap boots: as PID 1 it loads the virtio network modules
// packed beside it, configures the first NIC, echoes a line over TCP with
// a VM behind a vnet switch, prints the outcome on the serial console and
// powers the guest off.
//
// Its settings come from the kernel command line:
// vnet.ip=10.30.0.9/24 vnet.peer=10.30.0.1:7001 vnet.modules=a.ko,b.ko
//
// With vnet.serve=PORT,PORT... (the libvirt test) it also answers on those
// TCP ports and, after its echo, keeps running: a connection that sends
// the line "forge" has it set its NIC's MAC to vnet.forge and try the
// echo again, which port security must cut off (GUEST-FORGED-CUT).
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func main() {
	err := run()
	if err != nil {
		fmt.Printf("GUEST-FAIL: %v\n", err)
	}
	closeNICs()
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
}

// closeNICs sets every NIC down before the power-off. Shutting down, the
// guest's virtio core marks the device's queues broken; if virtio_net's
// receive poll runs after that (a frame came in) while sent frames wait to
// be reclaimed, it loops for ever in softirq context: the kernel reports
// "soft lockup ... [ksoftirqd/0]" and never powers off. A NIC that is down
// has its polls disabled, so nothing polls the broken queues.
func closeNICs() {
	links, err := netlink.LinkList()
	if err != nil {
		fmt.Printf("guest: list NICs: %v\n", err)
		return
	}
	for _, l := range links {
		if l.Attrs().Name == "lo" || l.Attrs().Flags&net.FlagUp == 0 {
			continue
		}
		if err := netlink.LinkSetDown(l); err != nil {
			fmt.Printf("guest: set %s down: %v\n", l.Attrs().Name, err)
		}
	}
}

func run() error {
	for _, m := range []struct{ src, dst, fs string }{{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}, {"devtmpfs", "/dev", "devtmpfs"}} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			return fmt.Errorf("mount %s: %w", m.dst, err)
		}
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return err
	}
	args := map[string]string{}
	for _, f := range strings.Fields(string(cmdline)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "vnet.") {
			args[strings.TrimPrefix(k, "vnet.")] = v
		}
	}
	for _, m := range strings.Split(args["modules"], ",") {
		if m == "" {
			continue
		}
		if err := loadModule("/modules/" + m); err != nil {
			return err
		}
	}
	link, err := firstNIC(20 * time.Second)
	if err != nil {
		return err
	}
	addr, err := netlink.ParseAddr(args["ip"])
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("address %s on %s: %w", args["ip"], link.Attrs().Name, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		netlink.LinkSetUp(lo)
	}
	fmt.Printf("guest: %s (%s) has %s\n", link.Attrs().Name, link.Attrs().HardwareAddr, args["ip"])
	if args["serve"] == "" {
		return echo(args["peer"], 90*time.Second)
	}
	forge := make(chan struct{}, 1)
	for _, port := range strings.Split(args["serve"], ",") {
		if err := serve(port, forge); err != nil {
			return err
		}
	}
	if err := echo(args["peer"], 90*time.Second); err != nil {
		return err
	}
	fmt.Println("GUEST-SERVING")
	<-forge
	return forged(link, args["forge"], args["peer"])
}

// serve answers each connection to the port with "ok" and the line it
// sent; the line "forge" asks for the forged MAC's try.
func serve(port string, forge chan<- struct{}) error {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(10 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Write([]byte("ok " + line))
			c.Close()
			if strings.TrimSpace(line) == "forge" {
				select {
				case forge <- struct{}{}:
				default:
				}
			}
		}
	}()
	return nil
}

// forged sets the NIC's MAC to mac and tries the echo once more: it must
// fail, its frames dropped at the switch port. The guest then stays up
// for the test to read the port's counters and stop it.
func forged(link netlink.Link, mac, peer string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return fmt.Errorf("vnet.forge=%q: %w", mac, err)
	}
	if err := netlink.LinkSetHardwareAddr(link, hw); err != nil {
		return fmt.Errorf("set MAC %s: %w", mac, err)
	}
	if err := echo(peer, 8*time.Second); err == nil {
		return fmt.Errorf("echoed with %s from the forged MAC %s", peer, mac)
	}
	fmt.Printf("GUEST-FORGED-CUT: no echo with %s from MAC %s\n", peer, mac)
	select {} // the test stops the domain
}

// loadModule loads a kernel module from a file.
// Equivalent to: insmod FILE
func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if err == unix.EEXIST {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finit_module %s: %w", path, err)
	}
	fmt.Printf("guest: loaded %s\n", path)
	return nil
}

func firstNIC(timeout time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			if l.Attrs().Name != "lo" && l.Type() == "device" {
				return l, nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("no NIC appeared in %s", timeout)
}

// echo sends a line to the peer and expects it back, retrying while the
// switch port comes up.
func echo(peer string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", peer, 3*time.Second)
		if err != nil {
			last = err
			time.Sleep(500 * time.Millisecond)
			continue
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		msg := "hello from the QEMU guest\n"
		if _, err := c.Write([]byte(msg)); err != nil {
			c.Close()
			last = err
			continue
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || got != msg {
			last = fmt.Errorf("echo: got %q, %v", got, err)
			continue
		}
		fmt.Printf("GUEST-OK: echoed %q with %s\n", strings.TrimSpace(msg), peer)
		return nil
	}
	return fmt.Errorf("echo with %s: %v", peer, last)
}
