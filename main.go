// Command berth is a multi-tenant file storage, sync and sharing daemon.
package main

import (
	"os"

	"berth/daemon"
)

func main() {
	os.Exit(daemon.Main(os.Args))
}
