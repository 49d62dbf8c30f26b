// Command pandastack-guest is the agent inside every PandaStack microVM: the
// VM's init, and the server the host talks to over virtio-serial.
package main

import (
	"fmt"
	"os"

	"github.com/pandastack/pandastack/internal/guest"
)

func main() {
	if err := guest.Main(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pandastack-guest:", err)
		os.Exit(1)
	}
}
